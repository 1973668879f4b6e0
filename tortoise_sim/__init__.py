"""tortoise_sim: executable reference simulator of Tortoise graph memory on Kuzu (spec: shared/spec/tortoise.md).

Entry point: ``Tortoise`` (SDK facade) over ``TortoiseStore`` (Kuzu schema, feed, dirty bookkeeping).
"""

from __future__ import annotations

from importlib import import_module

TYPE_CHECKING = False  # no runtime ``typing`` import: hook processes import this package first
if TYPE_CHECKING:
    from typing import Any

# Lazy exports (PEP 562): ``import tortoise_sim.hook_client`` must not pull Kuzu, numpy or dspy into a hook
# process, so the package namespace resolves these names on first use.
_EXPORTS = {
    "FaultHooks": "config", "SimConfig": "config",
    "CheckpointValidationError": "errors", "DuplicatePointId": "errors", "FaultInjected": "errors",
    "LifecycleError": "errors", "NotModelled": "errors", "ProviderUnavailable": "errors", "QuotaError": "errors",
    "UnknownPoint": "errors", "VolunteerValidationError": "errors",
    "DspyExtractor": "extraction", "MarkerExtractor": "extraction", "ScriptedExtractor": "extraction",
    "Tortoise": "sdk", "StepClock": "store", "TortoiseStore": "store",
}

if TYPE_CHECKING:  # pragma: no cover
    from .config import FaultHooks, SimConfig
    from .errors import (
        CheckpointValidationError,
        DuplicatePointId,
        FaultInjected,
        LifecycleError,
        NotModelled,
        ProviderUnavailable,
        QuotaError,
        UnknownPoint,
        VolunteerValidationError,
    )
    from .extraction import DspyExtractor, MarkerExtractor, ScriptedExtractor
    from .sdk import Tortoise
    from .store import StepClock, TortoiseStore


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'tortoise_sim' has no attribute {name!r}")
    value = getattr(import_module(f".{mod}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "Tortoise", "TortoiseStore", "SimConfig", "FaultHooks", "StepClock", "ScriptedExtractor", "MarkerExtractor",
    "DspyExtractor", "NotModelled", "DuplicatePointId", "LifecycleError", "ProviderUnavailable",
    "CheckpointValidationError", "QuotaError", "VolunteerValidationError", "FaultInjected", "UnknownPoint",
]
