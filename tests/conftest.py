"""Shared test setup: offline environment, one torch thread (2-core CI machines run tests beside other work)."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import harness  # noqa: F401,E402

try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover
    pass
