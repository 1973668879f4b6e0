"""A scenario's memory operations (``create_point``, ``retract``, ``service``, ``lock_store``, ``wait``) run through
the ``memsim tortoise`` command line, as a user would run them beside a host session, and what they started ended
by pid."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from harness.hosts.isolate import pid_alive
from harness.hosts.scenario.model import Op, ScenarioError

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
        if self.service_pid is not None and self.alive():
            os.kill(self.service_pid, sig)

    def run(self, op: Op) -> dict[str, Any]:
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


def memsim_executable() -> str:
    """The ``memsim`` command the memory operations and the hook lines run (``{memsim}``): the one beside this
    interpreter (the venv memsim runs from), else the one on PATH; :class:`ScenarioError` when there is none."""
    here = Path(sys.executable).with_name("memsim")
    if here.exists():
        return str(here)
    found = shutil.which("memsim")
    if found is None:
        raise ScenarioError("the memsim command is neither beside this Python nor on PATH (the scenario's memory "
                            "operations and hook lines run through it)")
    return found


def _read_line(stream: Any, timeout: float) -> str:
    box: list[str] = []
    t = threading.Thread(target=lambda: box.append(stream.readline()), daemon=True)
    t.start()
    t.join(timeout)
    return box[0].strip() if box else ""
