"""``memsim hosts run`` on the real Claude Code: a run owns ``<out>/<scenario>/<host>/`` and its summary and never
reads what an earlier run left, it leaves nothing outside its folder (every file created, traced with strace), and
SIGTERM or Ctrl-C ends its host, model server and service and removes what it had written. The two runs into one
folder are shared by the tests of this module (one module-scoped fixture)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from harness.hosts.scenario import SCENARIO_DIR
from tests.harness.hosts.conftest import require_host

MEMSIM = str(Path(sys.executable).with_name("memsim"))
STRACE = shutil.which("strace")
TRACED = ("creat,open,openat,mkdir,mkdirat,rename,renameat,renameat2,link,linkat,symlink,symlinkat,mknod,mknodat,"
          "bind,chdir,fchdir,clone,clone3,fork,vfork")
POINT_TEXT = "The ledger service stores its records in Postgres"


def _run_cmd(out: Path, scenario: Path = SCENARIO_DIR / "pointer-delivery.yaml") -> list[str]:
    return [MEMSIM, "hosts", "run", str(scenario), "--host", "claude-code", "--out", str(out)]


# ------------------------------------------------------------------------------------------------ strace
_CALL = re.compile(r"^(\w+)\((.*)\) += (-?\d+)(?:<([^>]*)>)?")
_STR = re.compile(r'"((?:[^"\\]|\\.)*)"')


def _dirfd(arg: str) -> str | None:
    m = re.match(r"^(?:AT_FDCWD|\d+)<([^>]*)>$", arg.strip())
    return m.group(1) if m else None


def created_paths(trace: Path) -> tuple[list[str], list[str]]:
    """Every path the traced processes created (``strace -f -y`` of :data:`TRACED`): files opened with O_CREAT,
    folders, renames, links, device nodes and unix sockets, absolute. A relative path is resolved against its
    directory fd or the process's working folder (known from ``chdir``/``fchdir``, ``AT_FDCWD<...>`` and the
    parent at ``clone``/``fork``); the second list names those that could not be resolved."""
    pending: dict[int, str] = {}
    cwd: dict[int, str | None] = {}
    created: list[str] = []
    unresolved: list[str] = []

    def resolve(pid: int, base: str | None, path: str) -> str | None:
        if path.startswith("/"):
            return os.path.normpath(path)
        base = base or cwd.get(pid)
        if base is None:
            unresolved.append(f"pid {pid}: {path}")
            return None
        return os.path.normpath(os.path.join(base, path))

    for raw in trace.read_text(encoding="utf-8", errors="replace").splitlines():
        head, _, rest = raw.partition(" ")
        if not head.isdigit():
            continue
        pid, rest = int(head), rest.lstrip()  # strace pads a pid shorter than five digits with spaces
        if rest.endswith("<unfinished ...>"):
            pending[pid] = rest[: -len("<unfinished ...>")]
            continue
        resumed = re.match(r"^<\.\.\. \w+ resumed>(.*)$", rest)
        if resumed:
            rest = pending.pop(pid, "") + resumed.group(1)
        m = _CALL.match(rest)
        if not m:
            continue
        call, args, res, res_path = m.group(1), m.group(2), int(m.group(3)), m.group(4)
        for c in re.findall(r"AT_FDCWD<([^>]*)>", args):
            cwd[pid] = c
        if res < 0:
            continue
        parts, strs = [a.strip() for a in args.split(", ")], _STR.findall(args)
        if call in ("clone", "clone3", "fork", "vfork"):
            cwd.setdefault(res, cwd.get(pid))
            continue
        if call == "chdir":
            cwd[pid] = resolve(pid, None, strs[0])
            continue
        if call == "fchdir":
            cwd[pid] = _dirfd(parts[0]) or cwd.get(pid)
            continue
        if call in ("open", "openat", "creat"):
            if (call == "creat" or "O_CREAT" in args) and res_path:
                created.append(res_path)
            continue
        path = None
        if call in ("mkdir", "mknod", "rename", "link", "symlink"):
            path = resolve(pid, None, strs[-1] if call in ("rename", "link", "symlink") else strs[0])
        elif call in ("mkdirat", "mknodat"):
            path = resolve(pid, _dirfd(parts[0]), strs[0])
        elif call in ("renameat", "renameat2", "linkat"):
            path = resolve(pid, _dirfd(parts[2]), strs[-1])
        elif call == "symlinkat":
            path = resolve(pid, _dirfd(parts[1]), strs[-1])
        elif call == "bind":
            sock = re.search(r'sun_path="((?:[^"\\]|\\.)*)"', args)
            if sock and sock.group(1) and not sock.group(1).startswith("@"):
                path = resolve(pid, None, sock.group(1))
        if path:
            created.append(path)
    return created, unresolved


def left_outside(created: list[str], *allowed: Path) -> list[str]:
    """The created paths that still exist outside ``allowed`` folders (device files such as /dev/null apart)."""
    out = set()
    for p in created:
        if not os.path.lexists(p) or any(Path(p).is_relative_to(a) for a in allowed):
            continue
        if stat.S_ISCHR(os.lstat(p).st_mode):
            continue
        out.add(p)
    return sorted(out)


# ------------------------------------------------------------------------------------------------ two runs
@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The shipped pointer-delivery scenario run twice into one folder (the first traced with strace when it is
    there), with what the first run had written."""
    require_host("claude-code")
    base = tmp_path_factory.mktemp("owned")
    out, trace = base / "out", base / "trace.txt"
    prefix = [STRACE, "-f", "-qq", "-y", "-e", "signal=none", "-e", f"trace={TRACED}", "-o", str(trace)] \
        if STRACE else []
    first = subprocess.run(prefix + _run_cmd(out), capture_output=True, text=True, timeout=600)
    run_dir = out / "pointer-delivery" / "claude-code"
    hooks_first = sorted(p.name for p in (run_dir / "s0" / "hooks").iterdir()) if run_dir.is_dir() else []
    summary_first = (run_dir.parent / "claude-code.json").read_text(encoding="utf-8") \
        if (run_dir.parent / "claude-code.json").is_file() else None
    second = subprocess.run(_run_cmd(out), capture_output=True, text=True, timeout=600)
    return {"out": out, "run_dir": run_dir, "first": first, "second": second, "hooks_first": hooks_first,
            "summary_first": summary_first, "trace": trace if STRACE else None}


def test_a_second_run_into_the_same_folder_starts_fresh(two_runs: dict) -> None:
    first, second, out, run_dir = two_runs["first"], two_runs["second"], two_runs["out"], two_runs["run_dir"]
    assert first.returncode == 0, first.stderr[-2000:]
    assert second.returncode == 0, second.stderr[-2000:]
    assert "checks 2/2 pass" in second.stdout
    summary = json.loads((run_dir.parent / "claude-code.json").read_text(encoding="utf-8"))
    assert summary["scenario"] == "pointer-delivery" and summary["run_dir"] == str(run_dir.resolve())
    (s,) = summary["sessions"]
    assert [i["kind"] for i in s["items"]] == ["digest", "pointer_block"]  # not four items
    (pointer,) = [i for i in s["items"] if i["kind"] == "pointer_block"]
    assert len(pointer["point_ids"]) == 1
    (start,) = (run_dir / "s0" / "hooks").glob("SessionStart-*.stdout")
    assert start.read_text(encoding="utf-8").count(POINT_TEXT) == 1  # the decision once in the digest
    hooks = sorted(p.name for p in (run_dir / "s0" / "hooks").iterdir())
    assert not set(hooks) & set(two_runs["hooks_first"])  # none of the first run's hook records
    starts = sorted(n.split("-")[0] for n in hooks if n.endswith(".start"))
    assert starts == ["SessionEnd", "SessionStart", "UserPromptSubmit"]  # one run of each hook, not two
    assert json.loads(two_runs["summary_first"])["sessions"][0]["session_id"] != s["session_id"]
    # the run's own names only: no shared summary, no staging folder left
    assert sorted(p.name for p in out.iterdir()) == ["pointer-delivery"]
    assert sorted(p.name for p in run_dir.parent.iterdir()) == ["claude-code", "claude-code.json"]


def test_a_host_run_leaves_nothing_outside_its_folder(two_runs: dict) -> None:
    """Every path the first run's processes created (memsim, the runner, Claude Code, the hooks) is gone or inside
    the run folder (or the hosts cache): Claude Code's claude-<uid>/... session folders and cc-socks go to the
    run's private TMPDIR, which is removed at the end."""
    from harness.hosts.install import hosts_dir

    if two_runs["trace"] is None:
        pytest.skip("strace is not installed: the files a run creates cannot be listed")
    assert two_runs["first"].returncode == 0, two_runs["first"].stderr[-2000:]
    created, unresolved = created_paths(two_runs["trace"])
    size = two_runs["trace"].stat().st_size
    assert any(p.startswith(str(two_runs["out"])) for p in created), (  # the trace does see the run's own files
        f"{len(created)} created paths in a {size}-byte trace, e.g. {created[:5]}")
    assert unresolved == []
    assert left_outside(created, two_runs["out"], hosts_dir()) == []


# ------------------------------------------------------------------------------------------------ interruption
def _processes_mentioning(text: str) -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                zombie = f.read().rsplit(")", 1)[-1].split()[0] in ("Z", "X")
        except OSError:
            continue
        if not zombie and (text.encode() in env or text in cmd):
            found.append(f"{entry}: {cmd[:200]}")
    return found


def _interrupt(tmp_path: Path, data: dict, started: str, sig: int) -> tuple[int, str, Path, Path, list[str]]:
    """Run ``data`` as a scenario with ``memsim hosts run``, send ``sig`` once a file matching ``started`` exists
    under the output folder; the exit status, stderr, the output and private temporary folders, and the processes
    still mentioning ``tmp_path`` just after the exit (ended by pid afterwards, whatever the test's outcome)."""
    scn = tmp_path / "held.yaml"
    scn.write_text(yaml.safe_dump(data), encoding="utf-8")
    systmp, out = tmp_path / "systmp", tmp_path / "out"
    systmp.mkdir()
    proc = subprocess.Popen(_run_cmd(out, scn), env={**os.environ, "TMPDIR": str(systmp)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 300
        while not any(p.stat().st_size or p.is_dir() for p in out.glob(started)):
            assert proc.poll() is None and time.time() < deadline, "the run never got there"
            time.sleep(0.2)
        assert _processes_mentioning(str(tmp_path))
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=120)
        left = _processes_mentioning(str(tmp_path))
    finally:
        if proc.poll() is None:
            proc.kill()
        for row in _processes_mentioning(str(tmp_path)):  # what a failed run left: this test's own, by pid
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(row.split(":")[0]), signal.SIGKILL)
    return proc.returncode, stderr, out, systmp, left


def _stopped_line(stderr: str, why: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("stopped by")] == [
        f"stopped by {why}: pointer-delivery on claude-code is not written (its host, model server and temporary "
        "files are gone)"]


def test_sigterm_ends_the_host_model_server_and_service_and_leaves_nothing(tmp_path: Path) -> None:
    """SIGTERM while Claude Code waits on the model server (the scripted reply is held 30 s) with the resident
    service running: exit 143, the host, its hooks, the runner with the model server and the service are ended,
    and neither the run folder nor the private temporary folder stays."""
    require_host("claude-code")
    data = yaml.safe_load((SCENARIO_DIR / "pointer-delivery.yaml").read_text(encoding="utf-8"))
    data["sessions"][0]["before"].append({"service": "start"})
    data["sessions"][0]["prompts"][0]["replies"][0]["delay_s"] = 30
    code, stderr, out, systmp, left = _interrupt(tmp_path, data, "**/claude-code/s0/requests.jsonl", signal.SIGTERM)
    assert code == 143, stderr[-2000:]
    assert _stopped_line(stderr, "SIGTERM")
    assert not out.exists()
    assert list(systmp.iterdir()) == []
    assert left == []


def test_ctrl_c_exits_130_and_leaves_nothing(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT) during the scenario's memory operations, before the host starts: exit 130, nothing
    written, the private temporary folder gone."""
    require_host("claude-code")
    data = yaml.safe_load((SCENARIO_DIR / "pointer-delivery.yaml").read_text(encoding="utf-8"))
    data["sessions"][0]["before"].insert(0, {"wait": {"seconds": 60}})
    code, stderr, out, systmp, left = _interrupt(tmp_path, data, "**/claude-code/s0/gates", signal.SIGINT)
    assert code == 130, stderr[-2000:]
    assert _stopped_line(stderr, "Ctrl-C")
    assert not out.exists()
    assert list(systmp.iterdir()) == []
    assert left == []
