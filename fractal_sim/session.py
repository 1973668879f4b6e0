"""``FractalSession``: append / finalize / cap / render / payload / save / load (spec 3.1, 3.2, 3.6, 5, 6.4, 6.5).

Realises MEM-OBJ-session-summary, MEM-OBJ-session-history, MEM-OBJ-turn-usage and the checkpoint half of
MEM-RTE-checkpoint-update. Faithful quirks, each linked to its claim:

- the summary is never trimmed and keeps only three counts per turn (FRA-01, FRA-18, FRA-41);
- the history tail is trimmed to 20 at four trim points, never at load (FRA-04, FRA-33, FRA-37);
- finalizing an evicted turn updates the summary before failing on the history (FRA-35);
- the history payload is a shallow copy of live entries (FRA-36);
- rejected files load as empty sessions with the requested id, and only unreadable JSON is backed up (FRA-22).
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .durable import DURABILITY_MODES, write_file
from .models import (
    EMPTY_SUMMARY_TEXT,
    MAX_HISTORY_TURNS,
    SUMMARY_HEADER,
    AgentTurn,
    RunTrace,
    SessionHistoryTurn,
    SessionState,
    SessionSummary,
    SummaryTurn,
    TurnUsage,
    UserTurn,
    new_turn_id,
    utc_now_iso,
)
from .store import backup_path_for, serialize_state, session_path

FaultHook = Callable[[str], None]
SAVE_STEP = "fractal.session.save"


def turn_usage_from_trace(trace: Any) -> TurnUsage | None:
    """Host-derived usage (FRA-08): main + sub tokens and cost, duration and iterations copied, and
    ``context_tokens`` = the last step's positive main input tokens (scanning from the end; none → 0).

    Reads attributes only, so any trace-like object works (FRA-29). Validation errors (e.g. a negative
    duration) propagate (FRA-38)."""
    if trace is None:
        return None
    context_tokens = 0
    for step in reversed(list(trace.steps)):
        value = step.usage.main.input_tokens
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            context_tokens = value
            break
    main, sub = trace.usage.main, trace.usage.sub
    return TurnUsage(
        input_tokens=main.input_tokens + sub.input_tokens,
        output_tokens=main.output_tokens + sub.output_tokens,
        cost=main.cost + sub.cost,
        duration_ms=trace.duration_ms,
        iterations=trace.iterations,
        context_tokens=context_tokens,
    )


def summarize_usage(summary: SessionSummary) -> TurnUsage:
    """Sum input/output/cost/duration/iterations; ``context_tokens`` = the latest non-zero value (FRA-09)."""
    totals = TurnUsage()
    for turn in summary.turns:
        usage = turn.agent.usage if turn.agent is not None else None
        if usage is None:
            continue
        totals.input_tokens += usage.input_tokens
        totals.output_tokens += usage.output_tokens
        totals.cost += usage.cost
        totals.duration_ms += usage.duration_ms
        totals.iterations += usage.iterations
        if usage.context_tokens:
            totals.context_tokens = usage.context_tokens
    return totals


def format_usage(totals: TurnUsage) -> str:
    """The ``/usage`` display."""
    if totals.input_tokens == 0 and totals.output_tokens == 0 and totals.iterations == 0:
        return "No recorded usage for this session yet."
    rows = [("input tokens", f"{totals.input_tokens:,}"), ("output tokens", f"{totals.output_tokens:,}")]
    if totals.context_tokens:
        rows.append(("current context", f"{totals.context_tokens:,}"))
    rows += [("iterations", str(totals.iterations)), ("agent time", f"{totals.duration_ms / 1000:.1f}s"),
             ("cost", f"${totals.cost:.4f}")]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name.ljust(width)}  {value}" for name, value in rows)


def render_session_summary(summary: SessionSummary) -> str:
    """Exact upstream text (spec 5.1): verbatim messages/responses, three counts, error; never usage, names,
    timestamps, traces or the session id (FRA-01, FRA-02, FRA-20)."""
    if not summary.turns:
        return EMPTY_SUMMARY_TEXT
    lines = [SUMMARY_HEADER]
    for i, turn in enumerate(summary.turns, start=1):
        lines += ["", f"Turn {i} ({turn.turn_id})", f"User: {turn.user.message}"]
        agent = turn.agent
        if agent is None:
            lines.append("Agent status: pending")
            continue
        lines.append(f"Agent status: {agent.status}")
        if agent.response:
            lines.append(f"Agent response: {agent.response}")
        lines += [f"files_read_count: {agent.files_read_count}",
                  f"files_changed_count: {agent.files_changed_count}",
                  f"commands_run_count: {agent.commands_run_count}"]
        if agent.error:
            lines.append(f"Error: {agent.error}")
    return "\n".join(lines)


def render_stored_turn(turn: SummaryTurn) -> str:
    """How a resumed session re-displays a stored agent turn (spec 5.4; FRA-13: pending → ``Running...``)."""
    agent = turn.agent
    if agent is None:
        return "Running..."
    if agent.status == "failed":
        return agent.error or "Turn failed."
    if agent.status == "interrupted":
        return agent.error or "Turn interrupted by user."
    if agent.status == "max_iterations":
        return "Reached max iterations; showing fallback response.\n" + (agent.response or "No fallback response.")
    return agent.response


def _check_str_list(value: Any, name: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or any(not isinstance(item, str) for item in value):
        raise TypeError(f"{name} must be list[str] or None.")
    return value  # stored without copying, as upstream


class FractalSession:
    """One session's state plus the operations upstream ``fractal.session.FractalSession`` offers."""

    def __init__(self, state: SessionState | None = None, *, session_id: str | None = None) -> None:
        if state is None:
            state = SessionState(session_id=session_id) if session_id is not None else SessionState()
        self.state = state

    @property
    def session_id(self) -> str:
        return self.state.session_id

    # -- cap -------------------------------------------------------------------------------------------
    def _trim_history(self) -> None:
        """Recency-only cap (spec 3.2): ``history = history[-20:]``, a new list."""
        self.state.history = self.state.history[-MAX_HISTORY_TURNS:]

    # -- append / finalize -------------------------------------------------------------------------------
    def add_user_message(self, content: str) -> str:
        turn_id = new_turn_id()
        now = utc_now_iso()
        self.state.summary.turns.append(SummaryTurn(turn_id=turn_id, user=UserTurn(message=content), agent=None))
        self.state.history.append(SessionHistoryTurn(
            turn_id=turn_id, user_message=content, status="pending", created_at=now, updated_at=now))
        self._trim_history()
        return turn_id

    def add_agent_turn(self, *, status: str, response: str = "", changed_files: list[str] | None = None,
                       files_read: list[str] | None = None, commands_run: list[str] | None = None,
                       error: str | None = None, trace: RunTrace | Any | None = None,
                       turn_id: str | None = None) -> None:
        """Finalize a turn (spec 3.1). ``turn_id=None`` targets the **last** summary turn; an id that was
        evicted from the history raises *after* the summary was updated (FRA-35, verified upstream)."""
        turns = self.state.summary.turns
        summary_turn: SummaryTurn | None = None
        if turn_id is None:
            summary_turn = turns[-1] if turns else None
        else:
            summary_turn = next((t for t in reversed(turns) if t.turn_id == turn_id), None)
        if summary_turn is None:
            if turn_id is None:
                raise ValueError("Cannot add an agent turn before a user turn exists.")
            raise ValueError(f"No session summary turn found for id '{turn_id}'.")
        files_read = _check_str_list(files_read, "files_read")
        changed_files = _check_str_list(changed_files, "changed_files")
        commands_run = _check_str_list(commands_run, "commands_run")
        summary_turn.agent = AgentTurn(
            status=status, response=response, files_read_count=len(files_read),
            files_changed_count=len(changed_files), commands_run_count=len(commands_run), error=error,
            usage=turn_usage_from_trace(trace))
        target_id = summary_turn.turn_id
        history_turn = next((h for h in reversed(self.state.history) if h.turn_id == target_id), None)
        if history_turn is None:
            raise ValueError(f"No session history turn found for id '{target_id}'.")
        history_turn.status = status
        history_turn.files_read = files_read
        history_turn.files_modified = changed_files
        history_turn.commands_run = commands_run
        history_turn.trace = trace
        history_turn.error = error
        history_turn.updated_at = utc_now_iso()
        self._trim_history()

    # -- projections -------------------------------------------------------------------------------------
    def summary(self) -> str:
        return render_session_summary(self.state.summary)

    def session_history_payload(self) -> list[SessionHistoryTurn]:
        """Trim (mutating state), then a shallow copy of the live entries (FRA-36)."""
        self._trim_history()
        return list(self.state.history)

    def usage_totals(self) -> TurnUsage:
        return summarize_usage(self.state.summary)

    # -- persistence ------------------------------------------------------------------------------------
    def path(self, workspace: str | os.PathLike[str], state_dir: Path | str | None = None) -> Path:
        return session_path(workspace, self.state.session_id, state_dir)

    def save(self, workspace: str | os.PathLike[str], *, state_dir: Path | str | None = None,
             fault_hook: FaultHook | None = None, durability: str = "faithful") -> Path:
        """Trim, then overwrite ``<id>.json`` in place (same inode; no temp file, fsync or lock: FRA-17).

        ``fault_hook("fractal.session.save")`` is called immediately before the write (see
        :mod:`fractal_sim.durable`). ``durability="atomic"`` is the hardened option (temp file in the same
        folder, fsync, ``os.replace``, fsync of the folder; REL-02): a crash mid-save leaves the previous file."""
        if durability not in DURABILITY_MODES:
            raise ValueError(f"durability must be one of {DURABILITY_MODES}, got {durability!r}")
        self._trim_history()
        path = self.path(workspace, state_dir)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = serialize_state(self.state)
        write_file(path, text.encode("utf-8"), step=SAVE_STEP, hook=fault_hook,
                   mode="overwrite" if durability == "faithful" else "atomic")
        return path

    @classmethod
    def load(cls, workspace: str | os.PathLike[str], *, session_id: str | None = None,
             state_dir: Path | str | None = None) -> FractalSession:
        """All branches of spec 6.5. Warnings are ``RuntimeWarning`` issued here with ``stacklevel=2``; every
        rejected file gives an empty session with the requested id (the next save overwrites it; FRA-22)."""
        if session_id is None:
            return cls()
        path = session_path(workspace, session_id, state_dir)
        if not path.exists():
            return cls(session_id=session_id)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            try:
                backup = backup_path_for(path)
                shutil.copy2(path, backup)
            except OSError:
                warnings.warn(f"Ignoring unreadable Fractal session at {path}: {exc}. "
                              "Could not preserve a backup.", RuntimeWarning, stacklevel=2)
            else:
                warnings.warn(f"Ignoring unreadable Fractal session at {path}: {exc}. "
                              f"Preserved a backup at {backup}.", RuntimeWarning, stacklevel=2)
            return cls(session_id=session_id)
        if not isinstance(data, dict):
            warnings.warn(f"Ignoring malformed Fractal session at {path}: expected a JSON object.",
                          RuntimeWarning, stacklevel=2)
            return cls(session_id=session_id)
        if data.get("schema_version") != 1:
            warnings.warn(f"Ignoring unsupported Fractal session format at {path}: expected schema_version=1.",
                          RuntimeWarning, stacklevel=2)
            return cls(session_id=session_id)
        try:
            state = SessionState.model_validate(data)
        except ValueError as exc:
            warnings.warn(f"Ignoring malformed Fractal session at {path}: {exc}.", RuntimeWarning, stacklevel=2)
            return cls(session_id=session_id)
        if state.session_id != session_id:
            warnings.warn(f"Ignoring Fractal session at {path}: embedded session_id '{state.session_id}' does not "
                          f"match requested session_id '{session_id}'.", RuntimeWarning, stacklevel=2)
            return cls(session_id=session_id)
        return cls(state)  # not trimmed (FRA-33, FRA-37)
