"""``Observation.from_test`` and ``Tested``: how a claim that states a difference is decided by its tests (Holm
over the claim's own comparisons; holds / refuted / inconclusive)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.claims import Observation, Tested


def _t(name: str, estimate: float, p: float, direction: str = ">") -> Tested:
    return Tested(name, "given", estimate, p, direction, 30, se=0.05)  # type: ignore[arg-type]


def test_direction_and_significance_decide() -> None:
    assert Observation.from_test(_t("a", 0.2, 0.001)).verdict == "holds"
    assert Observation.from_test(_t("a", -0.2, 0.001)).verdict == "refuted"
    assert Observation.from_test(_t("a", -0.2, 0.001, "<")).verdict == "holds"
    obs = Observation.from_test(_t("a", 0.2, 0.2))
    assert obs.verdict == "inconclusive" and obs.measured["inconclusive_tests"] == ["a"]
    assert Observation.from_test(_t("a", 0.0, 0.0001)).verdict == "inconclusive"  # no sign, no direction


def test_holm_runs_over_the_claims_own_comparisons() -> None:
    # each alone is significant; together Holm multiplies the smaller by 2 (0.06): both inconclusive
    alone = [Observation.from_test(_t(n, 0.1, p)).verdict for n, p in (("k4", 0.03), ("k8", 0.04))]
    assert alone == ["holds", "holds"]
    both = Observation.from_test([_t("k4", 0.1, 0.03), _t("k8", 0.1, 0.04)])
    assert both.verdict == "inconclusive"
    assert [t["p_holm"] for t in both.measured["tests"]] == pytest.approx([0.06, 0.06])
    assert both.measured["test_family"]["correction"] == "Holm over 2 comparison(s)"
    # one refuted comparison refutes the claim even when another is only inconclusive
    assert Observation.from_test([_t("x", -0.3, 0.0001), _t("y", 0.1, 0.5)]).verdict == "refuted"
    # the detectable difference uses the strictest Holm level: wider with more comparisons
    one = Observation.from_test(_t("a", 0.2, 0.001)).measured["tests"][0]["detectable"]
    two = both.measured["tests"][0]["detectable"]
    assert one == pytest.approx((1.959964 + 0.841621) * 0.05, rel=1e-5) and two > one


def test_checks_are_part_of_the_verdict() -> None:
    obs = Observation.from_test(_t("a", 0.2, 0.001), checks={"stores_everything": False, "x": True})
    assert obs.verdict == "refuted" and obs.measured["failed_checks"] == ["stores_everything"]
    assert obs.measured["checks"] == {"stores_everything": False, "x": True}
    assert Observation.from_test(_t("a", 0.2, 0.001), checks={"x": True}).verdict == "holds"
    with pytest.raises(ValueError, match="repeated"):
        Observation.from_test([_t("a", 1, 0.1), _t("a", 1, 0.1)])
    with pytest.raises(ValueError, match="no test"):
        Observation.from_test([])


def test_paired_two_sample_and_one_sample_build_from_probe_values() -> None:
    rng = np.random.default_rng(3)
    a = rng.random(60)
    b = np.clip(a - 0.15 + rng.normal(0, 0.05, 60), 0, 1)
    t = Tested.paired("a > b", a, b, ">")
    assert t.n == 60 and t.p < 0.001 and t.lo < t.estimate < t.hi and t.detail["wins"] > 50
    assert Observation.from_test(t).verdict == "holds"
    assert Observation.from_test(Tested.paired("b > a", b, a, ">")).verdict == "refuted"
    # NaN (a probe one row has no value for) is left out of the pairs
    a2 = a.copy()
    a2[:10] = np.nan
    assert Tested.paired("x", a2, b, ">").n == 50
    # five probes all in the stated direction cannot reach 0.05 (smallest two-sided p: 2 / 2^5)
    five = Tested.paired("x", np.ones(5), np.zeros(5), ">")
    assert five.p == pytest.approx(2 / 32, abs=0.01) and Observation.from_test(five).verdict == "inconclusive"
    six = Tested.paired("x", np.ones(6), np.zeros(6), ">")
    assert six.p < 0.05 and Observation.from_test(six).verdict == "holds"

    x = rng.integers(0, 2, 80).astype(float) * (rng.random(80) < 0.3)
    y = (rng.random(80) < 0.9).astype(float)
    two = Tested.two_sample("x < y", x, y, "<")
    assert two.n == [80, 80] and two.estimate < 0 and two.p < 0.001
    assert Observation.from_test(two).verdict == "holds"

    share = Tested.one_sample("empty >= 0.9", np.ones(40), 0.9, ">", "binary")
    assert share.test == "exact binomial" and share.estimate == pytest.approx(0.1) and share.p < 0.05
    assert Observation.from_test(share).verdict == "holds"
    recall = Tested.one_sample("recall < 0.2", np.r_[np.zeros(25), 0.5 * np.ones(5)], 0.2, "<")
    assert recall.estimate == pytest.approx(1 / 12 - 0.2) and Observation.from_test(recall).verdict == "holds"
    above = Tested.one_sample("recall < 0.2", np.r_[np.ones(25), np.zeros(5)], 0.2, "<")
    assert Observation.from_test(above).verdict == "refuted"
