from __future__ import annotations

import numpy as np
import pytest

from harness.embedding import ENCODER_NAMES, Encoder, cosine, get_encoder, minilm_model_path


@pytest.mark.parametrize("name", ENCODER_NAMES)
def test_known_properties(name: str) -> None:
    enc = get_encoder(name)
    assert isinstance(enc, Encoder)
    v = enc.encode(["A man is eating food.", "A man is eating a piece of bread.", "The stock market fell today."])
    assert v.dtype == np.float32 and v.shape == (3, 384) and enc.dim == 384
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    related, unrelated = cosine(v[0], v[1]), cosine(v[0], v[2])
    assert related > 0.7 > unrelated


def test_cached_per_process_and_empty_input() -> None:
    assert get_encoder("minilm-mean") is get_encoder("minilm-mean")
    assert get_encoder("minilm-mean").encode([]).shape == (0, 384)


def test_mean_and_pooler_differ_on_same_weights() -> None:
    text = ["Which file did the agent change?"]
    a, b = get_encoder("minilm-mean").encode(text), get_encoder("minilm-pooler").encode(text)
    assert not np.allclose(a, b, atol=1e-3)


def test_errors_are_clear() -> None:
    assert (minilm_model_path() / "config.json").exists()
    with pytest.raises(ValueError, match="unknown encoder"):
        get_encoder("bge-large")
    with pytest.raises(TypeError, match="sequence of strings"):
        get_encoder("minilm-mean").encode("one string")
