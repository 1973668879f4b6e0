"""memsim harness: claims ledger, offline LM and encoders, fault injection, CLI.

Importing this package sets ``LITELLM_LOCAL_MODEL_COST_MAP=True`` (before anything imports litellm, which dspy
does) and ``HF_HUB_OFFLINE=1`` (and quiets hub progress bars) so that nothing tries the network at run time.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# transformers 5 prints a "Loading weights" bar on every model load; hooks and CLIs must stay quiet.
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

__version__ = "0.1.0"
