"""One encoder cache per run (``harness.workloads.runner.shared_encoders``): two arms with the same encoder, the
mean-pooling baseline and the hybrid baseline, pay for each text once; without the cache each pays for its own."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import torch

from harness import embedding
from harness.workloads.runner import SharedEncoder, run_conversation, shared_encoders
from tests.harness.locomo_arms_fixture import tiny_conversation

torch.set_num_threads(1)


class _Counting:
    """The real ``minilm-mean`` encoder, counting every text it is asked to encode."""

    def __init__(self, base: Any) -> None:
        self.base = base
        self.dim = base.dim
        self.seen: Counter[str] = Counter()

    def encode(self, texts: Any) -> np.ndarray:
        self.seen.update(texts)
        return self.base.encode(texts)


def _run(tmp: Path, share: bool) -> tuple[Counter[str], dict[str, Any]]:
    real = embedding.get_encoder("minilm-mean")
    real = real.base if isinstance(real, SharedEncoder) else real
    counting = _Counting(real)
    saved = embedding._CACHE.get("minilm-mean")
    embedding._CACHE["minilm-mean"] = counting
    try:
        if share:
            with shared_encoders(("minilm-mean",)):
                res = run_conversation(tiny_conversation(), ["mean", "hybrid"], tmp, k_values=(1, 2))
        else:
            res = run_conversation(tiny_conversation(), ["mean", "hybrid"], tmp, k_values=(1, 2))
    finally:
        if saved is None:
            embedding._CACHE.pop("minilm-mean", None)
        else:
            embedding._CACHE["minilm-mean"] = saved
    return counting.seen, res


def test_two_arms_with_one_encoder_encode_each_text_once(tmp_path: Path) -> None:
    shared, res_shared = _run(tmp_path / "shared", True)
    plain, res_plain = _run(tmp_path / "plain", False)
    conv = tiny_conversation()
    assert all(res_shared["arms"][a]["status"] == "ok" for a in ("mean", "hybrid"))
    # every probe's question and every turn line was encoded, each exactly once for the two arms together
    assert {p.question for p in conv.probes} <= set(shared)
    assert len(shared) >= len(conv.turns()) + len(conv.probes)
    assert set(shared.values()) == {1}
    # without the cache the hybrid arm pays again for the same texts: each is encoded twice
    assert set(plain) == set(shared) and set(plain.values()) == {2}
    # and the arms deliver the same rows either way
    keep = ("row", "probe", "evidence_hits", "ranked", "tokens", "text_sha1")
    assert ([{k: r[k] for k in keep} for r in res_shared["records"]]
            == [{k: r[k] for k in keep} for r in res_plain["records"]])
