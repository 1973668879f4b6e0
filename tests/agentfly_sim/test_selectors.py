"""NP embedding selector (spec §3) and PM classifier selector (spec §4)."""

from __future__ import annotations

import json

import pytest
import torch

from agentfly_sim.bank import JsonlLineError, extract_pairs, load_jsonl, load_pool
from agentfly_sim.classifier import CachedCaseScorer, CaseRetriever, MemoryRetrieverClassifier, load_backbone
from agentfly_sim.embedding import CachedKeyIndex, NpSelector, load_np_encoder, retrieve
from agentfly_sim.errors import DriverStartupError


def _synthetic_pairs(n=40):
    topics = ["capital", "author", "director", "birth date", "sport", "river", "founder", "language"]
    return [(f"What is the {topics[i % 8]} of entity number {i}?", f"plan {i}", i) for i in range(n)]


def _same_ranking(a, b, tol=1e-6):
    """Same cases in the same order: rank numbers, scores (within ``tol``) and case ids (``line_index``) must
    agree position by position. Two ids may trade places only inside a run of near-tied scores (the faithful
    order among near-ties is not defined), so each tie run must hold the same set of ids in both rankings."""
    assert [r["rank"] for r in a] == [r["rank"] for r in b]
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert abs(x["score"] - y["score"]) <= tol
    start = 0
    for end in range(1, len(a) + 1):
        if end == len(a) or abs(a[end]["score"] - a[end - 1]["score"]) > tol:
            ids_a = [r["line_index"] for r in a[start:end]]
            ids_b = [r["line_index"] for r in b[start:end]]
            if end - start == 1:
                assert ids_a == ids_b, f"rank {start + 1}: case {ids_a[0]} vs {ids_b[0]}"
            else:
                assert sorted(ids_a) == sorted(ids_b), f"tie run at ranks {start + 1}..{end}: {ids_a} vs {ids_b}"
            start = end


def test_same_ranking_helper_fails_on_swapped_ids():
    ranking = [{"rank": i + 1, "score": 0.9 - 0.1 * i, "line_index": 10 + i, "question": f"q{i}"} for i in range(4)]
    _same_ranking(ranking, [dict(r) for r in ranking])
    swapped = [dict(r) for r in ranking]
    swapped[1]["line_index"], swapped[2]["line_index"] = swapped[2]["line_index"], swapped[1]["line_index"]
    with pytest.raises(AssertionError):
        _same_ranking(ranking, swapped)
    other = [dict(r) for r in ranking]
    other[3]["line_index"] = 99  # a different case at the last rank
    with pytest.raises(AssertionError):
        _same_ranking(ranking, other)
    tied = [dict(r, score=0.5) for r in ranking]  # inside a tie run the order is free, the id set is not
    tied_swapped = [dict(r) for r in tied]
    tied_swapped[0]["line_index"], tied_swapped[1]["line_index"] = 11, 10
    _same_ranking(tied, tied_swapped)


def test_cached_index_identical_topk_synthetic():
    tok, model = load_np_encoder()
    pairs = _synthetic_pairs()
    idx = CachedKeyIndex(tok, model)
    for q in ("Who founded entity 3?", "capital city of entity 17", "which river"):
        _same_ranking(retrieve(q, pairs, tok, model, "cpu", 8), idx.retrieve(q, pairs, "cpu", 8))


def test_cached_index_identical_topk_shipped(data_dir):
    tok, model = load_np_encoder()
    items = load_jsonl(data_dir / "dummy_memo.jsonl")
    pairs = extract_pairs(items)
    idx = CachedKeyIndex(tok, model)
    rows = [json.loads(x) for x in (data_dir / "deepresearcher.jsonl").read_text().splitlines()[:5]]
    for r in rows:
        _same_ranking(retrieve(r["question"], pairs, tok, model, "cpu", 8), idx.retrieve(r["question"], pairs, "cpu", 8))


def test_faithful_counts_and_plans_ignored():
    tok, model = load_np_encoder()
    pairs = _synthetic_pairs(9)
    before = model.memsim_texts_embedded
    a = retrieve("What is the capital?", pairs, tok, model, "cpu", 8)
    assert model.memsim_texts_embedded - before == 10
    edited = [(q, "totally different plan", i) for q, _, i in pairs]
    b = retrieve("What is the capital?", edited, tok, model, "cpu", 8)
    assert [r["score"] for r in a] == [r["score"] for r in b]
    assert len(a) == 8 and a[0]["rank"] == 1 and set(a[0]) == {"rank", "score", "question", "plan", "line_index"}
    assert retrieve("q", pairs, tok, model, "cpu", 0) == []
    with pytest.raises(RuntimeError):
        retrieve("q", pairs, tok, model, "cpu", -1)
    idx = CachedKeyIndex(tok, model)
    idx.rebuild(pairs)
    before = model.memsim_texts_embedded
    idx.retrieve("What is the capital?", pairs, "cpu", 8)
    assert model.memsim_texts_embedded - before == 1


def test_pooler_output_is_used():
    tok, model = load_np_encoder()
    from agentfly_sim.embedding import embed_texts

    v = embed_texts(["hello world"], tok, model)
    enc = tok(["hello world"], return_tensors="pt")
    with torch.no_grad():
        pooled = model(**enc).pooler_output
    assert torch.allclose(v, torch.nn.functional.normalize(pooled, dim=1), atol=1e-6)


def test_device_binding():
    with pytest.raises(DriverStartupError):
        NpSelector("cuda", cuda_available=False)
    sel = NpSelector("cuda", cuda_available=True)
    with pytest.raises(RuntimeError, match="same device"):
        sel.retrieve("q", _synthetic_pairs(3), "cpu", 2)
    assert len(sel.retrieve("q", _synthetic_pairs(3), "auto", 2)) == 2
    auto = NpSelector("auto", cuda_available=True)  # the default never mismatches
    assert len(auto.retrieve("q", _synthetic_pairs(3), "cpu", 2)) == 2


def test_classifier_architecture():
    _, bb = load_backbone()
    m = MemoryRetrieverClassifier(bb)
    keys = list(m.state_dict())
    assert {k.split(".")[0] for k in keys} == {"sentence_bert", "classifier"}
    assert {k for k in keys if k.startswith("classifier")} == {"classifier.0.weight", "classifier.0.bias",
                                                              "classifier.3.weight", "classifier.3.bias"}
    assert m.classifier[0].in_features == 768 and m.classifier[3].out_features == 2
    assert isinstance(m.classifier[2], torch.nn.Dropout) and m.classifier[2].p == 0.2


def _pool_file(tmp_path, n=12):
    p = tmp_path / "pool.jsonl"
    rows = [{"case": f"Who wrote book {i}?", "plan": json.dumps({"plan": [{"id": 1, "description": f"search {i}"}]}),
             "case_label": "positive" if i % 3 else "negative"} for i in range(n)]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def test_case_retriever_and_cached_scorer(tmp_path, untrained_ckpt):
    pool, meta = load_pool(_pool_file(tmp_path))
    r = CaseRetriever(untrained_ckpt, device="cpu")
    res = r.retrieve("Who wrote the novel?", pool, meta)
    assert [x["index"] for x in res] == list(range(12))
    assert all(0.0 <= x["score"] <= 1.0 for x in res)
    cached = CachedCaseScorer(r)
    for q in ("Who wrote the novel?", "capital of France"):
        a = r.score(q, pool)
        b = cached.score(q, pool)
        assert max(abs(x - y) for x, y in zip(a, b, strict=True)) < 1e-5
    assert cached.cases_encoded == 12  # case vectors computed once for the checkpoint
    chunked = CaseRetriever(untrained_ckpt, device="cpu", score_chunk_size=5)
    c = chunked.score("Who wrote the novel?", pool)
    assert max(abs(x - y) for x, y in zip(r.score("Who wrote the novel?", pool), c, strict=True)) < 1e-5


def test_case_retriever_strict_load(tmp_path, untrained_ckpt):
    state = torch.load(untrained_ckpt)
    state.pop("classifier.3.bias")
    bad = tmp_path / "bad.pt"
    torch.save(state, bad)
    with pytest.raises(RuntimeError):
        CaseRetriever(bad, device="cpu")
    with pytest.raises(FileNotFoundError):
        CaseRetriever(tmp_path / "missing.pt", device="cpu")


def test_load_pool_errors(tmp_path):
    p = tmp_path / "p.jsonl"
    p.write_text('{"case":"a"}\n\n{bad\n')
    with pytest.raises(JsonlLineError) as e:
        load_pool(p)
    assert e.value.lineno == 3
    p.write_text('{"plan":"x"}\n')
    with pytest.raises(ValueError, match="must contain 'case' field"):
        load_pool(p)
    p.write_text("\n\n")
    with pytest.raises(ValueError, match="Pool is empty"):
        load_pool(p)
    p.write_text('{"case":"a","plan":{"plan":[]}}\n{"case":"b"}\n')
    texts, meta = load_pool(p)
    assert meta == [{"case": "a", "plan": {"plan": []}, "case_label": "unknown"},
                    {"case": "b", "plan": None, "case_label": "unknown"}]


def test_topk_select_utility(tmp_path, untrained_ckpt):
    from agentfly_sim.classifier import topk_select

    pool, meta = load_pool(_pool_file(tmp_path, 7))
    r = CaseRetriever(untrained_ckpt, device="cpu")
    out = topk_select(r.model, r.tokenizer, "cpu", "Who wrote the novel?", pool, k=3)
    assert len(out) == 3 and [p for _, p, _ in out] == sorted((p for _, p, _ in out), reverse=True)
    full = {x["index"]: x["score"] for x in r.retrieve("Who wrote the novel?", pool, meta)}
    assert all(abs(full[i] - p) < 1e-5 and pool[i] == t for t, p, i in out)
