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
