"""NP cached mode through the driver, token counters, config from env, test doubles, out-of-scope servers."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from agentfly_sim.agents import ScriptedExecutor, ScriptedJudge, ScriptedPlanner
from agentfly_sim.driver import DriverConfig, NPDriver
from agentfly_sim.errors import NotModelled
from agentfly_sim.history import HeuristicTokenCounter, WordPieceTokenCounter
from agentfly_sim.testing import HashingEncoder
from agentfly_sim.workspace import connect_server


def _np_run(tmp_path, cached: bool):
    root = tmp_path / ("cached" if cached else "faithful")
    for d in ("client", "memory", "data", "result"):
        (root / d).mkdir(parents=True)
    qs = [{"question": f"Which river flows through city {i}?", "ground_truth": "x"} for i in range(4)]
    (root / "data/deepresearcher.jsonl").write_text("".join(json.dumps(q) + "\n" for q in qs))
    bank = [{"question": f"What is the {t} of place {i}?", "plan": "", "reward": i % 2}
            for i, t in enumerate(["river", "capital", "mayor", "river", "author", "river", "sport", "founder", "x"])]
    (root / "memory/dummy_memo.jsonl").write_text("".join(json.dumps(b) + "\n" for b in bank))
    d = NPDriver(root / "client", ScriptedPlanner(seed=2), ScriptedExecutor(), ScriptedJudge(), out=io.StringIO(),
                 config=DriverConfig(np_cached_index=cached))
    d.run()
    recs = [json.loads(x) for x in (root / "result/result_round_0.jsonl").read_text().splitlines()]
    return [r["meta_trace"][0]["input"] for r in recs]


def test_np_cached_index_driver_identical_prompts(tmp_path):
    assert _np_run(tmp_path, False) == _np_run(tmp_path, True)


def test_token_counters():
    assert HeuristicTokenCounter().count("a" * 9) == 3
    wp = WordPieceTokenCounter()
    assert wp.count("hello world") == 2


def test_config_from_env():
    cfg = DriverConfig.from_env({"MEMORY_JSONL_PATH": "memo.jsonl", "MEMORY_TOP_K": "4", "MEMORY_DEVICE": "cpu",
                                 "MEMORY_MAX_POS_EXAMPLES": "2", "RETRIEVER_MODEL_PATH": "x.pt"})
    assert (cfg.memory_jsonl_path, cfg.memory_top_k, cfg.memory_device, cfg.max_pos_examples, cfg.max_neg_examples,
            cfg.retriever_model_path) == ("memo.jsonl", 4, "cpu", 2, None, "x.pt")


def test_hashing_encoder_normalised():
    enc = HashingEncoder(64)
    v = enc.encode(["the cat sat", "", "the cat"])
    assert v.shape == (3, 64) and v.dtype == np.float32
    assert np.isclose(np.linalg.norm(v[0]), 1.0) and np.linalg.norm(v[1]) == 0.0
    assert v[0] @ v[2] > 0.5 and enc.texts_embedded == 3


def test_out_of_scope_servers():
    assert set(connect_server("code_agent")) == {"write_workspace_file", "read_workspace_file",
                                                 "execute_terminal_command"}
    with pytest.raises(NotModelled):
        connect_server("serp_search")
    with pytest.raises(KeyError):
        connect_server("nope")


def test_tiktoken_counter_refuses_without_local_file(tmp_path, monkeypatch):
    from agentfly_sim.history import TiktokenCounter

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    with pytest.raises(RuntimeError, match="not cached locally"):
        TiktokenCounter()
    (tmp_path / "junk").write_text("x")  # a cache dir without the cl100k file: still no network
    with pytest.raises(RuntimeError, match="offline runs cannot fetch"):
        TiktokenCounter()
