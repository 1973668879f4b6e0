"""Host scenarios: multi-session scripts a real agent host runs against the loopback model server, with the memory
under test given as a hook set.

A scenario is one YAML file (strict: every model forbids unknown keys; any unknown key, missing key or bad value
is reported as one line naming the file and the key path, e.g. ``scenarios/x.yaml: sessions[1].prompts[0].
replies[2].tool: ...``; :func:`load_scenario` raises :class:`ScenarioError` with the first such line,
:func:`validate` returns them all). Duplicate YAML keys are errors too (YAML itself would keep the last).

```yaml
name: pointer-delivery                 # lower-case words joined by "-"
description: what it shows
records: [MEM-RTE-hook-volunteer]      # the record ids it demonstrates
hosts: [claude-code, codex]            # optional; default: every host with a driver (RUN_HOSTS)
hooks:                                 # optional; default: memsim's documented Tortoise hook lines
  preset: tortoise                     # tortoise (default) | none (no hooks: the baseline)
  session_start: "python3 {examples}/note_hook.py"    # any event given replaces the preset's line
  timeouts: {SessionEnd: 3}            # integer seconds per event (Codex rejects a float)
sessions:
  - gap_s: 0.5                         # seconds after the previous session's end
    before:                            # memory operations before the session, in order
      - create_point: {ref: db, kind: decision, text: "...", credibility: high, live: true}
      - retract: {ref: db}
      - service: start                 # start | stop | hang | resume | kill
      - lock_store: {seconds: 5}       # a writer holds the store's lock, in the background
      - wait: {seconds: 1}
    prompts:
      - text: "What database does the ledger use?"
        replies:                       # the model turns scripted for this prompt, in order
          - shell: "ls"                # a shell command, run by each host's own shell tool (SHELL_TOOLS)
          - per_host:                  # or a reply given per host
              claude-code: {tool: Read, input: {file_path: notes.md}}
              codex: {shell: "cat notes.md"}
          - text: "It uses Postgres."
        after: [{service: kill}]       # operations before the next prompt's hook runs (see run_scenario)
    after: []                          # operations after the session
    expect:                            # what the session should show (entries: "ref:NAME" or a text)
      volunteered: ["ref:db"]
      in_digest: ["ref:db"]
      captured: true
```

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
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from tortoise_sim.admission import POINT_KINDS, TIER_PRIORS

__all__ = [
    "Scenario", "Session", "Prompt", "ReplySpec", "Op", "Hooks", "Expect", "ScenarioError", "load_scenario",
    "validate", "scenario_files", "SCENARIO_DIR", "EXAMPLES_DIR", "PLACEHOLDERS", "HARNESS", "SHELL_TOOLS",
    "KNOWN_HOSTS", "RUN_HOSTS", "TORTOISE_HOOKS", "expand", "hook_lines", "tee_command", "run_scenario", "pid_alive",
]

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"
EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "docs" / "examples" / "hosts"
HOOKTEE = Path(__file__).resolve().parent / "hooktee.sh"
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
    name: Annotated[str, Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")]
    description: Annotated[str, Field(min_length=1)]
    records: Annotated[list[Annotated[str, Field(pattern=r"^[A-Z]+(-[A-Za-z0-9]+)+$")]], Field(min_length=1)]
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
    import shlex

    parts = ["sh", str(HOOKTEE), str(folder), event, line] + ([str(gate)] if gate is not None else [])
    return " ".join(shlex.quote(x) for x in parts)


# ------------------------------------------------------------------------------------------------ loading
class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a mapping with the same key twice."""


def _mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: dict[Any, Any] = {}
    for knode, vnode in node.value:
        key = loader.construct_object(knode, deep=deep)
        if key in seen:
            mark = knode.start_mark
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", mark)
        seen[key] = loader.construct_object(vnode, deep=deep)
    return seen


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("[key]",) or (isinstance(part, str) and ("[" in part or part.startswith("function-"))):
            continue
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def _allowed(loc: tuple[Any, ...]) -> list[str]:
    """The keys the model at ``loc`` (the parent of an unknown key) allows."""
    import typing

    model: Any = Scenario
    for part in loc:
        if isinstance(part, int) or model is None:
            continue
        fields = getattr(model, "model_fields", None)
        if fields is None:
            model = None
            break
        if part not in fields:
            if isinstance(part, str) and part in KNOWN_HOSTS and model is ReplySpec:
                model = HostReply
            continue
        ann = fields[part].annotation
        model = None
        stack = [ann]
        while stack:
            t = stack.pop()
            if isinstance(t, type) and issubclass(t, BaseModel):
                model = t
                break
            stack.extend(typing.get_args(t))
    return list(getattr(model, "model_fields", {}) or [])


def _message(err: dict[str, Any]) -> str:
    kind, msg = err["type"], err["msg"]
    if kind == "extra_forbidden":
        allowed = _allowed(err["loc"][:-1])
        return "unknown key" + (f" (allowed: {', '.join(allowed)})" if allowed else "")
    if kind == "missing":
        return "missing"
    msg = msg.removeprefix("Value error, ")
    if kind not in ("value_error",) and "input" in err and not isinstance(err["input"], dict | list):
        shown = repr(err["input"])
        msg += f" (got {shown if len(shown) <= 60 else shown[:57] + '...'})"
    return msg


def _cross_checks(scn: Scenario) -> list[str]:
    """Checks across keys: refs defined once and before use, per-host replies covering the run hosts, a host
    tool only in a one-host scenario, shell tools known for every run host, hook placeholders known."""
    out: list[str] = []
    refs: set[str] = set()
    ops = list(scn.ops())
    for path, op in ops:
        if op.create_point is not None:
            if op.create_point.ref in refs:
                out.append(f"{path}.create_point.ref: ref {op.create_point.ref!r} is defined twice")
            refs.add(op.create_point.ref)
        elif op.retract is not None and op.retract.ref not in refs:
            out.append(f"{path}.retract.ref: no create_point before it defines ref {op.retract.ref!r}")
    all_refs = {op.create_point.ref for _, op in ops if op.create_point is not None}
    hosts = scn.run_hosts
    for i, s in enumerate(scn.sessions):
        known = {op.create_point.ref for p, op in ops
                 if op.create_point is not None and int(p.split("]")[0].split("[")[1]) <= i}
        if s.expect is not None:
            for key in ("volunteered", "not_volunteered", "in_digest", "not_in_digest"):
                for j, entry in enumerate(getattr(s.expect, key)):
                    if entry.startswith("ref:") and entry[4:] not in known:
                        why = "later" if entry[4:] in all_refs else "nowhere"
                        out.append(f"sessions[{i}].expect.{key}[{j}]: ref {entry[4:]!r} is defined {why} "
                                   "(a create_point up to this session's operations must define it)")
        for k, p in enumerate(s.prompts):
            for r, rep in enumerate(p.replies):
                where = f"sessions[{i}].prompts[{k}].replies[{r}]"
                if rep.tool is not None and len(hosts) != 1:
                    out.append(f"{where}.tool: a host's own tool needs hosts to name that one host "
                               f"(runs on {', '.join(hosts)}); use shell or per_host")
                if rep.shell is not None:
                    out += [f"{where}.shell: no shell tool is known for host {h!r}" for h in hosts
                            if h not in SHELL_TOOLS]
                if rep.per_host is not None:
                    missing = [h for h in hosts if h not in rep.per_host]
                    if missing:
                        out.append(f"{where}.per_host: no reply for host {', '.join(missing)}")
                    for h, hr in rep.per_host.items():
                        if hr.shell is not None and h not in SHELL_TOOLS:
                            out.append(f"{where}.per_host.{h}.shell: no shell tool is known for host {h!r}")
    for attr in EVENTS:
        line = getattr(scn.hooks, attr)
        for m in _PLACEHOLDER.finditer(line or ""):
            if m.group(1) not in PLACEHOLDERS:
                out.append(f"hooks.{attr}: unknown placeholder {{{m.group(1)}}} (known: {', '.join(PLACEHOLDERS)})")
    return out


def _errors(path: Path) -> tuple[Scenario | None, list[str]]:
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, [f"{name}: cannot read: {exc}"]
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        return None, [f"{name}{where}: YAML error: {problem}"]
    except RecursionError:  # PyYAML's composer recurses once per nesting level
        return None, [f"{name}: YAML error: nested too deeply"]
    except ValueError as exc:  # a scalar PyYAML cannot convert (a 5,000-digit integer, a date like 2026-13-45)
        return None, [f"{name}: YAML error: {' '.join(str(exc).split())[:200]}"]
    if not isinstance(data, dict):
        return None, [f"{name}: (top level): a scenario is a mapping, not {type(data).__name__}"]
    try:
        scn = Scenario.model_validate(data)
    except ValidationError as exc:
        return None, [f"{name}: {_path(e['loc'])}: {_message(e)}" for e in exc.errors()]
    return scn, [f"{name}: {line}" for line in _cross_checks(scn)]


def validate(path: str | Path) -> list[str]:
    """Every problem of a scenario file, one line each (empty when it is valid)."""
    return _errors(Path(path))[1]


def load_scenario(path: str | Path) -> Scenario:
    """The scenario in ``path``; :class:`ScenarioError` with the first problem's line otherwise."""
    scn, errors = _errors(Path(path))
    if errors or scn is None:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ScenarioError(errors[0] + more)
    return scn


def scenario_files(folder: Path = SCENARIO_DIR) -> list[Path]:
    """The scenario YAMLs shipped with memsim (or under ``folder``), by name."""
    return sorted(folder.glob("*.yaml"))


# ------------------------------------------------------------------------------------------------ running
_LOCK_SNIPPET = ("import sys, time\nimport kuzu\n"
                 "db = kuzu.Database(sys.argv[1])\nconn = kuzu.Connection(db)\n"
                 "print('locked', flush=True)\ntime.sleep(float(sys.argv[2]))\n")


LOCK_WAIT_S = 20.0
"""How long a scenario's memory operation re-runs a write that found the store locked."""


class _Memory:
    """Executes a scenario's memory operations through the ``memsim tortoise`` CLI (subprocesses, each bounded),
    and ends what it started by pid: the service it started, the store-lock writers."""

    def __init__(self, exe: str, db: Path, env: dict[str, str]) -> None:
        self.exe, self.db, self.env = exe, db, env
        self.refs: dict[str, str] = {}
        self.texts: dict[str, str] = {}
        self.service_pid: int | None = None
        self.hung = False
        self.locks: list[Any] = []
        self.lock_retries = 0

    def _cli(self, *args: str, timeout: float = 120.0, lock_wait_s: float = LOCK_WAIT_S) -> Any:
        """One ``memsim tortoise ARGS --db STORE`` run. A write that finds the store locked (a detached filer of the
        previous session still at work, as a user running the command right after a session would) is run again
        every 0.25 s for up to ``lock_wait_s`` seconds, as a user would re-run it; the attempts are counted."""
        import os
        import subprocess
        import time

        deadline = time.time() + lock_wait_s
        self.lock_retries = 0
        while True:
            res = subprocess.run([self.exe, "tortoise", *args, "--db", str(self.db)], env={**os.environ, **self.env},
                                 stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
            if res.returncode == 0 or "Could not set lock" not in res.stderr or time.time() >= deadline:
                return res
            self.lock_retries += 1
            time.sleep(0.25)

    def alive(self) -> bool:
        return self.service_pid is not None and pid_alive(self.service_pid)

    def _signal(self, sig: int) -> None:
        import os

        if self.service_pid is not None and self.alive():
            os.kill(self.service_pid, sig)

    def run(self, op: Op) -> dict[str, Any]:
        import json
        import signal
        import subprocess
        import sys
        import time

        t0 = time.time()
        out: dict[str, Any] = {"op": op.name, "t": t0, "ok": True}
        if op.create_point is not None:
            cp = op.create_point
            args = ["create-point", cp.kind, cp.text] + (["--credibility", cp.credibility] if cp.credibility else [])
            res = self._cli(*args, *(["--live"] if cp.live else []))
            out.update(ok=res.returncode == 0, ref=cp.ref, stderr=res.stderr.strip()[-400:])
            if res.returncode == 0:
                self.refs[cp.ref] = res.stdout.strip().splitlines()[-1]
                self.texts[cp.ref] = cp.text
                out["id"] = self.refs[cp.ref]
        elif op.retract is not None:
            pid = self.refs.get(op.retract.ref)
            res = self._cli("retract", pid or "") if pid else None
            out.update(ok=res is not None and res.returncode == 0, ref=op.retract.ref, id=pid,
                       stderr=(res.stderr.strip()[-400:] if res is not None else "ref was never created"))
        elif op.service == "start":
            res = self._cli("serve", "--detach", timeout=180)
            out.update(ok=res.returncode == 0, stderr=res.stderr.strip()[-400:])
            if res.returncode == 0:
                self.service_pid = int(json.loads(res.stdout.strip().splitlines()[-1])["pid"])
                self.hung = False
                out["pid"] = self.service_pid
        elif op.service in ("hang", "resume", "kill"):
            sig = {"hang": signal.SIGSTOP, "resume": signal.SIGCONT, "kill": signal.SIGKILL}[op.service]
            out.update(ok=self.alive(), pid=self.service_pid)
            self._signal(sig)
            self.hung = op.service == "hang"
            if op.service == "kill":
                deadline = time.time() + 10
                while self.alive() and time.time() < deadline:
                    time.sleep(0.05)
        elif op.service == "stop":
            if self.hung:
                self._signal(signal.SIGCONT)
                self.hung = False
            res = self._cli("serve", "--stop", timeout=60)
            out.update(ok=res.returncode == 0, stderr=res.stderr.strip()[-400:])
        elif op.lock_store is not None:
            p = subprocess.Popen([sys.executable, "-c", _LOCK_SNIPPET, str(self.db), str(op.lock_store.seconds)],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.locks.append(p)
            line = _read_line(p.stdout, 60.0)
            out.update(ok=line == "locked", pid=p.pid, seconds=op.lock_store.seconds)
        elif op.wait is not None:
            time.sleep(op.wait.seconds)
        if self.lock_retries:
            out["lock_retries"] = self.lock_retries
            self.lock_retries = 0
        out["dt"] = time.time() - t0
        return out

    def close(self) -> None:
        """Stop what this run started, by pid: lock writers, then the service (resumed first when hung)."""
        import signal
        import subprocess
        import time

        for p in self.locks:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=10)
        if self.alive():
            self._signal(signal.SIGCONT)
            try:
                self._cli("serve", "--stop", timeout=60)
            except subprocess.TimeoutExpired:
                pass
            deadline = time.time() + 10
            while self.alive() and time.time() < deadline:
                time.sleep(0.05)
            self._signal(signal.SIGKILL)


def pid_alive(pid: int) -> bool:
    """``pid`` names a running process (a zombie, exited but not yet reaped by its new parent, is not)."""
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return not Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[-1].startswith("Z")
    except OSError:
        return False


def _read_line(stream: Any, timeout: float) -> str:
    import threading

    box: list[str] = []
    t = threading.Thread(target=lambda: box.append(stream.readline()), daemon=True)
    t.start()
    t.join(timeout)
    return box[0].strip() if box else ""


PER_PROMPT_SESSION_END = frozenset({"codex"})
"""Hosts that run SessionStart and SessionEnd once per prompt (Codex: every ``codex exec`` / ``exec resume`` is a
process of its own, seen firing both hooks each time), so the session's last SessionEnd is its ``n - 1``-th."""


def _gate_target(host: str, prompt_index: int, n_prompts: int, lines: dict[str, str], where: str
                 ) -> tuple[str, int]:
    """The hook run a prompt's ``after`` operations wait on: the next prompt's UserPromptSubmit, or for the last
    prompt the session's last SessionEnd."""
    last_end = prompt_index if host in PER_PROMPT_SESSION_END else 0
    attr, event, n = (("user_prompt_submit", "UserPromptSubmit", prompt_index + 1) if prompt_index + 1 < n_prompts
                      else ("session_end", "SessionEnd", last_end))
    if attr not in lines:
        raise ScenarioError(f"{where}.after: operations after a prompt need a {attr} hook to wait on")
    return event, n


def _pending(db: Path, sid: str) -> bool:
    """The spool still has an unfiled entry for ``sid`` (whatever its retry time)."""
    from tortoise_sim.spool import Spool

    return sid in Spool(db.parent / "spool").due_sessions(1 << 62)


def _settled_turns(db: Path, sid: str, settle_s: float) -> tuple[list[dict[str, str]] | None, str | None]:
    """The store's turns for ``sid`` once no filing of it is pending in the spool, waiting up to ``settle_s`` for
    a filing still in flight (a detached one, or one waiting on the store lock); None and the reason when the store
    cannot be opened read-only all that time."""
    import time

    from harness.hosts.wire import store_turns

    deadline, why = time.time() + settle_s, None
    while True:
        try:
            turns = store_turns(db, sid)
            why = None
        except Exception as exc:  # noqa: BLE001 - a store held by a writer: retry until the deadline
            turns, why = None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        if (turns is not None and not _pending(db, sid)) or time.time() >= deadline:
            return turns, why
        time.sleep(0.25)


def _in_spool(db: Path, sid: str) -> bool:
    from tortoise_sim.spool import Spool

    sp = Spool(db.parent / "spool")
    return sp.read_meta(sid) is not None and bool(sp.read_turns(sid))


def _expectations(exp: Expect | None, mem: _Memory, obs: list[dict[str, Any]], deliv: list[Any],
                  compare: dict[str, Any] | None, lost: bool | None) -> dict[str, bool | None]:
    if exp is None:
        return {}
    conv = [d for d, o in deliv if o["conversation"]]
    pointer = [d for d in conv if d.item.kind == "pointer_block"]
    digest = [d for d in conv if d.item.kind == "digest"]
    ids = {p for d in pointer for p in d.point_ids}

    def volunteered(entry: str) -> bool:
        if entry.startswith("ref:"):
            return mem.refs.get(entry[4:], "\0") in ids
        return any(entry in d.item.text for d in pointer)

    def in_digest(entry: str) -> bool:
        text = mem.texts.get(entry[4:], "\0")[:160] if entry.startswith("ref:") else entry
        return any(text in d.item.text for d in digest)

    checks: dict[str, bool | None] = {}
    for e in exp.volunteered:
        checks[f"volunteered {e}"] = volunteered(e)
    for e in exp.not_volunteered:
        checks[f"not volunteered {e}"] = not volunteered(e)
    for e in exp.in_digest:
        checks[f"in digest {e}"] = in_digest(e)
    for e in exp.not_in_digest:
        checks[f"not in digest {e}"] = not in_digest(e)
    if exp.captured is not None:
        got = None if compare is None else (compare["equal"] and compare["memory_fed_back"] == 0)
        checks["captured"] = None if got is None else got == exp.captured
    if exp.memory_reaches_model is not None:
        checks["memory reaches model"] = bool(conv) == exp.memory_reaches_model
    if exp.lost is not None:
        checks["lost"] = None if lost is None else int(lost) == exp.lost
    return checks


def _latency(run: Any, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """:func:`harness.hosts.wire.prompt_latencies`, with ``gate_wait_s``: the part of a prompt's latency its
    UserPromptSubmit hook spent waiting on the runner's gate (the previous prompt's ``after`` operations), and
    ``latency_s_without_gate``."""
    from harness.hosts.wire import prompt_latencies

    ups = [r for r in records if r["event"] == "UserPromptSubmit"]
    out = prompt_latencies(run)
    for entry in out:
        k = entry["prompt"]
        gate = ups[k]["gate"] if k < len(ups) and ups[k]["gate"] else None
        entry["gate_wait_s"] = gate[1] - gate[0] if gate else 0.0
        lat = entry["latency_s"]
        entry["latency_s_without_gate"] = None if lat is None else lat - entry["gate_wait_s"]
    return out


def run_scenario(scenario: Scenario, host: str, run_dir: Path, *, memsim_exe: str | Path,
                 scenario_dir: Path | None = None, isolation: str = "auto", settle_s: float = 10.0) -> dict[str, Any]:
    """Run ``scenario`` on ``host`` under ``run_dir/<host>/`` and return the results (also written per session to
    ``s<i>/result.json``, and whole to ``result.json``).

    Per session: the ``before`` operations (through ``memsim tortoise ...`` with ``memsim_exe``), the wait until
    ``gap_s`` after the previous session's end, the host session (:func:`harness.hosts.drivers.run_session`) with
    every hook line wrapped by ``hooktee.sh`` (a prompt's ``after`` operations run while the next prompt's
    UserPromptSubmit hook, or for the last prompt the SessionEnd hook, waits on its gate; that wait is recorded and
    is part of that prompt's latency), the ``after`` operations, then the observations: the hook runs, the memory
    items they printed, per request the wire observation (:func:`harness.hosts.wire.observe_request`), per prompt
    the latency to its first conversation request, the store's turns against the host's transcript (read once
    every session has run and the service is stopped, so reading never delays the next session's start; waiting
    up to ``settle_s`` for a filing in flight), whether the session is lost
    (in neither store nor spool) and the session's ``expect`` checks. The store is ``<host>/store/tortoise.kuzu``,
    shared by the sessions, as are the host's HOME and workspace; the service socket is a private short path
    (``MEMSIM_TORTOISE_SOCKET``) given to the hooks and the CLI alike."""
    import json
    import shlex
    import shutil
    import sys
    import tempfile
    import threading
    import time

    from harness.hosts.drivers import HookSet, SessionSpec, run_session
    from harness.hosts.wire import (
        compare_turns,
        deliveries,
        hook_records,
        items_from_records,
        observe_request,
    )

    if host not in scenario.run_hosts:
        raise ScenarioError(f"scenario {scenario.name!r} does not run on {host!r} ({', '.join(scenario.run_hosts)})")
    root = Path(run_dir) / host
    home, cwd, db = root / "home", root / "work", root / "store" / "tortoise.kuzu"
    db.parent.mkdir(parents=True, exist_ok=True)
    sockdir = Path(tempfile.mkdtemp(prefix="mw-"))
    env = {"MEMSIM_TORTOISE_SOCKET": str(sockdir / "s.sock"), "MEMSIM_TORTOISE_DB": str(db), **scenario.hooks.env}
    values = {"memsim": shlex.quote(str(memsim_exe)), "db": shlex.quote(str(db)), "harness": HARNESS[host],
              "python": shlex.quote(sys.executable), "examples": shlex.quote(str(EXAMPLES_DIR)),
              "scenario_dir": shlex.quote(str(scenario_dir or SCENARIO_DIR)), "run_dir": shlex.quote(str(root))}
    lines = {attr: expand(line, values) for attr, line in hook_lines(scenario.hooks).items()}
    mem = _Memory(str(memsim_exe), db, env)
    results: list[dict[str, Any]] = []
    later: list[tuple[Any, ...]] = []
    prev_end: float | None = None
    try:
        for i, s in enumerate(scenario.sessions):
            sdir = root / f"s{i}"
            hooks_dir, gates = sdir / "hooks", sdir / "gates"
            gates.mkdir(parents=True, exist_ok=True)
            ops_log = [dict(mem.run(op), at=f"sessions[{i}].before[{j}]") for j, op in enumerate(s.before)]
            if prev_end is not None:
                time.sleep(max(0.0, prev_end + s.gap_s - time.time()))
            gated = []
            for k, p in enumerate(s.prompts):
                if p.after:
                    event, n = _gate_target(host, k, len(s.prompts), lines, f"sessions[{i}].prompts[{k}]")
                    (gates / f"{event}-{n}.hold").touch()
                    gated.append((event, n, k, p.after))
            hookset = HookSet(**{a: tee_command(line, EVENTS[a], hooks_dir, gates) for a, line in lines.items()},
                              timeouts=dict(scenario.hooks.timeouts))
            spec = SessionSpec(prompts=[p.text for p in s.prompts],
                               replies=[[r.for_host(host) for r in p.replies] for p in s.prompts],
                               home=home, cwd=cwd, hooks=hookset, env={**env, **s.env}, timeout_s=s.timeout_s,
                               allowed_tools=list(s.allowed_tools))
            done = threading.Event()

            def watch(gated: list = gated, done: threading.Event = done, gates: Path = gates,
                      ops_log: list = ops_log, i: int = i) -> None:
                for event, n, k, ops in gated:
                    while not (gates / f"{event}-{n}.waiting").exists():
                        if done.wait(0.02):
                            ops_log.extend({"op": op.name, "at": f"sessions[{i}].prompts[{k}].after[{j}]",
                                            "ok": False, "detail": "the host never reached the gate"}
                                           for j, op in enumerate(ops))
                            return
                    for j, op in enumerate(ops):
                        ops_log.append(dict(mem.run(op), at=f"sessions[{i}].prompts[{k}].after[{j}]"))
                    (gates / f"{event}-{n}.go").touch()

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            try:
                run = run_session(host, spec, sdir, isolation=isolation)
            finally:
                done.set()
                watcher.join(timeout=300)
            prev_end = run.t_end
            ops_log += [dict(mem.run(op), at=f"sessions[{i}].after[{j}]") for j, op in enumerate(s.after)]
            records = hook_records(hooks_dir)
            items = items_from_records(records)
            obs = [observe_request(r, items) for r in run.requests]
            deliv = [(d, o) for r, o in zip(run.requests, obs, strict=True) for d in deliveries(r, items)]
            res = {"session": i, "name": s.name, "host": host, "version": run.version, "isolation": run.isolation,
                   "session_id": run.session_id, "exit_code": run.exit_code, "timed_out": run.timed_out,
                   "t_start": run.t_start, "t_end": run.t_end,
                   "gap_s": None if not results else run.t_start - results[-1]["t_end"],
                   "ops": ops_log, "hooks": [{k: v for k, v in r.items() if k not in ("stdin",)} for r in records],
                   "items": [{"kind": it.kind, "event": it.event, "point_ids": it.point_ids,
                              "bytes": len(it.text.encode("utf-8"))} for it in items],
                   "requests": obs, "latency": _latency(run, records), "refs": dict(mem.refs)}
            results.append(res)
            later.append((res, run, s, obs, deliv, sdir))
        # The store is read once every session has run: reading it between sessions would wait for the previous
        # session's filing and so stretch the next session's start gap (gap_s), hiding whether a session starting
        # right after the previous one's end sees it. The service (when one runs) is stopped first: it holds the
        # store. A session's turns do not change once a later session runs, unless the host reuses its id.
        mem.close()
        for res, run, s, obs, deliv, sdir in later:
            compare, stored, why, lost = None, None, None, None
            if run.session_id and "session_end" in lines:
                stored, why = _settled_turns(db, run.session_id, settle_s)
                conv = None
                if run.transcript_path is not None:
                    from tortoise_sim.transcripts import read_transcript

                    conv = read_transcript(run.transcript_path, HARNESS[host])
                if stored is not None and conv is not None:
                    compare = compare_turns(stored, conv)
                if stored is not None:
                    lost = not stored and not _in_spool(db, run.session_id)
            res.update({"store_vs_transcript": compare, "store_unread": why, "lost": lost,
                        "checks": _expectations(s.expect, mem, obs, deliv, compare, lost)})
            (sdir / "result.json").write_text(json.dumps(res, indent=1, default=str), encoding="utf-8")
    finally:
        mem.close()
        shutil.rmtree(sockdir, ignore_errors=True)
    out = {"scenario": scenario.name, "records": list(scenario.records), "host": host, "run_dir": str(root),
           "sessions": results}
    (root / "result.json").write_text(json.dumps(out, indent=1, default=str), encoding="utf-8")
    return out


if __name__ == "__main__":
    import sys

    problems = [line for f in (sys.argv[1:] or [str(x) for x in scenario_files()]) for line in validate(f)]
    sys.stdout.write("".join(line + "\n" for line in problems))
    sys.exit(1 if problems else 0)
