"""Comparing recomputed results with committed ones: the same structure, equal strings, integers and booleans, and
floats equal to 12 significant digits. The statistics' bootstrap sums are matrix products, whose last bits depend on
how the BLAS library splits them over threads (a run with one thread and one with two differ in the 16th digit);
no number a page or a claim shows is affected."""

from __future__ import annotations

import math
from typing import Any

REL = 1e-12


def differences(got: Any, want: Any, path: str = "", rel: float = REL) -> list[str]:
    """Every place where ``got`` and ``want`` (JSON-like values) differ, as ``path: got != want``."""
    if isinstance(want, dict) and isinstance(got, dict):
        if set(got) != set(want):
            return [f"{path}: keys {sorted(set(got) ^ set(want), key=str)} differ"]
        return [d for k in want for d in differences(got[k], want[k], f"{path}/{k}", rel)]
    if isinstance(want, list) and isinstance(got, list):
        if len(got) != len(want):
            return [f"{path}: {len(got)} items != {len(want)}"]
        return [d for i, (g, w) in enumerate(zip(got, want, strict=True)) for d in differences(g, w, f"{path}[{i}]", rel)]
    if isinstance(want, float) and isinstance(got, float | int) and not isinstance(got, bool):
        if math.isnan(want) and math.isnan(got) or math.isclose(got, want, rel_tol=rel, abs_tol=rel):
            return []
    elif type(got) is type(want) and got == want:
        return []
    elif isinstance(want, int) and isinstance(got, float) and not isinstance(want, bool) and got == want:
        return []
    return [f"{path}: {got!r} != {want!r}"]


def assert_same_numbers(got: Any, want: Any, rel: float = REL) -> None:
    diffs = differences(got, want, rel=rel)
    assert not diffs, f"{len(diffs)} difference(s), first: " + "; ".join(diffs[:5])
