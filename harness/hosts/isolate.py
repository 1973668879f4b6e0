"""The runner process of one host session: ``python -m harness.hosts.isolate SPEC.json``.

:func:`harness.hosts.drivers.run_session` writes SPEC.json and starts this module, under ``unshare -n`` when the
session is isolated in its own network namespace ("netns": only a loopback interface, which this process brings up)
or directly ("base-url": the host is only pointed at the loopback server). Inside, it:

1. brings ``lo`` up (netns only), starts the :class:`~harness.hosts.server.ModelServer` on 127.0.0.1,
2. writes the host's configuration files, replacing ``{PORT}`` and ``{BASE_URL}`` in them, in the environment and
   in the command lines (the port is known only once the server is bound),
3. runs the host (``subprocess.Popen``, its own process group, a clean environment given by the spec) and feeds the
   prompts: mode "stream-json" writes one JSON line per prompt on the host's stdin, each after the previous prompt's
   ``{"type": "result"}`` line on its stdout, then closes stdin; mode "per-prompt" runs one host process per prompt
   (``argvs[i]``, ``{SESSION_ID}`` replaced by the id the first process printed); the submission time of each prompt
   is recorded,
4. enforces the session's timeout: SIGTERM to the host's process group (by its pid), then SIGKILL after
   ``kill_grace_s``,
5. ends the detached processes the host left behind (``reap``, below), stops the server and writes the result JSON
   (``result`` in the spec).

``setup`` (a list of argvs) runs before the host, each to completion within the session's deadline (Cline's ``cline
auth ...``); its exit codes and output are in the result's ``setup``. ``executables`` lists written files to make
executable (Cline's hook files).

``reap`` ends what a host leaves running after it exits, **by pid, never by name**: ``{"pid_files": [PATH, ...],
"home": HOME, "exe": PATH}``. A pid file is a JSON file with a ``pid`` key written by the run (Cline 3.0.65 writes its
``cline-hub-daemon`` there: ``$HOME/.cline/data/locks/hub/production.json``); :func:`reap` waits up to ``settle_s`` for one; a pid is ended only when
``/proc/<pid>/environ`` holds ``HOME=<home>`` (this run's own, freshly created HOME) and its command line starts
with ``exe`` (the pinned host binary). A /proc scan finds any other process with both marks (a daemon that had not
written its pid file yet). Each is sent SIGTERM, then SIGKILL after 5 s; the result's ``reaped`` lists ``{"pid",
"found_by" (pid file and/or proc scan), "cmdline", "ended_by"}``, and ``{"left": [pids]}`` when any survived. memsim's own detached filer (``tortoise_sim.filer``) also runs with
that HOME but not from ``exe``, so it is left alone.

Interruption: SIGTERM to the runner (what :func:`harness.hosts.drivers.run_runner` sends when its own process is
interrupted, by Ctrl-C or SIGTERM) ends the host's process group (SIGTERM, then SIGKILL after ``kill_grace_s``),
then every process still running with this session's HOME (:func:`end_by_home`: the hooks' own children, a
detached filer), stops the server and exits 143 without a result.

A pathname unix socket is a filesystem object, not part of the network namespace, so a service listening on one
outside (the memsim Tortoise service) stays reachable from inside a "netns" session
(``tests/harness/hosts/test_drivers.py`` checks it).

SPEC.json keys: ``mode`` ("netns" | "base-url"), ``script`` (Reply dicts), ``record`` (requests JSONL path),
``max_requests``, ``max_seconds``, ``files`` ({path: text}), ``env`` (the host's whole environment), ``cwd``,
``feed`` ("stream-json" | "per-prompt"), ``argv`` (stream-json) or ``argvs`` (per-prompt), ``prompts``,
``timeout_s``, ``kill_grace_s``, ``session_id_pattern`` (a regex whose group 1 is the session id, searched in the
first process's stdout+stderr), ``session_id_glob`` (else: the name of the newest path matching this absolute glob
after the first process, e.g. Cline's session folders), ``setup``, ``executables``, ``reap`` (above),
``result`` (path)."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from harness.hosts.server import ModelServer, Reply


@functools.lru_cache(maxsize=1)
def _netns_probe() -> tuple[bool, str]:
    if sys.platform != "linux":
        return False, f"network namespaces need Linux (this is {sys.platform})"
    if os.geteuid() != 0:
        return False, "network namespaces need root (unshare -n); running as uid " + str(os.geteuid())
    for tool in ("unshare", "ip"):
        if shutil.which(tool) is None:
            return False, f"{tool} not found on PATH"
    try:
        p = subprocess.run(["unshare", "-n", "ip", "link", "set", "lo", "up"], capture_output=True, text=True,
                           timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"unshare -n failed: {exc}"
    if p.returncode != 0:
        return False, f"unshare -n failed: {(p.stderr or p.stdout).strip().splitlines()[-1:] or p.returncode}"
    return True, "unshare -n works (root)"


def netns_available() -> tuple[bool, str]:
    """Whether this machine can run a session in its own network namespace, and why (or why not)."""
    return _netns_probe()


def _subst(text: str, port: int, url: str) -> str:
    return text.replace("{BASE_URL}", url).replace("{PORT}", str(port))


def _lo_up() -> None:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True, capture_output=True, timeout=10)


def end_group(proc: subprocess.Popen[Any], grace_s: float) -> None:
    """SIGTERM the process group led by ``proc`` (by its pid), then SIGKILL it after ``grace_s``."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    # the group may outlive its leader (a hook's child): SIGKILL what is left of it, by the same id
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class _Reader(threading.Thread):
    """Collects a pipe's text; calls ``on_line`` for each line."""

    def __init__(self, pipe: IO[str], on_line: Any = None, on_eof: Any = None) -> None:
        super().__init__(daemon=True)
        self.pipe, self.on_line, self.on_eof, self.parts = pipe, on_line, on_eof, []  # type: ignore[var-annotated]

    def run(self) -> None:
        try:
            for line in self.pipe:
                self.parts.append(line)
                if self.on_line is not None:
                    self.on_line(line)
        finally:
            if self.on_eof is not None:
                self.on_eof()

    @property
    def text(self) -> str:
        return "".join(self.parts)


def _proc_marks(pid: int, home: str, exe: str) -> tuple[bool, str]:
    """Whether process ``pid`` runs the host binary ``exe`` with ``HOME=home``, and its command line."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read().split(b"\0")
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return False, ""
    ours = f"HOME={home}".encode() in environ and bool(argv) and (
        argv[0] == exe or os.path.realpath(argv[0]) == os.path.realpath(exe))
    return ours, " ".join(argv)[:300]


def pid_alive(pid: int) -> bool:
    """``pid`` names a running process (a zombie, exited but not yet reaped by its parent, is not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def end_pid(pid: int, grace_s: float = 5.0) -> str:
    """SIGTERM ``pid``, then SIGKILL after ``grace_s``: which one ended it ("gone": it was not running)."""
    for sig, name in ((signal.SIGTERM, "SIGTERM"), (signal.SIGKILL, "SIGKILL")):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return "gone" if name == "SIGTERM" else "SIGTERM"
        t = time.monotonic() + (grace_s if name == "SIGTERM" else 5.0)
        while time.monotonic() < t:
            if not pid_alive(pid):
                return name
            time.sleep(0.05)
    return "still running"


def _scan(home: str, exe: str) -> dict[int, str]:
    out = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit() and int(entry) != os.getpid():
            ours, cmd = _proc_marks(int(entry), home, exe)
            if ours:
                out[int(entry)] = cmd
    return out


def processes_with_home(home: str) -> dict[int, str]:
    """The running processes (but this one) whose environment holds ``HOME=home``, with their command lines."""
    out: dict[int, str] = {}
    mark = f"HOME={home}".encode()
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if mark not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = " ".join(a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a)[:300]
        except OSError:
            continue
        if pid_alive(int(entry)):
            out[int(entry)] = cmd
    return out


def end_by_home(home: str | os.PathLike[str], grace_s: float = 3.0) -> list[dict[str, Any]]:
    """End, by pid, every process still running with ``HOME=home`` (SIGTERM, then SIGKILL after ``grace_s``): what
    an interrupted session leaves (the host, its hooks, their children, a detached filer). Only for a HOME a run
    created fresh for itself, so no other process can carry it; returns ``{"pid", "cmdline", "ended_by"}`` rows."""
    home = os.fspath(home)
    if not home:
        return []
    return [{"pid": pid, "cmdline": cmd, "ended_by": end_pid(pid, grace_s)}
            for pid, cmd in sorted(processes_with_home(home).items())]


def reap(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """End the processes ``spec`` names (see the module docstring), by pid; what was found and how it ended.

    ``settle_s``: wait up to that long for a pid file to appear first (Cline's daemon writes it about a second
    after the ``cline`` process has exited); a final scan reports anything still running as ``left``."""
    home, exe = str(spec.get("home", "")), str(spec.get("exe", ""))
    if not home or not exe:
        return []
    files = [Path(p) for p in spec.get("pid_files", [])]
    t_end = time.monotonic() + float(spec.get("settle_s", 0.0))
    while files and not any(f.exists() for f in files) and time.monotonic() < t_end:
        time.sleep(0.1)
    found: dict[int, list[str]] = {}
    for path in files:
        try:
            pid = json.loads(path.read_text(encoding="utf-8")).get("pid")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(pid, int) and pid > 1:
            found.setdefault(pid, []).append(f"pid file {path}")
    for pid in _scan(home, exe):
        found.setdefault(pid, []).append("proc scan (HOME and host binary)")
    out = []
    for pid, how in sorted(found.items()):
        ours, cmd = _proc_marks(pid, home, exe)
        row: dict[str, Any] = {"pid": pid, "found_by": how, "cmdline": cmd}
        if ours:
            row["ended_by"] = end_pid(pid)
        else:
            row.update(ended_by=None, skipped="not running, or not this run's (HOME or binary differ)")
        out.append(row)
    left = _scan(home, exe)
    if left:
        out.append({"left": sorted(left)})
    return out


def _run_setup(argvs: list[list[str]], env: dict[str, str], cwd: str, deadline: float) -> list[dict[str, Any]]:
    done = []
    for argv in argvs:
        proc = _start(argv, env, cwd, stdin=False)
        try:
            out, err = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            end_group(proc, 1.0)
            out, err = proc.communicate()
        done.append({"argv": argv, "exit_code": proc.returncode, "stdout": out[-2000:], "stderr": err[-2000:]})
    return done


def _start(argv: list[str], env: dict[str, str], cwd: str, stdin: bool) -> subprocess.Popen[str]:
    return subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def run(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one session as SPEC describes (see the module docstring) and return the result dict."""
    if spec.get("mode") == "netns":
        _lo_up()
    server = ModelServer([Reply.from_dict(r) for r in spec.get("script", [])],
                         record=Path(spec["record"]) if spec.get("record") else None,
                         max_requests=int(spec.get("max_requests", 200)),
                         max_seconds=float(spec.get("max_seconds", spec.get("timeout_s", 120) + 10)))
    port = server.start("127.0.0.1", 0)
    url = server.url
    for path, text in spec.get("files", {}).items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(_subst(text, port, url), encoding="utf-8")
    for path in spec.get("executables", []):
        os.chmod(path, 0o755)
    env = {k: _subst(v, port, url) for k, v in spec["env"].items()}
    cwd = spec["cwd"]
    timeout_s = float(spec.get("timeout_s", 120.0))
    grace = float(spec.get("kill_grace_s", 3.0))
    prompts: list[str] = list(spec.get("prompts", []))
    deadline = time.monotonic() + timeout_s
    prompt_times: list[float] = []
    stdout: list[str] = []
    stderr: list[str] = []
    exits: list[int | None] = []
    timed_out = False
    session_id: str | None = None
    setup: list[dict[str, Any]] = []
    reaped: list[dict[str, Any]] = []
    live: list[subprocess.Popen[str]] = []  # the host processes started, to end when interrupted
    t_start = time.time()

    def wait_or_kill(proc: subprocess.Popen[str]) -> None:
        nonlocal timed_out
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
            end_group(proc, grace)

    try:
        setup = _run_setup([[_subst(a, port, url) for a in argv] for argv in spec.get("setup", [])], env, cwd,
                           deadline)
        if spec.get("feed") == "stream-json":
            results = threading.Semaphore(0)
            eof = threading.Event()

            def on_eof() -> None:  # the host closed its stdout (exited): stop waiting for results
                eof.set()
                for _ in range(len(prompts) + 1):
                    results.release()

            def on_line(line: str) -> None:
                try:
                    obj = json.loads(line)
                except ValueError:
                    return
                if isinstance(obj, dict) and obj.get("type") == "result":
                    results.release()

            t_start = time.time()
            proc = _start([_subst(a, port, url) for a in spec["argv"]], env, cwd, stdin=True)
            live.append(proc)
            out, err = _Reader(proc.stdout, on_line, on_eof), _Reader(proc.stderr)  # type: ignore[arg-type]
            out.start()
            err.start()
            assert proc.stdin is not None
            try:
                for i, prompt in enumerate(prompts):
                    if i > 0 and (not results.acquire(timeout=max(0.0, deadline - time.monotonic()))
                                  or eof.is_set()):
                        break
                    prompt_times.append(t_start if i == 0 else time.time())
                    line = {"type": "user", "message": {"role": "user", "content": prompt}}
                    proc.stdin.write(json.dumps(line) + "\n")
                    proc.stdin.flush()
                if len(prompt_times) == len(prompts):
                    results.acquire(timeout=max(0.0, deadline - time.monotonic()))
                proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass
            wait_or_kill(proc)
            out.join(5)
            err.join(5)
            stdout.append(out.text)
            stderr.append(err.text)
            exits.append(proc.returncode)
        else:  # per-prompt
            pattern = re.compile(spec["session_id_pattern"]) if spec.get("session_id_pattern") else None
            for i, argv in enumerate(spec["argvs"]):
                if time.monotonic() >= deadline:
                    timed_out = True
                    break
                argv = [_subst(a.replace("{SESSION_ID}", session_id or ""), port, url) for a in argv]
                t = time.time()
                if i == 0:
                    t_start = t
                prompt_times.append(t)
                proc = _start(argv, env, cwd, stdin=False)
                live.append(proc)
                out, err = _Reader(proc.stdout), _Reader(proc.stderr)  # type: ignore[arg-type]
                out.start()
                err.start()
                wait_or_kill(proc)
                out.join(5)
                err.join(5)
                stdout.append(out.text)
                stderr.append(err.text)
                exits.append(proc.returncode)
                if i == 0 and pattern is not None:
                    m = pattern.search(out.text + "\n" + err.text)
                    session_id = m.group(1) if m else None
                if i == 0 and session_id is None and spec.get("session_id_glob"):
                    hits = sorted(Path("/").glob(spec["session_id_glob"].lstrip("/")), key=lambda q: q.stat().st_mtime)
                    session_id = hits[-1].name if hits else None
                if timed_out or proc.returncode != 0:
                    break
    except BaseException:  # interrupted (SIGTERM from the caller, see main): end what this session started
        for proc in live:
            if proc.poll() is None:
                end_group(proc, grace)
        end_by_home(env.get("HOME", ""))
        raise
    finally:
        t_end = time.time()
        if spec.get("reap"):
            reaped = reap(spec["reap"])
        server.stop()
    nonzero = [c for c in exits if c != 0]
    return {"isolation": spec.get("mode", "base-url"), "port": port, "session_id": session_id,
            "prompt_times": prompt_times, "t_start": t_start, "t_end": t_end,
            "exit_code": (nonzero[0] if nonzero else (exits[-1] if exits else None)), "exit_codes": exits,
            "timed_out": timed_out, "stdout": "".join(stdout), "stderr": "".join(stderr),
            "requests": server.requests, "server_stop": server.stop_reason, "setup": setup, "reaped": reaped}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m harness.hosts.isolate SPEC.json", file=sys.stderr)
        return 2
    spec = json.loads(Path(args[0]).read_text(encoding="utf-8"))

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)
    try:
        result = run(spec)
    except KeyboardInterrupt:
        return 143
    out = Path(spec["result"])
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result), encoding="utf-8")
    tmp.replace(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
