"""Shared test setup: offline environment, one torch thread (2-core CI machines run tests beside other work)."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pathlib import Path

import pytest

import harness  # noqa: F401,E402

try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover
    pass

SHARED_AGENTFLY = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "agentfly"


@pytest.fixture
def agentfly_data() -> Path:
    """The real AgentFly corpora; the test skips cleanly when they are absent."""
    from harness.ledger import find_data_dir

    found = find_data_dir()
    if found is None:
        pytest.skip("AgentFly corpora not found (../shared/data/agentfly or $MEMSIM_AGENTFLY_DATA)")
    return found
