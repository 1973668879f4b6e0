"""``memsim bench ...``: selector, CBR-loop and cost benchmarks (results under benchmarks/results/)."""

from __future__ import annotations

import typer

app = typer.Typer(help="Benchmarks measured side by side in one run: selectors, cbr-loop, cost. Each writes "
                       "benchmarks/results/<name>.{json,md,png}.", no_args_is_help=True)
