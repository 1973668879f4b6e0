"""``memsim fractal ...``: Fractal session memory (spec: shared/spec/fractal.md).

Commands mirror upstream Fractal's session tools: ``replay`` (run a scripted conversation through
``FractalRuntime`` with the offline ``ScriptedAgent``), ``sessions`` (``/sessions``), ``show`` (what the next turn
would receive) and ``usage`` (``/usage``). The state directory is upstream's (``FRACTAL_STATE_HOME``,
``XDG_STATE_HOME``, ``~/.local/state/fractal``) unless ``--state-dir`` is given. Errors print one line and exit 1.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from harness.cli.boundary import (
    BoundaryTyper,
    bad_option,
    cli_errors,
    describe_error,
    fail,
    make_console,
    warn,
)

app = BoundaryTyper(help="Fractal session memory: replay scripted turns, list, show and meter saved sessions.",
                  no_args_is_help=True)
console = make_console(soft_wrap=True)  # markup and emoji off: paths, ids and messages print as given
err_console = make_console(stderr=True, soft_wrap=True)

WorkspaceOpt = Annotated[Path, typer.Option("--workspace", "-w", help="Workspace directory (sessions are keyed by "
                                                                       "its resolved path).")]
StateDirOpt = Annotated[Path | None, typer.Option(
    "--state-dir", help="State directory (default: $FRACTAL_STATE_HOME, $XDG_STATE_HOME/fractal or "
                        "~/.local/state/fractal).")]


def _load_script(path: Path) -> Any:
    from fractal_sim.replay import ScriptError, parse_replay_script

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(f"{path}: cannot read script: {describe_error(exc)}") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f"{mark.line + 1}: " if mark is not None else " "
            what = " ".join(str(getattr(exc, "problem", None) or exc).split())
            raise fail(f"{path}:{line}invalid YAML: {what}") from None
        except (RecursionError, ValueError) as exc:  # nesting deeper than the parser's stack, 5000-digit ints
            raise fail(f"{path}: invalid YAML: {describe_error(exc)}") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise fail(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
        except (RecursionError, ValueError) as exc:  # nesting deeper than the parser's stack, 5000-digit ints
            raise fail(f"{path}: invalid JSON: {describe_error(exc)}") from None
    try:
        return parse_replay_script(data)
    except ScriptError as exc:
        raise fail(f"{path}: {' '.join(str(exc).split())}") from None
    except (TypeError, ValueError, AttributeError, RecursionError) as exc:  # YAML types the schema never expects
        raise fail(f"{path}: invalid script: {describe_error(exc)}") from None


def _workspace(path: Path, *, must_exist: bool = True) -> Path:
    if must_exist and not path.is_dir():
        raise fail(f"{path}: workspace directory does not exist")
    return path


def _resume(workspace: Path, session_id: str, state_dir: Path | None, *, inspect: bool = False) -> Any:
    """``runtime.resume`` with the spec's warnings shown as one ``warning:`` line each.

    ``inspect=True`` (``show``, ``usage``) never writes: upstream's load copies an unreadable session file to a
    ``.bad-<timestamp>`` backup (spec 6.5), which a read-only inspection must not repeat on every call, so such a
    file is reported and shown as the empty session upstream's load would yield, without the copy."""
    from fractal_sim import FractalRuntime, FractalSession, ScriptedAgent
    from fractal_sim.store import session_path

    runtime = FractalRuntime(workspace, agent=ScriptedAgent(), state_dir=state_dir)
    if inspect:
        try:
            path = session_path(workspace, session_id, state_dir)
        except ValueError as exc:
            raise fail(str(exc)) from None
        if path.is_dir():
            raise fail(f"{path}: is a directory, not a session file")
        if path.exists():
            try:
                json.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                warn(f"Ignoring unreadable Fractal session at {path}: {exc}. "
                     "Read-only inspection: no backup written.", to=err_console)
                runtime.session = FractalSession(session_id=session_id)
                return runtime
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            runtime.resume(session_id)
        except FileNotFoundError as exc:
            raise fail(str(exc)) from None
        except (ValueError, RecursionError) as exc:  # bad id; or what the reference load lets escape (spec 6.5)
            if isinstance(exc, ValueError) and str(exc).startswith("Invalid Fractal session id"):
                raise fail(str(exc)) from None
            from fractal_sim.store import session_path

            where = session_path(workspace, session_id, state_dir)
            raise fail(f"{where}: cannot load the session: {describe_error(exc)}") from None
    for w in caught:
        warn(str(w.message), to=err_console)
    return runtime


def _under(filename: Any, root: Path) -> bool:
    if not filename:
        return False
    try:
        return Path(filename).resolve().is_relative_to(root.resolve())
    except (OSError, ValueError, TypeError):
        return False


def _check_confined(script: Path, workspace: Path, parsed: Any) -> None:
    """One-line error when a ``files:`` entry or any turn action (read, write, open, replace, delete) names a
    path outside the workspace (``../x``, an absolute path, a symlink out)."""
    from fractal_sim.agent import confined

    for rel in parsed.files:
        try:
            target = confined(workspace, rel)
        except PermissionError as exc:
            raise fail(f"{script}: files: {rel!r}: {exc.strerror}") from None
        if target == workspace.resolve():
            raise fail(f"{script}: files: {rel!r} names the workspace itself, not a file")
    for i, turn in enumerate(parsed.turns, start=1):
        for action in turn.script.actions:
            rel = getattr(action, "path", None)
            if rel is None:
                continue
            try:
                confined(workspace, rel)
            except PermissionError as exc:
                raise fail(f"{script}: turn {i}: {type(action).__name__.lower()} {rel!r}: {exc.strerror}") from None


def _turn_status(runtime: Any) -> tuple[str, str]:
    turn = runtime.session.state.summary.turns[-1]
    if turn.agent is None:
        return "pending", ""
    return turn.agent.status, turn.agent.error or ""


@app.command()
def replay(
    script: Annotated[Path, typer.Argument(help="JSON or YAML script of turns: files, then per turn a message, "
                                                "actions, outcome and trace (README: 'memsim fractal replay "
                                                "scripts').")],
    workspace: WorkspaceOpt,
    state_dir: StateDirOpt = None,
    resume: Annotated[str | None, typer.Option(help="Continue this stored session instead of a new one.")] = None,
    create: Annotated[bool, typer.Option("--create/--no-create", help="Create the workspace if missing.")] = True,
) -> None:
    """Run a scripted conversation through FractalRuntime with the offline ScriptedAgent.

    Each turn's actions really run on the workspace (reads, writes, safe replaces, deletes; commands are only
    recorded) and emit the sandbox hook events; the session is saved twice per turn exactly as upstream."""
    from rich.progress import Progress

    from fractal_sim import FractalRuntime, ScriptedAgent

    parsed = _load_script(script)
    if create:
        try:
            workspace.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise fail(f"{workspace}: cannot create workspace: {exc}") from None
    _workspace(workspace)
    _check_confined(script, workspace, parsed)  # every path first: nothing is written when one escapes
    for rel, text in parsed.files.items():
        target = (workspace / rel).resolve()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    agent = ScriptedAgent([t.script for t in parsed.turns])
    runtime = FractalRuntime(workspace, agent=agent, state_dir=state_dir)
    if resume is not None:
        runtime = _resume(workspace, resume, state_dir)
        runtime.agent = agent
    counts: dict[str, int] = {}
    state_root = runtime.session_file().parents[3]
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("replaying turns", total=len(parsed.turns))
        for i, turn in enumerate(parsed.turns, start=1):
            agent.clear_interrupt()
            outcome = ""
            try:
                asyncio.run(runtime.submit(turn.message, interrupt_requested=agent.interrupt_requested))
            except asyncio.CancelledError as exc:
                outcome = f"CancelledError{': ' + str(exc) if str(exc) else ''}"
            except Exception as exc:  # noqa: BLE001 - an agent failure is a turn outcome, reported per turn
                if isinstance(exc, OSError) and _under(getattr(exc, "filename", None), state_root):
                    raise fail(f"turn {i}: cannot save the session: {exc}") from None
                outcome = f"{type(exc).__name__}: {exc}"
            status, error = _turn_status(runtime)
            counts[status] = counts.get(status, 0) + 1
            detail = f"  ({outcome})" if outcome and outcome != f"RuntimeError: {error}" else ""
            err = f"  error: {error}" if error else ""
            progress.console.print(f"turn {i:>3} {status:<14} {turn.message[:60]!r}{err}{detail}")
            progress.advance(task)
    console.print(f"session {runtime.session.session_id}: {len(parsed.turns)} turns "
                  f"({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))})")
    console.print(f"saved {runtime.session_file()}")


@app.command()
def sessions(workspace: WorkspaceOpt, state_dir: StateDirOpt = None,
             as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False) -> None:
    """List stored sessions of a workspace, newest first (upstream /sessions)."""
    from fractal_sim import list_sessions
    from fractal_sim.store import format_session_list, sessions_dir

    with cli_errors():
        rows = list_sessions(workspace, state_dir)
    if as_json:
        console.print(json.dumps([r.model_dump() for r in rows], indent=2))
    else:
        console.print(format_session_list(rows))
    console.print(f"sessions dir {sessions_dir(workspace, state_dir)}")


@app.command()
def show(
    session_id: Annotated[str, typer.Argument(help="Session id (the file name without .json).")],
    workspace: WorkspaceOpt,
    state_dir: StateDirOpt = None,
    counter: Annotated[str, typer.Option(help="Token counter for the estimate: minilm (MiniLM WordPiece "
                                              "tokenizer), chars4 or cl100k-bundled.")] = "minilm",
    instructions: Annotated[bool, typer.Option("--instructions/--no-instructions",
                                               help="Print the full instruction text.")] = True,
) -> None:
    """Show a stored session: the rendered summary, the history payload, the next turn's instructions and a
    context estimate. Loading follows upstream /resume (a rejected file shows as an empty session, warned)."""
    from fractal_sim.context_meter import COUNTERS, ContextMeter, CounterUnavailable
    from fractal_sim.signature import build_edit_workspace_signature, load_workspace_instructions

    if counter not in COUNTERS:
        raise bad_option("--counter", counter, COUNTERS)
    with cli_errors():
        runtime = _resume(workspace, session_id, state_dir, inspect=True)
    session = runtime.session
    console.rule("rendered session summary")
    console.print(session.summary(), markup=False)
    payload = session.session_history_payload()
    table = Table(title=f"history payload ({len(payload)} of max 20 turns; summary has "
                        f"{len(session.state.summary.turns)})")
    for col in ("turn", "status", "read", "modified", "commands", "trace", "message"):
        table.add_column(col, overflow="fold")
    for h in payload:
        table.add_row(h.turn_id[:13], h.status, str(len(h.files_read)), str(len(h.files_modified)),
                      str(len(h.commands_run)), h.trace.status if h.trace else "-", h.user_message[:40])
    console.print(table)
    if instructions:
        sig = build_edit_workspace_signature(session.summary(), load_workspace_instructions(runtime.workspace_path))
        console.rule(f"instructions of {sig.__name__} for the next turn")
        console.print(sig.instructions, markup=False)
    try:
        est = ContextMeter(counter).estimate_runtime(runtime)
        console.print(f"~{est.tokens} ctx ({est.counter}; system {est.system_chars} chars, user {est.user_chars} "
                      f"chars, session_history {est.history_json_chars} chars)")
    except CounterUnavailable as exc:
        warn(f"no context estimate: {exc}", to=err_console)
    console.print(f"session file {runtime.session_file()}")


@app.command()
def usage(session_id: Annotated[str, typer.Argument(help="Session id.")], workspace: WorkspaceOpt,
          state_dir: StateDirOpt = None) -> None:
    """Usage totals of a stored session (upstream /usage)."""
    from fractal_sim.session import format_usage

    with cli_errors():
        runtime = _resume(workspace, session_id, state_dir, inspect=True)
    console.print(format_usage(runtime.session.usage_totals()), markup=False)
    console.print(f"session file {runtime.session_file()}")
