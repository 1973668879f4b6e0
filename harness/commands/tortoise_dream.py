"""``memsim tortoise dream`` and ``memsim tortoise confidence``: EP maintenance commands (spec tortoise 9)."""

from __future__ import annotations

from harness.commands.tortoise import app  # noqa: F401  (commands register on the tortoise app)
