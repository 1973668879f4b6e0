"""In-memory Kuzu stores keep every page in the buffer pool: past it, memsim's own one-line ``StoreFull`` error,
on every later statement, never a Kuzu crash. The run is a child process, so a segfault shows as a signal exit.
(Capturing 1,000 small sessions at the default pool is run by ``memsim bench service-faults``.)"""

from __future__ import annotations

from benchmarks.service_faults import run_capacity


def test_a_full_in_memory_store_raises_store_full_on_every_later_call():
    out = run_capacity(400, 32, timeout=300)
    assert out["returncode"] == 0, out  # negative: the child died of a signal (a Kuzu crash)
    assert out["full_at"] is not None and out["captured"] > 0, out
    (msg,) = out["messages"]
    assert msg.startswith("in-memory Tortoise store is full: it keeps every page in its 32 MiB Kuzu buffer pool")
    assert "\n" not in msg
    got = dict(out["later_errors"])
    volunteered = got.pop("volunteer")  # the volunteer pipeline fails open: an empty response, no crash
    assert volunteered is None, out  # no exception: the hook answer is simply empty
    assert got == dict.fromkeys(("capture", "create_point", "context", "query"), msg), out
