"""The scenario model: what a host scenario YAML may hold (every model strict: unknown keys are errors), the hook
lines of the memory under test, and the constants the loader and the runner share.

The format, key by key, is documented in docs/hosts.md ("Scenario files"); :mod:`harness.hosts.scenario.load`
reads a file into a :class:`Scenario`, :mod:`harness.hosts.scenario.run` runs it on a host.

Hook lines are shell command lines with placeholders, each ``{identifier}`` one of :data:`PLACEHOLDERS`
(``{memsim}`` the memsim executable, ``{db}`` the scenario's Tortoise store, ``{harness}`` the ``--harness`` value
for the host (:data:`HARNESS`), ``{python}`` the interpreter, ``{examples}`` ``docs/examples/hosts``,
``{scenario_dir}`` the YAML's folder, ``{run_dir}`` the run folder); any other ``{identifier}`` is an error, other
braces (``awk '{print $1}'``) are left alone.

Replies are host-neutral where they can be: ``text``, or ``shell`` (mapped per host by :data:`SHELL_TOOLS`: Claude
Code's ``Bash`` with ``{"command": ...}``, Codex's ``exec_command`` with ``{"cmd": ...}``, the tools spec hosts.md
saw each host execute). A ``tool`` names one host's tool and needs the scenario's ``hosts`` to be that one host;
``per_host`` gives the reply for each host the scenario runs on.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tortoise_sim.admission import POINT_KINDS, TIER_PRIORS

SCENARIO_DIR = Path(__file__).resolve().parents[1] / "scenarios"
"""The shipped scenarios (``harness/hosts/scenarios/``)."""
EXAMPLES_DIR = Path(__file__).resolve().parents[3] / "docs" / "examples" / "hosts"
HOOKTEE = Path(__file__).resolve().parents[1] / "hooktee.sh"
KNOWN_HOSTS = ("claude-code", "codex", "cline", "gemini")
RUN_HOSTS = ("claude-code", "codex")
"""The hosts a scenario without ``hosts`` runs on (those with a driver)."""
HARNESS = {"claude-code": "claude", "codex": "codex", "cline": "cline", "gemini": "other"}
SHELL_TOOLS = {"claude-code": ("Bash", "command"), "codex": ("exec_command", "cmd")}
PLACEHOLDERS = ("memsim", "db", "harness", "python", "examples", "scenario_dir", "run_dir")
EVENTS = {"session_start": "SessionStart", "user_prompt_submit": "UserPromptSubmit", "session_end": "SessionEnd"}
TORTOISE_HOOKS = {
    "session_start": "{memsim} tortoise hook-session-start --db {db}",
    "user_prompt_submit": "{memsim} tortoise hook-volunteer --harness {harness} --db {db}",
    "session_end": "{memsim} tortoise hook-session-end --harness {harness} --db {db}",
}
"""memsim's documented Tortoise hook lines (docs/tortoise-hooks.md), as placeholders."""
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

HostName = Literal["claude-code", "codex", "cline", "gemini"]
EventName = Literal["SessionStart", "UserPromptSubmit", "SessionEnd"]


class ScenarioError(ValueError):
    """A scenario file that cannot be used, as one line naming the file and the key path."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ------------------------------------------------------------------------------------------------ replies
class _ReplyBody(_Strict):
    text: str | None = None
    shell: Annotated[str, Field(min_length=1)] | None = None
    tool: Annotated[str, Field(min_length=1)] | None = None
    input: dict[str, Any] | None = None
    delay_s: Annotated[float, Field(ge=0, le=60)] = 0.0

    def _kinds(self) -> list[str]:
        return [k for k in ("text", "shell", "tool") if getattr(self, k) is not None]

    @model_validator(mode="after")
    def _one(self) -> _ReplyBody:
        kinds = self._kinds() + (["per_host"] if getattr(self, "per_host", None) is not None else [])
        allowed = "text, shell, tool" + (" or per_host" if "per_host" in type(self).model_fields else "")
        if len(kinds) != 1:
            raise ValueError(f"a reply has exactly one of {allowed} (got {', '.join(kinds) or 'none'})")
        if self.input is not None and self.tool is None:
            raise ValueError("input goes with tool only")
        return self

    def for_host(self, host: str) -> Any:
        """The model server's ``Reply`` for ``host``."""
        from harness.hosts.server import Reply

        if self.text is not None:
            return Reply(text=self.text, delay_s=self.delay_s)
        if self.shell is not None:
            if host not in SHELL_TOOLS:
                raise ScenarioError(f"no shell tool is known for host {host!r}")
            tool, arg = SHELL_TOOLS[host]
            return Reply(tool=tool, input={arg: self.shell}, delay_s=self.delay_s)
        return Reply(tool=self.tool, input=dict(self.input or {}), delay_s=self.delay_s)


class HostReply(_ReplyBody):
    """One host's reply inside ``per_host``."""


class ReplySpec(_ReplyBody):
    """A scripted model turn: ``text``, ``shell`` (mapped per host), ``tool`` + ``input`` or ``per_host``."""

    per_host: dict[HostName, HostReply] | None = None

    def for_host(self, host: str) -> Any:
        if self.per_host is not None:
            if host not in self.per_host:
                raise ScenarioError(f"no reply is given for host {host!r}")
            return self.per_host[host].for_host(host)  # type: ignore[index]
        return super().for_host(host)


# ------------------------------------------------------------------------------------------------ operations
class CreatePoint(_Strict):
    ref: Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]*$")]
    kind: str
    text: Annotated[str, Field(min_length=1)]
    credibility: Literal["gold", "high", "medium", "low", "unverified"] | None = None
    live: bool = False

    @model_validator(mode="after")
    def _kind(self) -> CreatePoint:
        if self.kind not in POINT_KINDS:
            raise ValueError(f"kind {self.kind!r} is not a point kind ({', '.join(sorted(POINT_KINDS))})")
        if self.credibility is not None and self.credibility not in TIER_PRIORS:
            raise ValueError(f"credibility {self.credibility!r} is not a tier ({', '.join(TIER_PRIORS)})")
        return self


class Retract(_Strict):
    ref: str


class Seconds(_Strict):
    seconds: Annotated[float, Field(gt=0, le=120)]


class Op(_Strict):
    """One memory operation: exactly one of its keys. ``service``: start the resident service (``serve
    --detach``), stop it, hang it (SIGSTOP: its socket still accepts and never answers), resume it (SIGCONT) or
    kill it (SIGKILL); ``lock_store``: a writer holds the store's lock for ``seconds`` in the background."""

    create_point: CreatePoint | None = None
    retract: Retract | None = None
    service: Literal["start", "stop", "hang", "resume", "kill"] | None = None
    lock_store: Seconds | None = None
    wait: Seconds | None = None

    @model_validator(mode="after")
    def _one(self) -> Op:
        keys = [k for k in type(self).model_fields if getattr(self, k) is not None]
        if len(keys) != 1:
            raise ValueError(f"an operation has exactly one of {', '.join(type(self).model_fields)} "
                             f"(got {', '.join(keys) or 'none'})")
        return self

    @property
    def name(self) -> str:
        return next(k for k in type(self).model_fields if getattr(self, k) is not None)


# ------------------------------------------------------------------------------------------------ sessions
class Prompt(_Strict):
    text: Annotated[str, Field(min_length=1)]
    replies: list[ReplySpec] = Field(default_factory=list)
    after: list[Op] = Field(default_factory=list)


class Expect(_Strict):
    """What a session should show. List entries are ``"ref:NAME"`` (a point a ``create_point`` made) or a text.
    ``volunteered`` / ``not_volunteered``: a pointer block reaching the model names the point (a text: some
    pointer block carries it); ``in_digest`` / ``not_in_digest``: the session-start digest reaching the model
    carries the point's text; ``captured``: after the session the store's turns equal the host's conversation;
    ``memory_reaches_model``: some memory item reached some request; ``lost``: sessions in neither store nor
    spool."""

    volunteered: list[str] = Field(default_factory=list)
    not_volunteered: list[str] = Field(default_factory=list)
    in_digest: list[str] = Field(default_factory=list)
    not_in_digest: list[str] = Field(default_factory=list)
    captured: bool | None = None
    memory_reaches_model: bool | None = None
    lost: Annotated[int, Field(ge=0)] | None = None


class Session(_Strict):
    name: str | None = None
    gap_s: Annotated[float, Field(ge=0, le=3600)] = 0.0
    before: list[Op] = Field(default_factory=list)
    prompts: Annotated[list[Prompt], Field(min_length=1)]
    after: list[Op] = Field(default_factory=list)
    expect: Expect | None = None
    timeout_s: Annotated[float, Field(gt=0, le=600)] = 120.0
    env: dict[str, str] = Field(default_factory=dict)
    allowed_tools: list[str] = Field(default_factory=list)


class Hooks(_Strict):
    """The memory under test: ``preset`` (``tortoise``: memsim's documented hook lines, :data:`TORTOISE_HOOKS`;
    ``none``: no hooks) with any event's line replaced by the one given here."""

    preset: Literal["tortoise", "none"] = "tortoise"
    session_start: Annotated[str, Field(min_length=1)] | None = None
    user_prompt_submit: Annotated[str, Field(min_length=1)] | None = None
    session_end: Annotated[str, Field(min_length=1)] | None = None
    timeouts: dict[EventName, Annotated[int, Field(strict=True, ge=1, le=600)]] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)


class Scenario(_Strict):
    """A whole scenario file: ``name`` (lower-case words joined by "-"), ``description``, ``records`` (optional:
    the report record ids it demonstrates; every shipped scenario names its own), ``hosts`` (optional; default
    :data:`RUN_HOSTS`), ``hooks`` (optional; default memsim's documented Tortoise hook lines) and ``sessions``."""

    name: Annotated[str, Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")]
    description: Annotated[str, Field(min_length=1)]
    records: list[Annotated[str, Field(pattern=r"^[A-Z]+(-[A-Za-z0-9]+)+$")]] = Field(default_factory=list)
    hosts: Annotated[list[HostName], Field(min_length=1)] | None = None
    hooks: Hooks = Field(default_factory=Hooks)
    sessions: Annotated[list[Session], Field(min_length=1)]

    @property
    def run_hosts(self) -> tuple[str, ...]:
        return tuple(self.hosts) if self.hosts else RUN_HOSTS

    def ops(self) -> Iterator[tuple[str, Op]]:
        """Every operation with its key path, in the order a run executes them."""
        for i, s in enumerate(self.sessions):
            for j, op in enumerate(s.before):
                yield f"sessions[{i}].before[{j}]", op
            for k, p in enumerate(s.prompts):
                for j, op in enumerate(p.after):
                    yield f"sessions[{i}].prompts[{k}].after[{j}]", op
            for j, op in enumerate(s.after):
                yield f"sessions[{i}].after[{j}]", op


def hook_lines(hooks: Hooks) -> dict[str, str]:
    """The hook line per event attribute (``session_start``...), placeholders unexpanded."""
    base = dict(TORTOISE_HOOKS) if hooks.preset == "tortoise" else {}
    for attr in EVENTS:
        line = getattr(hooks, attr)
        if line is not None:
            base[attr] = line
    return base


def expand(line: str, values: dict[str, str]) -> str:
    """``line`` with each ``{identifier}`` placeholder replaced (shell-quoted by the caller's values)."""
    def sub(m: re.Match[str]) -> str:
        if m.group(1) not in values:
            raise ScenarioError(f"unknown placeholder {{{m.group(1)}}} (known: {', '.join(PLACEHOLDERS)})")
        return values[m.group(1)]
    return _PLACEHOLDER.sub(sub, line)


def tee_command(line: str, event: str, folder: Path, gate: Path | None = None) -> str:
    """``line`` wrapped by ``hooktee.sh`` so what the hook read and printed is kept under ``folder`` (``gate``: the
    folder of the runner's gates, see hooktee.sh)."""
    parts = ["sh", str(HOOKTEE), str(folder), event, line] + ([str(gate)] if gate is not None else [])
    return " ".join(shlex.quote(x) for x in parts)

