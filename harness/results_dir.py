"""Where commands that write results put them by default.

``memsim crash``, ``memsim fuzz`` and every ``memsim bench ...`` command write to one run folder unless
``--out`` names another: ``$MEMSIM_RESULTS_DIR/<command>/`` when that environment variable is set, else
``./memsim-results/<command>/`` under the working directory. The committed results under
``benchmarks/results/`` are rewritten only by a run that names that folder with ``--out``.
"""

from __future__ import annotations

import os
from pathlib import Path

RESULTS_ENV = "MEMSIM_RESULTS_DIR"
"""Environment variable naming the parent folder of every command's default run folder."""

DEFAULT_PARENT = "memsim-results"
"""Parent of the run folders (under the working directory) when ``$MEMSIM_RESULTS_DIR`` is not set."""


def default_out(command: str) -> Path:
    """The default output folder of ``command`` (``crash``, ``fuzz``, ``bench``): ``$MEMSIM_RESULTS_DIR/<command>``
    if that variable is set and not empty, else ``./memsim-results/<command>`` under the working directory."""
    parent = os.environ.get(RESULTS_ENV, "").strip()
    return (Path(parent).expanduser() if parent else Path.cwd() / DEFAULT_PARENT) / command
