from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

DATA = Path(os.environ.get("MEMSIM_AGENTFLY_DATA", Path(__file__).resolve().parents[3] / "shared/data/agentfly"))


@pytest.fixture(autouse=True)
def _one_thread():
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not (DATA / "memory.jsonl").is_file():
        pytest.skip(f"AgentFly corpora absent at {DATA}")
    return DATA


@pytest.fixture(scope="session")
def untrained_ckpt(tmp_path_factory) -> Path:
    """A seeded untrained MiniLM classifier checkpoint, shared by the session (about 92 MB)."""
    import torch

    torch.set_num_threads(1)
    from agentfly_sim.classifier import make_untrained_checkpoint

    p = tmp_path_factory.mktemp("ckpt") / "best.pt"
    make_untrained_checkpoint(p, seed=0)
    return p
