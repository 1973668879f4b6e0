"""Claims ledger core: ``Claim``, ``Observation``, ``Tested``, ``ClaimContext``, the ``@claim`` decorator and the
registry.

A claim is one demonstrable statement from a report (or found beyond it). Its ``demonstrate(ctx)`` builds a fresh
scenario under ``ctx.tmp_path``, drives a simulator through its public API and returns an ``Observation`` whose
verdict compares what was observed with what the statement predicts.

A claim that states a difference (one row above another on the same probes, one group of probes above another, a
mean beyond a stated threshold) is decided by a test, not by comparing means: each comparison is a ``Tested``
(built by ``Tested.paired``, ``Tested.two_sample`` or ``Tested.one_sample`` from per-probe values) and
``Observation.from_test`` turns them into the verdict: ``holds`` when every comparison is significant (Holm over
the claim's own comparisons, two-sided, adjusted p < 0.05) in the stated direction, ``refuted`` when one is
significant in the opposite direction, ``inconclusive`` otherwise (absence of evidence is not refutation).

Claims live in the modules of this package, one function per claim; module names start with the design name
(``fractal.py``, ``agentfly.py``, ``tortoise_capture.py``, ``tortoise_ep.py``, ``harness_self.py`` ...). The registry
imports every module of the package on first use.
"""

from __future__ import annotations

import functools
import importlib
import math
import pkgutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

Verdict = Literal["holds", "refuted", "inconclusive", "error", "skipped"]
Kind = Literal["mechanism", "consequence"]
Direction = Literal[">", "<"]
DESIGNS = ("harness", "fractal", "agentfly", "tortoise", "cross")
ALPHA = 0.05
"""The family-wise level of a claim's tests (Holm over the claim's own comparisons)."""
POWER = 0.80
"""The power at which a claim reports the smallest difference its test detects."""


class Observation(BaseModel):
    """What a demonstration saw: a verdict, measured numbers/structures, and a short readable excerpt."""

    verdict: Verdict
    measured: dict[str, Any] = Field(default_factory=dict)
    evidence: str = ""
    note: str = ""

    @classmethod
    def holds(cls, measured: Mapping[str, Any] | None = None, evidence: str = "", note: str = "") -> Observation:
        return cls(verdict="holds", measured=dict(measured or {}), evidence=evidence, note=note)

    @classmethod
    def refuted(cls, measured: Mapping[str, Any] | None = None, evidence: str = "", note: str = "") -> Observation:
        return cls(verdict="refuted", measured=dict(measured or {}), evidence=evidence, note=note)

    @classmethod
    def inconclusive(cls, measured: Mapping[str, Any] | None = None, evidence: str = "",
                     note: str = "") -> Observation:
        return cls(verdict="inconclusive", measured=dict(measured or {}), evidence=evidence, note=note)

    @classmethod
    def skipped(cls, reason: str, measured: Mapping[str, Any] | None = None) -> Observation:
        return cls(verdict="skipped", measured=dict(measured or {}), note=reason, evidence=reason)

    @classmethod
    def compare(cls, expected: Mapping[str, Any], observed: Mapping[str, Any], *, evidence: str = "",
                measured: Mapping[str, Any] | None = None, tol: float | None = None,
                note: str = "") -> Observation:
        """Holds iff every expected key equals the observed value (floats within ``tol``).

        ``measured`` gets the observed values (plus anything passed in ``measured``) and the prediction under
        ``measured["expected"]`` (the ledger shows them side by side); mismatches are listed as
        ``{key: {"expected": ..., "observed": ...}}`` under ``measured["mismatches"]``.
        """
        mismatches: dict[str, Any] = {}
        for key, want in expected.items():
            got = observed.get(key, _MISSING)
            if got is _MISSING or not values_match(want, got, tol):
                mismatches[key] = {"expected": want, "observed": None if got is _MISSING else got}
        out = {**dict(observed), **dict(measured or {})}
        if "expected" in out:
            raise ValueError("Observation.compare: 'expected' is reserved in measured/observed for the prediction")
        out["expected"] = dict(expected)
        if mismatches:
            out["mismatches"] = mismatches
            return cls.refuted(out, evidence, note)
        return cls.holds(out, evidence, note)

    @classmethod
    def from_checks(cls, checks: Mapping[str, bool], *, measured: Mapping[str, Any] | None = None,
                    evidence: str = "", note: str = "") -> Observation:
        """Holds iff every named check is true; failing names go to ``measured["failed_checks"]``."""
        failed = [name for name, ok in checks.items() if not ok]
        out = {**dict(measured or {}), "checks": {k: bool(v) for k, v in checks.items()}}
        if failed:
            out["failed_checks"] = failed
            return cls.refuted(out, evidence, note)
        return cls.holds(out, evidence, note)

    @classmethod
    def from_test(cls, tests: Tested | Sequence[Tested], *, checks: Mapping[str, bool] | None = None,
                  measured: Mapping[str, Any] | None = None, evidence: str = "", note: str = "",
                  alpha: float = ALPHA, power: float = POWER) -> Observation:
        """Decide a claim that states one or more differences by their tests.

        Holm's correction runs over ``tests`` (the claim's own comparisons). Each comparison *holds* when its
        adjusted p < ``alpha`` and its estimate has the stated sign, is *refuted* when significant with the
        other sign, and is *inconclusive* otherwise. The claim holds when every comparison holds and every named
        ``checks`` entry (the parts of the statement that are identities, e.g. "stores every turn") is true; it
        is refuted when a check fails or a comparison is refuted; otherwise inconclusive.

        ``measured`` gets ``tests`` (one entry per comparison: its test, n, estimate and interval, p, Holm p,
        outcome, ``detectable``: the smallest true difference the test detects with probability ``power`` at
        the strictest Holm level alpha / k, (z_{1-alpha/2k} + z_power) * standard error, and ``min_probes``: the
        fewest probes with which the test can hold at that level at all, see :meth:`Tested.min_probes`),
        ``test_family`` (alpha,
        correction, power), ``checks`` and, where they apply, ``failed_checks``, ``refuted_tests`` and
        ``inconclusive_tests``.
        """
        from scipy.special import ndtri

        from harness.stats import holm

        items = [tests] if isinstance(tests, Tested) else list(tests)
        if not items:
            raise ValueError("Observation.from_test: no test given")
        names = [t.name for t in items]
        if len(set(names)) != len(names):
            raise ValueError(f"Observation.from_test: repeated test names {names}")
        k = len(items)
        z = float(ndtri(1 - alpha / (2 * k)) + ndtri(power))
        rows = []
        for t, p_holm in zip(items, holm([t.p for t in items]), strict=True):
            rows.append({**t.to_dict(), "p_holm": p_holm, "outcome": t.outcome(p_holm, alpha),
                         "detectable": None if t.se is None else z * t.se,
                         "min_probes": t.min_probes(alpha / k)})
        out = {**dict(measured or {}), "tests": rows,
               "test_family": {"alpha": alpha, "correction": f"Holm over {k} comparison(s)", "power": power}}
        if checks is not None:
            out["checks"] = {name: bool(ok) for name, ok in checks.items()}
        failed = [name for name, ok in (checks or {}).items() if not ok]
        refuted = [r["name"] for r in rows if r["outcome"] == "refuted"]
        unsettled = [r["name"] for r in rows if r["outcome"] == "inconclusive"]
        if failed:
            out["failed_checks"] = failed
        if refuted:
            out["refuted_tests"] = refuted
        if unsettled:
            out["inconclusive_tests"] = unsettled
        if failed or refuted:
            return cls.refuted(out, evidence, note)
        if unsettled:
            return cls.inconclusive(out, evidence, note)
        return cls.holds(out, evidence, note)


_MISSING = object()


def _clean(x: Sequence[float] | Any) -> Any:
    import numpy as np

    a = np.asarray(x, dtype=np.float64).ravel()
    return a[~np.isnan(a)]


@dataclass(frozen=True)
class Tested:
    """One comparison a claim states, with its test. ``estimate`` is the signed number the statement predicts the
    sign of (a difference of means, or a mean minus the stated threshold); ``direction`` is that sign (``">"``:
    above zero, ``"<"``: below); ``p`` the test's two-sided p-value; ``lo``/``hi`` its 95% interval (unadjusted);
    ``se`` the estimate's standard error (for the detectable difference); ``n`` the probes (a list per group for
    two groups); ``detail`` anything else worth showing (means, wins/ties/losses, the threshold)."""

    __test__ = False  # a claims type, not a pytest test class

    name: str
    test: str
    estimate: float
    p: float
    direction: Direction
    n: int | list[int]
    lo: float | None = None
    hi: float | None = None
    se: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    kind: Literal["paired", "two-sample", "one-sample", ""] = ""

    def outcome(self, p_holm: float, alpha: float = ALPHA) -> str:
        """``holds`` / ``refuted`` (significant with the stated / the other sign) or ``inconclusive``."""
        if p_holm < alpha and self.estimate != 0:
            return "holds" if (self.estimate > 0) == (self.direction == ">") else "refuted"
        return "inconclusive"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "test": self.test, "n": self.n, "direction": self.direction,
                "estimate": self.estimate, "interval": [self.lo, self.hi], "p": self.p, **self.detail}

    def min_probes(self, level: float) -> int | None:
        """The fewest probes with which this test can reach p < ``level`` at all, when every probe falls on the
        stated side: paired, the n with 2 / 2^n < level (the smallest sign-flip p-value); one-sample, the n whose
        most extreme outcome (all 1 for ``>``, all 0 for ``<``) the exact binomial test rejects; two-sample, the
        size of the smaller group that complete separation from the larger (as observed) needs,
        2 / C(N + m, m) < level. None for a test of unknown kind."""
        if self.kind == "paired":
            n = 1
            while 2.0 ** (1 - n) >= level:
                n += 1
            return n
        if self.kind == "one-sample":
            from scipy.stats import binomtest

            t = float(self.detail["threshold"])
            if not 0 < t < 1:
                return None
            for n in range(1, 100_000):
                if binomtest(n if self.direction == ">" else 0, n, t).pvalue < level:
                    return n
            return None
        if self.kind == "two-sample" and isinstance(self.n, list):
            big = max(self.n)
            for m in range(1, big + 1):
                if 2 / math.comb(big + m, m) < level:
                    return m
            return None
        return None

    @classmethod
    def paired(cls, name: str, a: Sequence[float] | Any, b: Sequence[float] | Any, direction: Direction, *,
               strata: Sequence[Any] | None = None) -> Tested:
        """Rows ``a`` and ``b`` on the same probes (aligned; NaN where a probe has no value): mean(a - b) over the
        probes both scored, the two-sided paired randomization test (sign flips) and the expanded percentile
        bootstrap interval of the mean difference (``strata``: resample within each, e.g. the conversation).
        Fewer than two paired values: no test (p = 1)."""
        import numpy as np

        from harness.stats import Resampler, sign_flip_pvalues
        from harness.stats.intervals import bootstrap_intervals

        x, y = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
        if x.shape != y.shape:
            raise ValueError(f"{name}: paired rows of {len(x)} and {len(y)} probes")
        d = x - y
        keep = ~np.isnan(d)
        d = d[keep]
        detail = {"mean_a": float(x[keep].mean()) if len(d) else None,
                  "mean_b": float(y[keep].mean()) if len(d) else None,
                  "wins": int((d > 0).sum()), "ties": int((d == 0).sum()), "losses": int((d < 0).sum())}
        if len(d) < 2:
            return cls(name, "paired randomization (too few probes: no test)", float(d.sum()), 1.0, direction,
                       len(d), detail=detail, kind="paired")
        p = float(sign_flip_pvalues(d[None])[0])
        labels = None if strata is None else np.asarray(strata)[keep]
        (iv,) = bootstrap_intervals(d[None], Resampler(len(d), labels), method="expanded-percentile")
        return cls(name, "paired randomization (sign flips)", float(d.mean()), p, direction, len(d), iv.lo, iv.hi,
                   float(d.std(ddof=1) / math.sqrt(len(d))), detail, "paired")

    @classmethod
    def two_sample(cls, name: str, x: Sequence[float] | Any, y: Sequence[float] | Any,
                   direction: Direction) -> Tested:
        """Two different probe sets: mean(x) - mean(y), the two-sided permutation test (group labels shuffled)
        and the percentile bootstrap interval (:func:`harness.stats.two_sample`)."""
        from harness.stats import two_sample

        a, b = _clean(x), _clean(y)
        res = two_sample(a, b)
        se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
        return cls(name, "two-sample permutation", float(res.estimate.estimate or 0.0), res.p, direction,
                   [len(a), len(b)], res.estimate.lo, res.estimate.hi, se,
                   {"mean_x": float(a.mean()), "mean_y": float(b.mean())}, "two-sample")

    @classmethod
    def one_sample(cls, name: str, x: Sequence[float] | Any, threshold: float, direction: Direction,
                   kind: Literal["binary", "mean"] = "mean", *, strata: Sequence[Any] | None = None) -> Tested:
        """A mean against a stated threshold: the estimate is mean(x) - threshold; 0/1 outcomes get the exact
        binomial test, other values the bootstrap test that inverts the BCa interval
        (:func:`harness.stats.one_sample`)."""
        from harness.stats import one_sample

        v = _clean(x)
        res = one_sample(v, threshold, kind, strata=strata)
        mean = float(res.estimate.estimate or 0.0)
        if res.test == "exact binomial":  # the standard error under the null, as the binomial test sees it
            se = math.sqrt(threshold * (1 - threshold) / len(v))
        else:
            se = float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else None
        lo = None if res.estimate.lo is None else res.estimate.lo - threshold
        hi = None if res.estimate.hi is None else res.estimate.hi - threshold
        return cls(name, res.test, mean - threshold, res.p, direction, len(v), lo, hi, se,
                   {"mean": mean, "threshold": threshold}, "one-sample")


def values_match(want: Any, got: Any, tol: float | None = None) -> bool:
    """Structural equality with float tolerance (default: rel 1e-9, abs 1e-12)."""
    if isinstance(want, bool) or isinstance(got, bool):
        return type(want) is type(got) and want == got
    if isinstance(want, float) or isinstance(got, float):
        if not isinstance(want, int | float) or not isinstance(got, int | float):
            return want == got
        if tol is None:
            return math.isclose(want, got, rel_tol=1e-9, abs_tol=1e-12)
        return abs(want - got) <= tol
    if isinstance(want, Mapping) and isinstance(got, Mapping):
        return want.keys() == got.keys() and all(values_match(want[k], got[k], tol) for k in want)
    if isinstance(want, list | tuple) and isinstance(got, list | tuple):
        return len(want) == len(got) and all(values_match(a, b, tol) for a, b in zip(want, got, strict=True))
    return want == got


@dataclass
class ClaimContext:
    """What a demonstration receives: a fresh empty directory, a seed, and optional corpora."""

    tmp_path: Path
    seed: int = 0
    data_dir: Path | None = None
    quick: bool = False


Demonstrate = Callable[[ClaimContext], Observation]


@dataclass(frozen=True)
class Claim:
    id: str
    design: str
    record: str
    statement: str
    kind: Kind
    demonstrate: Demonstrate

    @property
    def source(self) -> str:
        fn = self.demonstrate
        return f"{fn.__module__}.{fn.__qualname__}"


_REGISTRY: dict[str, Claim] = {}
_discovered = False


def claim(id: str, *, design: str, record: str, statement: str, kind: Kind) -> Callable[[Demonstrate], Demonstrate]:
    """Register ``demonstrate`` as the claim ``id``. Duplicate ids are an error."""
    if design not in DESIGNS:
        raise ValueError(f"claim {id}: unknown design {design!r} (expected one of {DESIGNS})")
    if kind not in ("mechanism", "consequence"):
        raise ValueError(f"claim {id}: kind must be 'mechanism' or 'consequence', not {kind!r}")

    def register(fn: Demonstrate) -> Demonstrate:
        if id in _REGISTRY and _REGISTRY[id].demonstrate is not fn:
            raise ValueError(f"claim {id} registered twice ({_REGISTRY[id].source} and {fn.__module__})")
        _REGISTRY[id] = Claim(id=id, design=design, record=record, statement=statement, kind=kind, demonstrate=fn)
        return fn

    return register


def guarded_claim(id: str, *, design: str, record: str, statement: str, kind: Kind,
                  skip_reason: Callable[[], Observation | None]) -> Callable[[Demonstrate], Demonstrate]:
    """Register a claim that needs something that may be absent (a data set): ``skip_reason()`` returns the
    skipped ``Observation`` saying why, or ``None`` when the demonstration can run."""
    def register(fn: Demonstrate) -> Demonstrate:
        @functools.wraps(fn)
        def demonstrate(ctx: ClaimContext) -> Observation:
            return skip_reason() or fn(ctx)

        return claim(id, design=design, record=record, statement=statement, kind=kind)(demonstrate)

    return register


def discover() -> None:
    """Import every module of this package once so their ``@claim`` decorators run."""
    global _discovered
    if _discovered:
        return
    for info in pkgutil.iter_modules(__path__, prefix=f"{__name__}."):
        importlib.import_module(info.name)
    _discovered = True


def _id_key(claim_id: str) -> tuple[str, int, str]:
    prefix, _, num = claim_id.partition("-")
    return (prefix, int(num) if num.isdigit() else 0, claim_id)


def all_claims(design: str | None = None, ids: Iterable[str] | None = None, kind: str | None = None) -> list[Claim]:
    """Registered claims, filtered, sorted by id. Unknown ids raise ``KeyError``."""
    discover()
    claims = list(_REGISTRY.values())
    if ids:
        wanted = {i.upper() for i in ids}
        missing = wanted - set(_REGISTRY)
        if missing:
            raise KeyError(f"unknown claim id(s): {', '.join(sorted(missing))}")
        claims = [c for c in claims if c.id in wanted]
    if design:
        claims = [c for c in claims if c.design == design]
    if kind:
        claims = [c for c in claims if c.kind == kind]
    return sorted(claims, key=lambda c: _id_key(c.id))
