"""Arm registry: name -> constructor(ArmContext), baselines and design arms behind one lookup.

Baselines live in ``harness.workloads.baselines``. The design arms (Fractal, AgentFly NP/PM, Tortoise) live in
their own modules and are imported only when asked for: each spec names the module, the class and the keyword
arguments (NP is one class with ``pooling="pooler"`` or ``"mean"``). When the module is missing, fails to
import, lacks the class, or the constructor fails, ``build_arm`` raises ``ArmUnavailable`` with the reason; the
runner reports that arm as unavailable (in its output and in the results file), it is never dropped silently.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.workloads.base import Arm, ArmContext


class ArmUnavailable(RuntimeError):
    """An arm that cannot be built here (module missing or broken); the message says why."""


@dataclass(frozen=True)
class ArmSpec:
    """Where an arm comes from: a baseline factory, or a (module, class, kwargs) resolved lazily."""

    name: str
    kind: str  # "baseline" | "design"
    describe: str
    module: str = "harness.workloads.baselines"
    cls: str = ""
    kwargs: dict[str, Any] = field(default_factory=dict)


BASELINE_SPECS = (
    ArmSpec("full", "baseline", "every turn, conversation order"),
    ArmSpec("last20", "baseline", "the last 20 turns"),
    ArmSpec("bm25", "baseline", "bm25s top-K over rendered turns"),
    ArmSpec("mean", "baseline", "MiniLM mean-pooling top-K"),
    ArmSpec("hybrid", "baseline", "RRF of bm25 and mean"),
    ArmSpec("oracle", "baseline", "exactly the evidence turns"),
    ArmSpec("oracle-nodate", "baseline", "the evidence turns without session dates"),
)
DESIGN_SPECS = (
    ArmSpec("fractal", "design", "Fractal: one session of submits, a probe is one more submit",
            "harness.workloads.fractal_arm", "FractalArm"),
    ArmSpec("np-pooler", "design", "AgentFly NP: turns as cases, faithful pooler selector (cached index)",
            "harness.workloads.agentfly_arm", "NPArm", {"pooling": "pooler"}),
    ArmSpec("np-mean", "design", "AgentFly NP with mean pooling (named non-faithful variant)",
            "harness.workloads.agentfly_arm", "NPArm", {"pooling": "mean"}),
    ArmSpec("pm", "design", "AgentFly PM: classifier trained leave-one-conversation-out (non-faithful "
                            "labelling, AGF-35)", "harness.workloads.agentfly_arm", "PMArm"),
    ArmSpec("tortoise", "design", "Tortoise: capture per session; volunteered block and evaluation path",
            "harness.workloads.tortoise_arm", "TortoiseArm"),
    ArmSpec("tortoise-recorded", "design", "Tortoise with LoCoMo's recorded LM facts replayed as the extractor's "
                                           "output; volunteered block and evaluation path",
            "harness.workloads.tortoise_arm", "TortoiseRecordedArm"),
)
SPECS: dict[str, ArmSpec] = {s.name: s for s in BASELINE_SPECS + DESIGN_SPECS}
DEFAULT_ARMS = tuple(SPECS)
QUICK_ARMS = tuple(SPECS)


def arm_names() -> list[str]:
    """Every registered arm name (baselines first)."""
    return list(SPECS)


def _design_class(spec: ArmSpec) -> Callable[..., Arm]:
    try:
        mod = importlib.import_module(spec.module)
    except ModuleNotFoundError as exc:
        if exc.name == spec.module:
            raise ArmUnavailable(f"arm {spec.name!r} unavailable: module {spec.module} does not exist") from None
        raise ArmUnavailable(f"arm {spec.name!r} unavailable: importing {spec.module} failed: "
                             f"{type(exc).__name__}: {exc}") from None
    except Exception as exc:  # any import-time failure of another module is reported, not raised
        raise ArmUnavailable(f"arm {spec.name!r} unavailable: importing {spec.module} failed: "
                             f"{type(exc).__name__}: {exc}") from None
    cls = getattr(mod, spec.cls, None)
    if cls is None or not all(callable(getattr(cls, m, None)) for m in ("ingest", "deliver", "stored")):
        raise ArmUnavailable(f"arm {spec.name!r} unavailable: {spec.module} defines no arm class {spec.cls}")
    return cls


def arm_factory(name: str) -> Callable[..., Arm]:
    """The constructor of arm ``name`` (``ArmUnavailable`` when it cannot be built; ``ValueError`` if unknown)."""
    spec = SPECS.get(name)
    if spec is None:
        raise ValueError(f"unknown arm {name!r}; choose from {', '.join(SPECS)}")
    if spec.kind == "baseline":
        from harness.workloads.baselines import BASELINES

        return BASELINES[name]
    return _design_class(spec)


def build_arm(name: str, ctx: ArmContext) -> Arm:
    """Construct arm ``name`` for one conversation; construction errors of a design arm become ``ArmUnavailable``."""
    factory = arm_factory(name)
    if SPECS[name].kind == "baseline":
        return factory(ctx)
    try:
        return factory(ctx, **SPECS[name].kwargs)
    except Exception as exc:
        raise ArmUnavailable(f"arm {name!r} unavailable: constructing it failed: {type(exc).__name__}: {exc}"
                             ) from exc


def parse_arms(spec: str | None, quick: bool = False) -> list[str]:
    """``--arms`` text (comma-separated names, or ``all``/``baselines``/``designs``) -> names, validated."""
    if not spec or spec.strip() == "all":
        return list(QUICK_ARMS if quick else DEFAULT_ARMS)
    out: list[str] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        if part in ("baselines", "designs"):
            kind = part[:-1]
            out += [s.name for s in SPECS.values() if s.kind == kind and s.name not in out]
        elif part in SPECS:
            if part not in out:
                out.append(part)
        else:
            raise ValueError(f"unknown arm {part!r} in --arms; choose from {', '.join(SPECS)}, all, baselines, "
                             f"designs")
    if not out:
        raise ValueError("--arms names no arm")
    return out
