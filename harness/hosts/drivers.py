"""Drive a real, pinned agent host through one scripted session, isolated from the user's configuration.

:func:`run_session` writes the host's configuration into the session's own HOME (never the user's: ``~/.claude``
and ``~/.codex`` are neither read nor written, since the host only ever sees ``HOME=spec.home``), builds a clean
environment (PATH, locale, ``TMPDIR`` and ``spec.env``: no variable of the calling process leaks in, so no real key
or endpoint can reach the host), and runs the host together with the loopback model server in one runner process
(:mod:`harness.hosts.isolate`), in its own network namespace when the machine allows it. ``TMPDIR`` is
``spec.env["TMPDIR"]`` when given (the scenario runner gives its run's private folder), else a private folder made
for the session and removed after it: the hosts honour it for their own temporary files (Claude Code's
``claude-<uid>/...`` session folders and ``cc-socks``, Codex's sandbox lock folder), which would otherwise stay in
the system temporary directory. An interrupted session (Ctrl-C, SIGTERM) ends the host's processes by pid
(:func:`stop_runner`).

Claude Code (``spec/hosts.md``): ``claude -p --input-format stream-json --output-format stream-json --verbose``
with ``ANTHROPIC_BASE_URL``, a dummy ``ANTHROPIC_API_KEY``, ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`` and
``DISABLE_TELEMETRY=1``; hooks in ``$HOME/.claude/settings.json``. Every session uses stream-json input, one
prompt or several: each prompt is the line ``{"type": "user", "message": {"role": "user", "content": PROMPT}}``,
written after the previous prompt's ``result`` line. The session id is the ``session_id`` of the stream's
``system``/``init`` line; the transcript is ``$HOME/.claude/projects/<cwd slug>/<session id>.jsonl``.

Codex: ``CODEX_HOME=HOME=<home>``, ``config.toml`` as ``spec/hosts.md`` gives it (the provider's ``base_url`` the
loopback server), hooks in ``$CODEX_HOME/hooks.json`` (integer timeouts only: a float makes Codex reject the whole
file), ``codex exec --skip-git-repo-check --dangerously-bypass-hook-trust PROMPT``; a further prompt is
``codex exec resume ... <session id> PROMPT`` (a new process resuming the same session). The session id is the
``session id: <uuid>`` line Codex prints; the rollout is ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*-<id>.jsonl``.

Gemini CLI 0.61.0: ``GOOGLE_GEMINI_BASE_URL`` (the loopback server), a dummy ``GEMINI_API_KEY``,
``GEMINI_CLI_NO_RELAUNCH=1``, ``$HOME/.gemini/settings.json`` from :func:`gemini_settings` (API-key auth, hooks
under Gemini's event names :data:`GEMINI_EVENTS`, millisecond timeouts); ``gemini --skip-trust --session-id <uuid>
-p PROMPT`` (the driver picks the id), a further prompt ``gemini --skip-trust --resume <uuid> -p PROMPT``. The
transcript is ``$HOME/.gemini/tmp/<project>/chats/session-*-<id8>.jsonl``.

Cline 3.0.65: a setup command ``cline auth -p openai-compatible -k <dummy> -m mock-model -b <server>/v1``, hooks as
executables ``$HOME/.cline/hooks/<Event>`` (:func:`cline_hook_files`, :data:`CLINE_EVENTS`, ``HookSet.extra`` for
PreToolUse/PostToolUse), then ``cline --json PROMPT``; one prompt per session. Cline leaves a detached
``cline-hub-daemon``: the runner ends it by the pid of ``$HOME/.cline/data/locks/hub/production.json`` once
``/proc`` confirms it runs the pinned binary with this session's HOME (:func:`harness.hosts.isolate.reap`). The
transcript is ``$HOME/.cline/data/sessions/<id>/<id>.messages.json``. Findings: docs/hosts-cline-gemini.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.hosts.install import HOSTS, HostSpec, InstalledHost, find_host, hosts_dir, installed
from harness.hosts.isolate import netns_available
from harness.hosts.server import Reply

__all__ = ["HOSTS", "HostSpec", "InstalledHost", "find_host", "hosts_dir", "installed", "HookSet", "SessionSpec",
           "SessionRun", "run_session", "netns_available", "HostNotInstalled", "DUMMY_KEY"]

DUMMY_KEY = "memsim-loopback-dummy-key"
"""The only key a host is given: the loopback server accepts anything and the host never sees a real endpoint."""

_EVENTS = {"session_start": "SessionStart", "user_prompt_submit": "UserPromptSubmit", "session_end": "SessionEnd"}


class HostNotInstalled(RuntimeError):
    """The pinned host is not installed (``memsim hosts install NAME``)."""


@dataclass
class HookSet:
    """Shell command lines as a user writes them in the host's settings (None: no hook for that event)."""

    session_start: str | None = None
    user_prompt_submit: str | None = None
    session_end: str | None = None
    timeouts: dict[str, int] = field(default_factory=dict)  # event -> integer seconds; empty = host defaults
    extra: dict[str, str] = field(default_factory=dict)  # host-native event name -> command (e.g. Cline PostToolUse)

    def commands(self, events: dict[str, str] | None = None) -> dict[str, str]:
        """Host event name -> command line: the three portable hooks under the host's names (``events`` maps the
        attribute names to them; default Claude Code's), then :attr:`extra` (which wins for the same name)."""
        names = {**_EVENTS, **(events or {})}
        out = {names[attr]: getattr(self, attr) for attr in _EVENTS if getattr(self, attr) is not None}
        out.update(self.extra)
        return out

    def timeout_for(self, attr: str, event: str) -> int | None:
        t = self.timeouts.get(event, self.timeouts.get(attr))
        if t is not None and (isinstance(t, bool) or not isinstance(t, int)):
            raise ValueError(f"hook timeout for {event} must be an integer number of seconds, not {t!r}")
        return t

    def settings(self, events: dict[str, str] | None = None) -> dict[str, Any]:
        """The ``{"hooks": {...}}`` object Claude Code (settings.json), Codex (hooks.json) and Gemini CLI
        (settings.json, with ``events`` naming its events) read."""
        hooks: dict[str, Any] = {}
        names = {**_EVENTS, **(events or {})}
        attr_of = {v: k for k, v in names.items()}
        for event, cmd in self.commands(events).items():
            attr = attr_of.get(event, event)
            entry: dict[str, Any] = {"type": "command", "command": cmd}
            t = self.timeout_for(attr, event)
            if t is not None:
                entry["timeout"] = t
            hooks[event] = [{"hooks": [entry]}]
        return {"hooks": hooks}


@dataclass
class SessionSpec:
    prompts: list[str]
    replies: list[list[Reply]]  # replies[i]: the model turns scripted for prompt i, consumed in order
    home: Path  # the isolated HOME (and CODEX_HOME) of this run; created; may be shared by a scenario's sessions
    cwd: Path  # the workspace the host runs in; created
    hooks: HookSet | None = None
    env: dict[str, str] = field(default_factory=dict)  # extra environment for the host (and so its hooks)
    timeout_s: float = 120.0
    allowed_tools: list[str] = field(default_factory=list)


@dataclass
class SessionRun:
    host: str
    version: str
    isolation: str  # "netns" (own network namespace, loopback only) | "base-url" (base URL only)
    session_id: str | None
    transcript_path: Path | None  # the host's own transcript / rollout file of this session
    requests: list[dict]  # recorded requests (server.py format), in arrival order
    prompt_times: list[float]  # time.time() when each prompt was submitted (prompt 0: host process start)
    t_start: float  # host process start
    t_end: float  # host process exit
    exit_code: int | None
    timed_out: bool
    stdout: str
    stderr: str

    def to_json(self) -> dict:
        d = asdict(self)
        d["transcript_path"] = str(self.transcript_path) if self.transcript_path else None
        return d


def _base_env(home: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"), "HOME": str(home),
           "LANG": os.environ.get("LANG", "C.UTF-8"), "SHELL": "/bin/bash", "TERM": "dumb",
           "USER": os.environ.get("USER", "memsim"), "TMPDIR": os.environ.get("TMPDIR", "/tmp")}
    # the memsim package must stay importable by hooks that run `python -m ...` from the project's venv
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
    env.update(extra)
    return env


def claude_slug(cwd: Path) -> str:
    """Claude Code's projects folder name for a working directory (every non-alphanumeric character a dash)."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(cwd))


def _claude_plan(h: InstalledHost, spec: SessionSpec) -> dict[str, Any]:
    settings_path = spec.home / ".claude" / "settings.json"
    settings: dict[str, Any] = {}
    if settings_path.exists():
        try:
            settings = json.loads(settings_path.read_text(encoding="utf-8"))
        except ValueError:
            settings = {}
    settings["hooks"] = (spec.hooks or HookSet()).settings()["hooks"]
    argv = [str(h.bin), "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]
    if spec.allowed_tools:
        argv += ["--allowedTools", *spec.allowed_tools]
    env = _base_env(spec.home, {"ANTHROPIC_BASE_URL": "{BASE_URL}", "ANTHROPIC_API_KEY": DUMMY_KEY,
                                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
                                **spec.env})
    return {"feed": "stream-json", "argv": argv, "env": env,
            "files": {str(settings_path): json.dumps(settings, indent=2)}}


CODEX_CONFIG = """model = "mock-model"
model_provider = "mock"
check_for_update_on_startup = false
[model_providers.mock]
name = "mock"
base_url = "{BASE_URL}/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
[features]
plugins = false
apps = false
remote_plugin = false
in_app_updates = false
[analytics]
enabled = false
"""

_CODEX_SESSION = r"session id: ([0-9a-fA-F-]{36})"


def _codex_plan(h: InstalledHost, spec: SessionSpec) -> dict[str, Any]:
    files = {str(spec.home / "config.toml"): CODEX_CONFIG,
             str(spec.home / "hooks.json"): json.dumps((spec.hooks or HookSet()).settings(), indent=2)}
    flags = ["--skip-git-repo-check", "--dangerously-bypass-hook-trust"]
    argvs = [[str(h.bin), "exec", *flags, spec.prompts[0]]]
    argvs += [[str(h.bin), "exec", "resume", *flags, "{SESSION_ID}", p] for p in spec.prompts[1:]]
    env = _base_env(spec.home, {"CODEX_HOME": str(spec.home), "MOCK_API_KEY": DUMMY_KEY, **spec.env})
    return {"feed": "per-prompt", "argvs": argvs, "env": env, "files": files, "session_id_pattern": _CODEX_SESSION}


GEMINI_EVENTS = {"session_start": "SessionStart", "user_prompt_submit": "BeforeAgent", "session_end": "SessionEnd"}
"""Gemini CLI's names for the portable hooks: its per-prompt event is ``BeforeAgent`` (fired after the prompt is
submitted, before the agent loop's first model request)."""


def gemini_settings(hooks: HookSet | None) -> dict[str, Any]:
    """``$HOME/.gemini/settings.json``: API-key auth (the key is the dummy, the base URL the loopback server),
    telemetry, usage statistics and updates off, and the hooks (Gemini's timeouts are milliseconds, so
    ``HookSet.timeouts`` seconds are multiplied by 1000)."""
    hs = hooks or HookSet()
    settings = hs.settings(GEMINI_EVENTS)
    for groups in settings["hooks"].values():
        for g in groups:
            for e in g["hooks"]:
                if "timeout" in e:
                    e["timeout"] = int(e["timeout"]) * 1000
    return {"security": {"auth": {"selectedType": "gemini-api-key"}},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
            "telemetry": {"enabled": False}, "privacy": {"usageStatisticsEnabled": False}, **settings}


def _gemini_plan(h: InstalledHost, spec: SessionSpec, session_id: str) -> dict[str, Any]:
    files = {str(spec.home / ".gemini" / "settings.json"): json.dumps(gemini_settings(spec.hooks), indent=2)}
    argvs = [[str(h.bin), "--skip-trust", "--session-id", session_id, "-p", spec.prompts[0]]]
    argvs += [[str(h.bin), "--skip-trust", "--resume", session_id, "-p", p] for p in spec.prompts[1:]]
    env = _base_env(spec.home, {"GOOGLE_GEMINI_BASE_URL": "{BASE_URL}", "GEMINI_API_KEY": DUMMY_KEY,
                                "GEMINI_CLI_NO_RELAUNCH": "1", **spec.env})
    return {"feed": "per-prompt", "argvs": argvs, "env": env, "files": files}


def _gemini_after(spec: SessionSpec, result: dict[str, Any], session_id: str) -> tuple[str | None, Path | None]:
    """Gemini CLI keeps a session under ``$HOME/.gemini/tmp/<project>/chats/``: the file naming the session id."""
    root = spec.home / ".gemini" / "tmp"
    hits = sorted(p for p in root.glob("*/chats/*") if p.is_file() and session_id[:8] in p.name) if root.exists() \
        else []
    if not hits and root.exists():
        hits = sorted(p for p in root.glob("*/chats/*") if p.is_file() and session_id in
                      p.read_text(encoding="utf-8", errors="replace")[:4096])
    return session_id, hits[0] if hits else None


CLINE_EVENTS = {"session_start": "TaskStart", "user_prompt_submit": "UserPromptSubmit",
                "session_end": "TaskComplete"}
"""Cline's names for the portable hooks (its hooks are executables named after the event). Observed with 3.0.65:
UserPromptSubmit does not fire for the prompt given on the command line; TaskStart and TaskComplete fire once per
``cline`` process; PreToolUse/PostToolUse (``HookSet.extra``) fire around each tool call."""

CLINE_HUB_PID_FILE = Path(".cline") / "data" / "locks" / "hub" / "production.json"
"""Where Cline 3.0.65 records its detached ``cline-hub-daemon`` (JSON with ``pid``), relative to HOME."""


def cline_hook_files(home: Path, hooks: HookSet | None) -> dict[str, str]:
    """``$HOME/.cline/hooks/<Event>``: one ``/bin/sh`` script per hook running the user's command line (stdin passed
    through). Cline has no per-hook timeout setting, so ``HookSet.timeouts`` do not apply."""
    out = {}
    for event, cmd in (hooks or HookSet()).commands(CLINE_EVENTS).items():
        out[str(home / ".cline" / "hooks" / event)] = f"#!/bin/sh\n{cmd}\n"
    return out


def _cline_plan(h: InstalledHost, spec: SessionSpec) -> dict[str, Any]:
    if len(spec.prompts) > 1:  # `cline --json --id ID PROMPT` answered "JSON output mode requires a prompt argument"
        raise ValueError("the cline driver runs one prompt per session (a resumed `cline --json --id ID PROMPT` "
                         "was refused by Cline 3.0.65)")
    files = cline_hook_files(spec.home, spec.hooks)
    setup = [[str(h.bin), "auth", "-p", "openai-compatible", "-k", DUMMY_KEY, "-m", "mock-model", "-b",
              "{BASE_URL}/v1"]]
    argvs = [[str(h.bin), "--json", spec.prompts[0]]]
    env = _base_env(spec.home, dict(spec.env))
    return {"feed": "per-prompt", "argvs": argvs, "env": env, "files": files, "executables": sorted(files),
            "setup": setup, "session_id_glob": str(spec.home / ".cline" / "data" / "sessions" / "*"),
            "reap": {"pid_files": [str(spec.home / CLINE_HUB_PID_FILE)], "home": str(spec.home),
                     "exe": str(h.bin.resolve()), "settle_s": 3.0}}


def _cline_after(spec: SessionSpec, result: dict[str, Any]) -> tuple[str | None, Path | None]:
    """The session folder ``$HOME/.cline/data/sessions/<id>/`` (newest), its ``<id>.messages.json`` transcript."""
    sid = result.get("session_id")
    root = spec.home / ".cline" / "data" / "sessions"
    if not sid and root.exists():
        dirs = sorted((d for d in root.iterdir() if d.is_dir()), key=lambda d: d.stat().st_mtime)
        sid = dirs[-1].name if dirs else None
    if not sid:
        return None, None
    path = root / sid / f"{sid}.messages.json"
    return sid, path if path.exists() else None


def _claude_after(spec: SessionSpec, result: dict[str, Any]) -> tuple[str | None, Path | None]:
    sid = None
    for line in result["stdout"].splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("session_id"):
            sid = str(obj["session_id"])
            break
    if sid is None:
        for r in result["requests"]:
            sid = r["headers"].get("x-claude-code-session-id") or sid
    if sid is None:
        return None, None
    path = spec.home / ".claude" / "projects" / claude_slug(spec.cwd) / f"{sid}.jsonl"
    if not path.exists():
        hits = sorted((spec.home / ".claude" / "projects").glob(f"*/{sid}.jsonl"))
        path = hits[0] if hits else path
    return sid, path if path.exists() else None


def _codex_after(spec: SessionSpec, result: dict[str, Any]) -> tuple[str | None, Path | None]:
    sid = result.get("session_id")
    if not sid:
        return None, None
    hits = sorted((spec.home / "sessions").glob(f"*/*/*/rollout-*-{sid}.jsonl"))
    return sid, hits[0] if hits else None


def _resolve_isolation(isolation: str) -> str:
    if isolation not in ("auto", "netns", "base-url"):
        raise ValueError(f"isolation must be auto, netns or base-url, not {isolation!r}")
    ok, why = netns_available()
    if isolation == "netns" and not ok:
        raise RuntimeError(f"a network namespace is not available: {why}")
    return "netns" if isolation in ("auto", "netns") and ok else "base-url"


def stop_runner(runner: subprocess.Popen[str], home: str, grace_s: float = 15.0) -> None:
    """End an interrupted session: SIGTERM to the runner (it ends the host's process group and every process with
    the session's HOME, stops the model server and exits), SIGKILL to the runner's group after ``grace_s``, then
    end by pid whatever still runs with the session's HOME (:func:`harness.hosts.isolate.end_by_home`)."""
    from harness.hosts.isolate import end_by_home

    try:
        os.killpg(runner.pid, signal.SIGTERM)
        runner.wait(timeout=grace_s)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(runner.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            runner.wait(timeout=5)
    end_by_home(home)


def run_runner(plan: dict[str, Any], run_dir: Path, mode: str, *, timeout_s: float) -> dict[str, Any]:
    """Start ``python -m harness.hosts.isolate`` on ``plan`` (under ``unshare -n`` for "netns") and return its
    result dict; the runner is itself bounded (its process group is ended by pid past ``timeout_s`` + a margin)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    spec_path, result_path = run_dir / "runner-spec.json", run_dir / "runner-result.json"
    plan = {**plan, "mode": mode, "record": str(run_dir / "requests.jsonl"), "result": str(result_path),
            "timeout_s": timeout_s}
    spec_path.write_text(json.dumps(plan, indent=1), encoding="utf-8")
    result_path.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "harness.hosts.isolate", str(spec_path)]
    if mode == "netns":
        argv = ["unshare", "-n", "--", *argv]
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    runner = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = runner.communicate(timeout=timeout_s + 30)
    except (KeyboardInterrupt, SystemExit):  # Ctrl-C or SIGTERM here: the session goes with this process
        stop_runner(runner, str(plan.get("env", {}).get("HOME", "")))
        raise
    except subprocess.TimeoutExpired:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(runner.pid, sig)
            except ProcessLookupError:
                break
            time.sleep(1)
        out, err = runner.communicate()
        raise RuntimeError(f"the session runner did not finish in {timeout_s + 30:.0f} s (ended by pid)") from None
    if runner.returncode != 0 or not result_path.exists():
        tail = (err or out).strip().splitlines()[-1:] or [f"exit {runner.returncode}"]
        raise RuntimeError(f"the session runner failed: {tail[0]}")
    return json.loads(result_path.read_text(encoding="utf-8"))


def run_session(host: str, spec: SessionSpec, run_dir: Path, *, isolation: str = "auto") -> SessionRun:
    """Run ``host`` (pinned, installed) through the prompts of ``spec`` with the scripted replies; see the module
    docstring. Raises :class:`HostNotInstalled` when the pinned host is not installed."""
    if host not in HOSTS:
        raise ValueError(f"unknown host {host!r} (known: {', '.join(HOSTS)})")
    if not spec.prompts:
        raise ValueError("a session has at least one prompt")
    h = find_host(host)
    if h is None:
        raise HostNotInstalled(f"{host} {HOSTS[host].version} is not installed (memsim hosts install {host})")
    mode = _resolve_isolation(isolation)
    spec.home.mkdir(parents=True, exist_ok=True)
    spec.cwd.mkdir(parents=True, exist_ok=True)
    own_tmp = None
    if "TMPDIR" not in spec.env:  # the host's temporary files go to a private folder, removed after the session
        own_tmp = Path(tempfile.mkdtemp(prefix="memsim-host-"))
        spec = dataclasses.replace(spec, env={**spec.env, "TMPDIR": str(own_tmp)})
    try:
        return _run_session(host, h, spec, run_dir, mode)
    finally:
        if own_tmp is not None:
            shutil.rmtree(own_tmp, ignore_errors=True)


def _run_session(host: str, h: InstalledHost, spec: SessionSpec, run_dir: Path, mode: str) -> SessionRun:
    own_sid = str(uuid.uuid4())
    if host == "claude-code":
        plan = _claude_plan(h, spec)
    elif host == "codex":
        plan = _codex_plan(h, spec)
    elif host == "gemini":
        plan = _gemini_plan(h, spec, own_sid)
    else:
        plan = _cline_plan(h, spec)
    plan.update(cwd=str(spec.cwd), prompts=list(spec.prompts),
                script=[r.to_dict() for turn in spec.replies for r in turn],
                max_seconds=spec.timeout_s + 10, kill_grace_s=3.0)
    result = run_runner(plan, run_dir, mode, timeout_s=spec.timeout_s)
    if host == "claude-code":
        sid, transcript = _claude_after(spec, result)
    elif host == "codex":
        sid, transcript = _codex_after(spec, result)
    elif host == "gemini":
        sid, transcript = _gemini_after(spec, result, own_sid)
    else:
        sid, transcript = _cline_after(spec, result)
    run = SessionRun(host=host, version=h.version, isolation=result["isolation"], session_id=sid,
                     transcript_path=transcript, requests=result["requests"], prompt_times=result["prompt_times"],
                     t_start=result["t_start"], t_end=result["t_end"], exit_code=result["exit_code"],
                     timed_out=result["timed_out"], stdout=result["stdout"], stderr=result["stderr"])
    (run_dir / "session.json").write_text(json.dumps({k: v for k, v in run.to_json().items() if k != "requests"},
                                                     indent=1), encoding="utf-8")
    return run
