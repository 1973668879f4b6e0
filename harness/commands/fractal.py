"""``memsim fractal ...``: Fractal session memory (spec: shared/spec/fractal.md)."""

from __future__ import annotations

import typer

app = typer.Typer(help="Fractal session memory: replay scripted turns, list, show and meter saved sessions.",
                  no_args_is_help=True)
