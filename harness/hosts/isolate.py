"""The runner process of one host session: ``python -m harness.hosts.isolate SPEC.json``.

:func:`harness.hosts.drivers.run_session` writes SPEC.json and starts this module, under ``unshare -n`` when the
session is isolated in its own network namespace ("netns": only a loopback interface, which this process brings up)
or directly ("base-url": the host is only pointed at the loopback server). Inside, it:

1. brings ``lo`` up (netns only), starts the :class:`~harness.hosts.server.ModelServer` on 127.0.0.1,
2. writes the host's configuration files, replacing ``{PORT}`` and ``{BASE_URL}`` in them and in the environment
   (the port is known only once the server is bound),
3. runs the host (``subprocess.Popen``, its own process group, a clean environment given by the spec) and feeds the
   prompts: mode "stream-json" writes one JSON line per prompt on the host's stdin, each after the previous prompt's
   ``{"type": "result"}`` line on its stdout, then closes stdin; mode "per-prompt" runs one host process per prompt
   (``argvs[i]``, ``{SESSION_ID}`` replaced by the id the first process printed); the submission time of each prompt
   is recorded,
4. enforces the session's timeout: SIGTERM to the host's process group (by its pid), then SIGKILL after
   ``kill_grace_s``,
5. stops the server and writes the result JSON (``result`` in the spec).

A pathname unix socket is a filesystem object, not part of the network namespace, so a service listening on one
outside (the memsim Tortoise service) stays reachable from inside a "netns" session
(``tests/harness/hosts/test_drivers.py`` checks it).

SPEC.json keys: ``mode`` ("netns" | "base-url"), ``script`` (Reply dicts), ``record`` (requests JSONL path),
``max_requests``, ``max_seconds``, ``files`` ({path: text}), ``env`` (the host's whole environment), ``cwd``,
``feed`` ("stream-json" | "per-prompt"), ``argv`` (stream-json) or ``argvs`` (per-prompt), ``prompts``,
``timeout_s``, ``kill_grace_s``, ``session_id_pattern`` (a regex whose group 1 is the session id, searched in the
first process's stdout+stderr), ``result`` (path)."""

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
    t_start = time.time()

    def wait_or_kill(proc: subprocess.Popen[str]) -> None:
        nonlocal timed_out
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
            end_group(proc, grace)

    try:
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
            proc = _start(spec["argv"], env, cwd, stdin=True)
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
                argv = [a.replace("{SESSION_ID}", session_id or "") for a in argv]
                t = time.time()
                if i == 0:
                    t_start = t
                prompt_times.append(t)
                proc = _start(argv, env, cwd, stdin=False)
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
                if timed_out or proc.returncode != 0:
                    break
    finally:
        t_end = time.time()
        server.stop()
    nonzero = [c for c in exits if c != 0]
    return {"isolation": spec.get("mode", "base-url"), "port": port, "session_id": session_id,
            "prompt_times": prompt_times, "t_start": t_start, "t_end": t_end,
            "exit_code": (nonzero[0] if nonzero else (exits[-1] if exits else None)), "exit_codes": exits,
            "timed_out": timed_out, "stdout": "".join(stdout), "stderr": "".join(stderr),
            "requests": server.requests, "server_stop": server.stop_reason}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m harness.hosts.isolate SPEC.json", file=sys.stderr)
        return 2
    spec = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    result = run(spec)
    out = Path(spec["result"])
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result), encoding="utf-8")
    tmp.replace(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
