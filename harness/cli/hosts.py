"""``memsim hosts ...``: install the pinned agent hosts (Claude Code, Codex) with npm into memsim's cache folder, and
list what is installed. The hosts are test and benchmark dependencies: never installed globally, never committed."""

from __future__ import annotations

from typing import Annotated

import typer

from harness.cli.boundary import bad_option, fail, make_console

app = typer.Typer(help="Agent hosts memsim drives offline (Claude Code, Codex): install them pinned with npm into "
                       "memsim's cache folder ($MEMSIM_HOSTS_DIR) and list them.", no_args_is_help=True)
console = make_console()  # markup and emoji off: paths print as given


@app.command("install")
def install_cmd(
    names: Annotated[list[str] | None, typer.Argument(
        help="Hosts to install (default: claude-code and codex).", show_default=False)] = None,
    if_reachable: Annotated[bool, typer.Option(
        "--if-reachable", help="Exit 0 with one line when node/npm are missing or the registry cannot be reached "
                               "(for test commands on machines without them).")] = False,
) -> None:
    """Install hosts at their pinned versions with npm (npm install --prefix <cache>/<name>-<version>)."""
    from harness.hosts import install as inst

    chosen = list(names or inst.DEFAULT_HOSTS)
    for n in chosen:
        if n not in inst.HOSTS:
            raise bad_option("NAME", n, list(inst.HOSTS))
    missing = inst.missing_tools()
    if missing:
        msg = f"cannot install hosts: {' and '.join(missing)} not found on PATH"
        if if_reachable:
            console.print(f"skipped: {msg}", soft_wrap=True)
            raise typer.Exit(0)
        raise fail(msg)
    if if_reachable and any(inst.find_host(n) is None for n in chosen):
        ok, why = inst.registry_reachable()
        if not ok:
            console.print(f"skipped: the npm registry is not reachable ({why})", soft_wrap=True)
            raise typer.Exit(0)
    for n in chosen:
        try:
            h = inst.install(n)
        except inst.InstallError as exc:
            if if_reachable and getattr(exc, "unreachable", False):
                console.print(f"skipped: the npm registry is not reachable ({exc})", soft_wrap=True)
                raise typer.Exit(0) from None
            raise fail(str(exc)) from None
        console.print(f"{h.name} {h.version}: {h.bin}", soft_wrap=True)


@app.command("list")
def list_cmd() -> None:
    """One row per known host: its pinned version, the version installed (from its package.json) and the path.

    Plain aligned rows, one line each (a path is never wrapped, so it can be copied from a pipe or a narrow
    terminal); ``-`` where a host is not installed."""
    from harness.hosts import install as inst

    have = inst.installed()
    rows = [("host", "pinned", "installed", "path")]
    for name, spec in inst.HOSTS.items():
        h = have.get(name)
        rows.append((name, spec.version, h.version if h else "-", str(h.root) if h else "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    console.print(f"hosts folder: {inst.hosts_dir()}", soft_wrap=True)
    for r in rows:
        console.print("  ".join(c.ljust(w) for c, w in zip(r[:3], widths, strict=True)) + "  " + r[3],
                      soft_wrap=True)
