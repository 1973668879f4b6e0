"""The detached filer of a session end [SIM]: ``python -m tortoise_sim.filer --db DB --spool-dir DIR --session-id SID``.

Claude Code cancels a SessionEnd hook after 1.5 s by default (SIGTERM) and a cold filing (interpreter, Kuzu, the
MiniLM encoder, the capture) takes longer on a small machine, so without a resident service the session-end hook
client spools the transcript (standard library), starts this process in a new session (``start_new_session``: the
host's signal to the hook does not reach it) and exits. The filer holds the spool's filing lock
(:func:`tortoise_sim.spool.filer_lock`; the hook client takes it before starting the filer and hands the locked fd
over, ``--lock-fd``, so a session-start hook that comes right after the session end always sees it held), files that
one session (``flush_spool(only_session_id=SID)`` with the capture key, :mod:`tortoise_sim.resident`), and exits. A
store held by another writer is retried for ``--open-wait`` seconds; when the filer cannot file, the entry stays due
in the spool (the next session-start drain or ``spool-flush`` files it) and one line goes to ``<spool>/filer.log``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

__all__ = ["main", "LOG_NAME", "OPEN_WAIT_S"]

LOG_NAME = "filer.log"
OPEN_WAIT_S = 20.0


def _log(root: Path, msg: str) -> None:
    try:
        root.mkdir(parents=True, exist_ok=True)
        with open(root / LOG_NAME, "a", encoding="utf-8") as fh:
            fh.write(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} pid {os.getpid()}: {msg}\n")
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tortoise_sim.filer")
    ap.add_argument("--db", required=True)
    ap.add_argument("--spool-dir", required=True)
    ap.add_argument("--session-id", required=True)
    ap.add_argument("--lock-fd", type=int, default=None, help="an inherited fd already holding the filing lock")
    ap.add_argument("--open-wait", type=float, default=OPEN_WAIT_S)
    a = ap.parse_args(argv)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    root = Path(a.spool_dir)
    from .spool import filer_lock

    fd = a.lock_fd if a.lock_fd is not None else filer_lock(root, 120.0)
    if fd is None:
        _log(root, f"session {a.session_id!r}: the filing lock stayed held for 120 s; left in the spool")
        return 1
    try:
        from .resident import file_spooled, open_sim

        deadline = time.monotonic() + a.open_wait
        while True:
            try:
                sim = open_sim(Path(a.db), "analysed", "minilm")
                break
            except RuntimeError as exc:  # Kuzu: the store is held by another process
                if time.monotonic() >= deadline:
                    _log(root, f"session {a.session_id!r}: cannot open {a.db} ({' '.join(str(exc).split())}); "
                               "left in the spool")
                    return 1
                time.sleep(0.1)
        try:
            counts = file_spooled(a.db, root, a.session_id, sim=sim)
        finally:
            sim.close()
        if not counts.get("filed") and not counts.get("skipped_filed"):
            _log(root, f"session {a.session_id!r}: not filed ({counts})")
        return 0
    except Exception as exc:  # noqa: BLE001 - detached: the log is the only reader
        _log(root, f"session {a.session_id!r}: filing failed: {type(exc).__name__}: {exc}")
        return 1
    finally:
        os.close(fd)


if __name__ == "__main__":
    sys.exit(main())
