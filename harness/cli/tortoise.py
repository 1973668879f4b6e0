"""``memsim tortoise ...``: Tortoise graph memory on Kuzu (spec: shared/spec/tortoise.md).

Every command works on an on-disk Kuzu store: ``--db PATH`` (default ``$MEMSIM_TORTOISE_DB`` or
``./.memsim/tortoise.kuzu``). Embeddings come from ``harness.embedding.get_encoder("minilm-mean")``, loaded only
when a command actually embeds text.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from harness.cli import tortoise_dream, tortoise_serve
from harness.cli.boundary import (
    BoundaryTyper,
    bad_option,
    check_choice,
    check_range,
    cli_errors,
    describe_error,
    fail,
    make_console,
    read_input_text,
    read_stdin_bytes,
)
from harness.cli.tortoise_store import (
    KUZU_INT64_MAX,
    DbOpt,
    PresetOpt,
    _LazyEncoder,
    db_path,
    open_sim,
)
from tortoise_sim.hook_client import FILINGS, HARNESSES
from tortoise_sim.transcripts import READERS

app = BoundaryTyper(help="Tortoise graph memory on Kuzu: capture, checkpoint, volunteer pointers, hooks, digest, "
                       "dream.", no_args_is_help=True)
console = make_console(soft_wrap=True)  # markup and emoji off: paths, ids and messages print as given


def _print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, default=str, indent=2) + "\n")


def _wrote(summary: str) -> None:
    """One human-readable line on stderr saying what a writing command stored (stdout stays machine-readable)."""
    sys.stderr.write(summary + "\n")


@contextmanager
def _encoder_status(sim: Any, what: str) -> Iterator[None]:
    """A status line on stderr while this command loads the MiniLM encoder (seconds, on its first use in the
    process) to ``what``; nothing when the store embeds elsewhere (the resident service) or the model is loaded.
    In a terminal it is a spinner that goes away; piped, one plain line."""
    from harness import embedding
    from harness.cli.tortoise_store import ServiceSim

    if isinstance(sim, ServiceSim):  # the service embeds; its __getattr__ refuses every other attribute
        yield
        return
    encoder = getattr(getattr(sim, "store", None), "encoder", None)
    if not isinstance(encoder, _LazyEncoder) or "minilm-mean" in embedding._CACHE:
        yield
        return
    text = f"loading the MiniLM sentence encoder to {what} (first use in this process: a few seconds) ..."
    if sys.stderr.isatty():
        with make_console(stderr=True).status(text):
            yield
    else:
        sys.stderr.write(text + "\n")
        yield


def _load_json_input(file: Path | None) -> Any:
    raw = read_input_text(file, "JSON input").encode("utf-8") if file is not None else read_stdin_bytes()
    where = str(file) if file is not None else "<stdin>"
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # also 5000-digit ints, too-deep nesting
        line = getattr(exc, "lineno", 1)
        raise fail(f"{where}:{line}: not valid JSON ({describe_error(exc)})") from None


# ------------------------------------------------------------------------------------------- hooks
# The hook commands a harness runs go through ``harness.cli.entry`` straight to the standard-library client
# (``tortoise_sim.hook_client``) before typer is imported. These typer definitions are what ``--help`` shows and
# what a caller of the typer app (tests, ``python -m harness.cli.main``) runs: they delegate to the same client
# (:func:`tortoise_sim.hook_client.hook_outcome`), so both ways behave alike: the service when one answers, the
# session end's spool-first write and detached filing, the session start's drain, one stderr line per failure,
# exit 0. Option values are passed through unchanged: the client checks them (a bad value is its one stderr line,
# nothing on stdout, exit 0), as it does on the fast path.
SocketOpt = Annotated[str | None, typer.Option(
    "--socket", metavar="PATH", help="The resident service's socket (default $MEMSIM_TORTOISE_SOCKET, else derived from the store "
                     "path, as `memsim tortoise serve --db STORE` does).")]
SpoolDirOpt = Annotated[Path | None, typer.Option(
    "--spool-dir", help="Spool root (default: <db dir>/spool).")]


def _run_hook(command: str, options: dict[str, Any]) -> None:
    """Run ``command`` through the standard-library hook client with the options given (None: not given; True: a
    flag), print its stdout and its one stderr line, exit 0."""
    from tortoise_sim.hook_client import hook_outcome

    argv = [command]
    for name, value in options.items():
        if value is None or value is False:
            continue
        argv += [name] if value is True else [name, str(value)]
    try:
        data = read_stdin_bytes()
    except Exception:  # noqa: BLE001 - a hook never fails the host
        data = b""
    out, note = hook_outcome(argv, data)
    if note:
        sys.stderr.write(" ".join(note.splitlines()) + "\n")
    if out:
        sys.stdout.write(out)
        sys.stdout.flush()
    raise typer.Exit(0)


def _choices(values: tuple[str, ...]) -> str:
    return "[" + "|".join(values) + "]"


@app.command("hook-volunteer")
def hook_volunteer(
    harness_name: Annotated[str, typer.Option(
        "--harness", metavar=_choices(HARNESSES),
        help="Output shape: claude, codex and devin get hookSpecificOutput JSON, cline contextModification JSON, "
             "other the raw block. The default is codex, as upstream. Any other value prints a note on stderr "
             "and nothing on stdout (still exit 0).")] = "codex",
    db: DbOpt = None,
    socket_path: SocketOpt = None,
) -> None:
    """Per-prompt hook: read the harness's hook JSON on stdin, print the JSON shape the harness expects (one
    line) when a pointer is eligible, nothing otherwise. Always exits 0, so a hook never fails its host. When a
    resident service (`serve`) holds the store, the hook waits at most $MEMSIM_HOOK_TIMEOUT seconds (default 1)
    for its answer, then prints nothing and notes it on stderr; with none, it runs in this process on the store
    opened read-only."""
    _run_hook("hook-volunteer", {"--harness": harness_name, "--db": db, "--socket": socket_path})


@app.command("hook-session-start")
def hook_session_start_cmd(
    db: DbOpt = None,
    socket_path: SocketOpt = None,
    spool_dir: SpoolDirOpt = None,
    no_drain: Annotated[bool, typer.Option(
        "--no-drain", help="No drain before the digest, as the analysed snapshot's hook "
                           "($MEMSIM_HOOK_START_DRAIN=0 does the same).")] = False,
) -> None:
    """Session-start hook: first the drain (every due spool entry but the live session's is
    filed, waiting up to $MEMSIM_HOOK_DRAIN_BUDGET seconds, default 3, for a filer at work; nothing pending costs
    one folder scan), then print the context digest verbatim, or one line saying there is no memory yet when
    there is no store; a failure prints nothing and one stderr line. Exit 0. A resident service gets
    $MEMSIM_HOOK_TIMEOUT seconds (default 1, plus the drain budget when something is pending) to answer."""
    _run_hook("hook-session-start", {"--db": db, "--socket": socket_path, "--spool-dir": spool_dir,
                                     "--no-drain": no_drain})


@app.command()
def context(db: DbOpt = None, preset: PresetOpt = "analysed") -> None:
    """Render the session-start digest (recency-selected diary, points and confidence sections)."""
    from tortoise_sim.digest import NO_MEMORY_LINE

    path = db_path(db)
    if not path.exists():
        sys.stdout.write(NO_MEMORY_LINE + "\n")
        return
    with cli_errors(OSError, ValueError, TypeError, RuntimeError):
        sys.stdout.write(open_sim(path, preset, must_exist=True).context())


@app.command()
def volunteer(
    db: DbOpt = None,
    max_pointers: Annotated[int, typer.Option(help="1..5 pointers.")] = 3,
    min_confidence: Annotated[float, typer.Option(help="Confidence gate in [0, 1].")] = 0.7,
    prior_context: Annotated[Path | None, typer.Option(help="File with earlier injected context.")] = None,
    block_only: Annotated[bool, typer.Option("--block", help="Print only the block text.")] = False,
) -> None:
    """Read a prompt (plain text, or a JSON window ``[{role, content}, ...]``) on stdin and print the
    volunteering response as JSON (or only the block with ``--block``)."""
    from tortoise_sim import VolunteerValidationError

    check_range("--max-pointers", max_pointers, lo=1, hi=5)
    check_range("--min-confidence", min_confidence, lo=0.0, hi=1.0)
    raw = read_stdin_bytes().decode("utf-8", "replace")
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    window = parsed if isinstance(parsed, list) else [{"role": "user", "content": raw.strip()}]
    path = db_path(db)
    if not path.exists():
        raise fail(f"{path}: no Tortoise store (create one with `memsim tortoise create-point` or `capture`)")
    prior = read_input_text(prior_context, "--prior-context file") if prior_context is not None else None
    try:
        res = open_sim(path, must_exist=True).volunteer_context(
            window, max_pointers=max_pointers, min_confidence=min_confidence, prior_context=prior)
    except VolunteerValidationError as exc:
        raise fail(f"<stdin>:1: {exc.code}") from None
    if block_only:
        sys.stdout.write(res["block"])
    else:
        _print_json(res)


OnCorruptOpt = Annotated[str, typer.Option(
    "--on-corrupt", help="A spool entry whose meta is unreadable: delete (upstream: its intact turn "
                         "log goes too) or quarantine (hardened: both files move to <spool>/quarantine/).")]


def _spool_dir(db: Path | None, spool_dir: Path | None) -> Path:
    return spool_dir if spool_dir is not None else db_path(db).parent / "spool"


@app.command("hook-session-end")
def hook_session_end_cmd(
    harness_name: Annotated[str, typer.Option(
        "--harness", help="Harness name recorded in the spool; it also picks the transcript reader (claude, devin: "
                          "Claude Code JSONL; codex: Codex rollout; others: the previous every-message reader).")
    ] = "claude",
    db: DbOpt = None,
    socket_path: SocketOpt = None,
    spool_dir: SpoolDirOpt = None,
    transcript_reader: Annotated[str | None, typer.Option(
        "--transcript-reader", metavar=_choices(READERS),
        help="The transcript reader (default auto: chosen by --harness); claude-tools keeps tool calls and results "
             "as compact lines; legacy is the previous reader.")] = None,
    filing: Annotated[str | None, typer.Option(
        "--filing", metavar=_choices(FILINGS),
        help="How the spooled session is filed when no service answers: detached (default: a filer process that "
             "outlives the hook, so a host's SessionEnd budget cannot cut it), inline (this process, as before), "
             "spool (spool only; the next session start or spool-flush files it). Default $MEMSIM_HOOK_END_FILING, "
             "else detached.")] = None,
    no_discard_ledger: Annotated[bool, typer.Option(
        "--no-discard-ledger", help="A session end that spools nothing (bad hook JSON, no session id, a transcript "
                                    "it cannot read, no turns) writes no discarded.jsonl row "
                                    "($MEMSIM_HOOK_END_LEDGER=0 does the same).")] = False,
) -> None:
    """Session-end hook: read the transcript (``turns`` or ``transcript_path`` of the stdin JSON, with
    ``session_id``) and write it to the spool first, then file that session: through the service when one
    answers (waiting up to $MEMSIM_HOOK_END_TIMEOUT seconds, default 30), else as --filing says. Prints nothing;
    a failure is one stderr line (the session stays in the spool); always exits 0."""
    _run_hook("hook-session-end", {"--harness": harness_name, "--db": db, "--socket": socket_path,
                                   "--spool-dir": spool_dir, "--transcript-reader": transcript_reader,
                                   "--filing": filing, "--no-discard-ledger": no_discard_ledger})


@app.command("spool-flush")
def spool_flush_cmd(
    db: DbOpt = None,
    spool_dir: Annotated[Path | None, typer.Option(help="Spool root (default: <db dir>/spool).")] = None,
    on_corrupt: OnCorruptOpt = "delete",
    capture_key: Annotated[bool, typer.Option(
        "--capture-key/--no-capture-key",
        help="Post each entry with its capture key, so a session already filed (a filing killed before it was "
             "marked filed) is not stored twice (the hook path's default); --no-capture-key posts as upstream's "
             "spool does.")] = True,
) -> None:
    """File every due spool entry into the local store; print the flush counts and the discard ledger (rows by
    reason and the latest rows: sessions a session end could not spool, entries discarded or failed)."""
    import time

    from tortoise_sim.spool import Spool, ledger_summary, local_capture_post

    check_choice("--on-corrupt", on_corrupt, ("delete", "quarantine"))  # a usage error, before the store opens
    root = _spool_dir(db, spool_dir)
    sim = open_sim(db)
    sp = Spool(root, permanent=sim.cfg.spool_permanent, corrupt=on_corrupt, send_capture_key=capture_key)
    counts = sp.flush_spool(local_capture_post(sim.capture_session), int(time.time() * 1000))
    _print_json({**counts, "ledger": ledger_summary(root)})
    sys.stderr.write(f"spool: {root}\n")


# ------------------------------------------------------------------------------------------- writers
@app.command()
def capture(
    file: Annotated[Path | None, typer.Argument(help="JSON list of {role, content} turns (default: stdin).")] = None,
    session_id: Annotated[str | None, typer.Option(help="Session id (default: generated).")] = None,
    db: DbOpt = None,
    preset: PresetOpt = "analysed",
    no_extractor: Annotated[bool, typer.Option("--no-extractor",
                                               help="Capture turns without an extraction provider.")] = False,
) -> None:
    """Capture a session transcript: turns first, then marker extraction (``decision: ...`` lines) and
    deterministic admission."""
    conv = _load_json_input(file)
    sim = open_sim(db, preset)
    if no_extractor:
        sim.extractor = None
    from tortoise_sim import ProviderUnavailable

    with cli_errors(ValueError, ProviderUnavailable, OSError), _encoder_status(sim, "embed what is admitted"):
        res = sim.capture_session(conv, session_id=session_id)
    if not res.get("ok", True):
        where = str(file) if file is not None else "<stdin>"
        raise fail(f"{where}: nothing captured: no turn has a user/assistant role and non-empty content "
                   f"({json.dumps(res)})")
    _print_json(res)
    sys.stderr.write(f"store: {db_path(db)}\n")


@app.command("create-point")
def create_point_cmd(
    kind: Annotated[str, typer.Argument(help="Point kind, e.g. decision, statement, observation.")],
    content: Annotated[str, typer.Argument(help="Point content.")],
    credibility: Annotated[str | None, typer.Option(help="gold|high|medium|low|unverified (sets the prior).")] = None,
    live: Annotated[bool, typer.Option(help="Promote draft -> live after creating.")] = False,
    db: DbOpt = None,
) -> None:
    """Create a Point (SDK semantics: draft, no dedup) and print its id."""
    from tortoise_sim.admission import POINT_KINDS, TIER_PRIORS

    check_choice("--credibility", credibility, TIER_PRIORS)
    check_choice("KIND", kind, sorted(POINT_KINDS))
    sim = open_sim(db)
    with cli_errors(ValueError, TypeError), _encoder_status(sim, "embed the point"):
        row = sim.create_point(kind, content, credibility=credibility)
        if live:
            sim.update_point(row["id"], status="live")
    sys.stdout.write(row["id"] + "\n")
    _wrote(f"created {kind} point {row['id']} ({'live' if live else 'draft'}, credibility "
           f"{credibility or 'default'}) in {db_path(db)}")


@app.command()
def checkpoint(
    file: Annotated[Path | None, typer.Argument(help="JSON list of {content, wing?, room?} (default: stdin).")] = None,
    agent: Annotated[str, typer.Option(help="Agent name recorded as the provenance subject.")] = "checkpoint",
    threshold: Annotated[float, typer.Option(help="Semantic dedup threshold (1.0 disables).")] = 0.95,
    db: DbOpt = None,
) -> None:
    """File checkpoint items with hash and semantic dedup; prints ``{filed, duplicates}``."""
    from tortoise_sim import CheckpointValidationError, QuotaError

    check_range("--threshold", threshold, lo=0.0, hi=1.0, lo_open=True)
    items = _load_json_input(file)
    sim = open_sim(db)
    with cli_errors(CheckpointValidationError, QuotaError, ValueError), _encoder_status(sim, "embed the items"):
        res = sim.checkpoint(items, agent_name=agent, threshold=threshold)
    _print_json(res)
    ids = res.get("ids") or []
    _wrote(f"filed {res.get('filed', 0)} checkpoint item(s) for {agent!r}"
           + (f" ({', '.join(ids)})" if ids else "") + f", skipped {res.get('duplicates', 0)} duplicate(s), "
           f"in {db_path(db)}")


@app.command("diary-write")
def diary_write_cmd(
    agent: Annotated[str, typer.Argument()], entry: Annotated[str, typer.Argument()],
    topic: Annotated[str | None, typer.Option()] = None, wing: Annotated[str | None, typer.Option()] = None,
    db: DbOpt = None,
) -> None:
    """Write a diary entry for an agent."""
    row = open_sim(db).diary_write(agent, entry, topic=topic, wing=wing)
    sys.stdout.write(row["id"] + "\n")
    _wrote(f"wrote diary entry {row['id']} for agent {agent!r} ({len(entry)} chars"
           + (f", topic {topic!r}" if topic else "") + f") in {db_path(db)}")


@app.command("diary-read")
def diary_read_cmd(
    agent: Annotated[str, typer.Argument()], last_n: Annotated[int, typer.Option()] = 10,
    wing: Annotated[str | None, typer.Option()] = None, db: DbOpt = None,
) -> None:
    """Read an agent's newest diary entries (no status filter, no relevance)."""
    check_range("--last-n", last_n, lo=0, hi=KUZU_INT64_MAX)
    rows = open_sim(db, must_exist=True).diary_read(agent, last_n=last_n, wing=wing)
    _print_json([{k: v for k, v in r.items() if k != "embedding"} for r in rows])


@app.command()
def retract(
    point_id: Annotated[str, typer.Argument()],
    valid_to: Annotated[str | None, typer.Option(help="ISO-8601 end of validity.")] = None,
    dry_run: Annotated[bool, typer.Option(help="Preview without writing.")] = False,
    db: DbOpt = None,
) -> None:
    """Retract (tombstone) a point: guarded, single-shot, event before the compare-and-swap."""
    from tortoise_sim import LifecycleError

    if valid_to is not None:
        from datetime import datetime

        try:
            datetime.fromisoformat(valid_to)
        except ValueError:
            raise bad_option("--valid-to", valid_to, "an ISO-8601 date or time") from None
    path = db_path(db)
    if not path.exists():
        raise fail(f"{path}: no Tortoise store")
    try:
        res = open_sim(path, must_exist=True).retract_point(point_id, valid_to=valid_to, dry_run=dry_run)
    except LifecycleError as exc:
        raise fail(f"retract {point_id!r}: {exc.code}") from None
    _print_json({k: v for k, v in res.items() if k != "embedding"})


@app.command()
def supersede(old_id: Annotated[str, typer.Argument()], new_id: Annotated[str, typer.Argument()],
              db: DbOpt = None) -> None:
    """Supersede OLD by NEW (edges move, CORRECTS trail)."""
    from tortoise_sim import LifecycleError

    try:
        res = open_sim(db, must_exist=True).supersede_point(old_id, new_id)
    except LifecycleError as exc:
        raise fail(f"supersede {old_id!r} by {new_id!r}: {exc.code}") from None
    except FileNotFoundError as exc:
        raise fail(f"{exc}: no Tortoise store") from None
    _print_json(res)


@app.command()
def show(point_id: Annotated[str, typer.Argument()], db: DbOpt = None) -> None:
    """Print one Point (embedding omitted)."""
    try:
        row = open_sim(db, must_exist=True).get_point(point_id)
    except FileNotFoundError as exc:
        raise fail(f"{exc}: no Tortoise store") from None
    if row is None:
        raise fail(f"no point with id {point_id!r}")
    _print_json({k: v for k, v in row.items() if k != "embedding"})


@app.command()
def feed(db: DbOpt = None, last: Annotated[int, typer.Option(help="Only the last N events.")] = 50) -> None:
    """Print the GraphEvent feed (seq, type, payload)."""
    check_range("--last", last, lo=0)
    try:
        rows = open_sim(db, must_exist=True).store.feed()
    except FileNotFoundError as exc:
        raise fail(f"{exc}: no Tortoise store") from None
    for r in rows[max(len(rows) - last, 0):]:  # --last 0 prints nothing (rows[-0:] would be every row)
        sys.stdout.write(json.dumps({"seq": r["seq"], "type": r["type"], "payload": r["payload"]}) + "\n")


# The dream / EP commands and ``serve`` live in their own modules; mounted last, so --help lists them last.
app.command()(tortoise_dream.dream)
app.command()(tortoise_dream.confidence)
app.command()(tortoise_serve.serve)
