"""``memsim tortoise ...``: Tortoise graph memory on Kuzu (spec: shared/spec/tortoise.md)."""

from __future__ import annotations

import typer

app = typer.Typer(help="Tortoise graph memory on Kuzu: capture, checkpoint, volunteer pointers, hooks, digest, "
                       "dream.", no_args_is_help=True)

# Dream / EP commands live in their own module and register themselves on ``app`` (kept last on purpose).
from harness.commands import tortoise_dream as _tortoise_dream  # noqa: E402,F401
