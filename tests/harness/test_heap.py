"""harness.heap: freed C-heap pages go back to the kernel, and nothing else changes."""

from __future__ import annotations

import platform

import pytest

from harness.heap import release_freed_heap


def _rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_freed_chunks_below_live_ones_are_returned() -> None:
    """64 MB in 4 KB buffers (glibc's heap, not Python's small-object arenas), all freed but every 64th: the free
    space sits below live chunks, so free() keeps it resident; the trim hands it back and the survivors are
    untouched."""
    bufs = [bytearray(b"x" * 4096) for _ in range(16384)]
    keep = bufs[::64]
    for i, b in enumerate(keep):
        b[0] = i % 256
    del bufs
    before = _rss_kib()
    assert release_freed_heap() is True
    after = _rss_kib()
    assert before - after > 32 * 1024, (before, after)
    assert all(b[0] == i % 256 and b[1:] == b"x" * 4095 for i, b in enumerate(keep))
