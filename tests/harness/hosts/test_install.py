"""``memsim hosts install`` / ``memsim hosts list`` with a fake npm on PATH (it records its argv and writes the
package.json an install would), no network."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.main import app
from harness.hosts import install as inst

FAKE_NPM = '''#!{python}
import json, os, sys
from pathlib import Path
args = sys.argv[1:]
with open(os.environ["FAKE_NPM_LOG"], "a") as f:
    f.write(json.dumps(args) + "\\n")
mode = os.environ.get("FAKE_NPM_MODE", "ok")
if args[0] == "ping":
    if mode in ("offline", "ping-ok-install-offline"):
        if mode == "offline":
            sys.stderr.write("npm error code EAI_AGAIN\\nnpm error request to the registry failed, reason: getaddrinfo EAI_AGAIN\\n")
            sys.exit(1)
    sys.exit(0)
if mode == "ping-ok-install-offline":
    mode = "offline"
if mode == "offline":
    sys.stderr.write("npm error code ENOTFOUND\\nnpm error network request to the registry failed, reason: getaddrinfo ENOTFOUND\\n")
    sys.exit(1)
if mode == "broken":
    sys.stderr.write("npm error code E500\\nnpm error something else went wrong\\n")
    sys.exit(1)
prefix = Path(args[args.index("--prefix") + 1])
spec = args[-1]
package, version = spec.rsplit("@", 1)
if mode == "other-version":
    version = "0.0.1"
pkg = prefix.joinpath("node_modules", *package.split("/"))
pkg.mkdir(parents=True, exist_ok=True)
(pkg / "package.json").write_text(json.dumps({{"name": package, "version": version}}))
bin_dir = prefix / "node_modules" / ".bin"
bin_dir.mkdir(parents=True, exist_ok=True)
name = {{"@anthropic-ai/claude-code": "claude", "@openai/codex": "codex", "@google/gemini-cli": "gemini",
        "cline": "cline"}}[package]
(bin_dir / name).write_text("#!/bin/sh\\necho fake\\n")
(bin_dir / name).chmod(0o755)
'''


def _exe(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _exe(bin_dir / "npm", FAKE_NPM.format(python=sys.executable))
    _exe(bin_dir / "node", "#!/bin/sh\necho v20\n")
    log = tmp_path / "npm-argv.jsonl"
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("FAKE_NPM_LOG", str(log))
    monkeypatch.setenv("MEMSIM_HOSTS_DIR", str(tmp_path / "hosts"))
    monkeypatch.delenv("MEMSIM_HOSTS_EXTRA", raising=False)
    return {"bin": bin_dir, "log": log, "hosts": tmp_path / "hosts"}


def calls(log: Path) -> list[list[str]]:
    return [json.loads(ln) for ln in log.read_text().splitlines()] if log.exists() else []


def invoke(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, ["hosts", *args])


def one_line(r, code: int) -> str:  # type: ignore[no-untyped-def]
    assert r.exit_code == code, r.output
    assert "Traceback" not in r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1, r.output
    return lines[0]


def test_install_default_set_pinned_into_the_cache_folder(env: dict[str, Path]) -> None:
    r = invoke("install")
    assert r.exit_code == 0, r.output
    got = [c for c in calls(env["log"]) if c[0] != "ping"]
    assert len(got) == 2
    for argv, name in zip(got, ("claude-code", "codex"), strict=True):
        spec = inst.HOSTS[name]
        assert argv[0] == "install"
        assert argv[argv.index("--prefix") + 1] == str(env["hosts"] / f"{name}-{spec.version}")
        assert "--no-audit" in argv and "--no-fund" in argv
        assert argv[-1] == f"{spec.package}@{spec.version}"
    for name in ("claude-code", "codex"):
        h = inst.find_host(name)
        assert h is not None and h.version == inst.HOSTS[name].version and h.bin.exists()
        assert str(h.bin) in r.output
    # installed already: npm is not called again
    assert invoke("install", "codex", "--if-reachable").exit_code == 0
    assert len(calls(env["log"])) == 2  # neither an install nor a registry ping


def test_install_cline_and_gemini_by_name_pinned(env: dict[str, Path]) -> None:
    """The two later hosts install by name at their pins; the default set stays claude-code and codex."""
    assert inst.DEFAULT_HOSTS == ("claude-code", "codex")
    r = invoke("install", "cline", "gemini")
    assert r.exit_code == 0, r.output
    got = [c for c in calls(env["log"]) if c[0] != "ping"]
    assert [c[-1] for c in got] == ["cline@3.0.65", "@google/gemini-cli@0.61.0"]
    for name in ("cline", "gemini"):
        h = inst.find_host(name)
        assert h is not None and h.version == inst.HOSTS[name].version and h.root == env["hosts"] / f"{name}-{h.version}"


def test_list_shows_pinned_installed_and_path(env: dict[str, Path]) -> None:
    def rows() -> dict[str, list[str]]:
        r = invoke("list")
        assert r.exit_code == 0, r.output
        return {ln.split()[0]: ln.split() for ln in r.output.splitlines() if ln.split()[0] in inst.HOSTS}

    others = {"cline": ["cline", "3.0.65", "-", "-"], "gemini": ["gemini", "0.61.0", "-", "-"]}
    assert rows() == {"claude-code": ["claude-code", "2.1.328", "-", "-"], "codex": ["codex", "0.169.0", "-", "-"],
                      **others}
    assert invoke("install", "claude-code").exit_code == 0
    assert rows() == {"claude-code": ["claude-code", "2.1.328", "2.1.328", str(env["hosts"] / "claude-code-2.1.328")],
                      "codex": ["codex", "0.169.0", "-", "-"], **others}


def test_wrong_installed_version_is_listed_not_used(env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NPM_MODE", "other-version")
    r = invoke("install", "codex")
    assert "0.0.1" in one_line(r, 1) and "0.169.0" in r.output
    assert inst.installed()["codex"].version == "0.0.1"
    assert inst.find_host("codex") is None


@pytest.mark.parametrize("missing", ["npm", "node", "both"])
def test_missing_node_or_npm_is_one_line(env: dict[str, Path], missing: str) -> None:
    for tool in (("npm", "node") if missing == "both" else (missing,)):
        (env["bin"] / tool).unlink()
    line = one_line(invoke("install"), 1)
    assert line.startswith("error:")
    for tool in ("npm", "node"):
        assert (tool in line.split("cannot install hosts:")[1]) == (missing in (tool, "both"))
    line = one_line(invoke("install", "--if-reachable"), 0)
    assert "not found" in line and not line.startswith("error:")
    assert calls(env["log"]) == []


@pytest.mark.parametrize("mode", ["offline", "ping-ok-install-offline"])
def test_unreachable_registry(env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    monkeypatch.setenv("FAKE_NPM_MODE", mode)
    line = one_line(invoke("install", "--if-reachable"), 0)
    assert "registry is not reachable" in line and "complete log" not in line
    assert [c[0] for c in calls(env["log"])] == (["ping"] if mode == "offline" else ["ping", "install"])
    line = one_line(invoke("install"), 1)
    assert line.startswith("error:") and "getaddrinfo" in line
    assert inst.find_host("claude-code") is None


def test_other_npm_failure_is_not_excused(env: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NPM_MODE", "broken")
    line = one_line(invoke("install", "--if-reachable"), 1)
    assert line.startswith("error:") and "something else went wrong" in line


def test_unknown_host_is_a_usage_error(env: dict[str, Path]) -> None:
    r = invoke("install", "emacs")
    assert r.exit_code == 2 and "emacs" in r.output and "Traceback" not in r.output
    assert calls(env["log"]) == []


def test_hosts_dir_default_and_extra_installs(env: dict[str, Path], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMSIM_HOSTS_DIR")
    from platformdirs import user_cache_dir

    assert inst.hosts_dir() == Path(user_cache_dir("memsim")) / "hosts"
    monkeypatch.setenv("MEMSIM_HOSTS_DIR", str(env["hosts"]))
    extra = tmp_path / "exploration"
    os.environ["FAKE_NPM_MODE"] = "ok"
    import subprocess

    subprocess.run([str(env["bin"] / "npm"), "install", "--prefix", str(extra), "@openai/codex@0.169.0"], check=True)
    assert inst.find_host("codex") is None
    monkeypatch.setenv("MEMSIM_HOSTS_EXTRA", str(extra))
    h = inst.find_host("codex")
    assert h is not None and h.root == extra
