"""Offline workspace agents behind the agent protocol of spec 1.1: ``ScriptedAgent`` and ``DspyAgent``.

Both perform the adapter steps of upstream ``FractalAgent.aforward``: build the ``Workspace`` (``.fractal``
excluded), reload AGENTS.md, build ``EditWorkspaceWithSession`` with the rendered summary in its instructions,
pass the four inputs (history uncapped and unsaved: FRA-31), convert the prediction to ``AgentResult`` with type
checks (a wrong type raises ``TypeError``, which the runtime turns into a failed turn) and report iteration events.

``ScriptedAgent`` (spec 1.2) really performs its actions on the workspace and emits the hook events the upstream
sandbox would emit for them (spec 4.8); each call is captured as an ``AgentCall`` so scenarios can inspect
everything the model would have received (``model_visible_text``, used by FRA-42).
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .models import (
    DEFAULT_MAX_ITERATIONS,
    AgentResult,
    IterationEvent,
    IterationStep,
    LMUsage,
    RunTrace,
    SessionHistoryTurn,
    TokenUsage,
    Workspace,
)
from .signature import build_edit_workspace_signature, field_descriptions, load_workspace_instructions

RuntimeEventCallback = Callable[[Any], Any]
IterationCallback = Callable[[IterationEvent], Any]

# Linux values of the flags upstream's sandbox reports for a safe-replace temp file.
_SAFE_REPLACE_FLAGS = 1 | 64 | 512  # O_WRONLY | O_CREAT | O_TRUNC


# --- actions ------------------------------------------------------------------------------------------------


@dataclass
class Read:
    path: str


@dataclass
class Write:
    path: str
    text: str = ""


@dataclass
class Open:
    path: str
    mode: str = "r"


@dataclass
class SafeReplace:
    path: str
    text: str = ""


@dataclass
class Delete:
    path: str


@dataclass
class Run:
    command: str | list[str]
    ok: bool = True


@dataclass
class Emit:
    raw: Any


@dataclass
class SetInterrupt:
    pass


@dataclass
class Probe:
    fn: Callable[[], Any]


Action = Read | Write | Open | SafeReplace | Delete | Run | Emit | SetInterrupt | Probe


# --- outcomes -----------------------------------------------------------------------------------------------


@dataclass
class Return:
    response: Any = "ok"
    changed_files: Any = field(default_factory=list)


@dataclass
class Raise:
    message: str = "agent failed"
    exc_type: type[BaseException] = RuntimeError
    trace: Any = None
    attach: str = "self"  # or "cause": the trace sits on an inner exception used as __cause__


@dataclass
class Cancel:
    pass


Outcome = Return | Raise | Cancel


@dataclass
class TraceSpec:
    """Overrides of the default scripted trace (spec 1.2). ``steps=None`` → one step per action (or one per
    entry of ``step_input_tokens`` when given); ``steps=[]`` → no steps."""

    status: str = "completed"
    model: str = "scripted"
    iterations: int | None = None
    duration_ms: int = 0
    usage_main: TokenUsage = field(default_factory=TokenUsage)
    usage_sub: TokenUsage = field(default_factory=TokenUsage)
    steps: list[IterationStep] | None = None
    step_input_tokens: list[int] | None = None


@dataclass
class TurnScript:
    actions: list[Any] = field(default_factory=list)
    outcome: Any = field(default_factory=lambda: Return("ok", []))
    trace: Any = "default"  # "default" | TraceSpec | RunTrace | None | any object (passed through)


# --- capture ------------------------------------------------------------------------------------------------


@dataclass
class AgentCall:
    """What one agent call received (spec 1.2 "Capture")."""

    signature_name: str
    instructions: str
    input_fields: dict[str, str]
    output_fields: dict[str, str]
    inputs_json: dict[str, Any]
    history_ref: Any

    def model_visible_text(self) -> str:
        """instructions + all field descriptions + the inputs as JSON: everything the model receives."""
        descriptions = "\n".join([*self.input_fields.values(), *self.output_fields.values()])
        return self.instructions + "\n" + descriptions + "\n" + json.dumps(self.inputs_json, ensure_ascii=False)


def workspace_digest(root: str | os.PathLike[str]) -> str:
    """SHA-256 over sorted (relative path, bytes) of the regular files under ``root``."""
    base = Path(root)
    digest = hashlib.sha256()
    for path in sorted(p for p in base.rglob("*") if p.is_file() and not p.is_symlink()):
        digest.update(path.relative_to(base).as_posix().encode("utf-8") + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _history_json(history: Sequence[Any] | None) -> list[Any]:
    out = []
    for entry in history or []:
        out.append(entry.model_dump(mode="json") if isinstance(entry, SessionHistoryTurn) else entry)
    return out


def prepare_call(workspace_path: str | os.PathLike[str], user_message: str, rendered_session_summary: str,
                 session_history: list[SessionHistoryTurn] | None,
                 included_paths: Iterable[str | os.PathLike[str]] | None) -> tuple[Any, dict[str, Any], AgentCall]:
    """Adapter steps 1-4: workspace objects, AGENTS.md, signature, inputs; plus the capture record."""
    workspace = Workspace(path=str(Path(workspace_path).expanduser().resolve()), mode="direct")
    if ".fractal" not in workspace.exclude:
        workspace.exclude.append(".fractal")
    included = [Workspace(path=str(Path(p).expanduser().resolve()), mode="direct") for p in included_paths or []]
    agents_text = load_workspace_instructions(workspace)
    signature = build_edit_workspace_signature(rendered_session_summary, agents_text)
    history = session_history if session_history is not None else []
    inputs = {"workspace": workspace, "included_paths": included or None, "user_message": user_message,
              "session_history": history}
    input_fields, output_fields = field_descriptions(signature)
    call = AgentCall(
        signature_name=signature.__name__, instructions=signature.instructions, input_fields=input_fields,
        output_fields=output_fields,
        inputs_json={"workspace": workspace.path,
                     "included_paths": [w.path for w in included] if included else None,
                     "user_message": user_message, "session_history": _history_json(history)},
        history_ref=history)
    return signature, inputs, call


def to_agent_result(response: Any, changed_files: Any, trace: Any) -> AgentResult:
    """Adapter step 5: type checks (a failure reaches the runtime as an ordinary exception → ``failed``)."""
    if not isinstance(response, str):
        raise TypeError(f"Agent response must be str, got {type(response).__name__}.")
    if not isinstance(changed_files, list) or any(not isinstance(p, str) for p in changed_files):
        raise TypeError("Agent changed_files must be list[str].")
    if trace is not None and not isinstance(trace, RunTrace):
        raise TypeError(f"Agent trace must be RunTrace or None, got {type(trace).__name__}.")
    return AgentResult(response=response, changed_files=changed_files, trace=trace)


def _notify_iteration(callback: IterationCallback | None, event: IterationEvent) -> None:
    if callback is None:
        return
    try:
        result = callback(event)
        if inspect.isawaitable(result):  # pragma: no cover - display callbacks are sync in practice
            asyncio.ensure_future(result)
    except Exception:  # noqa: BLE001 - display only; upstream swallows
        pass


def _code_line(action: Any) -> str:
    if isinstance(action, Read):
        return f"Path({action.path!r}).read_text()"
    if isinstance(action, Write):
        return f"Path({action.path!r}).write_text(...)"
    if isinstance(action, Open):
        return f"open({action.path!r}, {action.mode!r}).close()"
    if isinstance(action, SafeReplace):
        return f"safe_replace({action.path!r})"
    if isinstance(action, Delete):
        return f"os.unlink({action.path!r})"
    if isinstance(action, Run):
        return f"subprocess.run({action.command!r})"
    if isinstance(action, Emit):
        return "emit_hook_event(...)"
    if isinstance(action, SetInterrupt):
        return "request_interrupt()"
    return "probe()"


def _step(k: int, code: str, input_tokens: int = 0) -> IterationStep:
    return IterationStep(iteration=k, reasoning="", code=code, output="", untruncated_output="", duration_ms=0,
                         usage=LMUsage(main=TokenUsage(input_tokens=input_tokens)))


class ScriptedAgent:
    """Deterministic offline agent; one ``TurnScript`` consumed per call (exhausted → ``Return("ok", [])``)."""

    def __init__(self, scripts: Iterable[TurnScript] = (), *, max_iterations: int = DEFAULT_MAX_ITERATIONS,
                 model_label: str = "scripted") -> None:
        self.scripts: list[TurnScript] = list(scripts)
        self.max_iterations = max_iterations
        self.model_label = model_label
        self.calls: list[AgentCall] = []
        self.interrupt_flag = False
        self.closed = False

    # the flag a harness passes as ``interrupt_requested`` (cleared before each submit)
    def interrupt_requested(self) -> bool:
        return self.interrupt_flag

    def clear_interrupt(self) -> None:
        self.interrupt_flag = False

    def add(self, *scripts: TurnScript) -> None:
        self.scripts.extend(scripts)

    def prewarm(self) -> None:
        return None

    def close(self) -> None:
        self.closed = True

    def _next_script(self) -> TurnScript:
        return self.scripts.pop(0) if self.scripts else TurnScript([], Return("ok", []))

    def build_trace(self, script: TurnScript) -> Any:
        spec = script.trace
        if isinstance(spec, str) and spec == "default":
            spec = TraceSpec()
        if not isinstance(spec, TraceSpec):
            return spec  # None, a RunTrace, or anything else (passed through as given)
        if spec.steps is not None:
            steps = [s.model_copy(deep=True) for s in spec.steps]
        elif spec.step_input_tokens is not None:
            codes = [_code_line(a) for a in script.actions]
            steps = [_step(k, codes[k - 1] if k <= len(codes) else "", tokens)
                     for k, tokens in enumerate(spec.step_input_tokens, start=1)]
        else:
            steps = [_step(k, _code_line(a)) for k, a in enumerate(script.actions, start=1)]
        iterations = spec.iterations if spec.iterations is not None else max(1, len(script.actions))
        return RunTrace(status=spec.status, model=spec.model, iterations=iterations,
                        max_iterations=self.max_iterations, duration_ms=spec.duration_ms,
                        usage=LMUsage(main=spec.usage_main.model_copy(), sub=spec.usage_sub.model_copy()),
                        steps=steps)

    async def aforward(self, *, workspace_path: str | os.PathLike[str], user_message: str,
                       rendered_session_summary: str = "", session_history: list[SessionHistoryTurn] | None = None,
                       included_paths: Iterable[str | os.PathLike[str]] | None = None,
                       on_runtime_event: RuntimeEventCallback | None = None,
                       on_iteration_event: IterationCallback | None = None) -> AgentResult:
        _, _, call = prepare_call(workspace_path, user_message, rendered_session_summary, session_history,
                                  included_paths)
        self.calls.append(call)
        script = self._next_script()
        root = Path(call.inputs_json["workspace"])
        emitter = _HookEmitter(on_runtime_event)
        n = len(script.actions)
        for k, action in enumerate(script.actions, start=1):
            self._perform(root, action, emitter)
            _notify_iteration(on_iteration_event, IterationEvent(k, self.max_iterations, k == n))
        outcome = script.outcome
        if isinstance(outcome, Cancel):
            raise asyncio.CancelledError()
        if isinstance(outcome, Raise):
            exc = outcome.exc_type(outcome.message)
            if outcome.trace is not None:
                if outcome.attach == "cause":
                    inner = RuntimeError(f"inner: {outcome.message}")
                    inner.trace = outcome.trace  # type: ignore[attr-defined]
                    exc.__cause__ = inner
                else:
                    exc.trace = outcome.trace  # type: ignore[attr-defined]
            raise exc
        trace = self.build_trace(script)
        return to_agent_result(outcome.response, outcome.changed_files, trace)

    # -- real effects + hook events (spec 4.8) ------------------------------------------------------------
    def _perform(self, root: Path, action: Any, emit: _HookEmitter) -> None:
        perform_action(root, action, emit, on_interrupt=self._set_interrupt)

    def _set_interrupt(self) -> None:
        self.interrupt_flag = True


def confined(root: Path, rel: str | os.PathLike[str]) -> Path:
    """``root / rel`` resolved, or ``PermissionError`` when it leaves the workspace (``../x``, an absolute path,
    a symlink pointing out). Simulator safety, not a modelled mechanism: the offline agents act on the user's
    real disk, so every action path is confined to the workspace the session is keyed by."""
    base = Path(root).resolve()
    try:
        target = (base / rel).resolve()
    except (ValueError, OSError, RuntimeError) as exc:  # embedded NUL, symlink loop
        raise PermissionError(13, f"invalid path ({exc})", str(rel)) from None
    if target != base and base not in target.parents:
        raise PermissionError(13, "path is outside the workspace", str(rel))
    return target


def perform_action(root: Path, action: Any, emit: _HookEmitter, *,
                   on_interrupt: Callable[[], None] | None = None) -> None:
    """Perform one scripted action for real on the workspace and emit the sandbox's hook events (spec 4.8).

    A failing operation emits ``error`` instead of ``after`` and returns normally (the script continues). A path
    outside the workspace fails that way too (``PermissionError``, see :func:`confined`), before anything is
    touched."""
    if isinstance(action, (Read, Write)):
        reading = isinstance(action, Read)
        method = "pathlib.Path.read_text" if reading else "pathlib.Path.write_text"
        mode = "r" if reading else "w"
        p = action.path
        emit(method, "before", [p])
        emit("pathlib.Path.open", "before", [p, mode])
        try:
            target = confined(root, p)
            if reading:
                target.read_text(encoding="utf-8")
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(action.text, encoding="utf-8")
        except OSError as exc:
            emit("pathlib.Path.open", "error", [p, mode], error=repr(exc))
            emit(method, "error", [p], error=repr(exc))
        else:
            emit("pathlib.Path.open", "after", [p, mode])
            emit(method, "after", [p])
    elif isinstance(action, Open):
        kwargs = {"mode": action.mode}
        emit("builtins.open", "before", [action.path], kwargs=kwargs)
        try:
            with open(confined(root, action.path), action.mode):
                pass
        except OSError as exc:
            emit("builtins.open", "error", [action.path], kwargs=kwargs, error=repr(exc))
        else:
            emit("builtins.open", "after", [action.path], kwargs=kwargs)
    elif isinstance(action, SafeReplace):
        tmp = action.path + ".tmp"
        data = action.text.encode("utf-8")
        emit("os.open", "before", [tmp, _SAFE_REPLACE_FLAGS])
        try:
            confined(root, action.path)
            (root / tmp).parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(confined(root, tmp), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        except OSError as exc:
            emit("os.open", "error", [tmp, _SAFE_REPLACE_FLAGS], error=repr(exc))
            return
        emit("os.open", "after", [tmp, _SAFE_REPLACE_FLAGS], result=fd)
        emit("os.pwrite", "before", [fd, len(data), 0])
        try:
            written = os.pwrite(fd, data, 0)
        except OSError as exc:
            emit("os.pwrite", "error", [fd, len(data), 0], error=repr(exc))
            return
        else:
            emit("os.pwrite", "after", [fd, len(data), 0], result=written)
        finally:
            os.close(fd)
        emit("os.replace", "before", [tmp, action.path])
        try:
            os.replace(root / tmp, root / action.path)
        except OSError as exc:
            emit("os.replace", "error", [tmp, action.path], error=repr(exc))
        else:
            emit("os.replace", "after", [tmp, action.path])
    elif isinstance(action, Delete):
        emit("os.unlink", "before", [action.path])
        try:
            confined(root, action.path).unlink()
        except OSError as exc:
            emit("os.unlink", "error", [action.path], error=repr(exc))
        else:
            emit("os.unlink", "after", [action.path])
    elif isinstance(action, Run):
        c = action.command
        emit("subprocess.run", "before", [c])
        emit("subprocess.Popen", "before", [c])
        emit("subprocess.Popen", "after", [c])
        if action.ok:
            emit("subprocess.run", "after", [c], result=0)
        else:
            emit("subprocess.run", "error", [c], error="CalledProcessError(returncode=1)")
    elif isinstance(action, Emit):
        emit.raw(action.raw)
    elif isinstance(action, SetInterrupt):
        if on_interrupt is not None:
            on_interrupt()
    elif isinstance(action, Probe):
        action.fn()
    else:
        raise TypeError(f"Unknown scripted action: {action!r}")


class _HookEmitter:
    """Builds sandbox-shaped hook event dicts (``RawHookEvent`` JSON form) and hands them to the callback."""

    def __init__(self, callback: RuntimeEventCallback | None) -> None:
        self.callback = callback

    def __call__(self, target: str, phase: str, args: list[Any], *, kwargs: dict[str, Any] | None = None,
                 result: Any = None, error: Any = None) -> None:
        self.raw({"target": target, "phase": phase, "args": list(args), "kwargs": dict(kwargs or {}),
                  "result": result, "error": error, "duration_ms": None, "timestamp": time.time()})

    def raw(self, event: Any) -> None:
        if self.callback is not None:
            self.callback(event)


class DspyAgent:
    """The same adapter over any ``dspy.LM``.

    ``mode="predict"`` (default): one ``dspy.Predict(EditWorkspaceWithSession)`` call. ``mode="react"``:
    ``dspy.ReAct`` over the same signature with three tools (``read_file``, ``write_file``, ``run_command``) routed
    through the hook-emitting workspace functions of the ScriptedAgent (commands are recorded, never executed).

    Trace: ``status="completed"``, ``model=lm.model``, ``iterations`` = LM calls made, usage from the LM's
    reported prompt/completion tokens and cost (0 when absent), one step per tool call (react). The summary
    reaches the LM in the system message (signature instructions); the history in the user message
    (``session_history`` input)."""

    def __init__(self, lm: Any = None, *, max_iterations: int = DEFAULT_MAX_ITERATIONS,
                 mode: str = "predict") -> None:
        if mode not in ("predict", "react"):
            raise ValueError(f"DspyAgent mode must be 'predict' or 'react', not {mode!r}")
        self.lm = lm
        self.max_iterations = max_iterations
        self.mode = mode
        self.calls: list[AgentCall] = []

    @property
    def model_label(self) -> str:
        return str(getattr(self.lm, "model", "dspy"))

    def prewarm(self) -> None:
        return None

    def close(self) -> None:
        return None

    def _tools(self, root: Path, emitter: _HookEmitter, actions: list[Any]) -> list[Callable[..., str]]:
        def read_file(path: str) -> str:
            """Read a UTF-8 text file; `path` is relative to the workspace."""
            actions.append(Read(path))
            perform_action(root, actions[-1], emitter)
            try:
                return confined(root, path).read_text(encoding="utf-8")
            except OSError as exc:
                return f"error: {exc}"

        def write_file(path: str, text: str) -> str:
            """Write `text` to a file relative to the workspace (parents are created)."""
            actions.append(Write(path, text))
            perform_action(root, actions[-1], emitter)
            return f"wrote {len(text)} characters to {path}"

        def run_command(command: str) -> str:
            """Run a shell command in the workspace (offline: recorded, not executed)."""
            actions.append(Run(command))
            perform_action(root, actions[-1], emitter)
            return "recorded; commands are not executed in the offline simulator"

        return [read_file, write_file, run_command]

    async def aforward(self, *, workspace_path: str | os.PathLike[str], user_message: str,
                       rendered_session_summary: str = "", session_history: list[SessionHistoryTurn] | None = None,
                       included_paths: Iterable[str | os.PathLike[str]] | None = None,
                       on_runtime_event: RuntimeEventCallback | None = None,
                       on_iteration_event: IterationCallback | None = None) -> AgentResult:
        import dspy

        signature, inputs, call = prepare_call(workspace_path, user_message, rendered_session_summary,
                                               session_history, included_paths)
        self.calls.append(call)
        lm = self.lm if self.lm is not None else dspy.settings.lm
        history = getattr(lm, "history", None)
        before = len(history) if isinstance(history, list) else 0
        actions: list[Any] = []
        if self.mode == "react":
            root = Path(call.inputs_json["workspace"])
            module: Any = dspy.ReAct(signature, tools=self._tools(root, _HookEmitter(on_runtime_event), actions),
                                     max_iters=self.max_iterations)
        else:
            module = dspy.Predict(signature)
        started = time.monotonic()
        with dspy.context(lm=lm):
            prediction = module(**inputs)
        duration_ms = int((time.monotonic() - started) * 1000)
        entries = history[before:] if isinstance(history, list) else []
        main = TokenUsage()
        for entry in entries:
            usage = entry.get("usage") or {}
            main.input_tokens += int(usage.get("prompt_tokens") or 0)
            main.output_tokens += int(usage.get("completion_tokens") or 0)
            main.cost += float(entry.get("cost") or 0.0)
        iterations = len(entries) or 1
        steps = [_step(k, _code_line(a)) for k, a in enumerate(actions, start=1)]
        trace = RunTrace(status="completed", model=str(getattr(lm, "model", "dspy")), iterations=iterations,
                         max_iterations=self.max_iterations, duration_ms=duration_ms, usage=LMUsage(main=main),
                         steps=steps)
        for k in range(1, len(actions) + 1):
            _notify_iteration(on_iteration_event, IterationEvent(k, self.max_iterations, False))
        _notify_iteration(on_iteration_event, IterationEvent(len(actions) + 1, self.max_iterations, True))
        return to_agent_result(getattr(prediction, "response", None), getattr(prediction, "changed_files", None),
                               trace)
