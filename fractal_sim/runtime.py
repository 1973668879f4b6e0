"""``FractalRuntime``: the submit loop and its finalization branches (spec 3.3-3.5, 6.7).

Realises MEM-RTE-checkpoint-update, MEM-RTE-session-context and MEM-RTE-session-reload. Two saves per finalized
submit: the pending turn is on disk before the agent runs (FRA-10), the final state after. Branches P, A-F of
spec 3.4 (FRA-11, FRA-12); a cancellation without the interrupt flag leaves a permanent pending turn (branch B,
FRA-13); exceptions raised before finalization (``on_pending``, an invalid trace usage) leave the turn pending
(FRA-38). Hook capture is best-effort (FRA-15); traces are extracted from exception chains (FRA-16).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from .events import RuntimeEventTracker
from .models import (
    INTERRUPTED_ERROR,
    MAX_ITERATIONS_ERROR,
    AgentResult,
    HeadlessResult,
    IterationEvent,
    RunTrace,
)
from .session import FaultHook, FractalSession, turn_usage_from_trace
from .store import resolve_workspace, session_path

HEADLESS_EXIT_CODES = {"succeeded": 0, "failed": 1, "max_iterations": 2, "interrupted": 130}
HEADLESS_INTERRUPTED_ERROR = "interrupted by user"


def user_facing_error(exc: BaseException) -> str:
    """``str(exc)`` (upstream's two sandbox-setup message substitutions are not modelled)."""
    return str(exc)


def coerce_trace(value: Any) -> RunTrace | None:
    """RunTrace kept; dict validated; ``model_dump`` objects dumped then validated; anything else → None."""
    if value is None:
        return None
    if isinstance(value, RunTrace):
        return value
    try:
        if isinstance(value, dict):
            return RunTrace.model_validate(value)
        dump = getattr(value, "model_dump", None)
        if callable(dump):
            return RunTrace.model_validate(dump(mode="python"))
    except (TypeError, ValueError):
        return None
    return None


def extract_trace(exc: BaseException) -> RunTrace | None:
    """Walk ``exc`` then ``__cause__ or __context__`` (cycle-guarded); coerce the first non-None ``.trace``.
    A malformed trace becomes no trace without changing the status (FRA-16)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        trace = getattr(cur, "trace", None)
        if trace is not None:
            return coerce_trace(trace)
        cur = cur.__cause__ or cur.__context__
    return None


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


class FractalRuntime:
    """One workspace, one current session, one agent. ``state_dir=None`` resolves the state directory from the
    environment at every save (spec 6.1). ``fault_hook`` is passed to every save (step ``fractal.session.save``).

    Hardened options (named, off by default; the reference has neither, FRA-17): ``durability="atomic"`` makes
    every save a temp-file + ``os.replace`` (REL-02); ``session_lock=True`` holds an exclusive ``flock`` on
    ``<id>.json.lock`` for the whole submit and reloads the session from disk under it, so two processes
    submitting to one session serialise instead of overwriting each other's turns (REL-10).
    """

    def __init__(self, workspace_path: str | os.PathLike[str], included_paths: Iterable[Any] | None = None,
                 session: FractalSession | None = None, agent: Any = None, *,
                 state_dir: Path | str | None = None, fault_hook: FaultHook | None = None,
                 durability: str = "faithful", session_lock: bool = False) -> None:
        self.workspace_path = resolve_workspace(workspace_path)
        self.included_paths = [resolve_workspace(p) for p in included_paths or []]
        self.session = session if session is not None else FractalSession()
        self.agent = agent
        self.state_dir = Path(state_dir) if state_dir is not None else None
        self.fault_hook = fault_hook
        self.durability = durability
        self.session_lock = session_lock
        self.last_tracker: RuntimeEventTracker | None = None

    @classmethod
    def create(cls, workspace_path: str | os.PathLike[str], agent: Any, *,
               included_paths: Iterable[Any] | None = None, resume_session_id: str | None = None,
               state_dir: Path | str | None = None, fault_hook: FaultHook | None = None,
               durability: str = "faithful", session_lock: bool = False) -> FractalRuntime:
        """``FractalSession.load(workspace)`` (always a new random session), then ``resume(id)`` if asked."""
        runtime = cls(workspace_path, included_paths,
                      FractalSession.load(resolve_workspace(workspace_path), state_dir=state_dir), agent,
                      state_dir=state_dir, fault_hook=fault_hook, durability=durability,
                      session_lock=session_lock)
        if resume_session_id is not None:
            runtime.resume(resume_session_id)
        return runtime

    # -- session navigation (spec 6.7) -----------------------------------------------------------------------
    def session_file(self) -> Path:
        return session_path(self.workspace_path, self.session.session_id, self.state_dir)

    def resume(self, session_id: str) -> FractalSession:
        path = session_path(self.workspace_path, session_id, self.state_dir)  # invalid id → ValueError
        if not path.exists():
            raise FileNotFoundError(f"No Fractal session found for id '{session_id}'.")
        self.session = FractalSession.load(self.workspace_path, session_id=session_id, state_dir=self.state_dir)
        return self.session

    def new_session(self) -> FractalSession:
        """In memory only; nothing is written until the next pending save; old files untouched (FRA-24)."""
        self.session = FractalSession()
        return self.session

    def save(self) -> Path:
        return self.session.save(self.workspace_path, state_dir=self.state_dir, fault_hook=self.fault_hook,
                                 durability=self.durability)

    @contextlib.contextmanager
    def _submit_lock(self) -> Iterator[None]:
        """``session_lock=True``: exclusive flock on ``<id>.json.lock``, then reload the stored session (if any)
        so this submit appends to what other processes saved. Faithful default: no lock (FRA-17)."""
        if not self.session_lock:
            yield
            return
        import fcntl

        path = self.session_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_name(path.name + ".lock"), "a+b") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                if path.exists():
                    self.session = FractalSession.load(self.workspace_path, session_id=self.session.session_id,
                                                       state_dir=self.state_dir)
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    # -- submit (spec 3.3) ---------------------------------------------------------------------------------
    async def submit(self, user_message: str, *, on_pending: Callable[[], Any] | None = None,
                     on_runtime_event: Callable[[Any], Any] | None = None,
                     on_iteration_event: Callable[[IterationEvent], Any] | None = None,
                     interrupt_requested: Callable[[], bool] | None = None) -> AgentResult:
        with self._submit_lock():
            return await self._submit(user_message, on_pending=on_pending, on_runtime_event=on_runtime_event,
                                      on_iteration_event=on_iteration_event,
                                      interrupt_requested=interrupt_requested)

    async def _submit(self, user_message: str, *, on_pending: Callable[[], Any] | None = None,
                      on_runtime_event: Callable[[Any], Any] | None = None,
                      on_iteration_event: Callable[[IterationEvent], Any] | None = None,
                      interrupt_requested: Callable[[], bool] | None = None) -> AgentResult:
        tracker = RuntimeEventTracker()
        self.last_tracker = tracker  # inspection only: tracker.files_modified is never persisted (FRA-05)

        def hook(raw: Any) -> None:
            try:
                display = tracker.observe(raw)
            except Exception:  # noqa: BLE001 - malformed events are dropped silently (FRA-15)
                return
            if display is not None and on_runtime_event is not None:
                try:
                    on_runtime_event(display)
                except Exception:  # noqa: BLE001 - display callback errors are swallowed
                    pass

        def iteration(event: IterationEvent) -> None:
            if on_iteration_event is not None:
                try:
                    on_iteration_event(event)
                except Exception:  # noqa: BLE001
                    pass

        session = self.session
        turn_id = session.add_user_message(user_message)
        self.save()  # save #1: the pending turn is on disk before the agent runs
        if on_pending is not None:
            await _maybe_await(on_pending())

        def finalize_interrupted(trace: RunTrace | None) -> None:
            session.add_agent_turn(status="interrupted", response="", files_read=tracker.files_read,
                                   commands_run=tracker.commands_run, error=INTERRUPTED_ERROR, trace=trace,
                                   turn_id=turn_id)
            self.save()

        if interrupt_requested is not None and interrupt_requested():  # branch P
            finalize_interrupted(None)
            raise asyncio.CancelledError(INTERRUPTED_ERROR)

        try:
            result = await self.agent.aforward(
                workspace_path=self.workspace_path, user_message=user_message,
                rendered_session_summary=session.summary(), session_history=session.session_history_payload(),
                included_paths=self.included_paths or None, on_runtime_event=hook, on_iteration_event=iteration)
        except asyncio.CancelledError as exc:
            if interrupt_requested is not None and interrupt_requested():  # branch A
                finalize_interrupted(extract_trace(exc))
            raise  # branch B: no finalization, no save: the turn stays pending
        except Exception as exc:
            trace = extract_trace(exc)
            if interrupt_requested is not None and interrupt_requested():  # branch C
                finalize_interrupted(trace)
                raise asyncio.CancelledError(INTERRUPTED_ERROR) from exc
            session.add_agent_turn(status="failed", response="", files_read=tracker.files_read,  # branch D
                                   commands_run=tracker.commands_run, error=user_facing_error(exc), trace=trace,
                                   turn_id=turn_id)
            self.save()
            raise
        trace = result.trace
        if trace is not None and trace.status == "max_iterations":  # branch E
            status, error = "max_iterations", MAX_ITERATIONS_ERROR
        else:  # branch F: status follows only the trace status string (FRA-11)
            status, error = "succeeded", None
        session.add_agent_turn(status=status, response=result.response, changed_files=result.changed_files,
                               files_read=tracker.files_read, commands_run=tracker.commands_run, error=error,
                               trace=trace, turn_id=turn_id)
        self.save()  # save #2
        return result

    def submit_sync(self, user_message: str, **kwargs: Any) -> AgentResult:
        """``asyncio.run(self.submit(...))`` for synchronous callers."""
        return asyncio.run(self.submit(user_message, **kwargs))


async def run_headless(runtime: FractalRuntime, message: str) -> tuple[HeadlessResult, int]:
    """One-turn envelope (spec 6.7): ``submit`` **without** ``interrupt_requested``. A ``CancelledError``
    reports ``interrupted`` / exit 130 while the stored turn stays pending (FRA-39)."""
    base = {"session_id": runtime.session.session_id, "workspace": str(runtime.workspace_path)}
    try:
        result = await runtime.submit(message)
    except asyncio.CancelledError:
        envelope = HeadlessResult(**base, status="interrupted", error=HEADLESS_INTERRUPTED_ERROR)
    except Exception as exc:  # noqa: BLE001
        envelope = HeadlessResult(**base, status="failed", error=user_facing_error(exc))
    else:
        status = "max_iterations" if result.trace is not None and result.trace.status == "max_iterations" \
            else "succeeded"
        envelope = HeadlessResult(**base, status=status, response=result.response,
                                  changed_files=list(result.changed_files),
                                  usage=turn_usage_from_trace(result.trace))
    return envelope, HEADLESS_EXIT_CODES[envelope.status]
