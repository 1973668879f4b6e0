"""Unit tests for the hook reducer (spec section 4)."""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest
from pydantic import ValidationError

from fractal_sim import HookEvent, RuntimeEventTracker
from fractal_sim.events import coerce_int, decode_command, decode_path


def ev(target: str, phase: str, *args, **extra) -> dict:
    return {"target": target, "phase": phase, "args": list(args), "timestamp": 1.0, **extra}


def test_decoders() -> None:
    assert decode_path(PurePosixPath("a/b")) == "a/b"
    assert decode_path({"repr": "r", "value": "v"}) == "v"
    assert decode_path({"path": 3, "repr": "r"}) == "r"
    assert decode_path(5) == "5" and decode_path(None) is None
    assert decode_command("subprocess.check_call", [None]) == "None"
    assert decode_command("subprocess.call", []) == "call"
    assert decode_command("subprocess.run", [""]) == "run"
    assert decode_command("subprocess.run", [["echo", "a b", 3]]) == "echo 'a b' 3"
    assert decode_command("subprocess.run", [{"repr": "ls -l"}]) == "ls -l"
    assert coerce_int(True) is None and coerce_int("12") == 12 and coerce_int({"repr": {"value": "7"}}) == 7
    assert coerce_int(1.5) is None


def test_open_modes_and_display() -> None:
    t = RuntimeEventTracker()
    shown = []
    for target, args, kwargs in (("builtins.open", ["r.txt"], {}), ("builtins.open", ["w.txt", "w"], {}),
                                 ("pathlib.Path.open", ["rw.txt"], {"mode": "r+"}),
                                 ("builtins.open", ["bad.txt"], {"mode": 3})):
        for phase in ("before", "after"):
            e = t.observe(ev(target, phase, *args, kwargs=kwargs))
            if e is not None:
                shown.append(e.message)
    assert t.files_read == ["r.txt", "rw.txt", "bad.txt"]
    assert t.files_modified == ["w.txt", "rw.txt"]
    assert shown == ["opening r.txt", "editing w.txt", "editing rw.txt", "opening bad.txt"]
    missing = t.observe(ev("pathlib.Path.read_bytes", "before"))
    assert missing.message == "reading file" and missing.path is None


def test_os_open_flags_and_fd_mapping() -> None:
    t = RuntimeEventTracker()
    t.observe(ev("os.open", "after", "ro.txt", 0, result=3))
    t.observe(ev("os.open", "after", "rw.txt", 2, result={"value": 4}))
    t.observe(ev("os.open", "after", "ap.txt", 1024 | 1, result="5"))
    t.observe(ev("os.open", "after", "nofl.txt", result=6))
    for fd, target in ((3, "os.pread"), (4, "os.ftruncate"), (5, "os.pwrite"), (6, "os.pread")):
        t.observe(ev(target, "after", fd, 1, 0))
    assert t.files_read == ["ro.txt", "rw.txt", "nofl.txt"]
    assert t.files_modified == ["rw.txt", "ap.txt"]


def test_nesting_suppression() -> None:
    t = RuntimeEventTracker()
    shown = []
    seq = [ev("pathlib.Path.read_text", "before", "a"), ev("builtins.open", "before", "a", "w"),
           ev("os.open", "before", "a", 577), ev("os.open", "after", "a", 577, result=9),
           ev("builtins.open", "after", "a", "w"), ev("pathlib.Path.read_text", "after", "a"),
           ev("os.pwrite", "after", 9, 1, 0)]
    for e in seq:
        d = t.observe(e)
        if d:
            shown.append(d.message)
    assert t.files_read == ["a"] and t.files_modified == [] and shown == ["reading a"]
    # commands: Popen nested in run ignored; a different command inside is recorded
    for e in (ev("subprocess.run", "before", "make"), ev("subprocess.Popen", "before", "make"),
              ev("subprocess.Popen", "before", "inner"), ev("subprocess.Popen", "after", "make"),
              ev("subprocess.run", "after", "make"), ev("subprocess.Popen", "before", "make")):
        t.observe(e)
    assert t.commands_run == ["make", "inner"]


def test_commands_recorded_before_and_failed_display() -> None:
    t = RuntimeEventTracker()
    assert t.observe(ev("subprocess.run", "after", "ls")) is None
    assert t.observe(ev("subprocess.check_output", "before", "git log")).message == "running git log"
    assert t.observe(ev("subprocess.check_output", "error", "git log")).message == "command failed: git log"
    assert t.commands_run == ["git log"]
    assert t.observe(ev("subprocess.check_output", "before", "git log")) is not None
    assert t.commands_run == ["git log"]  # unique by exact string


def test_adaptation() -> None:
    t = RuntimeEventTracker()
    t.observe(HookEvent(target="os.unlink", phase="after", args=("gone.txt",)))
    assert t.files_modified == ["gone.txt"]
    assert t.observe(ev("unknown.target", "before", "x")) is None
    for bad in ({"target": "os.unlink", "phase": "after", "args": ["x"]},
                ev("os.unlink", "during", "x"), {**ev("os.unlink", "after"), "args": "x"}, "not an event"):
        with pytest.raises(ValidationError):
            t.observe(bad)
    t.observe(ev("os.replace", "before", "t", "dst"))
    t.observe(ev("os.replace", "after", "t"))  # no destination -> nothing
    assert t.files_modified == ["gone.txt"]
