"""What every ``memsim`` command shares: the error boundary (:func:`guarded`, :class:`BoundaryTyper`), one-line
errors (:func:`fail`, :func:`describe_error`, :func:`cli_errors`), one-line usage errors (:func:`usage_error_line`
for the parser's, :func:`bad_option` for the values a command checks itself),
the consoles every command prints through (:func:`make_console`, :func:`styled`, :func:`warn`) and the checks of
options, input files and output folders.

Printing user text: every console made here has rich markup *and* emoji codes off, so a path, id, option value or
exception message is printed exactly as given (``results [old]/x.json`` keeps its brackets, ``[/x]`` is no markup
error, ``:smile:`` stays text). Styling is applied only to what memsim itself writes, as :class:`rich.text.Text`
spans (:func:`styled`): the ``error:`` and ``warning:`` prefixes, verdict words. Never build rich markup around
user text, and never ``escape`` it (the escape backslashes would be printed)."""

from __future__ import annotations

import contextlib
import functools
import math
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
import typer
from rich.console import Console
from rich.text import Text

try:  # typer 0.2x vendors click: the exceptions it raises are typer._click's, not the click package's
    from typer._click import exceptions as _typer_click
except ImportError:  # pragma: no cover - a typer that uses the click package itself
    _typer_click = click.exceptions

CLICK_EXITS: tuple[type[BaseException], ...] = (typer.Exit, click.exceptions.Exit)
"""A command's deliberate exit, whichever click raised it."""
CLICK_ERRORS: tuple[type[BaseException], ...] = (click.exceptions.ClickException, click.exceptions.Abort,
                                                  _typer_click.ClickException, typer.Abort)
"""Usage errors and aborts that click itself reports (raised by a command: ``typer.BadParameter``, ``typer.Abort``)."""


def make_console(*, stderr: bool = False, **kwargs: Any) -> Console:
    """A console that prints strings as given: no markup, no emoji codes, no highlighting (see the module doc).

    Every command module takes its consoles from here; style what memsim writes with :func:`styled`."""
    return Console(stderr=stderr, highlight=False, markup=False, emoji=False, **kwargs)


console = make_console()
err_console = make_console(stderr=True)


def styled(text: str, style: str) -> Text:
    """``text`` with a rich style, for a console made by :func:`make_console` (no markup is parsed)."""
    return Text(text, style=style)


def error_line(message: str) -> Text:
    """``error: <message>``: the prefix styled, the message printed exactly as given (markup and emoji off)."""
    return Text.assemble(styled("error:", "bold red"), " ", Text(message))


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print a one-line ``error: ...`` to stderr and return the ``typer.Exit`` to raise.

    ``message`` is plain text (user paths, ids and exception messages go in as they are: nothing is interpreted)."""
    err_console.print(error_line(message), soft_wrap=True)
    return typer.Exit(code)


def warn(message: str, *, to: Console | None = None) -> None:
    """Print ``warning: <message>`` (prefix styled, message as given) on stderr, or on the console ``to``."""
    (to or err_console).print(Text.assemble(styled("warning:", "yellow"), " ", Text(message)), soft_wrap=True)


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
        raise fail(describe_error(exc)) from None


def read_stdin_bytes() -> bytes:
    return sys.stdin.buffer.read() if not sys.stdin.isatty() else b""


# ------------------------------------------------------------------------------------ the error boundary
TRACEBACK_ENV = "MEMSIM_TRACEBACK"
"""Set this environment variable to 1 to let unexpected exceptions through with their traceback."""


# Exceptions that mean a defect rather than bad input: their one line says so (and how to see where) after the message.
_INTERNAL = (AssertionError, AttributeError, IndexError, NameError, NotImplementedError, TypeError, ZeroDivisionError)


def _one_line(text: str) -> str:
    """``text`` on one line: line breaks (and the blanks around them) and tabs become one space; the other spaces
    are kept, so a file name with two spaces in a row is printed as it is."""
    import re

    return re.sub(r"[ \t]*[\r\n\t][\s]*", " ", text).strip()


def describe_error(exc: BaseException) -> str:
    """One line for an exception, naming the file when the exception carries one (OSError.filename, a
    UnicodeDecodeError's byte offset, a Kuzu runtime message without its ``Runtime exception:`` prefix).

    The line is the message, never led by the exception's class name; an exception that signals a defect rather
    than bad input (an IndexError, a TypeError, ...) is named after the message, with the way to see its traceback."""
    if isinstance(exc, OSError) and getattr(exc, "filename", None) is not None:
        what = exc.strerror or str(exc)
        other = f" -> {exc.filename2}" if getattr(exc, "filename2", None) else ""
        return f"{exc.filename}{other}: {what}"
    if isinstance(exc, UnicodeDecodeError):
        return f"not valid UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"
    if isinstance(exc, EOFError):
        return f"unexpected end of file{': ' + str(exc) if str(exc) else ''}"
    if isinstance(exc, KeyError):
        return f"not found: {exc.args[0]!r}" if exc.args else "a key was not found"
    msg = _one_line(str(exc))
    for prefix in ("Runtime exception: ", "IO exception: ", "Binder exception: "):
        msg = msg.replace(prefix, "")
    if len(msg) > 300:  # shorten what was wrong, never the leading file name (``<file>: <what>``)
        head, sep, rest = msg.partition(": ")
        keep = head + sep if sep else ""
        msg = keep + rest[:max(297 - len(keep), 80)] + "..." if sep else msg[:297] + "..."
    if isinstance(exc, OSError) and not msg:
        msg = "operating system error"
    if isinstance(exc, _INTERNAL) or not msg:
        return f"{msg or 'failed'} (an internal {type(exc).__name__}; {TRACEBACK_ENV}=1 shows where)"
    return msg


def is_hook_command(name: str | None) -> bool:
    """Hook entry points (``hook-*`` commands) always exit 0 with empty stdout (spec tortoise 7.1)."""
    return bool(name) and str(name).replace("_", "-").startswith("hook-")


def guarded(fn: Callable[..., Any], *, hook: bool = False) -> Callable[..., Any]:
    """Wrap a command callback in the CLI error boundary.

    A normal command turns any exception that escapes it into one ``error: ...`` line on stderr and exit status
    1 (``typer.Exit``/``click`` exits pass through unchanged; ``EOFError`` would otherwise become click's bare
    ``Aborted.``). A hook command never fails its host: any exception, and any non-zero exit, becomes exit 0
    with nothing more printed. An interruption exits 130 for Ctrl-C and 143 for SIGTERM (a command that writes
    results turns SIGTERM into ``harness.runs.Terminated`` so its clean-up runs; see
    ``harness.cli.run_output.published_run``). ``MEMSIM_TRACEBACK=1`` re-raises unexpected exceptions for
    debugging.
    """
    if getattr(fn, "__memsim_boundary__", False):
        return fn

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _COMMAND_END.append([])
        try:
            return fn(*args, **kwargs)
        except CLICK_EXITS as exc:
            if hook and getattr(exc, "exit_code", 0):
                raise typer.Exit(0) from None
            raise
        except CLICK_ERRORS:
            if hook:
                raise typer.Exit(0) from None
            raise
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM where the command turned it into Terminated
            if hook:
                raise typer.Exit(0) from None
            from harness.runs import exit_code_for

            raise typer.Exit(exit_code_for(exc)) from None
        except Exception as exc:  # noqa: BLE001 - this is the boundary
            if hook:
                raise typer.Exit(0) from None
            if os.environ.get(TRACEBACK_ENV) == "1":
                raise
            raise fail(describe_error(exc)) from None
        finally:
            for done in reversed(_COMMAND_END.pop()):
                with contextlib.suppress(Exception):
                    done()

    wrapper.__memsim_boundary__ = True  # type: ignore[attr-defined]
    return wrapper


_COMMAND_END: list[list[Callable[[], Any]]] = []
"""One list per running command (innermost last): what :func:`at_command_end` registered."""


def at_command_end(done: Callable[[], Any]) -> bool:
    """Run ``done`` when the running command ends, however it ends (its result printed, an error line, an exit);
    False, and nothing registered, outside a command. The CLI closes the stores a command opened this way, so a
    later command in the same process (a test's CliRunner, a program embedding the app) never works beside a live
    handle on the same files."""
    if not _COMMAND_END:
        return False
    _COMMAND_END[-1].append(done)
    return True


def guard_app(app: typer.Typer) -> typer.Typer:
    """Apply :func:`guarded` to every command of ``app`` and of its sub-apps (idempotent)."""
    for info in app.registered_commands:
        if info.callback is not None:
            name = info.name or info.callback.__name__
            info.callback = guarded(info.callback, hook=is_hook_command(name))
    for group in app.registered_groups:
        if group.typer_instance is not None:
            guard_app(group.typer_instance)
    return app


class BoundaryTyper(typer.Typer):
    """``typer.Typer`` whose commands (and mounted sub-apps) all run inside :func:`guarded`."""

    def command(self, name: str | None = None, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        register = super().command(name, **kwargs)

        def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
            register(guarded(fn, hook=is_hook_command(name or fn.__name__)))
            return fn

        return decorator

    def add_typer(self, typer_instance: typer.Typer, **kwargs: Any) -> None:
        guard_app(typer_instance)
        super().add_typer(typer_instance, **kwargs)


# ------------------------------------------------------------------------------------ option checks
def _command_path() -> str | None:
    """The running command's path (``memsim bench locomo``), or None outside a command line."""
    from typer._click.globals import get_current_context

    ctx = get_current_context(silent=True)
    return ctx.command_path if ctx is not None else None


def bad_option(name: str, value: Any, allowed: str | Iterable[str]) -> typer.Exit:
    """A usage error found by the command itself (a value outside its list or rule, options that do not go
    together): print one ``error:`` line naming the command, the option, the value and what is allowed, and return
    the ``typer.Exit(2)`` to raise (exit status 2, as the parser's usage errors). ``allowed`` is the list of allowed
    values or a rule in words; ``value`` None means the option's use, not one value, is wrong. A hook command still
    exits 0 (:func:`guarded`). Failures that are not about the command line (a missing file, data not found, a run
    that fails) go through :func:`fail` with exit status 1."""
    rule = allowed if isinstance(allowed, str) else f"choose from {', '.join(map(str, allowed))}"
    what = f"invalid use of '{name}': {rule}" if value is None else f"invalid value for '{name}': {value!r}; {rule}"
    where = _command_path()
    return fail(f"{where}: {what} (see `{where} --help`)" if where else what, 2)


def check_range(flag: str, value: float | None, *, lo: float | None = None, hi: float | None = None,
                lo_open: bool = False, hi_open: bool = False) -> None:
    """Refuse NaN/inf and values outside ``[lo, hi]`` (open ends when ``lo_open``/``hi_open``) in one line (a usage
    error: exit status 2)."""
    if value is None:
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise bad_option(flag, value, "a finite number")
    bad = (lo is not None and (value < lo or (lo_open and value == lo))) or \
          (hi is not None and (value > hi or (hi_open and value == hi)))
    if bad:
        left = "(" if lo_open else "["
        right = ")" if hi_open else "]"
        rng = f"{left}{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}{right}"
        raise bad_option(flag, value, f"must be in {rng}")


def check_choice(flag: str, value: str | None, choices: Iterable[str]) -> None:
    """Refuse a value outside ``choices`` in one line listing them (a usage error: exit status 2)."""
    options = list(choices)
    if value is not None and value not in options:
        raise bad_option(flag, value, options)


def read_input_file(path: Path, what: str = "input file") -> bytes:
    """Bytes of a user-named input file, or a one-line error naming it (missing, a directory, unreadable)."""
    if not path.exists():
        raise fail(f"{path}: {what} not found")
    if path.is_dir():
        raise fail(f"{path}: is a directory, not a {what}")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise fail(f"{path}: cannot read {what}: {exc.strerror or exc}") from None


def read_input_text(path: Path, what: str = "input file") -> str:
    """UTF-8 text of a user-named input file, or a one-line error naming it and the bad byte offset."""
    raw = read_input_file(path, what)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise fail(f"{path}: {describe_error(exc)}") from None


def check_output_dir(path: Path, flag: str = "--out") -> Path:
    """Make sure ``path`` is (or can become) a writable directory before any work starts; one-line error
    otherwise. Creates the directory (the command would create it anyway)."""
    if path.exists() and not path.is_dir():
        raise fail(f"{path}: {flag} exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise fail(f"{path}: {flag} cannot be created: {exc.strerror or exc}") from None
    try:
        with tempfile.NamedTemporaryFile(dir=path, prefix=".memsim-write-check-"):
            pass
    except OSError as exc:
        raise fail(f"{path}: {flag} is not writable: {exc.strerror or exc}") from None
    return path


# ------------------------------------------------------------------------------------ usage errors
def _close_options(exc: Any) -> list[str]:
    """Options of the failing command whose names are close to the unknown one (compared without the leading
    dashes, which would make ``--foo`` look like ``--out``)."""
    import difflib

    ctx = getattr(exc, "ctx", None)
    wrong = str(getattr(exc, "option_name", "") or "")
    if ctx is None or not wrong:
        return []
    names = [o for p in ctx.command.get_params(ctx) for o in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ()))
             if o.startswith("-")]
    by_bare = {n.lstrip("-"): n for n in names}
    close = difflib.get_close_matches(wrong.lstrip("-").split("=", 1)[0], list(by_bare), n=3, cutoff=0.75)
    return [by_bare[c] for c in close]


def usage_error_line(exc: Any) -> str:
    """The one line (without ``error:``) for a usage error of click/typer: the command, what was wrong (the option
    or argument it names and, for a bad value, the values allowed), and where to see the options.

    An unknown option is followed only by close matches of its own name (click's suggestion compares the names with
    their dashes, so ``--foo`` suggested ``--out``); an unknown command by the commands of its group."""
    ctx = getattr(exc, "ctx", None)
    where = ctx.command_path if ctx is not None else "memsim"
    kind = type(exc).__name__
    if kind == "NoSuchOption":
        close = _close_options(exc)
        what = f"no such option {exc.option_name}" + (f" (did you mean {' or '.join(close)}?)" if close else "")
    else:
        what = exc.format_message()
        if kind == "UsageError" and what.startswith("No such command") and ctx is not None:
            cmds = getattr(ctx.command, "list_commands", lambda c: [])(ctx)
            if cmds:
                what = f"{what.rstrip('.')}; choose one of {', '.join(cmds)}"
    what = " ".join(str(what).split()).rstrip(".")
    if what[:1].isupper() and not what[1:2].isupper():
        what = what[0].lower() + what[1:]
    return f"{where}: {what} (see `{where} --help`)"


def name_usage_errors(cmd: Any) -> None:
    """Make every usage error raised while parsing ``cmd``'s arguments (and those of the commands below it) carry
    that command's context: the parser raises some (an option missing its value) without one, and click then
    attaches the root's, so the line would name ``memsim`` instead of the command (and a hook would not be known)."""
    from typer._click.exceptions import UsageError

    if "parse_args" not in vars(cmd):
        original = cmd.parse_args

        def parse_args(ctx: Any, args: list[str]) -> Any:
            try:
                return original(ctx, args)
            except UsageError as exc:
                if getattr(exc, "ctx", None) is None or exc.ctx is not ctx:
                    exc.ctx = ctx
                raise

        cmd.parse_args = parse_args
    for sub in (getattr(cmd, "commands", None) or {}).values():
        name_usage_errors(sub)


@contextmanager
def one_line_usage_errors() -> Iterator[None]:
    """Turn a click/typer usage error (bad option value, unknown option or command, missing argument) into one
    ``error:`` line on stderr and exit status 2. A hook command exits 0 instead, with nothing printed (spec tortoise
    7.1: a hook never fails its host). ``--help`` on a group with no arguments is left to typer."""
    from typer._click.exceptions import NoArgsIsHelpError, UsageError

    try:
        yield
    except NoArgsIsHelpError:
        raise
    except UsageError as exc:
        ctx = getattr(exc, "ctx", None)
        if ctx is not None and is_hook_command(ctx.info_name):
            raise typer.Exit(0) from None
        raise fail(usage_error_line(exc), getattr(exc, "exit_code", 2) or 2) from None
