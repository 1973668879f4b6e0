"""``memsim agentfly ...``: AgentFly/Memento case-based reasoning memory (spec: shared/spec/agentfly.md)."""

from __future__ import annotations

import typer

app = typer.Typer(help="AgentFly/Memento CBR memory: retrieve with the trained classifier, train it, run the "
                       "NP/PM driver loops offline.", no_args_is_help=True)
