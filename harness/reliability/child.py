"""Entry point of the child processes the reliability tools spawn (``python -m harness.reliability.<tool> NAME
ARGS...``): one dispatch for the kill runners and the concurrent writers."""

from __future__ import annotations

from collections.abc import Callable


def child_main(argv: list[str], commands: dict[str, Callable[..., None]], what: str = "command") -> None:
    """Run ``commands[NAME](*ARGS)`` for ``argv = [NAME, *ARGS]``; an unknown NAME exits naming it."""
    name, *rest = argv
    if name not in commands:
        raise SystemExit(f"unknown {what} {name!r}")
    commands[name](*rest)
