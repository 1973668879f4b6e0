"""tortoise_sim: executable reference simulator of Tortoise graph memory on Kuzu (spec: shared/spec/tortoise.md).

Entry point: ``Tortoise`` (SDK facade) over ``TortoiseStore`` (Kuzu schema, feed, dirty bookkeeping).
"""

from __future__ import annotations

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

__all__ = [
    "Tortoise", "TortoiseStore", "SimConfig", "FaultHooks", "StepClock", "ScriptedExtractor", "MarkerExtractor",
    "DspyExtractor", "NotModelled", "DuplicatePointId", "LifecycleError", "ProviderUnavailable",
    "CheckpointValidationError", "QuotaError", "VolunteerValidationError", "FaultInjected", "UnknownPoint",
]
