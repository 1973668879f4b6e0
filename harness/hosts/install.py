"""The pinned agent hosts and memsim's cache of them: ``memsim hosts install`` puts each host with npm into
``hosts_dir()/<name>-<version>/`` (``npm install --prefix DIR --no-audit --no-fund PACKAGE@VERSION``, the exact pinned
version); nothing is ever installed globally or committed, and the hosts are run, never modified.

``hosts_dir()`` is ``$MEMSIM_HOSTS_DIR`` when set, else ``platformdirs.user_cache_dir("memsim")/hosts``.
``$MEMSIM_HOSTS_EXTRA`` (``os.pathsep``-separated folders, each an npm prefix such as ``/tmp/hosts/claude``) names
further installs that :func:`installed` accepts when they hold the pinned version (an installed version that differs
from the pin is listed, never used by :func:`find_host`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class HostSpec:
    name: str
    package: str  # the npm package
    version: str  # the pinned version
    bin: str  # the executable under node_modules/.bin
    api: str  # the model API it calls (server.py "api" names)


HOSTS: dict[str, HostSpec] = {
    "claude-code": HostSpec("claude-code", "@anthropic-ai/claude-code", "2.1.328", "claude", "anthropic.messages"),
    "codex": HostSpec("codex", "@openai/codex", "0.169.0", "codex", "openai.responses"),
    "gemini": HostSpec("gemini", "@google/gemini-cli", "0.61.0", "gemini", "gemini.generate"),
    "cline": HostSpec("cline", "cline", "3.0.65", "cline", "openai.chat"),
}
DEFAULT_HOSTS: tuple[str, ...] = ("claude-code", "codex")


@dataclass(frozen=True)
class InstalledHost:
    name: str
    version: str  # read from the package's package.json
    root: Path  # the npm prefix
    bin: Path  # node_modules/.bin/<bin>


def hosts_dir() -> Path:
    """Where ``memsim hosts install`` puts the hosts (``$MEMSIM_HOSTS_DIR``, else the user cache folder)."""
    env = os.environ.get("MEMSIM_HOSTS_DIR")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("memsim")) / "hosts"


def install_dir(name: str) -> Path:
    spec = HOSTS[name]
    return hosts_dir() / f"{name}-{spec.version}"


def package_json(root: Path, spec: HostSpec) -> Path:
    return root.joinpath("node_modules", *spec.package.split("/"), "package.json")


def read_installed(name: str, root: Path) -> InstalledHost | None:
    """The host installed under the npm prefix ``root`` (its version from package.json), or None."""
    spec = HOSTS[name]
    try:
        version = str(json.loads(package_json(root, spec).read_text(encoding="utf-8"))["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    b = root / "node_modules" / ".bin" / spec.bin
    if not b.exists():
        return None
    return InstalledHost(name, version, root, b)


def _candidates(name: str) -> list[Path]:
    roots = [install_dir(name)]
    for extra in filter(None, os.environ.get("MEMSIM_HOSTS_EXTRA", "").split(os.pathsep)):
        roots.append(Path(extra).expanduser())
    return roots


def installed() -> dict[str, InstalledHost]:
    """The known hosts found installed (the pinned install folder first, then ``$MEMSIM_HOSTS_EXTRA``)."""
    found: dict[str, InstalledHost] = {}
    for name in HOSTS:
        hits = [h for h in (read_installed(name, r) for r in _candidates(name)) if h is not None]
        pinned = [h for h in hits if h.version == HOSTS[name].version]
        if pinned or hits:
            found[name] = (pinned or hits)[0]
    return found


def find_host(name: str) -> InstalledHost | None:
    """The host at its pinned version, or None when it is not installed at that version."""
    h = installed().get(name)
    return h if h is not None and h.version == HOSTS[name].version else None


class InstallError(Exception):
    """An install that could not run or failed (the message is one line)."""


def missing_tools() -> list[str]:
    """Which of node and npm are not on PATH."""
    return [t for t in ("node", "npm") if shutil.which(t) is None]


def npm_argv(name: str) -> list[str]:
    spec = HOSTS[name]
    return [shutil.which("npm") or "npm", "install", "--prefix", str(install_dir(name)), "--no-audit", "--no-fund",
            "--save-exact", f"{spec.package}@{spec.version}"]


_UNREACHABLE = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "ECONNRESET", "ENETUNREACH", "EHOSTUNREACH",
                "network request", "getaddrinfo", "socket hang up")


def registry_unreachable(stderr: str) -> bool:
    """Whether npm's error output says the registry could not be reached."""
    return any(s in stderr for s in _UNREACHABLE)


def _npm_error(text: str, code: int) -> str:
    """npm's error output in one line: its ``npm error`` lines, without the debug-log pointer."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and "complete log of this run" not in ln]
    errs = [ln.removeprefix("npm error").strip() for ln in lines if ln.startswith(("npm error", "npm ERR!"))]
    picked = [e for e in errs if not e.startswith(("syscall", "errno"))][:2] or lines[-1:] or [f"exit {code}"]
    return "; ".join(picked)


def registry_reachable(timeout_s: float = 20.0) -> tuple[bool, str]:
    """Ask the configured npm registry once (``npm ping``, no retries): (reachable, npm's answer in one line).

    ``--if-reachable`` checks this first, so a machine without network skips in a fraction of a second instead of
    waiting through npm's install retries (about a minute)."""
    try:
        p = subprocess.run([shutil.which("npm") or "npm", "ping", "--fetch-retries=0", "--fetch-timeout=10000"],
                           capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return False, f"npm ping did not answer in {timeout_s:.0f} s"
    except OSError as exc:
        return False, f"npm ping could not run: {exc}"
    if p.returncode == 0:
        return True, "ok"
    return False, _npm_error(p.stderr + p.stdout, p.returncode)


def install(name: str, *, timeout_s: float = 600.0) -> InstalledHost:
    """Install ``name`` at its pinned version (a no-op when it is there); raises :class:`InstallError`."""
    if name not in HOSTS:
        raise InstallError(f"unknown host {name!r} (known: {', '.join(HOSTS)})")
    have = read_installed(name, install_dir(name))
    if have is not None and have.version == HOSTS[name].version:
        return have
    install_dir(name).mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.run(npm_argv(name), capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise InstallError(f"npm install of {name} did not finish in {timeout_s:.0f} s") from exc
    if proc.returncode != 0:
        tail = _npm_error(proc.stderr + proc.stdout, proc.returncode)
        err = InstallError(f"npm install {HOSTS[name].package}@{HOSTS[name].version} failed: {tail}")
        err.unreachable = registry_unreachable(proc.stderr + proc.stdout)  # type: ignore[attr-defined]
        raise err
    have = read_installed(name, install_dir(name))
    if have is None:
        raise InstallError(f"npm reported success but {package_json(install_dir(name), HOSTS[name])} or the "
                           f"{HOSTS[name].bin} executable is missing")
    if have.version != HOSTS[name].version:
        raise InstallError(f"npm installed {name} {have.version}, not the pinned {HOSTS[name].version}")
    return have
