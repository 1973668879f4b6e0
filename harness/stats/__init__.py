"""Uncertainty for memsim's comparisons: intervals on per-row means, paired tests between rows, unpaired tests.

The unit is the probe (a question with annotated evidence); a row's number is its mean over a probe set. Modules:
:mod:`harness.stats.intervals` (Wilson, Clopper-Pearson, the shared bootstrap), :mod:`harness.stats.paired`
(paired bootstrap, randomization test, Holm, per-cluster agreement, detectable difference) and
:mod:`harness.stats.unpaired` (two-sample, one-sample against a threshold, Hodges-Lehmann for latency cells).
docs/comparisons.md says what each is for and how to read it.
"""

from __future__ import annotations

from harness.stats.intervals import (
    CONFIDENCE,
    RESAMPLES,
    Interval,
    Resampler,
    bootstrap_intervals,
    clopper_pearson,
    format_interval,
    proportion_interval,
    row_intervals,
    t_bounds,
    wilson,
)
from harness.stats.paired import (
    ALPHA,
    DIFFERENCE_METHOD,
    PairResult,
    cluster_differences,
    compare,
    detectable_difference,
    difference_intervals,
    holm,
    permutations_for,
    sign_flip_pvalues,
)
from harness.stats.unpaired import (
    TestResult,
    hodges_lehmann,
    median_interval,
    one_sample,
    two_sample,
    within_level,
)

__all__ = [
    "ALPHA", "CONFIDENCE", "DIFFERENCE_METHOD", "RESAMPLES", "Interval", "PairResult", "Resampler", "TestResult",
    "bootstrap_intervals", "clopper_pearson", "cluster_differences", "compare", "detectable_difference",
    "difference_intervals", "format_interval", "hodges_lehmann", "holm", "median_interval", "one_sample",
    "permutations_for", "proportion_interval", "row_intervals", "sign_flip_pvalues", "t_bounds", "two_sample",
    "wilson", "within_level",
]
