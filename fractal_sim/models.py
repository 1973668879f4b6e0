"""Pydantic state of Fractal session memory (spec section 2) and its constants (section 9).

Field order is JSON key order, so the models below are the on-disk format of upstream Fractal
(fractal-rlm 0.1.2) session files: a memsim file resumes upstream and vice versa (FRA-28, FRA-44).
Default pydantic config on purpose: unknown keys are ignored and assignments are not re-validated (FRA-37).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

SCHEMA_VERSION = 1
MAX_HISTORY_TURNS = 20
MAX_ITERATIONS_ERROR = "Reached max iterations before SUBMIT; response came from fallback extraction."
INTERRUPTED_ERROR = "Turn interrupted by user."
EMPTY_SUMMARY_TEXT = "No prior Fractal session context."
SUMMARY_HEADER = "## Session Summary"
DEFAULT_MAX_ITERATIONS = 30

AgentStatus = Literal["succeeded", "failed", "max_iterations", "interrupted"]
HistoryStatus = Literal["pending", "succeeded", "failed", "max_iterations", "interrupted"]
TraceStatus = Literal["in_progress", "completed", "max_iterations", "error"]


def utc_now_iso() -> str:
    """``datetime.now(timezone.utc).isoformat()`` (no fraction when the microsecond is 0)."""
    return datetime.now(UTC).isoformat()


def new_session_id() -> str:
    return uuid.uuid4().hex


def new_turn_id() -> str:
    return "turn-" + uuid.uuid4().hex


# --- trace (predict-rlm 0.7.0 RunTrace compatible, spec 2.1) -------------------------------------------


class TokenUsage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    cache_hits: int = 0


class LMUsage(BaseModel):
    main: TokenUsage = Field(default_factory=TokenUsage)
    sub: TokenUsage = Field(default_factory=TokenUsage)


class IterationStep(BaseModel):
    iteration: int
    reasoning: str
    code: str
    output: str
    untruncated_output: str
    error: bool = False
    duration_ms: int
    tool_calls: list[dict] = Field(default_factory=list)
    predict_calls: list[dict] = Field(default_factory=list)
    lm: dict | None = None
    usage: LMUsage = Field(default_factory=LMUsage)


class RunTrace(BaseModel):
    status: TraceStatus
    model: str
    sub_model: str | None = None
    iterations: int
    max_iterations: int
    duration_ms: int
    usage: LMUsage = Field(default_factory=LMUsage)
    telemetry_ref: dict | None = None
    steps: list[IterationStep] = Field(default_factory=list)


# --- session state (spec 2.2) --------------------------------------------------------------------------


class UserTurn(BaseModel):
    message: str


class TurnUsage(BaseModel):
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cost: float = Field(default=0.0, ge=0)
    duration_ms: int = Field(default=0, ge=0)
    iterations: int = Field(default=0, ge=0)
    context_tokens: int = Field(default=0, ge=0)


class AgentTurn(BaseModel):
    status: AgentStatus
    response: str = ""
    files_read_count: int = Field(default=0, ge=0)
    files_changed_count: int = Field(default=0, ge=0)
    commands_run_count: int = Field(default=0, ge=0)
    error: str | None = None
    usage: TurnUsage | None = None


class SummaryTurn(BaseModel):
    turn_id: str
    user: UserTurn
    agent: AgentTurn | None = None  # None = pending


class SessionSummary(BaseModel):
    """Every turn ever appended; never truncated (FRA-18, FRA-41)."""

    turns: list[SummaryTurn] = Field(default_factory=list)


class SessionHistoryTurn(BaseModel):
    turn_id: str
    user_message: str
    status: HistoryStatus
    files_read: list[str] = Field(default_factory=list)
    files_modified: list[str] = Field(default_factory=list)
    commands_run: list[str] = Field(default_factory=list)
    trace: RunTrace | None = None
    error: str | None = None
    created_at: str
    updated_at: str


class SessionState(BaseModel):
    schema_version: Literal[1] = 1
    session_id: str = Field(default_factory=new_session_id)
    summary: SessionSummary = Field(default_factory=SessionSummary)
    history: list[SessionHistoryTurn] = Field(default_factory=list)


# --- other models (spec 2.3) ---------------------------------------------------------------------------


class SessionInfo(BaseModel):
    session_id: str
    updated_at: str
    turn_count: int
    first_message: str


class HeadlessResult(BaseModel):
    """One-turn CLI envelope; never persisted."""

    session_id: str = ""
    workspace: str = ""
    status: AgentStatus
    response: str = ""
    changed_files: list[str] = Field(default_factory=list)
    usage: TurnUsage | None = None
    error: str | None = None

    def to_json(self) -> str:
        import json

        return json.dumps(self.model_dump(mode="json"))


@dataclass
class AgentResult:
    response: str
    changed_files: list[str] = field(default_factory=list)
    trace: RunTrace | None = None


@dataclass
class IterationEvent:
    step: int
    max_iterations: int
    is_final: bool = False


@dataclass
class HookEvent:
    """Upstream ``RuntimeHookSnapshot``: args/kwargs stored as given (not coerced)."""

    target: str
    phase: str
    args: Any = field(default_factory=list)
    kwargs: Any = field(default_factory=dict)
    result: Any = None
    error: Any = None


class RawHookEvent(BaseModel):
    target: str
    phase: Literal["before", "after", "error"]
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    result: Any = None
    error: Any = None
    duration_ms: int | None = None
    timestamp: float


class RuntimeEvent(BaseModel):
    """Display-only event; never persisted. ``command`` is the full command, only ``message`` is truncated."""

    kind: Literal["file_read", "file_write", "command"]
    target: str
    phase: str
    message: str
    path: str | None = None
    command: str | None = None


class Workspace(BaseModel):
    path: str
    mode: str = "direct"
    exclude: list[str] = Field(default_factory=list)
