"""Fractal write sequences: submit (save #1 pending, save #2 finalised) and the session listing (spec 6.4-6.6).

Faithful: every save overwrites ``<id>.json`` in place (FRA-17), so a crash mid-write leaves a torn file; the
next load treats it as unreadable (backup, empty session with the same id, spec 6.5 branch 3) and the listing
skips it silently: every acknowledged turn of that session is lost (REL-01). Hardened: ``durability="atomic"``.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from fractal_sim import FractalRuntime, ScriptedAgent
from fractal_sim.session import FractalSession
from fractal_sim.store import list_sessions, session_path
from harness.reliability.crash import Acks, Check, Scenario, leftover_temp_files

TURNS = ("Add a README section", "Fix the failing test", "Rename the helper")


def _durability(mode: str) -> str:
    return "faithful" if mode == "faithful" else "atomic"


def _bookkeeping(root: Path) -> dict[str, Any]:
    p = root / "scenario.json"
    return json.loads(p.read_text()) if p.exists() else {"sessions": []}


def _note_session(root: Path, sid: str) -> None:
    book = _bookkeeping(root)
    book["sessions"].append(sid)
    (root / "scenario.json").write_text(json.dumps(book))  # the explorer's own notes, not design state


def _runtime(root: Path, hook: Any, mode: str) -> FractalRuntime:
    ws = root / "ws"
    ws.mkdir(exist_ok=True)
    return FractalRuntime(ws, agent=ScriptedAgent(), state_dir=root / "state", fault_hook=hook,
                          durability=_durability(mode))


def run_submit(root: Path, hook: Any, mode: str, acks: Acks) -> None:
    rt = _runtime(root, hook, mode)
    _note_session(root, rt.session.session_id)
    for msg in TURNS:
        rt.submit_sync(msg)
        acks.append(f"{rt.session.session_id}:{msg}")


def run_listing(root: Path, hook: Any, mode: str, acks: Acks) -> None:
    rt = _runtime(root, hook, mode)
    _note_session(root, rt.session.session_id)
    for msg in TURNS[:2]:
        rt.submit_sync(msg)
        acks.append(f"{rt.session.session_id}:{msg}")
    rt.new_session()
    _note_session(root, rt.session.session_id)
    rt.submit_sync(TURNS[2])
    acks.append(f"{rt.session.session_id}:{TURNS[2]}")


def check(root: Path, acks: list[str], mode: str) -> Check:
    """Restart: load each session through ``FractalSession.load`` and list the workspace's sessions."""
    c = Check()
    ws, state = root / "ws", root / "state"
    listed = {info.session_id: info.turn_count for info in list_sessions(ws, state)}
    stored: list[str] = []
    for sid in _bookkeeping(root)["sessions"]:
        path = session_path(ws, sid, state)
        if not path.exists():
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            session = FractalSession.load(ws, session_id=sid, state_dir=state)
        for w in caught:
            c.notes.append(str(w.message)[:160])
            if str(path) not in str(w.message):
                c.start = "unclear_error"
        turns = session.state.summary.turns
        done = [t.user.message for t in turns if t.agent is not None and t.agent.status == "succeeded"]
        stored += [f"{sid}:{m}" for m in done]
        messages = [t.user.message for t in turns]
        c.duplicates += [f"{sid}:{m}" for m in sorted(set(messages)) if messages.count(m) > 1]
        if sid not in listed:
            c.disagree.append(f"{path.name} exists but the listing does not show it")
        elif listed[sid] != len(turns):
            c.disagree.append(f"listing shows {listed[sid]} turns for {sid}, the file holds {len(turns)}")
    c.lost = [a for a in acks if a not in stored]
    extra = set(listed) - set(_bookkeeping(root)["sessions"])
    if extra:
        c.disagree.append(f"listing shows sessions never written: {sorted(extra)}")
    c.notes += [f"leftover temp file {t}" for t in leftover_temp_files(root)]
    return c


def scenarios() -> list[Scenario]:
    return [
        Scenario("fractal", "fractal.submit", "three submits to one session (save #1 pending, save #2 final)",
                 run_submit, check, hardened_option="FractalRuntime(durability='atomic')"),
        Scenario("fractal", "fractal.listing", "two sessions in one workspace; the listing must show both",
                 run_listing, check, hardened_option="FractalRuntime(durability='atomic')"),
    ]
