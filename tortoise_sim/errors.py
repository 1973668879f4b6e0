"""Named errors of the Tortoise simulator."""

from __future__ import annotations

__all__ = [
    "TortoiseError", "NotModelled", "DuplicatePointId", "LifecycleError", "ProviderUnavailable",
    "CheckpointValidationError", "QuotaError", "VolunteerValidationError", "FaultInjected", "UnknownPoint",
    "StoreLocked",
]


class TortoiseError(Exception):
    """Base class."""


class NotModelled(TortoiseError):
    """A reference surface that is out of scope (spec §1.2; claim TOR-48)."""


class DuplicatePointId(TortoiseError):
    """``create_point`` with an explicit id that already exists (spec §2.5 item 1)."""


class UnknownPoint(TortoiseError, KeyError):
    """An id that names no Point."""


class LifecycleError(TortoiseError):
    """Guard failure of retract/supersede/invalidate (spec §8): ``code`` is e.g. ``not_found``."""

    def __init__(self, code: str, detail: str = "") -> None:
        super().__init__(f"{code}: {detail}" if detail else code)
        self.code = code


class ProviderUnavailable(TortoiseError):
    """Capture without extractor under ``capture_requires_provider`` (spec §3.1 step 1)."""


class CheckpointValidationError(TortoiseError, ValueError):
    """Malformed checkpoint batch (spec §4.6 step 0)."""


class QuotaError(TortoiseError):
    """More than 500 checkpoint items (``ERR_QUOTA``)."""


class VolunteerValidationError(TortoiseError, ValueError):
    """Invalid volunteer request (spec §6.1 / §6.11 C1); ``code`` names the rule."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class FaultInjected(TortoiseError):
    """Raised by an injected fault (spec §5.3)."""


class StoreLocked(TortoiseError):
    """The hardened open (``store.open_with_retry``) gave up: another process held Kuzu's file lock for the whole
    retry window. The message names the store file."""
