"""The run-ownership rule (harness.runs): a run owns its names, starts fresh, replaces only when finished,
leaves nothing when it fails or is terminated, refuses to replace long work without overwrite."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness import runs


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_run_replaces_only_its_own_names_and_only_when_it_finishes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "locomo.json").write_text('{"old": 1}')
    (out / "locomo.png").write_text("old figure")  # the new run writes no figure: the old one must go
    (out / "locomo").mkdir()
    (out / "locomo" / "store.db").write_text("old store")
    (out / "locomo-paper.json").write_text("another run's")
    (out / "notes.txt").write_text("the user's")
    with runs.owned_run(out, ["locomo"]) as stage:
        assert not (stage / "locomo").exists()  # fresh: the earlier store is not visible
        (stage / "locomo.json").write_text('{"new": 1}')
        (stage / "locomo").mkdir()
        (stage / "locomo" / "delivered.jsonl").write_text("new")
        assert json.loads((out / "locomo.json").read_text()) == {"old": 1}  # not replaced before the end
    assert _files(out) == ["locomo", "locomo-paper.json", "locomo.json", "locomo/delivered.jsonl", "notes.txt"]
    assert json.loads((out / "locomo.json").read_text()) == {"new": 1}
    assert (out / "locomo-paper.json").read_text() == "another run's"


def test_a_failed_or_interrupted_run_leaves_the_earlier_outputs_and_nothing_else(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "fuzz.json").write_text("earlier")
    for exc in (RuntimeError("boom"), KeyboardInterrupt(), runs.Terminated("signal 15")):
        with pytest.raises(type(exc)), runs.owned_run(out, ["fuzz"]) as stage:
            (stage / "fuzz.json").write_text("half")
            raise exc
        assert _files(out) == ["fuzz.json"]
        assert (out / "fuzz.json").read_text() == "earlier"


def test_a_stray_output_is_an_error_and_nothing_is_published(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="summary.json, which is not one of its names"):
        with runs.owned_run(out, ["hosts/claude-code"]) as stage:
            (stage / "hosts" / "claude-code").mkdir(parents=True)
            (stage / "summary.json").write_text("[]")
    assert _files(out) == []


def test_nested_names_publish_beside_other_runs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "pointer-delivery" / "codex").mkdir(parents=True)
    (out / "pointer-delivery" / "claude-code" / "home").mkdir(parents=True)
    with runs.owned_run(out, ["pointer-delivery/claude-code", "pointer-delivery/claude-code-summary"]) as stage:
        d = stage / "pointer-delivery" / "claude-code"
        d.mkdir(parents=True)
        (d / "result.json").write_text("{}")
        (stage / "pointer-delivery" / "claude-code-summary.json").write_text("[]")
    assert _files(out) == ["pointer-delivery", "pointer-delivery/claude-code", "pointer-delivery/claude-code-summary.json",
                           "pointer-delivery/claude-code/result.json", "pointer-delivery/codex"]


def test_long_earlier_work_is_refused_without_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "locomo.json").write_text(json.dumps({"run": {"wall_s": 7200}}))
    with pytest.raises(runs.RunRefused, match=r"locomo.json: an earlier run that took 2.0 h .* --overwrite"):
        with runs.owned_run(out, ["locomo"], refuse_longer_than_s=1800):
            raise AssertionError("the body must not run")
    assert _files(out) == ["locomo.json"]
    with runs.owned_run(out, ["locomo"], refuse_longer_than_s=1800, overwrite=True) as stage:
        (stage / "locomo.json").write_text(json.dumps({"run": {"wall_s": 3}}))
    with runs.owned_run(out, ["locomo"], refuse_longer_than_s=1800) as stage:  # a short earlier run is replaced
        (stage / "locomo.json").write_text("{}")
    assert (out / "locomo.json").read_text() == "{}"


def test_a_killed_runs_staging_folder_is_hidden_and_removed_by_the_next_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = out / f".memsim-partial-bench-{dead.pid}-abcd1234"
    (stale / "bench.json").parent.mkdir()
    (stale / "bench.json").write_text("half")
    mine = out / f".memsim-partial-bench-{os.getpid()}-abcd1234"  # a live process's stage stays
    mine.mkdir()
    with runs.owned_run(out, ["bench"]) as stage:
        (stage / "bench.json").write_text("{}")
    assert not stale.exists() and mine.exists()


def test_sigterm_removes_the_stage_and_exits_143(tmp_path: Path) -> None:
    out = tmp_path / "out"
    script = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from harness import runs
        try:
            with runs.terminated_as_interrupt(), runs.owned_run(Path({str(out)!r}), ["slow"]) as stage:
                (stage / "slow.json").write_text("half")
                print("ready", flush=True)
                time.sleep(30)
        except KeyboardInterrupt as exc:
            sys.exit(runs.exit_code_for(exc))
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 143
    assert _files(out) == []


def test_names_are_plain_relative_paths(tmp_path: Path) -> None:
    for bad in ("", "../x", "/abs", ".hidden", "a/./b"):
        with pytest.raises(ValueError):
            with runs.owned_run(tmp_path, [bad]):
                pass


def test_the_run_record_names_the_code() -> None:
    rec = runs.run_record(12.5, ["/x/memsim", "bench", "cost"])
    assert rec["command"] == "memsim bench cost" and rec["wall_s"] == 12.5 and rec["memsim"]
    root = Path(runs.__file__).resolve().parents[1]
    if (root / ".git").exists():
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
        assert rec["commit"] == head.stdout.strip()
        assert "commit " + rec["commit"][:7] in runs.describe_code(rec)
    assert runs.describe_code({"memsim": "0.1.0"}) == "memsim 0.1.0 (not a git checkout)"
    assert "uncommitted changes (diff sha256 abcdef01)" in runs.describe_code(
        {"memsim": "0.1.0", "commit": "0123456789", "diff_sha256": "abcdef0123"})


def test_a_name_the_run_wrote_nothing_under_keeps_its_earlier_entries(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "serve.json").write_text("earlier")
    with runs.owned_run(out, ["serve", "engines"]) as stage:
        (stage / "engines.json").write_text("{}")
    assert _files(out) == ["engines.json", "serve.json"] and (out / "serve.json").read_text() == "earlier"


def test_published_folder_and_the_runs_wall_clock(tmp_path: Path) -> None:
    assert runs.current_wall_s() is None
    with runs.owned_run(tmp_path, ["cost"]) as stage:
        assert runs.published_folder(stage) == tmp_path
        assert runs.published_folder(stage / "cost" / "x.json") == tmp_path / "cost" / "x.json"
        assert runs.current_wall_s() is not None and runs.run_record()["wall_s"] >= 0
        (stage / "cost.json").write_text("{}")
    assert runs.current_wall_s() is None and "wall_s" not in runs.run_record()
    assert runs.published_folder(tmp_path / "plain") == tmp_path / "plain"
