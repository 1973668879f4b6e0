"""NP cached index: the cheap one-text query encode and the FAISS backend (issue 12 items 4 and 5).

* `embed_one` gives `embed_texts([text])[0]` within 1e-6 (short, long-truncated, empty and non-ASCII texts);
* the FAISS backend returns the torch backend's top-k (same keys, same order, scores within 1e-6) on synthetic
  banks with exact duplicate keys (ties) and near ties, and the faithful recompute's top-k on the shipped bank.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from agentfly_sim.embedding import (
    CachedKeyIndex,
    _faiss_flat_ip,
    embed_one,
    embed_texts,
    load_np_encoder,
    ranked_results,
)


@pytest.fixture(scope="module")
def enc():
    torch.set_num_threads(1)
    return load_np_encoder()


def test_one_text_encode_matches_the_batch_path(enc) -> None:
    tok, model = enc
    texts = ["What sport does Deportivo Cali play?", "", "Zürich — 東京 naïve café",
             " ".join(["long"] * 600), "a"]
    for t in texts:
        a = embed_one(t, tok, model)
        b = embed_texts([t], tok, model)[0]
        assert a.shape == b.shape and float((a - b).abs().max()) <= 1e-6, t
    with pytest.raises(ValueError):
        CachedKeyIndex(tok, model, query_encode="fast")


def _index_from(mat: np.ndarray, backend: str) -> tuple[CachedKeyIndex, list[tuple[str, str, int]]]:
    index = CachedKeyIndex(None, None, backend=backend)
    pairs = [(f"k{i}", "", i) for i in range(len(mat))]
    index.keys = [p[0] for p in pairs]
    index.matrix = torch.from_numpy(mat)
    index._faiss = _faiss_flat_ip(index.matrix) if backend == "faiss" else None
    return index, pairs


def _bank(seed: int, n: int = 3000, dim: int = 64) -> np.ndarray:
    rng = np.random.default_rng(seed)
    mat = rng.standard_normal((n, dim)).astype(np.float32)
    mat[n // 2:n // 2 + 200] = mat[:200]  # exact duplicate keys: exact score ties
    mat[n // 2 + 200:n // 2 + 400] = mat[200:400] + np.float32(1e-7) * rng.standard_normal((200, dim))  # near ties
    return mat / np.linalg.norm(mat, axis=1, keepdims=True)


@pytest.mark.parametrize("seed", [0, 1])
def test_faiss_backend_equals_torch_topk_with_ties(seed: int) -> None:
    mat = _bank(seed)
    fa, pairs = _index_from(mat, "faiss")
    to, _ = _index_from(mat, "torch")
    rng = np.random.default_rng(100 + seed)
    queries = [mat[i] for i in (0, 5, 250)] + [mat[10] + 0.05 * rng.standard_normal(mat.shape[1])
                                               for _ in range(3)] + list(rng.standard_normal((6, mat.shape[1])))
    for q in queries:
        qv = torch.from_numpy((q / np.linalg.norm(q)).astype(np.float32))
        for k in (1, 5, 8, 40):
            a, b = fa.search(qv, pairs, k), to.search(qv, pairs, k)
            assert [r["line_index"] for r in a] == [r["line_index"] for r in b], (k,)
            assert all(abs(x["score"] - y["score"]) <= 1e-6 for x, y in zip(a, b, strict=True))
    assert 0 < fa.exact_fallbacks < len(queries) * 4  # ties went to the full top-k, the rest did not


def test_faiss_backend_on_the_shipped_bank_equals_the_faithful_recompute(enc, data_dir) -> None:
    tok, model = enc
    rows = [json.loads(x) for x in (data_dir / "memory.jsonl").read_text(encoding="utf-8").splitlines() if x]
    pairs = [(r["case"], r["plan"], i) for i, r in enumerate(rows)]
    fa = CachedKeyIndex(tok, model, backend="faiss")
    # `retrieve` embeds every key and then the query on each call; its key vectors are the same for every query,
    # so they are computed once here exactly as it does (embed_texts over all keys, batches of 64)
    keys = embed_texts([p[0] for p in pairs], tok, model)
    for task in (rows[3]["case"], "Which country is the football club Deportivo Cali based in?"):
        got = fa.retrieve(task, pairs, device_str="cpu", top_k=8)
        ref = ranked_results(pairs, keys @ embed_texts([task], tok, model)[0], 8)
        assert [r["line_index"] for r in got] == [r["line_index"] for r in ref]
        assert all(abs(x["score"] - y["score"]) <= 1e-6 for x, y in zip(got, ref, strict=True))
