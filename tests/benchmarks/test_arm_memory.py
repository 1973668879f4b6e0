"""The LoCoMo worker memory measurement: this process's memory read from /proc, the models it holds, and one
quick conversation measured per arm and stage."""

from __future__ import annotations

import sys

import pytest

from benchmarks import arm_memory as M


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self")
def test_memory_is_read_from_proc():
    m = M.read_memory()
    assert {"rss", "anon", "file", "hwm", "pss"} <= set(m)
    assert m["hwm"] >= m["rss"] > 0 and m["anon"] + m["file"] <= m["rss"] + m.get("shmem", 0) + 4096


def test_models_loaded_finds_outer_modules_only():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Linear(32, 2))
    found = [m for m in M.models_loaded() if m["class"] == "Sequential"
             and m["param_bytes"] == sum(p.numel() * 4 for p in model.parameters())]
    assert found  # the Sequential is counted, its Linear layers are not separate models
    del model


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self")
def test_one_quick_conversation_is_measured_per_arm_and_stage(tmp_path, monkeypatch):
    from harness.workloads.locomo import find_locomo_path

    data = find_locomo_path()
    if data is None:
        pytest.skip("LoCoMo data not found (set MEMSIM_LOCOMO_DATA)")
    shared = tmp_path.parent / f"{tmp_path.name}-shared-store"
    monkeypatch.setenv("MEMSIM_EMBED_STORE", str(shared))
    got = M.measure("conv-26", data=data, arms="full,mean", quick=True, work_root=tmp_path)
    assert [(r["arm"], r["stage"]) for r in got["rows"]] == [(a, s) for a in ("full", "mean") for s in M.STAGES]
    assert all(r["rss"] > 0 and r["peak_rss"] >= r["rss"] - 4096 for r in got["rows"])
    assert got["arm_status"] == {"conv-26": {"full": "ok", "mean": "ok"}}
    md = M.render_markdown(got)
    assert md.startswith("# Memory of one LoCoMo worker (conv-26") and "| full | build |" in md
    assert list(tmp_path.iterdir()) == []  # the work folder and its fresh embedding store are removed
    assert not shared.exists()  # the user's shared store is neither read nor written
