"""Arm registry: name -> constructor(ArmContext), baselines and design arms behind one lookup.

Baselines live in ``harness.workloads.baselines``. The design arms (Fractal, AgentFly NP/PM, Tortoise) live in
their own modules and are imported only when asked for: each spec names the module, the class and the keyword
arguments (NP is one class with ``pooling="pooler"`` or ``"mean"``). When the module is missing, fails to
import, lacks the class, or the constructor fails, ``build_arm`` raises ``ArmUnavailable`` with the reason; the
runner reports that arm as unavailable (in its output and in the results file), it is never dropped silently.

External arms (bring your own): an arm class outside memsim, behind the same protocol
(``harness.workloads.base.Arm``: ``name``, ``rows``, ``ingest``, ``deliver``, ``stored``, ``close``; constructed
with one ``ArmContext``), comes in two ways:

- ``--arm-class package.module:Class`` (``load_arm_class``): imported and checked before the run; a malformed spec,
  a missing module or class, or a class that does not satisfy the protocol is a one-line ``ValueError``. The arm's
  name is the class attribute ``name`` (else the class name); it may not shadow a built-in arm.
- An installed package's entry point in the group ``memsim.arms`` (``name = "package.module:Class"``): its name
  is then usable in ``--arms`` like a built-in one (``external`` selects every such arm). Entry points are
  resolved lazily like the design arms, so a broken plugin makes only its own arm unavailable; an entry point
  named like a built-in arm is ignored (the built-in wins).

Both ways follow one rule under every protocol of ``memsim bench locomo`` (``designs`` and ``locomo-paper``):
:func:`select_arms` turns ``--arms`` and ``--arm-class`` into the run's arm list, and :func:`require_runnable`
refuses a selection of which no arm can be imported (one line naming each arm and why), so such a run never
writes results without rows.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
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
    kind: str  # "baseline" | "design" | "external"
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


ENTRY_POINT_GROUP = "memsim.arms"
PROTOCOL_METHODS = ("ingest", "deliver", "stored", "close")


def entry_point_specs() -> dict[str, ArmSpec]:
    """Arms installed by other packages under the ``memsim.arms`` entry-point group (not imported yet)."""
    out: dict[str, ArmSpec] = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in SPECS or ep.name in out or ":" not in ep.value:
            continue
        module, _, attr = ep.value.partition(":")
        dist = getattr(getattr(ep, "dist", None), "name", None)
        out[ep.name] = ArmSpec(ep.name, "external", f"entry point {ep.value}" + (f" ({dist})" if dist else ""),
                               module.strip(), attr.strip())
    return out


def arm_names() -> list[str]:
    """Every registered arm name (baselines first, then design arms, then installed entry-point arms)."""
    return list(SPECS) + [n for n in entry_point_specs() if n not in SPECS]


def _attr(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _missing_methods(cls: Any) -> list[str]:
    return [m for m in PROTOCOL_METHODS if not callable(getattr(cls, m, None))]


def load_arm_class(spec: str) -> ArmSpec:
    """``package.module:Class`` -> an external ``ArmSpec``, checked now: one-line ``ValueError`` for a malformed
    spec, a module that does not exist or fails to import, a missing class, a class without the protocol's
    methods or a constructor that does not take one ``ArmContext``, and a name taken by a built-in arm."""
    text = spec.strip()
    module, sep, attr = text.partition(":")
    module, attr = module.strip(), attr.strip()
    if (not sep or not module or not attr or not all(p.isidentifier() for p in module.split("."))
            or not all(p.isidentifier() for p in attr.split("."))):
        raise ValueError(f"--arm-class {spec!r}: expected package.module:Class (a module path, a colon, a class)")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and (module == exc.name or module.startswith(exc.name + ".")):
            raise ValueError(f"--arm-class {text}: no module named {exc.name} (is it installed or on "
                             f"PYTHONPATH?)") from None
        raise ValueError(f"--arm-class {text}: importing {module} failed: {' '.join(str(exc).split())}") from None
    except Exception as exc:  # an import-time failure of the user's module: one line, never a traceback
        raise ValueError(f"--arm-class {text}: importing {module} failed: {type(exc).__name__}: "
                         f"{' '.join(str(exc).split())}") from None
    cls = _attr(mod, attr)
    if cls is None:
        raise ValueError(f"--arm-class {text}: module {module} defines no {attr}")
    if not callable(cls):
        raise ValueError(f"--arm-class {text}: {attr} is not a class")
    missing = _missing_methods(cls)
    if missing:
        raise ValueError(f"--arm-class {text}: {attr} is not an arm: it has no {', '.join(missing)} method(s) "
                         f"(an arm has name, rows, {', '.join(PROTOCOL_METHODS)})")
    try:
        inspect.signature(cls).bind(ArmContext)
    except TypeError:
        raise ValueError(f"--arm-class {text}: {attr} is not an arm: its constructor must take one ArmContext "
                         f"argument") from None
    except ValueError:  # no signature to inspect (a builtin): let construction decide
        pass
    name = getattr(cls, "name", None)
    name = name if isinstance(name, str) and name.strip() else getattr(cls, "__name__", attr)
    if name in SPECS:
        raise ValueError(f"--arm-class {text}: its name {name!r} is a built-in arm; give the class another "
                         f"name attribute")
    return ArmSpec(name, "external", f"--arm-class {text}", module, attr)


def check_arm(arm: Any, name: str) -> Any:
    """An arm instance checked against the protocol after construction (``rows`` a non-empty sequence of row
    names); ``ArmUnavailable`` otherwise."""
    rows = getattr(arm, "rows", None)
    if (isinstance(rows, str) or not isinstance(rows, list | tuple) or not rows
            or not all(isinstance(r, str) and r for r in rows)):
        raise ArmUnavailable(f"arm {name!r} does not satisfy the arm protocol: rows must be a non-empty tuple of "
                             f"row names, got {rows!r}")
    missing = _missing_methods(arm)
    if missing:
        raise ArmUnavailable(f"arm {name!r} does not satisfy the arm protocol: no {', '.join(missing)} method(s)")
    return arm


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
    cls = _attr(mod, spec.cls)
    if cls is None or not all(callable(getattr(cls, m, None)) for m in ("ingest", "deliver", "stored")):
        raise ArmUnavailable(f"arm {spec.name!r} unavailable: {spec.module} defines no arm class {spec.cls}")
    return cls


def arm_spec(name: str) -> ArmSpec:
    """The spec of a built-in or entry-point arm (``ValueError`` if unknown)."""
    spec = SPECS.get(name) or entry_point_specs().get(name)
    if spec is None:
        raise ValueError(f"unknown arm {name!r}; choose from {', '.join(arm_names())}")
    return spec


def arm_factory(name: str | ArmSpec) -> Callable[..., Arm]:
    """The constructor of arm ``name`` (``ArmUnavailable`` when it cannot be built; ``ValueError`` if unknown)."""
    spec = name if isinstance(name, ArmSpec) else arm_spec(name)
    if spec.kind == "baseline":
        from harness.workloads.baselines import BASELINES

        return BASELINES[spec.name]
    return _design_class(spec)


def build_arm(name: str | ArmSpec, ctx: ArmContext) -> Arm:
    """Construct arm ``name`` (or an external ``ArmSpec``) for one conversation; construction errors of a design or
    external arm, and an external arm that does not satisfy the protocol, become ``ArmUnavailable``."""
    spec = name if isinstance(name, ArmSpec) else arm_spec(name)
    factory = arm_factory(spec)
    if spec.kind == "baseline":
        return factory(ctx)
    try:
        arm = factory(ctx, **spec.kwargs)
    except Exception as exc:
        raise ArmUnavailable(f"arm {spec.name!r} unavailable: constructing it failed: {type(exc).__name__}: "
                             f"{exc}") from exc
    return check_arm(arm, spec.name) if spec.kind == "external" else arm


def parse_arms(spec: str | None, quick: bool = False) -> list[str]:
    """``--arms`` text (comma-separated names, or ``all``/``baselines``/``designs``/``external``) -> names,
    validated. ``None`` (the option not given) means ``all``; an empty text is an error."""
    if spec is None or spec.strip() == "all":
        return list(QUICK_ARMS if quick else DEFAULT_ARMS)
    if not spec.strip():
        raise ValueError("--arms is empty: name at least one arm (or all, baselines, designs)")
    external = entry_point_specs()
    out: list[str] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        if part in ("baselines", "designs"):
            kind = part[:-1]
            out += [s.name for s in SPECS.values() if s.kind == kind and s.name not in out]
        elif part == "external":
            out += [n for n in external if n not in out]
        elif part in SPECS or part in external:
            if part not in out:
                out.append(part)
        else:
            raise ValueError(f"unknown arm {part!r} in --arms; choose from {', '.join(arm_names())}, all, "
                             f"baselines, designs, external")
    if not out:
        raise ValueError("--arms names no arm")
    return out


def select_arms(arms: str | None, arm_classes: list[str] | None = None, *, quick: bool = False,
                default: str | None = None, allow_none: bool = False) -> list[str | ArmSpec]:
    """The arms of a run: ``--arms`` (``parse_arms``; ``None`` means ``default``, itself ``all`` when ``None``;
    with ``allow_none``, ``none`` or an empty text selects no named arm) followed by each ``--arm-class``
    (``load_arm_class``). The same rule for every protocol; ``ValueError`` (one line) for an unknown name, a bad
    class or an arm selected twice."""
    text = default if arms is None else arms
    named: list[str | ArmSpec] = [] if allow_none and text is not None and text.strip().lower() in ("none", "") \
        else list(parse_arms(text, quick))
    for spec in arm_classes or []:
        ext = load_arm_class(spec)
        if ext.name in [n if isinstance(n, str) else n.name for n in named]:
            raise ValueError(f"--arm-class {spec}: an arm named {ext.name!r} is already selected")
        named.append(ext)
    return named


def require_runnable(names: list[str | ArmSpec]) -> None:
    """Refuse (one-line ``ValueError``) a non-empty selection of which no arm can even be imported: every design
    or external arm's module and class are resolved (``arm_factory``); a baseline always can. One importable arm
    is enough: the others are then reported unavailable beside it, as before."""
    reasons: list[str] = []
    for entry in names:
        spec = entry if isinstance(entry, ArmSpec) else arm_spec(entry)
        if spec.kind == "baseline":
            return
        try:
            arm_factory(spec)
        except ArmUnavailable as exc:
            reasons.append(" ".join(str(exc).split()))
            continue
        return
    if reasons:
        raise ValueError("no selected arm can run: " + "; ".join(reasons))
