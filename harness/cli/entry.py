"""``memsim`` console entry: hook commands are dispatched before typer (or anything else heavy) is imported.

``memsim tortoise hook-volunteer|hook-session-start|hook-session-end [options]`` is what a user wires into Claude
Code, Codex or Cline, and a harness spawns it on every prompt: it goes straight to the standard-library hook
client (``tortoise_sim.hook_client``), which uses the resident service when one answers and otherwise runs the
cheap in-process path; it always exits 0. ``--help`` on a hook command, and every other command, go to the typer
app (``harness.cli.main``).
"""

from __future__ import annotations

import sys


def main() -> None:
    argv = sys.argv[1:]
    if len(argv) >= 2 and argv[0] == "tortoise" and argv[1].startswith("hook-") and "--help" not in argv:
        from tortoise_sim.hook_client import HOOK_COMMANDS
        from tortoise_sim.hook_client import main as hook_main

        if argv[1] in HOOK_COMMANDS:
            hook_main(argv[1:])  # never returns (os._exit(0))
    from harness.cli.main import app

    app()


if __name__ == "__main__":
    main()
