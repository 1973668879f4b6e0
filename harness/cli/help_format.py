"""Readable ``--help`` for every memsim command: value placeholders that say what to type, and prose that wraps
at the terminal's width instead of at the docstring's line breaks.

Typer (0.29) labels every option with its Python type (``<bool>``, ``<str>``), including flags that take no
value, and in its rich mode keeps the single line breaks of a command's first docstring paragraph in the command
list, so a sentence breaks wherever the source line ended. ``TidyGroup`` is the root group class of the ``memsim``
app (``typer.Typer(cls=TidyGroup)``); when typer builds the click command tree it walks every command once and:

- joins the single line breaks inside each help paragraph (blank lines, ``\\b`` paragraphs and list items stay);
- shows no placeholder for a flag, ``[a|b|c]`` for a choice, the option's own name for a text value (``--design
  DESIGN``), and ``INTEGER``, ``FLOAT`` or ``PATH`` otherwise; an explicit ``metavar=`` in a definition wins.
"""

from __future__ import annotations

from typing import Any

import typer.core
from typer.core import TyperArgument, TyperGroup, TyperOption

__all__ = ["TidyGroup", "reflow", "placeholder", "tidy_command"]


def reflow(text: str | None) -> str | None:
    """Join single line breaks inside paragraphs; keep blank lines, ``\\b`` paragraphs and list/indented lines."""
    if not text:
        return text
    out = []
    for para in text.split("\n\n"):
        lines = para.split("\n")
        if para.startswith("\b") or any(ln.lstrip().startswith(("- ", "* ", "| ")) or ln.startswith("    ")
                                        for ln in lines[1:]):
            out.append(para)
        else:
            out.append(" ".join(ln.strip() for ln in lines if ln.strip()))
    return "\n\n".join(out)


def placeholder(param: Any, ctx: Any) -> str | None:
    """The value placeholder shown in ``--help`` for ``param`` (``None`` = nothing, for flags)."""
    if getattr(param, "metavar", None) is not None:
        return param.metavar
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return None
    desc = param.type_descriptor
    if desc.is_choice and desc.choices:
        return "[" + "|".join(str(getattr(c, "value", c)) for c in desc.choices) + "]"
    label = typer.core.TyperOption.display_type(param, ctx).strip("<>")
    if label == "str" or label.startswith("list[str"):
        name = (param.name or "value").upper()
        return name if isinstance(param, TyperOption) else "TEXT"
    if label.startswith("int") or label.startswith("list[int"):
        return "INTEGER"
    if label.startswith("float"):
        return "FLOAT"
    if label in ("path", "file", "directory", "dir") or "path" in label:
        return "PATH"
    return label.upper()


class _TidyOption(TyperOption):
    def display_type_rich(self, ctx: Any) -> str | None:  # noqa: D102 - see placeholder()
        shown = placeholder(self, ctx)
        if shown is not None and self.nargs != 1:
            shown += "..."
        return shown


class _TidyArgument(TyperArgument):
    def display_type_rich(self, ctx: Any) -> str | None:  # noqa: D102 - see placeholder()
        return placeholder(self, ctx)


def _tidy_param(p: Any) -> Any:
    if getattr(p, "help", None):
        p.help = reflow(p.help)
    if type(p) is TyperOption:
        p.__class__ = _TidyOption
    elif type(p) is TyperArgument:
        p.__class__ = _TidyArgument
    return p


def tidy_command(cmd: Any) -> None:
    """Reflow the help of ``cmd`` and its parameters and swap in the placeholder rules, recursively (the
    ``--help`` option click adds on demand included)."""
    cmd.help = reflow(cmd.help)
    if getattr(cmd, "short_help", None):
        cmd.short_help = reflow(cmd.short_help)
    for p in getattr(cmd, "params", []):
        _tidy_param(p)
    if hasattr(cmd, "get_help_option") and "get_help_option" not in vars(cmd):
        original = cmd.get_help_option
        cmd.get_help_option = lambda ctx: (lambda opt: opt if opt is None else _tidy_param(opt))(original(ctx))
    for sub in (getattr(cmd, "commands", None) or {}).values():
        tidy_command(sub)


class TidyGroup(TyperGroup):
    """Root group that tidies the whole command tree once, when typer builds it, and turns every usage error of
    the tree (parsed in :meth:`make_context` for the root, in :meth:`invoke` for the commands below it) into one
    ``error:`` line with exit status 2 (``harness.cli.boundary.one_line_usage_errors``)."""

    def __init__(self, **kwargs: Any) -> None:
        from harness.cli.boundary import name_usage_errors

        super().__init__(**kwargs)
        tidy_command(self)
        name_usage_errors(self)

    def main(self, args: Any = None, prog_name: Any = None, **extra: Any) -> Any:
        """Run the app with its command line known to ``harness.runs.run_record`` (the ``command`` a results JSON
        records), whether it came from the shell or from a program that runs the app."""
        import sys

        from harness.runs import command_line

        argv = sys.argv[1:] if args is None else list(args)
        with command_line(["memsim", *map(str, argv)]):
            return super().main(args=args, prog_name=prog_name, **extra)

    def make_context(self, info_name: Any, args: Any, parent: Any = None, **extra: Any) -> Any:  # noqa: D102
        from harness.cli.boundary import one_line_usage_errors

        with one_line_usage_errors():
            return super().make_context(info_name, args, parent=parent, **extra)

    def invoke(self, ctx: Any) -> Any:  # noqa: D102
        from harness.cli.boundary import one_line_usage_errors

        with one_line_usage_errors():
            return super().invoke(ctx)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        for p in self.params:  # typer adds the completion options after building the group
            _tidy_param(p)
        super().format_help(ctx, formatter)


def _fold_long_words() -> None:
    """Make every option's help text fold a word longer than its column (``$MEMSIM_LONGMEMEVAL_DATA``, a path
    default) onto the next line instead of cutting it with an ellipsis: typer prints the help through a rich grid
    whose columns crop (``overflow="ellipsis"``), and a text's own ``overflow`` takes precedence there."""
    from rich.text import Text
    from typer import rich_utils

    original = rich_utils._get_parameter_help
    if getattr(original, "__memsim_fold__", False):
        return

    def folded(*args: Any, **kwargs: Any) -> Any:
        columns = original(*args, **kwargs)
        for item in getattr(columns, "renderables", []):
            if isinstance(item, Text):
                item.overflow = "fold"
        return columns

    folded.__memsim_fold__ = True  # type: ignore[attr-defined]
    rich_utils._get_parameter_help = folded


_fold_long_words()
