"""``benchmarks/ann.py``: the sentence generator, the vector cache, one small measured run and its re-render.

The encoder is replaced by the hashing encoder (no MiniLM in a unit test); the measuring code is the benchmark's."""

from __future__ import annotations

import json

import faiss
import numpy as np
import pytest
from typer.testing import CliRunner

from benchmarks import ann
from harness.cli.main import app
from tortoise_sim.embed import HashingEncoder

faiss.omp_set_num_threads(1)


@pytest.fixture
def small(monkeypatch, tmp_path):
    monkeypatch.setattr(ann, "CACHE_ROOT", tmp_path / "cache")
    monkeypatch.setattr(ann, "CHUNK", 400)
    monkeypatch.setattr(ann, "_encoder", HashingEncoder)
    monkeypatch.setattr(ann, "EF_SWEEP", (8, 64))
    return tmp_path


def test_generator_is_deterministic_diverse_and_streams_are_disjoint():
    a = ann.sentences(3, "base", 0, 2000)
    assert a == ann.sentences(3, "base", 0, 2000) and a != ann.sentences(4, "base", 0, 2000)
    assert len(set(a)) > 0.97 * len(a)
    test = set(ann.sentences(3, "test", 0, 300))
    assert len(test & set(a)) < 5 and test != set(ann.sentences(3, "validation", 0, 300))


def test_cache_fills_once_and_serves_prefixes(small):
    v = ann.base_vectors(1, 900)
    assert v.shape == (900, 384) and sorted(p.name for p in ann.cache_dir(1).glob("base-*.npy")) == [
        "base-00000.npy", "base-00001.npy", "base-00002.npy"]
    enc = HashingEncoder()
    assert np.array_equal(v[410], enc.encode([ann.sentence(1, "base", 410)])[0])
    assert np.array_equal(ann.base_vectors(1, 500), v[:500])


def test_small_run_writes_results_and_rerenders_the_same_markdown(small):
    out = small / "out"
    paths = ann.run(out, seed=1, points=[600], echo=lambda s: None)
    assert {p.name for p in paths} == {"ann.json", "ann.md", "ann.png"}
    payload = json.loads((out / "ann.json").read_text(encoding="utf-8"))
    (size,) = payload["sizes"]
    assert size["n"] == 600 and [r["M"] for r in size["hnsw"]] == list(ann.M_SWEEP)
    for r in size["hnsw"]:
        for row in r["sweep"]:
            for split in ("validation", "test"):
                assert 0.0 <= row[split]["recall_at_8"] <= 1.0 and row[split]["p50_ms"] > 0
        # efSearch 64 over 600 points explores nearly all of them: recall at least that of efSearch 8
        assert r["sweep"][1]["validation"]["recall_at_8"] >= r["sweep"][0]["validation"]["recall_at_8"]
    # the choice, recomputed from the sweep rows: the fastest validation p50 among the rows that reach the target
    # recall. At 600 points efSearch 64 reaches it, so a choice must have been made (never a skipped check)
    ok = sorted((row["validation"]["p50_ms"], r["M"], row["efSearch"]) for r in size["hnsw"] for row in r["sweep"]
                if row["validation"]["recall_at_8"] >= ann.TARGET_RECALL)
    assert ok, [row["validation"]["recall_at_8"] for r in size["hnsw"] for row in r["sweep"]]
    chosen = size["chosen"]
    assert chosen is not None and (chosen["M"], chosen["efSearch"]) == ok[0][1:]
    assert chosen["validation"]["recall_at_8"] >= ann.TARGET_RECALL
    assert payload["levels"][0]["met"] is None  # 1e6 not measured here
    md = (out / "ann.md").read_text(encoding="utf-8")
    assert "not measured" in md
    (out / "ann.md").unlink()
    ann.rerender(out)
    assert (out / "ann.md").read_text(encoding="utf-8") == md


def test_rerender_of_a_bad_file_names_it(small):
    (small / "ann.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ValueError, match="ann.json"):
        ann.rerender(small)


def test_cli_render_path(small):
    out = small / "out"
    ann.run(out, seed=1, points=[600], echo=lambda s: None)
    md = (out / "ann.md").read_text(encoding="utf-8")
    res = CliRunner().invoke(app, ["bench", "ann", "--render", "--no-progress", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "ann.md" in res.output and (out / "ann.md").read_text(encoding="utf-8") == md
    res = CliRunner().invoke(app, ["bench", "ann", "--render", "--no-progress", "--out", str(small / "none")])
    assert res.exit_code == 1 and "ann.json" in res.output and "Traceback" not in res.output
