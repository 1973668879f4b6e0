"""``memsim explore``: the page written into the run folder, and bad input (a folder from an older memsim or without
a delivery store, a row that does not exist, a damaged table or store, a page over the size level) refused with one
line naming the folder or file and what is missing, nothing written. No browser needed."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.main import app
from harness.explore import WRITE_STEP, ExploreError, write_explorer
from harness.faults import FaultInjected, FaultPlan
from tests.harness.explore_runs import Capture, cached

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Capture:
    return cached("tiny", tmp_path_factory)


def copy_run(cap: Capture, dest: Path) -> Path:
    shutil.copytree(cap.run_dir, dest)
    for p in dest.glob("*.explore.html"):
        p.unlink()
    return dest


def refused(args: list[str], *needles: str, code: int = 1) -> None:
    r = CliRunner().invoke(app, ["explore", *args])
    assert r.exit_code == code, r.output
    assert "Traceback" not in r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), r.output
    for n in needles:
        assert n in r.output, (n, r.output)


def test_writes_the_page_into_the_run_folder(small: Capture, tmp_path: Path) -> None:
    run = copy_run(small, tmp_path / "run")
    for arg in (run, run / "tiny", run / "tiny.json", run / "tiny.probes.parquet"):
        r = CliRunner().invoke(app, ["explore", str(arg), "--rows", "full,fractal", "--limit", "2"])
        assert r.exit_code == 0, r.output
        assert r.output.strip() == f"wrote {run / 'tiny.explore.html'}"
    html = (run / "tiny.explore.html").read_text(encoding="utf-8")
    assert '"defaults":["full","fractal"]' in html and "2 of 3 questions" in html


def test_bad_input_is_one_line_and_writes_nothing(small: Capture, tmp_path: Path) -> None:
    run = copy_run(small, tmp_path / "run")
    page = run / "tiny.explore.html"
    refused([str(run / "tiny"), "--rows", "full,nope"], "no row 'nope'", "tiny.probes.parquet")
    refused([str(run / "tiny"), "--types", "9"], "no question matches --types 9")
    refused([str(run / "tiny"), "--limit", "0"], "--limit", code=2)
    refused([str(tmp_path / "nowhere")], "nowhere", "no such run")
    older = tmp_path / "older"
    older.mkdir()
    (older / "tiny.json").write_text("{}")
    refused([str(older / "tiny")], str(older), "no per-probe table")
    refused([str(older)], str(older), "no per-probe table")
    nostore = copy_run(small, tmp_path / "nostore")
    (nostore / "tiny.deliveries.json.gz").unlink()
    refused([str(nostore / "tiny")], str(nostore), "no delivery store tiny.deliveries.json.gz")
    table = copy_run(small, tmp_path / "badtable")
    (table / "tiny.probes.parquet").write_bytes((table / "tiny.probes.parquet").read_bytes()[:300])
    refused([str(table / "tiny")], str(table / "tiny.probes.parquet"))
    store = copy_run(small, tmp_path / "badstore")
    data = json.loads(gzip.decompress((store / "tiny.deliveries.json.gz").read_bytes()))
    data["conversations"][0]["lits"][0] += "!"
    (store / "tiny.deliveries.json.gz").write_bytes(gzip.compress(json.dumps(data).encode()))
    refused([str(store / "tiny")], str(store / "tiny.deliveries.json.gz"), "damaged")
    other = copy_run(small, tmp_path / "other")
    data = json.loads(gzip.decompress((other / "tiny.deliveries.json.gz").read_bytes()))
    data["data"] = "data: another run"
    (other / "tiny.deliveries.json.gz").write_bytes(gzip.compress(json.dumps(data).encode()))
    refused([str(other / "tiny")], "different runs")
    gone = copy_run(small, tmp_path / "gone")
    data = json.loads(gzip.decompress((gone / "tiny.deliveries.json.gz").read_bytes()))
    data["conversations"][0]["deliveries"] = [d for d in data["conversations"][0]["deliveries"] if d[1] != "bm25@8"]
    (gone / "tiny.deliveries.json.gz").write_bytes(gzip.compress(json.dumps(data).encode()))
    refused([str(gone / "tiny")], "no delivery of row 'bm25@8'")
    for folder in (run, older, nostore, table, store, other, gone):
        assert not list(folder.glob("*.explore.html")), folder
    assert not page.exists()


def test_a_page_over_the_level_is_refused_and_the_write_is_atomic(small: Capture, tmp_path: Path) -> None:
    run = copy_run(small, tmp_path / "run")
    with pytest.raises(ExploreError, match=r"over the 0.01 MB level; choose fewer questions with --limit N or "
                                           r"--types T") as exc:
        write_explorer(run, "tiny", max_bytes=10_000)
    assert "\n" not in str(exc.value)
    with pytest.raises(FaultInjected):
        write_explorer(run, "tiny", fault_hook=FaultPlan({WRITE_STEP: 1}))
    assert sorted(p.name for p in run.iterdir()) == ["tiny.deliveries.json.gz", "tiny.probes.parquet"]


def test_run_artefacts_with_data_text_are_never_committed() -> None:
    """Pages and stores of real data are git-ignored; the results folder holds none but a synthetic run's."""
    ignored = subprocess.run(["git", "check-ignore", "--no-index", "benchmarks/results/locomo.explore.html",
                              "benchmarks/results/locomo.deliveries.json.gz", "x/run.explore.html"],
                             cwd=REPO, capture_output=True, text=True)
    if ignored.returncode == 128:
        pytest.skip("not a git checkout")
    assert ignored.stdout.split() == ["benchmarks/results/locomo.explore.html",
                                      "benchmarks/results/locomo.deliveries.json.gz", "x/run.explore.html"]
    tracked = subprocess.run(["git", "ls-files", "-z", "--", "benchmarks/results"], cwd=REPO, capture_output=True,
                             text=True, check=True).stdout.split("\0")
    # what is committed, not what a local run left beside it (ignored, as checked above)
    for p in [REPO / f for f in tracked if f.endswith((".explore.html", ".deliveries.json.gz"))]:
        name = p.name.split(".")[0]
        results = json.loads((p.parent / f"{name}.json").read_text(encoding="utf-8"))
        assert (results.get("data") or {}).get("synthetic") is True, f"{p}: text from a data file committed"


def test_bench_no_explore_skips_only_the_page(tmp_path: Path) -> None:
    """``memsim bench longmemeval --no-explore``: the delivery store is written, the explorer page is not; without
    the flag the same run writes the page."""
    from benchmarks.worlds import longmemeval as gen

    data = tmp_path / "lme.json"
    gen.write_file(data, 1, seed=3, sessions=8)
    for flag, page in (("--no-explore", False), ("--explore", True)):
        out = tmp_path / flag.strip("-")
        r = CliRunner().invoke(app, ["bench", "longmemeval", "--data", str(data), "--arms", "full", "--embed",
                                     "per-call", "--out", str(out), "--no-progress", flag])
        assert r.exit_code == 0, r.output
        assert (out / "longmemeval.deliveries.json.gz").is_file()
        assert (out / "longmemeval.explore.html").is_file() is page


def test_a_run_named_by_folder_and_name_beside_its_own_folder(tmp_path: Path) -> None:
    """``<folder>/<name>`` names the run even when the run's own folder ``<folder>/<name>/`` exists (a LoCoMo run
    keeps its conversations there): ``memsim explore benchmarks/results/locomo`` is the form a user types."""
    from harness.explore import find_run

    (tmp_path / "locomo").mkdir()
    (tmp_path / "locomo" / "conv-1.json").write_text("{}")
    (tmp_path / "locomo.probes.parquet").write_bytes(b"")
    assert find_run(tmp_path / "locomo") == (tmp_path, "locomo")
    (tmp_path / "locomo.probes.parquet").unlink()
    with pytest.raises(ExploreError, match="no per-probe table"):
        find_run(tmp_path / "locomo")
