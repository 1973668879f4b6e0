"""SIGTERM ends a benchmark like Ctrl-C: its clean-up runs, so no results file and no temp file stays behind, the
earlier results stay as they were, and the exit status is 143."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def test_sigterm_mid_run_leaves_no_results_and_no_temp_file(tmp_path: Path) -> None:
    from benchmarks.worlds import longmemeval as W

    data = tmp_path / "lme.json"
    W.write_file(data, 400, seed=1, sessions=8)
    out = tmp_path / "out"
    out.mkdir()
    (out / "longmemeval.json").write_text('{"earlier": true}')
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli.entry", "bench", "longmemeval", "--data", str(data),
                             "--arms", "full,last20", "--out", str(out), "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        deadline = time.monotonic() + 120
        tmp_jsonl: list[Path] = []
        while time.monotonic() < deadline and not tmp_jsonl:  # wait until the run is writing its delivered texts
            tmp_jsonl = list(out.glob(".memsim-partial-longmemeval-*/longmemeval/.delivered.jsonl.*"))
            time.sleep(0.2)
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        assert tmp_jsonl, "the run never started writing"
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, output
    left = sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))
    assert left == ["longmemeval.json"], (left, output)
    assert (out / "longmemeval.json").read_text() == '{"earlier": true}'
