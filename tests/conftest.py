"""Shared test setup: offline environment, one torch thread (2-core CI machines run tests beside other work)."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import harness  # noqa: F401,E402

# Development copies of the data sets, in a folder beside the checkout when there is one: tests read them through
# the same environment variables a user sets (the library itself only knows those and the fetched cache). Tests
# that need them skip cleanly when they are absent.
_SIBLING_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
for _env, _sub in (("MEMSIM_LOCOMO_DATA", "locomo"), ("MEMSIM_AGENTFLY_DATA", "agentfly")):
    if not os.environ.get(_env) and (_SIBLING_DATA / _sub).is_dir():
        os.environ[_env] = str(_SIBLING_DATA / _sub)

# The embedding store is state meant to outlive runs (a user cache folder): tests never touch the user's; each test
# process gets a fresh one, removed when the process ends.
if not os.environ.get("MEMSIM_EMBED_STORE"):
    import atexit
    import shutil
    import tempfile

    _STORE_DIR = tempfile.mkdtemp(prefix="memsim-test-embed-store-")
    os.environ["MEMSIM_EMBED_STORE"] = _STORE_DIR
    atexit.register(shutil.rmtree, _STORE_DIR, True)

try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover
    pass
