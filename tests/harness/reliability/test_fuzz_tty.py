"""``memsim fuzz`` with a terminal attached: the CLI loaders' error lines are coloured there (an escape sequence
before ``error:``), and the fuzzer must still see them as the documented rejection, not as crashes. Its hypothesis
files go to a temporary folder of the run, neither the current directory nor the output folder."""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
from pathlib import Path

import pytest

from harness.reliability.fuzz_core import cli_rejected, plain_text

pty = pytest.importorskip("pty")


def _run_in_pty(argv: list[str], cwd: Path, timeout: float = 240.0) -> tuple[int, bytes]:
    """Run ``argv`` with a pseudo-terminal as stdin, stdout and stderr; return (exit status, everything it wrote)."""
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "HYPOTHESIS_STORAGE_DIRECTORY",
                                                             "COLUMNS", "LINES")}
    env.update(TERM="xterm-256color", OMP_NUM_THREADS="1")
    pid, fd = pty.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.chdir(cwd)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    out = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 1.0)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        else:
            os.kill(pid, signal.SIGKILL)
            pytest.fail(f"memsim fuzz did not finish within {timeout} s: {out[-500:]!r}")
    finally:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), out


def test_fuzz_in_a_terminal_counts_coloured_error_lines_as_rejections(tmp_path):
    out = tmp_path / "run"
    argv = [sys.executable, "-c", "from harness.cli.entry import main; main()", "fuzz", "--examples", "3",
            "--target", "fractal-replay-json", "--out", str(out)]
    code, shown = _run_in_pty(argv, cwd=tmp_path)
    assert b"\x1b[" in shown, "no escape codes: the run did not see a terminal, so this test shows nothing"
    report = json.loads((out / "fuzz.json").read_text(encoding="utf-8"))
    (result,) = report["targets"]
    assert result["outcomes"]["crash"] == 0, result["failures"]
    assert result["outcomes"]["rejected"] > 0, result  # the error-line path was exercised (the specials reject)
    assert code == 0, plain_text(shown.decode(errors="replace"))[-2000:]
    assert not (tmp_path / ".hypothesis").exists(), "hypothesis wrote to the current directory"
    assert not (out / ".hypothesis").exists(), "hypothesis's files belong to the run, not to its output folder"


@pytest.mark.parametrize("stderr", [
    "\x1b[1;31merror:\x1b[0m {p}: invalid JSON\n",       # a terminal's colours
    "\x1b[1merror:\x1b[0m {p}: invalid JSON\n",          # NO_COLOR: bold only
    "\x1b]8;id=1;file:///x\x1b\\error:\x1b]8;;\x1b\\ {p}: invalid JSON\n",  # a hyperlink around the prefix
    "error: {p}: invalid JSON\n",                        # no terminal
])
def test_cli_rejections_are_judged_on_what_the_terminal_shows(tmp_path, stderr):
    path = tmp_path / "s [x].json"
    assert cli_rejected(1, stderr.format(p=path), path) == "rejected"
