"""docs/comparisons.md: its loading examples run as written (pyarrow, pandas, memsim, ir_measures; ranx where it is
installed) against a per-probe table and run files of the documented layout, and give memsim's numbers."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from benchmarks.worlds.probe_results import locomo_table_rows
from harness.probes import aggregate, probe_table, read_probes, write_probes
from harness.trec import LEVELS, level_qrels, level_rankings, query_id, write_trec

PAGE = Path(__file__).resolve().parents[2] / "docs" / "comparisons.md"
HEADLINE = {"category": ["1", "2", "3", "4"]}


def _section(title: str) -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(title)
    nxt = re.search(r"^## ", text[start + len(title):], flags=re.M)
    return text[start: start + len(title) + (nxt.start() if nxt else len(text))]


def _blocks(section: str, lang: str = "python") -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", section, flags=re.S)


@pytest.fixture
def results(tmp_path, monkeypatch):
    """benchmarks/results/locomo.probes.parquet and benchmarks/results/locomo/{runs,qrels} in a scratch folder."""
    folder = tmp_path / "benchmarks" / "results"
    folder.mkdir(parents=True)
    rows = ("hybrid@8", "bm25@8", "fractal")
    write_probes(folder / "locomo.probes.parquet", probe_table(locomo_table_rows(0, rows=rows)), data="locomo",
                 probe_sets={"headline": HEADLINE}, stratify=True)
    session_of = {f"D{s}:{t}": s for s in range(1, 6) for t in range(1, 5)}
    turns = list(session_of)
    runs = {r: {lv: {} for lv in LEVELS} for r in ("hybrid@8", "bm25@8")}
    qrels = {lv: {} for lv in LEVELS}
    for q in range(20):
        qid = query_id("conv-26", q)
        ev = [turns[q % len(turns)]]
        for j, r in enumerate(runs):
            ranking = turns[(q + j) % 7:][:8]
            for lv, docs in level_rankings(ranking, session_of).items():
                runs[r][lv][qid] = docs
        for lv, rel in level_qrels(ev, session_of).items():
            qrels[lv][qid] = rel
    write_trec(folder / "locomo", runs, qrels)
    monkeypatch.chdir(tmp_path)
    return folder


def test_pyarrow_example_gives_the_aggregate_means(results):
    (code,) = [b for b in _blocks(_section("## Loading a per-probe table")) if "pyarrow" in b]
    ns: dict = {}
    exec(code, ns)
    want = aggregate(read_probes(results / "locomo.probes.parquet").table, HEADLINE, ["evidence_recall"])
    got = dict(zip(ns["means"]["row"].to_pylist(), ns["means"]["evidence_recall_mean"].to_pylist(), strict=True))
    assert got == pytest.approx({r: v["metrics"]["evidence_recall"]["mean"] for r, v in want.items()})


def test_pandas_example(results):
    (code,) = [b for b in _blocks(_section("## Loading a per-probe table")) if "pandas" in b]
    ns: dict = {}
    exec(code, ns)
    want = aggregate(read_probes(results / "locomo.probes.parquet").table, HEADLINE, ["evidence_recall"])
    assert ns["means"].to_dict() == pytest.approx({r: v["metrics"]["evidence_recall"]["mean"]
                                                   for r, v in want.items()})
    assert list(ns["wide"].columns) == sorted(want) and len(ns["wide"]) == 582  # probes with a recall


def test_memsim_example(results):
    (code,) = [b for b in _blocks(_section("## Loading a per-probe table")) if "harness" in b]
    ns: dict = {}
    exec(code, ns)
    assert set(ns["means"]) == {"hybrid@8", "bm25@8", "fractal"}
    iv = ns["intervals"]["evidence_recall"]["hybrid@8"]
    assert iv["lo"] <= ns["means"]["hybrid@8"]["metrics"]["evidence_recall"]["mean"] == iv["estimate"] <= iv["hi"]


def test_ir_measures_example(results):
    (code,) = [b for b in _blocks(_section("## Loading the run files")) if "ir_measures" in b]
    ns: dict = {}
    exec(code, ns)
    assert {str(k) for k in ns["scores"]} == {"nDCG@10", "R@10", "Success@5"}
    assert all(0 <= v <= 1 for v in ns["scores"].values())


def test_ranx_example(results):
    pytest.importorskip("ranx", reason="ranx is optional (the page shows it for users who have it)")
    (code,) = [b for b in _blocks(_section("## Loading the run files")) if "ranx" in b]
    exec(code, {})


def test_command_examples_use_real_options():
    import typer.main

    from harness.cli.main import app

    params = {o for p in typer.main.get_command(app).commands["compare"].params for o in p.opts}
    for line in _blocks(_section("## Comparing runs from the command line"), "bash")[0].splitlines():
        argv = shlex.split(line)
        assert argv[:2] == ["memsim", "compare"]
        assert {a for a in argv if a.startswith("--")} <= params, argv
