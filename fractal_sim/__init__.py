"""fractal_sim: an executable reference model of Fractal's session memory (spec ``shared/spec/fractal.md``).

Modules follow upstream's mechanism boundaries: ``models`` (pydantic state), ``session`` (append / finalize /
cap / render / payload / save / load), ``events`` (hook reducer), ``store`` (state dir, workspace key, listing),
``signature`` (``EditWorkspaceWithSession``, AGENTS.md), ``runtime`` (submit loop and branches),
``context_meter``, ``agent`` (``ScriptedAgent``, ``DspyAgent``) and ``replay`` (JSON/YAML replay scripts).
Never imports ``harness``.
"""

from __future__ import annotations

from .agent import (
    AgentCall,
    Cancel,
    Delete,
    DspyAgent,
    Emit,
    Open,
    Probe,
    Raise,
    Read,
    Return,
    Run,
    SafeReplace,
    ScriptedAgent,
    SetInterrupt,
    TraceSpec,
    TurnScript,
    Write,
    workspace_digest,
)
from .context_meter import ContextEstimate, ContextMeter
from .events import RuntimeEventTracker
from .models import (
    INTERRUPTED_ERROR,
    MAX_HISTORY_TURNS,
    MAX_ITERATIONS_ERROR,
    AgentResult,
    HookEvent,
    RawHookEvent,
    RunTrace,
    SessionState,
    TurnUsage,
    Workspace,
)
from .runtime import FractalRuntime, run_headless
from .session import FractalSession, render_session_summary, summarize_usage, turn_usage_from_trace
from .signature import build_edit_workspace_signature, load_workspace_instructions
from .store import default_state_dir, list_sessions, session_path, workspace_key

__all__ = [
    "AgentCall", "AgentResult", "Cancel", "ContextEstimate", "ContextMeter", "Delete", "DspyAgent", "Emit",
    "FractalRuntime", "FractalSession", "HookEvent", "INTERRUPTED_ERROR", "MAX_HISTORY_TURNS",
    "MAX_ITERATIONS_ERROR", "Open", "Probe", "Raise", "RawHookEvent", "Read", "Return", "Run", "RunTrace",
    "RuntimeEventTracker", "SafeReplace", "ScriptedAgent", "SessionState", "SetInterrupt", "TraceSpec",
    "TurnScript", "TurnUsage", "Workspace", "Write", "build_edit_workspace_signature", "default_state_dir",
    "list_sessions", "load_workspace_instructions", "render_session_summary", "run_headless", "session_path",
    "summarize_usage", "turn_usage_from_trace", "workspace_digest", "workspace_key",
]
