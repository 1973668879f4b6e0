"""The Kuzu failure on a second dream, on the smallest ep_scaling store found to show it (2,048 factors, 4,096
Points; every size tried below completes: 300-2,047 sampled, 2,040-2,047 included), each dream pair in a child
process: with a CHECKPOINT between the dreams the old
in-place edge write fails in Kuzu (KU_UNREACHABLE) and the child dies without a result, while the default
delete-and-create write completes, reads the same edges through the checkpoint and leaves the same store as the
old write without a checkpoint."""

from __future__ import annotations

from pathlib import Path

from benchmarks import dream_abort

SMALLEST_ABORTING = 2048  # `python -m benchmarks.dream_abort --sizes 2040 2047 2048` (not monotone: 2,250 completes)


def test_second_dream_after_checkpoint_old_write_fails_default_completes(tmp_path: Path) -> None:
    out = dream_abort.compare(SMALLEST_ABORTING, 0, tmp_path / "cache", runs=("old", "default", "reference"))
    old, new, ref = (out["runs"][k] for k in ("old", "default", "reference"))
    assert not old["completed"] and old["returncode"] != 0 and old["ku_unreachable"], old
    assert ref["completed"] and new["completed"], (ref["stderr_tail"], new["stderr_tail"])
    assert new["result"]["edges_kept_between"] is True
    assert out["same_as_reference"]["default"]
    # both dreams of the default run wrote: the second one after the checkpoint too
    assert [d["affected_claims"] > 1000 for d in new["result"]["dreams"]] == [True, True]
    assert new["result"]["edges"] > 4000 and new["result"]["feed_rows"] > 3000
