"""Typer sub-apps of the ``memsim`` CLI, one module per design (each design's engineer owns its module)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console

err_console = Console(stderr=True, highlight=False)


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print a one-line ``error: ...`` to stderr and return the ``typer.Exit`` to raise."""
    err_console.print(f"[bold red]error:[/] {message}", soft_wrap=True)
    return typer.Exit(code)


@contextmanager
def cli_errors(*expected: type[BaseException]) -> Iterator[None]:
    """Turn expected exceptions (default: OSError, ValueError, KeyError, json errors) into one-line errors."""
    import json

    kinds = expected or (OSError, ValueError, KeyError, json.JSONDecodeError)
    try:
        yield
    except typer.Exit:
        raise
    except kinds as exc:  # type: ignore[misc]
        msg = str(exc) if not isinstance(exc, KeyError) else f"not found: {exc.args[0]!r}"
        raise fail(f"{type(exc).__name__}: {msg}") from None


def read_stdin_bytes() -> bytes:
    return sys.stdin.buffer.read() if not sys.stdin.isatty() else b""
