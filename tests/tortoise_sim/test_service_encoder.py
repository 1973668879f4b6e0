"""The light numpy MiniLM (hooks and the resident service) against sentence-transformers' minilm-mean vectors."""

from __future__ import annotations

import numpy as np
import pytest

TEXTS = [
    "What did we decide about the simulator store?",
    "thanks!",
    "decision: use Kuzu for the graph store because it is embedded " * 40,  # past 256 word pieces: truncated
    "Ünïcödé, punctuation -- and 中文 characters; numbers 3.14 and ids 01a22d1bde74-50ae68d1b48c",
    "",
    "  leading and trailing whitespace\n\twith tabs  ",
]


@pytest.fixture(scope="module")
def encoders():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    from harness.embedding import get_encoder
    from tortoise_sim.light_encoder import LightMiniLM

    return get_encoder("minilm-mean"), LightMiniLM(batch_size=4)


def test_light_minilm_matches_sentence_transformers(encoders):
    st, light = encoders
    want = st.encode(TEXTS)
    got = light.encode(TEXTS)  # batched, padded to the longest text of each batch of 4
    assert got.shape == want.shape == (len(TEXTS), 384) and got.dtype == np.float32
    assert np.abs(got - want).max() <= 1e-6
    for i, t in enumerate(TEXTS):  # one text at a time (no padding) and the repeat cache give the same vectors
        one = light.encode([t])
        assert np.abs(one[0] - want[i]).max() <= 1e-6
        assert np.array_equal(light.encode([t]), one)
    assert light.encode([]).shape == (0, 384)
    with pytest.raises(TypeError):
        light.encode("a single string")


def test_contiguous_projection_layout_gives_the_same_bits():
    """``use_contiguous`` (the service's layout) against the transposed views (the default and previous engine):
    the same float32 vectors for texts of 1 to past 64 word pieces, one at a time and batched; lengths where the
    probe found the layouts differ keep the views."""
    from threadpoolctl import threadpool_limits

    from tortoise_sim.light_encoder import LightMiniLM

    words = "release train schema migration owner platform team cadence vector cache".split()
    texts = TEXTS + [" ".join(words[: 1 + k % len(words)] * (1 + k // 3)) for k in range(40)] + ["a", "ok"]
    with threadpool_limits(1, user_api="blas"):
        views, contiguous = LightMiniLM(batch_size=8), LightMiniLM(batch_size=8)
        ok = contiguous.use_contiguous()
        assert views.layout == "views" and contiguous.layout == ("contiguous" if ok else "views")
        assert ok <= set(range(1, 65))
        for t in texts:
            assert np.array_equal(views._encode([t]), contiguous._encode([t])), t
        assert np.array_equal(views._encode(texts), contiguous._encode(texts))
        assert len({len(e.ids) for e in contiguous.tok.encode_batch(texts)} & ok) > 10  # the fast path ran
