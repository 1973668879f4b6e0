"""Synthetic task worlds for the benchmarks (``benchmarks/``).

``cbr``: the case-based-reasoning world (task families, paraphrases, canonical plans, a labelled case bank,
query sets, graded relevance) used by ``memsim bench selectors | cbr-loop | cost``.
"""

from __future__ import annotations

from benchmarks.worlds.cbr import CaseBank, CBRWorld, QuerySet
from benchmarks.worlds.families import FAMILIES, Family

__all__ = ["FAMILIES", "CBRWorld", "CaseBank", "Family", "QuerySet"]
