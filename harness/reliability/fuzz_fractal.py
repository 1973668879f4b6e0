"""Fuzz targets of Fractal's loaders: a session file (``FractalSession.load`` and ``list_sessions``) and a
``fractal replay`` script (JSON and YAML)."""

from __future__ import annotations

import contextlib
import io
import json
import warnings
from collections.abc import Callable
from pathlib import Path

from harness.reliability.fuzz_core import (
    Crash,
    FuzzInput,
    PartialWrite,
    Target,
    cli_rejected,
    place,
    read_only,
)


def _fractal_session(inp: FuzzInput, tmp: Path) -> str:
    from fractal_sim.session import FractalSession
    from fractal_sim.store import list_sessions, session_path
    from harness.cli.boundary import describe_error

    ws = tmp / "ws"
    ws.mkdir()
    state = tmp / "state"
    path = session_path(ws, "s1", state)
    place(inp, path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            session = FractalSession.load(ws, session_id="s1", state_dir=state)
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            # The reference load catches only OSError/JSONDecodeError (spec 6.5): these escape it as upstream's do;
            # the CLI's _resume turns them into one line naming the session file.
            describe_error(exc)
            return "rejected"
    for bad in path.parent.glob("s1.json.bad-*"):
        if inp.data is not None and bad.read_bytes() != inp.data:
            raise PartialWrite(f"backup {bad.name} is not a complete copy")
    list_sessions(ws, state)
    if caught:
        return "skipped"
    if session.session_id != "s1":
        raise Crash("accepted a session under another id")
    return "accepted"


def _fractal_replay(suffix: str) -> Callable[[FuzzInput, Path], str]:
    def run(inp: FuzzInput, tmp: Path) -> str:
        import typer

        from harness.cli.fractal import _load_script

        err = io.StringIO()
        with read_only(inp, tmp / f"script{suffix}", tmp) as path:
            try:
                with contextlib.redirect_stderr(err):
                    _load_script(path)
            except typer.Exit as exc:
                return cli_rejected(exc.exit_code, err.getvalue(), path)
        return "accepted"

    return run


_SESSION_SEED = json.dumps({"schema_version": 1, "session_id": "s1", "summary": {"turns": []}}, indent=2).encode()
_SCRIPT_SEED = json.dumps({"files": {"a.py": "print(1)\n"}, "turns": [
    {"message": "hi", "actions": [{"read": "a.py"}, {"write": {"path": "a.py", "text": "x"}}],
     "outcome": {"return": {"response": "Done.", "changed_files": ["a.py"]}}}]}).encode()
_YAML_SEED = b"files: {a.py: \"print(1)\"}\nturns:\n  - message: hi\n    actions: [{read: a.py}, {run: pytest}]\n" \
             b"    outcome: {return: {response: Done.}}\n    trace: {status: completed, step_input_tokens: [10]}\n"


def targets() -> list[Target]:
    """Fractal's targets, in report order."""
    return [
        Target("fractal-session", "fractal_sim.session.FractalSession.load + store.list_sessions", _fractal_session,
               _SESSION_SEED, ("schema_version", "session_id", "summary", "turns", "user", "agent", "usage"), False,
               "warning + empty session (spec 6.5) = skipped; UnicodeDecodeError/ValueError/RecursionError escape "
               "the reference load (it catches OSError and JSONDecodeError only) = rejected; any .bad backup must "
               "equal the input"),
        Target("fractal-replay-json", "harness.cli.fractal._load_script (.json)", _fractal_replay(".json"),
               _SCRIPT_SEED, ("files", "turns", "message", "actions", "outcome", "trace", "read", "write", "return"),
               False, "one `error: <file>...` line, exit 1"),
        Target("fractal-replay-yaml", "harness.cli.fractal._load_script (.yaml)", _fractal_replay(".yaml"),
               _YAML_SEED, ("files", "turns", "message", "actions", "outcome", "trace", "read", "run"), False,
               "one `error: <file>...` line, exit 1"),
    ]
