"""``benchmarks.design_profile``: one question's time per arm, stage and phase, the encoder calls counted, the
seams put back afterwards, and the store run reading what the first run encoded."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from benchmarks import design_profile as prof
from benchmarks.worlds import longmemeval as gen

torch.set_num_threads(1)


def test_profile_attributes_time_and_counts_encoder_calls(tmp_path: Path, monkeypatch) -> None:
    import harness.embedding as emb

    data = tmp_path / "lme.json"
    gen.write_file(data, 2, seed=2, sessions=8)
    before = emb.MeanPoolingEncoder.encode
    monkeypatch.setenv("MEMSIM_EMBED_STORE", str(tmp_path / "store"))
    cold = prof.profile(data, questions=1, arms="bm25,mean,hybrid", embed="store")
    warm = prof.profile(data, questions=1, arms="bm25,mean,hybrid", embed="store")
    assert emb.MeanPoolingEncoder.encode is before  # every seam is put back
    n_turns = cold["questions"][0]["n_turns"]
    mean = cold["arms"]["mean"]
    # each turn line and the question encoded once, alone; the hybrid arm reads them all from the store
    assert mean["counts"]["encode minilm-mean"] == {"calls": n_turns + 1, "texts": n_turns + 1}
    assert "encode minilm-mean" not in cold["arms"]["hybrid"]["counts"]
    assert mean["phases"]["encode"] > 0 and set(mean["stages"]) >= {"build", "ingest", "deliver"}
    assert all(ph in prof.PHASES for a in cold["arms"].values() for ph in a["phases"])
    assert abs(sum(a["total_s"] for a in cold["arms"].values()) - cold["accounted_s"]) < 1e-6
    assert "encode minilm-mean" not in warm["arms"]["mean"]["counts"]  # a second run encodes nothing
    assert warm["arms"]["mean"]["counts"]["store reads"]["texts"] == n_turns + 1
    md = prof.render_markdown(cold)
    assert "## Per arm" in md and "| mean |" in md
    paths = prof.main(["--data", str(data), "--arms", "bm25", "--out", str(tmp_path / "o")])
    assert json.loads(paths[0].read_text())["arms_selected"] == ["bm25"]
