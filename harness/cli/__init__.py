"""The ``memsim`` command line: the console entry (``entry``, which dispatches hook commands before typer is
imported), the root typer app (``main``), the error boundary and option checks every command shares
(``boundary``), the help formatter (``help_format``) and one module per typer sub-app.

This package's ``__init__`` imports nothing, so the hook path (``harness.cli.entry``) stays free of typer."""
