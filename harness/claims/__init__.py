"""Claims ledger core: ``Claim``, ``Observation``, ``ClaimContext``, the ``@claim`` decorator and the registry.

A claim is one demonstrable statement from a report (or found beyond it). Its ``demonstrate(ctx)`` builds a fresh
scenario under ``ctx.tmp_path``, drives a simulator through its public API and returns an ``Observation`` whose
verdict compares what was observed with what the statement predicts.

Claims live in the modules of this package, one function per claim; module names start with the design name
(``fractal.py``, ``agentfly.py``, ``tortoise_capture.py``, ``tortoise_ep.py``, ``harness_self.py`` ...). The registry
imports every module of the package on first use.
"""

from __future__ import annotations

import functools
import importlib
import math
import pkgutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

Verdict = Literal["holds", "refuted", "error", "skipped"]
Kind = Literal["mechanism", "consequence"]
DESIGNS = ("harness", "fractal", "agentfly", "tortoise", "cross")


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


_MISSING = object()


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
