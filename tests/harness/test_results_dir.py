"""Commands that write results default to a run folder; the committed ``benchmarks/results`` stay put."""

from __future__ import annotations

import hashlib
import importlib
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchmarks.common import RESULTS_DIR
from harness.cli.main import app
from harness.results_dir import RESULTS_ENV, default_out

runner = CliRunner()


def _hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def clone(tmp_path, monkeypatch):
    """A working directory laid out like a fresh clone: a copy of the committed results at benchmarks/results."""
    import torch

    torch.set_num_threads(1)
    shutil.copytree(RESULTS_DIR, tmp_path / "benchmarks" / "results")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(RESULTS_ENV, raising=False)
    before = (_hashes(tmp_path / "benchmarks" / "results"), _hashes(RESULTS_DIR))
    yield tmp_path
    assert _hashes(tmp_path / "benchmarks" / "results") == before[0], "the clone's committed results changed"
    assert _hashes(RESULTS_DIR) == before[1], "the repository's committed results changed"


def test_default_out_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(RESULTS_ENV, raising=False)
    assert default_out("crash") == tmp_path / "memsim-results" / "crash"
    monkeypatch.setenv(RESULTS_ENV, "")
    assert default_out("fuzz") == tmp_path / "memsim-results" / "fuzz"
    monkeypatch.setenv(RESULTS_ENV, str(tmp_path / "elsewhere"))
    assert default_out("bench") == tmp_path / "elsewhere" / "bench"


def test_crash_writes_to_its_run_folder(clone):
    res = runner.invoke(app, ["crash", "--sequence", "fractal.listing", "--max-points", "1"])
    assert res.exit_code == 0, res.output
    run = clone / "memsim-results" / "crash"
    assert sorted(p.name for p in run.iterdir()) == ["crash.json", "crash.md"]
    assert f"wrote {run / 'crash.json'}" in res.output.replace("\n", "")
    # --merge reads and rewrites the crash.json of the same folder
    res = runner.invoke(app, ["crash", "--sequence", "fractal.submit", "--max-points", "1", "--merge"])
    assert res.exit_code == 0, res.output
    merged = __import__("json").loads((run / "crash.json").read_text(encoding="utf-8"))
    assert {s["sequence"] for s in merged["sequences"]} == {"fractal.listing", "fractal.submit"}


def test_crash_and_fuzz_follow_the_environment(clone, monkeypatch):
    pytest.importorskip("hypothesis")
    monkeypatch.setenv(RESULTS_ENV, str(clone / "runs"))
    res = runner.invoke(app, ["crash", "--sequence", "fractal.listing", "--max-points", "1"])
    assert res.exit_code == 0, res.output
    assert (clone / "runs" / "crash" / "crash.json").is_file()
    res = runner.invoke(app, ["fuzz", "--target", "fractal-replay-json", "--examples", "2", "--no-specials"])
    assert res.exit_code == 0, res.output
    assert (clone / "runs" / "fuzz" / "fuzz.json").is_file()
    assert str(clone / "runs" / "fuzz" / "fuzz.json") in res.output.replace("\n", "")
    assert not (clone / "memsim-results").exists()


def test_fuzz_writes_to_its_run_folder(clone):
    pytest.importorskip("hypothesis")
    res = runner.invoke(app, ["fuzz", "--target", "fractal-replay-json", "--examples", "2", "--no-specials"])
    assert res.exit_code == 0, res.output
    assert (clone / "memsim-results" / "fuzz" / "fuzz.json").is_file()


# every bench command, with its benchmark module's run() replaced by one that records where it was told to write:
# command -> (module, arguments, the name its run owns)
BENCHES = {"selectors": ("selectors", [], "selectors"), "cbr-loop": ("cbr_loop", [], "cbr-loop"),
           "cost": ("cost", [], "cost"), "locomo": ("locomo", ["--data", "locomo10.json"], "locomo"),
           "serve": ("serve", [], "serve"), "engines": ("engines", [], "engines"),
           "sweep": ("sweep", ["any.yaml"], "sweep-any"), "redaction": ("redaction", [], "redaction"),
           "ep-scaling": ("ep_scaling", [], "ep_scaling"), "service-faults": ("service_faults", [], "service-faults"),
           "ep-engine": ("ep_engine", [], "ep-engine"), "capture-path": ("capture_path", ["store.kuzu"], "capture_path"),
           "ann": ("ann", [], "ann"), "hosts": ("hosts", [], "hosts"),
           "longmemeval": ("longmemeval", ["--data", "lme.json"], "longmemeval"),
           "longmemeval-scale": ("longmemeval_scale", [], "longmemeval-scale")}
COMMITTED = Path("benchmarks") / "results"  # the committed results folder, relative to the clone


def test_every_bench_command_is_covered_here():
    from harness.cli.bench import app as bench_app

    assert {c.name or c.callback.__name__ for c in bench_app.registered_commands} == set(BENCHES)


@pytest.mark.parametrize("quick", [False, True])
@pytest.mark.parametrize("bench", sorted(BENCHES))
def test_every_bench_defaults_to_the_run_folder(clone, monkeypatch, bench, quick):
    from types import SimpleNamespace

    from harness.runs import STAGE_PREFIX, published_folder

    module, args, name = BENCHES[bench]
    mod = importlib.import_module(f"benchmarks.{module}")
    seen: list[Path] = []

    def fake_run(*a, **kw):
        stage = Path(a[1] if bench == "sweep" else a[0])
        assert stage.name.startswith(STAGE_PREFIX)  # the run writes into its staging folder
        seen.append(published_folder(stage))
        p = stage / f"{name}.json"
        if published_folder(stage) != COMMITTED:  # told to write the committed folder: the fake writes nothing
            p.write_text("{}\n", encoding="utf-8")
        return [p]

    monkeypatch.setattr(mod, "run", fake_run)
    if bench == "sweep":  # the sweep file names the run
        monkeypatch.setattr(mod, "load_config", lambda path: SimpleNamespace(name="any"))
    (clone / "locomo10.json").write_text("[]\n", encoding="utf-8")  # locomo checks its data exists before the work
    (clone / "store.kuzu").write_bytes(b"")  # capture-path checks its store exists before the work
    (clone / "lme.json").write_text("[]\n", encoding="utf-8")  # longmemeval checks its data exists before the work
    flags = ["--quick"] if quick and bench != "sweep" else []
    res = runner.invoke(app, ["bench", bench, *args, *flags, "--no-progress"])
    assert res.exit_code == 0, res.output
    run = clone / "memsim-results" / "bench"
    assert seen == [run]
    assert f"wrote {run / (name + '.json')}" in res.output.replace("\n", "")
    assert sorted(p.name for p in run.iterdir()) == [f"{name}.json"]
    # --out names another folder: the benchmark's results are published exactly there
    seen.clear()
    res = runner.invoke(app, ["bench", bench, *args, *flags, "--no-progress", "--out", "mine"])
    assert res.exit_code == 0, res.output
    assert seen == [Path("mine")] and (clone / "mine" / f"{name}.json").is_file()
    # ... and --out naming the clone's committed folder (a user may rewrite it on purpose) is passed through as
    # well, not redirected to the run folder (the fixture checks that the fake left the committed files alone)
    seen.clear()
    res = runner.invoke(app, ["bench", bench, *args, *flags, "--no-progress", "--out", str(COMMITTED),
                              "--overwrite"])
    assert res.exit_code == 0, res.output
    assert seen == [COMMITTED]
    assert (clone / COMMITTED).is_dir() and (clone / COMMITTED / "cost.json").is_file()


def test_bench_out_that_is_a_file_fails_before_the_work(clone, monkeypatch):
    import benchmarks.cost as mod

    monkeypatch.setattr(mod, "run", lambda *a, **kw: pytest.fail("the benchmark ran"))
    (clone / "a-file").write_text("x", encoding="utf-8")
    res = runner.invoke(app, ["bench", "cost", "--quick", "--out", "a-file"])
    assert res.exit_code == 1
    assert res.output.strip().splitlines() == ["error: a-file: --out exists and is not a directory"]
