"""What the ``memsim tortoise`` commands share: the ``--db`` and ``--preset`` options, the store path and its checks,
the lazily loaded CLI encoder, the redactor choice, and :func:`open_sim`, which opens the store in-process or, while
a resident service (``tortoise_sim.service``) holds it, returns a :class:`ServiceSim` that sends the command there.

While a service holds a store, it is the store's only Kuzu writer: the :class:`ServiceSim` sends ``capture``,
``checkpoint``, ``diary-write``, ``diary-read``, ``volunteer``, ``context`` and ``spool-flush`` to the service; any
other command stops with a one-line error naming the service (stop it first with ``memsim tortoise serve --stop``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from harness.cli.boundary import at_command_end, check_choice, describe_error, fail

DbOpt = Annotated[Path | None, typer.Option("--db", help="Kuzu store path (default $MEMSIM_TORTOISE_DB or "
                                                         "./.memsim/tortoise.kuzu).")]
PresetOpt = Annotated[str, typer.Option(help="Version profile: analysed, snapshot or later.")]
PRESETS = ("analysed", "snapshot", "later")
KUZU_INT64_MAX = 2**63 - 1
EMBED_CHAR_CAP = 65_536
"""Characters of a text the CLI encoder passes to MiniLM after the SDK's 512-word cut (spec 2.6). MiniLM reads at
most 256 word pieces, so only pathological texts (a few huge whitespace-free words) are affected; the cap keeps a
20 MB item from being re-tokenised in full by every later checkpoint's dedup."""


def db_path(db: Path | None) -> Path:
    if db is not None:
        return db
    env = os.environ.get("MEMSIM_TORTOISE_DB")
    return Path(env) if env else Path(".memsim") / "tortoise.kuzu"


class _LazyEncoder:
    """MiniLM (mean pooling) loaded on the first ``encode`` call, so read-only commands that never embed
    (a courtesy prompt, the digest) stay fast."""

    dim = 384

    def encode(self, texts: Any) -> Any:
        import torch

        torch.set_num_threads(1)  # one thread per CLI process: concurrent hooks/CLIs share the cores
        from harness.embedding import get_encoder
        from tortoise_sim.embed import cut_words

        # The SDK encoder's 512-word cut (spec 2.6), which the CLI path used to skip, then EMBED_CHAR_CAP.
        return get_encoder("minilm-mean").encode([cut_words(str(t))[:EMBED_CHAR_CAP] for t in texts])


REDACTOR_ENV = "MEMSIM_TORTOISE_REDACTOR"


def redactor_choice() -> str:
    """``$MEMSIM_TORTOISE_REDACTOR``: ``faithful`` (default; spec 3.3, turns only) or ``hardened`` (every stored and
    spooled text through ``tortoise_sim.redaction``; the session-start digest behind a data notice)."""
    from tortoise_sim.redaction import REDACTORS

    value = os.environ.get(REDACTOR_ENV, "faithful")
    if value not in REDACTORS:  # the environment, not the command line: exit status 1
        raise fail(f"${REDACTOR_ENV} must be one of {', '.join(REDACTORS)}, not {value!r}")
    return value


def check_store_path(path: Path, *, must_exist: bool) -> None:
    """One-line errors for a ``--db`` that cannot be a Kuzu store: a directory, an empty (0-byte) file, or (for
    read commands, ``must_exist``) a missing path. Read commands therefore never create a store or its folder."""
    if path.is_dir():
        raise fail(f"{path}: is a directory, not a Kuzu store file")
    if path.exists() and path.is_file() and path.stat().st_size == 0:
        raise fail(f"{path}: empty file (0 bytes), not a Kuzu store; remove it or pass another --db")
    if must_exist and not path.exists():
        raise fail(f"{path}: no Tortoise store (create one with `memsim tortoise create-point` or `capture`)")


def open_sim(db: Path | None, preset: str = "analysed", *, must_exist: bool = False) -> Any:
    """Open the store at ``--db`` (see :func:`check_store_path`); Kuzu's open errors (not a Kuzu file, locked
    by another process, read-only) become one line naming the store."""
    from tortoise_sim import SimConfig, Tortoise

    if (served := service_sim(db_path(db), preset)) is not None:  # the resident service owns the store
        return served

    check_choice("--preset", preset, PRESETS)
    path = db_path(db)
    check_store_path(path, must_exist=must_exist)
    cfg = SimConfig.preset(preset, redactor=redactor_choice())
    try:
        sim = Tortoise(path, config=cfg, encoder=_LazyEncoder(), seed=None)
    except (RuntimeError, OSError) as exc:
        msg = describe_error(exc).removeprefix("RuntimeError: ")
        raise fail(f"{path}: cannot open the Kuzu store: {msg}") from None
    at_command_end(sim.close)  # a late-collected handle's close would checkpoint its stale view over a newer one
    return sim



CLI_TIMEOUT_S = 300.0  # a CLI command sent to the service (a capture of a long transcript) waits this long
STATUS_TIMEOUT_S = 3.0  # the CLI's first question to a service (``status`` never waits for the store lock)


def _rebuild_error(exc: Any) -> BaseException:
    """The service's error as the exception type the in-process call would have raised (same CLI message)."""
    import builtins

    from tortoise_sim import errors

    cls = getattr(errors, exc.type, None) or getattr(builtins, exc.type, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        if exc.code is not None:
            try:
                return cls(exc.code)
            except Exception:  # noqa: BLE001
                pass
        try:
            return cls(str(exc))
        except Exception:  # noqa: BLE001
            pass
    return RuntimeError(f"service: {exc.type}: {exc}")


class ServiceSim:
    """The subset of ``Tortoise`` the CLI uses, answered by the service on ``sock``."""

    def __init__(self, path: Path, sock: str, status: dict[str, Any], preset: str = "analysed") -> None:
        from tortoise_sim import SimConfig

        self.path, self.sock, self.status = path, sock, status
        self.cfg = SimConfig.preset(preset)
        self.extractor: Any = "service"

    def _call(self, op: str, **args: Any) -> Any:
        from tortoise_sim.hook_client import ServiceError, call

        try:
            res = call(self.sock, op, args, timeout=CLI_TIMEOUT_S)
        except ServiceError as exc:
            raise _rebuild_error(exc) from None
        except TimeoutError:
            raise fail(f"{self.path}: the Tortoise service on {self.sock} did not answer within "
                       f"{CLI_TIMEOUT_S:g} s; see `memsim tortoise serve --status --db {self.path}`") from None
        if res is None:
            raise fail(f"{self.path}: the Tortoise service on {self.sock} stopped answering; run the command again")
        return res

    def capture_session(self, conversation: Any, session_id: str | None = None,
                        capture_key: str | None = None) -> Any:
        if capture_key is not None:  # the spool's key (spool-flush): the service's capture is idempotent on it
            return self._call("capture", conversation=conversation, session_id=session_id,
                              no_extractor=self.extractor is None, capture_key=capture_key)
        return self._call("capture", conversation=conversation, session_id=session_id,
                          no_extractor=self.extractor is None)

    def checkpoint(self, items: Any, agent_name: str = "checkpoint", threshold: float = 0.95) -> Any:
        return self._call("checkpoint", items=items, agent=agent_name, threshold=threshold)

    def create_point(self, kind: str, content: str, credibility: str | None = None) -> Any:
        return self._call("create_point", kind=kind, content=content, credibility=credibility)

    def update_point(self, point_id: str, status: str) -> Any:
        return self._call("update_point", point_id=point_id, status=status)

    def retract_point(self, point_id: str, valid_to: str | None = None, dry_run: bool = False) -> Any:
        return self._call("retract", point_id=point_id, valid_to=valid_to, dry_run=dry_run)

    def diary_write(self, agent: str, entry: str, topic: str | None = None, wing: str | None = None) -> Any:
        return self._call("diary_write", agent=agent, entry=entry, topic=topic, wing=wing)

    def diary_read(self, agent: str, last_n: int = 10, wing: str | None = None) -> Any:
        return self._call("diary_read", agent=agent, last_n=last_n, wing=wing)

    def volunteer_context(self, window: Any, **kw: Any) -> Any:
        return self._call("volunteer", window=window, **kw)

    def context(self) -> str:
        return self._call("context")

    def close(self) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        raise fail(f"{self.path}: held by the Tortoise service (pid {self.status.get('pid')}, socket {self.sock}), "
                   f"which applies only capture, checkpoint, create-point, retract, diary-write/read, volunteer, context "
                   f"and spool-flush; "
                   f"stop it first: memsim tortoise serve --stop --db {self.path}")


def service_sim(path: Path, preset: str = "analysed") -> ServiceSim | None:
    """A :class:`ServiceSim` when a service answers for ``path``, else None (the caller opens Kuzu itself)."""
    from tortoise_sim.hook_client import ServiceError, call, socket_path_for

    sock = socket_path_for(path)
    try:
        status = call(sock, "status", timeout=STATUS_TIMEOUT_S)  # answered without the store lock
    except TimeoutError:
        raise fail(f"{path}: a process accepts connections on {sock} but does not answer within "
                   f"{STATUS_TIMEOUT_S:g} s; see `memsim tortoise serve --status --db {path}`") from None
    except (ServiceError, OSError):
        return None
    return ServiceSim(path, sock, status, preset) if status is not None else None
