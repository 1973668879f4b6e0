"""Tortoise write sequences: capture, checkpoint admission, diary, retract/supersede, spool write/flush.

Faithful (spec §5.1): a mutation commits in Kuzu, then the feed row is written in its own transaction and the
journal line appended, both best-effort; create_point commits the point, then marks it dirty, then emits;
retract emits ``PointRetracted`` *before* its compare-and-swap (TOR-24). A crash between those steps leaves
graph, feed and journal disagreeing (REL-06), and a crash mid-checkpoint leaves items without provenance that a
retry never repairs (the retry sees them as hash duplicates; REL-06). Hardened (REL-07):
``SimConfig(event_durability="transactional")``.

Each check reopens the store from disk (its own loader; the transactional mode re-derives lost journal lines),
retries what the caller was never told succeeded (checkpoint batches, the spool flush), then compares graph,
feed and journal.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from harness.reliability.crash import Acks, Check, Scenario
from tortoise_sim.config import FaultHooks, SimConfig
from tortoise_sim.sdk import Tortoise
from tortoise_sim.spool import Spool, local_capture_post
from tortoise_sim.store import StepClock

CONVERSATIONS = {
    "s1": [{"role": "user", "content": "decision: use Kuzu for the graph store"},
           {"role": "assistant", "content": "Noted, Kuzu it is."}],
    "s2": [{"role": "user", "content": "decision: journal every mutation as JSONL"},
           {"role": "assistant", "content": "Agreed."}],
}
BATCHES = [[{"content": "The API rate limit is 600 requests per minute"},
            {"content": "Deploys happen on Tuesdays after the standup"}],
           [{"content": "The staging database is rebuilt every night"}]]
DIARY = ["Tried the bulk loader; 3x faster than row inserts", "Spool flush retried twice before filing"]


def _open(root: Path, mode: str, hook: Any = None, *, restart: bool = False) -> Tortoise:
    """The scenario run is deterministic (step clock, seed 0) so every crash run repeats the recorded steps; a
    restart uses the system clock and fresh randomness, as a new process would (a replayed step clock would
    hand out the ids of points the crashed run already committed)."""
    cfg = SimConfig(embedder="hashing", event_log_path=str(root / "journal.jsonl"),
                    event_durability="best_effort" if mode == "faithful" else "transactional")
    if restart:
        return Tortoise(root / "db", config=cfg, seed=None, faults=FaultHooks(step=hook))
    return Tortoise(root / "db", config=cfg, clock=StepClock(), seed=0, faults=FaultHooks(step=hook))


def _book(root: Path, **kw: Any) -> dict[str, Any]:
    p = root / "scenario.json"
    data = json.loads(p.read_text()) if p.exists() else {}
    if kw:
        data.update(kw)
        p.write_text(json.dumps(data))  # the explorer's own notes, not design state
    return data


def _journal(root: Path) -> tuple[list[dict[str, Any]], int]:
    path = root / "journal.jsonl"
    if not path.exists():
        return [], 0
    good, bad = [], 0
    for raw in path.read_bytes().split(b"\n"):
        if not raw.strip():
            continue
        try:
            good.append(json.loads(raw.decode("utf-8")))
        except (UnicodeDecodeError, json.JSONDecodeError):
            bad += 1
    return good, bad


def _key(type_: str, payload: Any) -> tuple[str, str]:
    p = payload if isinstance(payload, dict) else {}
    return type_, str(p.get("id") or p.get("capture_key") or p.get("session_id") or p.get("name") or "")


def _agreement(t: Tortoise, root: Path, mode: str, c: Check) -> dict[str, dict[str, Any]]:
    """Graph vs feed vs journal; returns the graph's points by id."""
    rows = t.store.query("MATCH (p:Point) WHERE p.is_operator = false OR p.is_operator IS NULL "
                         "RETURN p.id AS id, p.content AS content, p.status AS status, p.pointKind AS kind")
    points = {r["id"]: r for r in rows}
    feed = t.store.feed()
    journal, bad = _journal(root)
    if bad:
        c.disagree.append(f"journal.jsonl: {bad} unparseable line(s)")
    fk = Counter(_key(e["type"], e["payload"]) for e in feed)
    jk = Counter(_key(j.get("type", ""), j.get("payload")) for j in journal if j.get("type") != "EntityMutated"
                 or mode != "faithful")
    c.duplicates += [f"feed {k} x{n}" for k, n in fk.items() if n > 1]
    c.duplicates += [f"journal {k} x{n}" for k, n in jk.items() if n > 1]
    only_feed, only_journal = fk - jk, jk - fk
    if only_feed:
        c.disagree.append(f"in the feed, not the journal: {sorted(only_feed)[:3]}")
    if only_journal:
        c.disagree.append(f"in the journal, not the feed: {sorted(only_journal)[:3]}")
    added = {k[1] for k in fk if k[0] == "PointAdded"}
    # extracted points (``pt_<hash>`` ids, written by the capture payload writer) emit no PointAdded (spec §5.2)
    missing_event = sorted(pid for pid in points if pid not in added and not pid.startswith("pt_"))
    if missing_event:
        c.disagree.append(f"points without a PointAdded event: {missing_event[:3]}")
    for event, status in (("PointRetracted", "retracted"), ("PointSuperseded", "superseded")):
        _status_agreement(points, {k[1] for k in fk if k[0] == event}, event, status, c)
    return points


def _status_agreement(points: dict[str, dict[str, Any]], emitted: set[str], event: str, status: str,
                      c: Check) -> None:
    """Every point named by an ``event`` feed row has ``status``, and every point with ``status`` has the event."""
    for pid in emitted:
        if pid in points and points[pid]["status"] != status:
            c.disagree.append(f"{event} {pid} but status {points[pid]['status']!r}")
    for pid, row in points.items():
        if row["status"] == status and pid not in emitted:
            c.disagree.append(f"{pid} {status} without a {event} event")


def _restart(root: Path, mode: str, c: Check) -> Tortoise | None:
    try:
        return _open(root, mode, restart=True)
    except Exception as exc:  # noqa: BLE001 - a store that cannot reopen is an outcome
        c.start = "clear_error" if str(root) in str(exc) else "unclear_error"
        c.notes.append(f"reopen failed: {exc!r}"[:200])
        return None


def _restarted(root: Path, mode: str, check: Callable[[Tortoise, Check], None]) -> Check:
    """Reopen the store as a new process would, run ``check`` on it and close it; a store that cannot reopen
    is itself the outcome (``Check.start``)."""
    c = Check()
    t = _restart(root, mode, c)
    if t is None:
        return c
    try:
        check(t, c)
    finally:
        t.close()
    return c


# ------------------------------------------------------------------------------------------------ capture
def run_capture(root: Path, hook: Any, mode: str, acks: Acks) -> None:
    with closing(_open(root, mode, hook)) as t:
        for sid, conv in CONVERSATIONS.items():
            t.capture_session(conv, session_id=sid)
            acks.append(sid)


def check_capture(root: Path, acks: list[str], mode: str) -> Check:
    def check(t: Tortoise, c: Check) -> None:
        _agreement(t, root, mode, c)
        for sid in acks:
            n = t.store.query("MATCH (s:Session {id:$s})-[:CONTAINS]->(p:Point) WHERE p.pointKind = 'event' "
                              "RETURN count(p) AS n", {"s": sid})[0]["n"]
            if n != len(CONVERSATIONS[sid]):
                c.lost.append(f"session {sid}: {n} of {len(CONVERSATIONS[sid])} turns")

    return _restarted(root, mode, check)


# ------------------------------------------------------------------------------------------------ checkpoint
def run_checkpoint(root: Path, hook: Any, mode: str, acks: Acks) -> None:
    with closing(_open(root, mode, hook)) as t:
        for i, batch in enumerate(BATCHES):
            t.checkpoint(batch, agent_name="agent-a", threshold=1.0)
            acks.append(str(i))


def check_checkpoint(root: Path, acks: list[str], mode: str) -> Check:
    def check(t: Tortoise, c: Check) -> None:
        for i, batch in enumerate(BATCHES):  # the caller retries every batch it was never told succeeded
            if str(i) not in acks:
                t.checkpoint(batch, agent_name="agent-a", threshold=1.0)
        points = _agreement(t, root, mode, c)
        contents = [r["content"] for r in points.values() if r["kind"] == "checkpoint-item"]
        for batch in BATCHES:
            for item in batch:
                n = contents.count(item["content"])
                if n == 0:
                    c.lost.append(item["content"])
                elif n > 1:
                    c.duplicates.append(f"{item['content']!r} x{n}")
        prov = {r["o"] for r in t.store.query(
            "MATCH (e:Event {eventKind:'pointAdded'})-[:produces]->(o:Object) RETURN o.name AS o")}
        no_prov = [pid for pid, r in points.items() if r["kind"] == "checkpoint-item" and pid not in prov]
        if no_prov:
            c.disagree.append(f"checkpoint items without provenance: {len(no_prov)}")

    return _restarted(root, mode, check)


# ------------------------------------------------------------------------------------------------ diary
def run_diary(root: Path, hook: Any, mode: str, acks: Acks) -> None:
    with closing(_open(root, mode, hook)) as t:
        for entry in DIARY:
            t.diary_write("agent-a", entry, topic="ops")
            acks.append(entry)


def check_diary(root: Path, acks: list[str], mode: str) -> Check:
    def check(t: Tortoise, c: Check) -> None:
        _agreement(t, root, mode, c)
        entries = [r["content"] for r in t.diary_read("agent-a", last_n=50)]
        c.lost = [a for a in acks if a not in entries]
        c.duplicates += [f"{e!r} x{entries.count(e)}" for e in set(entries) if entries.count(e) > 1]

    return _restarted(root, mode, check)


# ------------------------------------------------------------------------------------------------ lifecycle
def run_lifecycle(root: Path, hook: Any, mode: str, acks: Acks) -> None:
    with closing(_open(root, mode)) as t:  # setup without the hook: only the lifecycle writes are crash points
        ids = [t.create_point("statement", text)["id"] for text in
               ("The cache TTL is 60 seconds", "The queue holds 10k jobs", "The queue holds 50k jobs")]
        _book(root, ids=ids)
        t.store.faults.step = hook
        t.retract_point(ids[0])
        acks.append(f"retract:{ids[0]}")
        t.supersede_point(ids[1], ids[2])
        acks.append(f"supersede:{ids[1]}")


def check_lifecycle(root: Path, acks: list[str], mode: str) -> Check:
    def check(t: Tortoise, c: Check) -> None:
        points = _agreement(t, root, mode, c)
        for a in acks:
            op, pid = a.split(":", 1)
            want = "retracted" if op == "retract" else "superseded"
            if points.get(pid, {}).get("status") != want:
                c.lost.append(f"{a} (status {points.get(pid, {}).get('status')!r})")

    return _restarted(root, mode, check)


# ------------------------------------------------------------------------------------------------ dream
def run_dream(root: Path, hook: Any, mode: str, acks: Acks) -> None:
    with closing(_open(root, mode)) as t:  # setup without the hook: a claim graph A -IMPL-> B -NAND-> C, all dirty
        ids = {n: t.create_point("statement", f"Claim {n} of the dream graph", status="live")["id"] for n in "ABC"}
        t.set_point_baseline(ids["A"], 10, 1)
        t.set_point_baseline(ids["C"], 5, 1)
        t.create_operator("IMPL", ids["A"], [ids["B"]])
        t.create_operator("NAND", ids["B"], [ids["C"]])
        t.store.faults.step = hook
        t.dream(mode="local", require_calibration=False)
        acks.append("dream")


def check_dream(root: Path, acks: list[str], mode: str) -> Check:
    """Restart, let the design's own replay re-dream what is still dirty (``ep_dirty`` flags), then: nothing
    stays dirty, and every claim's stored confidence equals its latest ``ConfidenceChanged`` event."""
    def check(t: Tortoise, c: Check) -> None:
        t.dream(mode="local", require_calibration=False)
        _agreement(t, root, mode, c)
        claims = {r["id"]: r for r in t.store.claim_rows()}
        dirty = [i for i, r in claims.items() if r.get("ep_dirty")]
        if dirty:
            c.disagree.append(f"{len(dirty)} claim(s) still ep_dirty after the restart's dream")
        latest: dict[str, float] = {}
        for e in t.store.feed(["ConfidenceChanged"]):
            latest[e["payload"]["id"]] = e["payload"]["confidence"]
        for cid, conf in latest.items():
            stored = claims.get(cid, {}).get("confidence")
            if stored is None or abs(float(stored) - float(conf)) > 1e-9:
                c.disagree.append(f"{cid}: stored confidence {stored} but last ConfidenceChanged {conf}")
        if "dream" in acks and not latest:
            c.lost.append("acknowledged dream left no ConfidenceChanged event")

    return _restarted(root, mode, check)


# ------------------------------------------------------------------------------------------------ spool
SPOOL_TURNS = [{"role": "user", "content": "decision: keep the spool under 256 MB"},
               {"role": "assistant", "content": "OK."},
               {"role": "user", "content": "Also quarantine permanent failures."}]


def _spool(root: Path, hook: Any, mode: str) -> Spool:
    hardened = mode != "faithful"
    return Spool(root / "spool", fault_hook=hook, clock=StepClock(), atomic_turns=hardened, send_capture_key=hardened,
                 idempotent_ledger=hardened)


def _poster(t: Tortoise) -> Any:
    """Local capture, except that the receiver rejects session ``s2`` permanently (HTTP 400 -> quarantine)."""
    local = local_capture_post(t.capture_session)
    return lambda body: 400 if body["session_id"] == "s2" else local(body)


def run_spool(root: Path, hook: Any, mode: str, acks: Acks) -> None:
    with closing(_open(root, mode, hook)) as t:
        sp = _spool(root, hook, mode)
        sp.spool_write("s1", SPOOL_TURNS[:2], "claude", "hook", "m1")
        acks.append("write:2")
        sp.spool_write("s1", SPOOL_TURNS, "claude", "hook", "m1")
        acks.append("write:3")
        sp.spool_write("s2", SPOOL_TURNS[:1], "claude", "hook", "m1")
        acks.append("write:s2")
        counts = sp.flush_spool(_poster(t), now_ms=10**13)
        if counts["filed"]:
            acks.append("filed")


def check_spool(root: Path, acks: list[str], mode: str) -> Check:
    def check(t: Tortoise, c: Check) -> None:
        sp = _spool(root, None, mode)
        try:  # the restart's own replay: flush what is pending
            sp.flush_spool(_poster(t), now_ms=10**13)
        except Exception as exc:  # noqa: BLE001
            c.start = "clear_error" if str(root) in str(exc) else "unclear_error"
            c.notes.append(f"flush after restart failed: {exc!r}"[:200])
        _agreement(t, root, mode, c)
        n = t.store.query("MATCH (s:Session {id:'s1'})-[:CONTAINS]->(p:Point) WHERE p.pointKind = 'event' "
                          "RETURN count(p) AS n")[0]["n"]
        want = 3 if "write:3" in acks else 2 if "write:2" in acks else 0
        if n < want:
            c.lost.append(f"graph holds {n} of {want} acknowledged spooled turns")
        meta = None
        try:
            meta = sp.read_meta("s1")
        except Exception as exc:  # noqa: BLE001
            c.disagree.append(f"spool meta unreadable: {exc!r}"[:120])
        if meta is not None and n and meta.get("lane") != "filed":
            c.disagree.append(f"graph holds the session but the spool entry is {meta.get('lane')!r}")
        if "write:s2" in acks:  # the rejected session: quarantined (turns kept) with exactly one ledger row
            try:
                meta2 = sp.read_meta("s2")
            except Exception as exc:  # noqa: BLE001
                meta2 = None
                c.disagree.append(f"s2 meta unreadable: {exc!r}"[:120])
            if meta2 is None or meta2.get("lane") != "quarantine" or not sp.read_turns("s2"):
                c.lost.append(f"s2 not quarantined with its turns (lane {meta2 and meta2.get('lane')!r})")
            rows = [r for r in sp._ledger_rows_lenient() if r.get("session_id") == "s2"]
            if len(rows) > 1:
                c.duplicates.append(f"ledger rows for s2 x{len(rows)}")
            elif not rows:
                c.disagree.append("s2 quarantined without a ledger row")

    return _restarted(root, mode, check)


def scenarios() -> list[Scenario]:
    opt = "SimConfig(event_durability='transactional')"
    return [
        Scenario("tortoise", "tortoise.capture", "two capture_session calls: turns transaction, extraction, "
                 "points, ingest dream, feed rows and journal lines", run_capture, check_capture, hardened_option=opt),
        Scenario("tortoise", "tortoise.checkpoint", "two checkpoint batches (3 items): point, dirty mark, feed, "
                 "journal, provenance per item; unacknowledged batches retried", run_checkpoint, check_checkpoint,
                 hardened_option=opt),
        Scenario("tortoise", "tortoise.diary", "two diary_write calls", run_diary, check_diary, hardened_option=opt),
        Scenario("tortoise", "tortoise.lifecycle", "retract_point then supersede_point", run_lifecycle,
                 check_lifecycle, hardened_option=opt),
        Scenario("tortoise", "tortoise.dream", "local dream over a 3-claim graph: flush, write-back, "
                 "ConfidenceChanged events, dirty flags settled; the restart re-dreams what is still dirty",
                 run_dream, check_dream, hardened_option=opt),
        Scenario("tortoise", "tortoise.spool", "spool write (rewrite), spool write (append), a second session; "
                 "flush: s1 into capture, s2 rejected (400) and quarantined; the restart flushes again",
                 run_spool, check_spool,
                 hardened_option=opt + " + Spool(atomic_turns=True, send_capture_key=True, idempotent_ledger=True)"),
    ]
