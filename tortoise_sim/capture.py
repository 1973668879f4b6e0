"""Capture (spec §3): window, redaction, turn writer + surplus sweep, extraction, deterministic admission
(``execute_embed``), supersession channel, sessionCaptured Event + Session Source, promotion + ingest dream."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from .admission import (
    MITIGATION_MARKER,
    POINT_KINDS,
    create_operator,
    link_source,
    mitigate_operator,
    promote_point,
)
from .errors import ProviderUnavailable
from .lifecycle import supersede_point
from .priors import prior_ids
from .records import RecordStore
from .redaction import REDACTION_PATTERNS, redact, redactor_for
from .search import search_points
from .store import TortoiseStore
from .text import STOPWORDS, ev_id, normalise_content, object_id, pt_id, sha256_hex

__all__ = [
    "REDACTION_PATTERNS", "redact", "window_turns", "capture_session", "execute_embed", "commit_payload",
    "apply_supersessions", "session_event_id", "MAX_TURNS", "TURN_CHARS",
]

MAX_TURNS = 500
TURN_CHARS = 5000
ENTITY_KINDS = frozenset({"core:person", "core:organization", "core:project", "core:product", "core:tool",
                          "core:technology", "core:concept", "core:place", "core:other"})
EVENT_KINDS = frozenset({"core:occurrence", "core:meeting", "core:decision", "core:incident", "core:release",
                         "core:milestone"})

def window_turns(conversation: Sequence[Any]) -> list[dict[str, str]]:
    """Spec §3.2: content None -> '', non-str -> str(), first 5000 chars; role None -> 'unknown'."""
    out = []
    for turn in conversation:
        if not isinstance(turn, dict):
            raise ValueError("each turn must be an object with role and content")
        content = turn.get("content")
        content = "" if content is None else content if isinstance(content, str) else str(content)
        role = turn.get("role")
        role = "unknown" if role is None else role if isinstance(role, str) else str(role)
        out.append({"role": role, "content": content[:TURN_CHARS]})
    return out


def session_event_id(session_id: str) -> str:
    """sessionCaptured Event id (deterministic, [LATER])."""
    return ev_id("sessionCaptured:" + session_id)


_TURN_ID = re.compile(r"^(.*)_t(\d+)$")


def _write_turns(store: TortoiseStore, sid: str, turns: list[dict[str, str]], n_conversation: int,
                 redactions: int, warnings: list[str]) -> None:
    """Spec §3.4-3.5: Session MERGE, turn MERGE, CONTAINS; [A] writer: embeddings, journaling, sweep, one
    transaction. Turns are written before extraction and survive any later failure (TOR-01)."""
    analysed = store.cfg.turn_writer == "analysed"
    existed = bool(store.query("MATCH (s:Session {id:$s}) RETURN s.id AS id", {"s": sid}))
    texts = [f"[{t['role']}] {t['content']}" for t in turns]
    vecs = store.embed(texts) if analysed else [None] * len(texts)
    store.fault("capture.turns")
    now = store.now()
    with store.transaction():
        store.execute(
            "MERGE (s:Session {id:$s}) ON CREATE SET s.created_at = $now "
            "SET s.turn_count = $n, s.is_episodic = true",
            {"s": sid, "now": now, "n": n_conversation},
        )
        if analysed:
            store.execute("MATCH (s:Session {id:$s}) SET s.capture_redactions = $r", {"s": sid, "r": redactions})
        tids = [f"{sid}_t{i}" for i in range(len(texts))]
        prior = {r["id"]: (r["h"], r["e"]) for r in store.by_ids(
            tids, "MATCH (p:Point {id:$id}) RETURN p.id AS id, p.content_hash AS h, p.embedding AS e",
            "MATCH (p:Point) WHERE p.id IN $ids RETURN p.id AS id, p.content_hash AS h, p.embedding AS e")}
        rows = []
        for tid, text, vec, turn in zip(tids, texts, vecs, turns, strict=True):
            h = sha256_hex(text)
            if not analysed:
                emb = None
            elif vec is not None:
                emb = vec
            elif tid in prior and prior[tid][0] == h:
                emb = prior[tid][1]
            else:
                emb = None
            rows.append({"id": tid, "content": text, "role": turn["role"], "hash": h, "emb": emb})
        if len(rows) >= BULK_TURNS:
            _bulk_turns(store, sid, rows, now)
        else:
            for r in rows:
                store.execute(
                    "MERGE (p:Point {id:$id}) ON CREATE SET p.createdAt = $now, p.status = 'draft' "
                    "SET p.content = $c, p.pointKind = 'event', p.is_operator = false, p.speaker = $role, "
                    "p.is_episodic = true, p.updatedAt = $now, p.content_hash = $h, p.embedding = $e "
                    "WITH p MATCH (s:Session {id:$s}) MERGE (s)-[:CONTAINS]->(p)",
                    {"id": r["id"], "now": now, "c": r["content"], "role": r["role"], "h": r["hash"],
                     "e": r["emb"], "s": sid},
                )
        if analysed:
            for r in rows:
                store.emit_event("PointAdded", {"id": r["id"], "kind": "event", "content_hash": r["hash"],
                                                "contains_session": sid},
                                 snapshot={"id": r["id"], "content": r["content"], "pointKind": "event",
                                           "speaker": r["role"], "is_episodic": True, "updatedAt": now,
                                           "content_hash": r["hash"]})
        if analysed:
            store.emit_event("SessionRecorded", {"session_id": sid, "capture_redactions": redactions,
                                                 "turn_count": n_conversation})
        if analysed and existed:
            keep = {f"{sid}_t{i}" for i in range(len(turns))}
            rows = store.query(
                "MATCH (s:Session {id:$s})-[:CONTAINS]->(p:Point) WHERE p.is_episodic = true "
                "AND p.pointKind = 'event' RETURN p.id AS id ORDER BY id", {"s": sid})
            for r in rows:
                m = _TURN_ID.match(r["id"])
                if not m or m.group(1) != sid or r["id"] in keep:
                    continue
                store.execute("MATCH (p:Point {id:$id}) DETACH DELETE p", {"id": r["id"]})
                store.emit_event("PointRetracted", {"id": r["id"]})
                store.journal("EntityMutated", {"op": "delete", "id": r["id"]})


BULK_TURNS = 32


def _bulk_turns(store: TortoiseStore, sid: str, rows: list[dict[str, Any]], now: str) -> None:
    """Large windows go through one pyarrow-backed ``LOAD FROM`` per statement instead of a MERGE per turn."""
    import pyarrow as pa

    from .embed import EMBED_DIM

    table = pa.table({
        "tid": [r["id"] for r in rows], "txt": [r["content"] for r in rows], "rl": [r["role"] for r in rows],
        "hs": [r["hash"] for r in rows],
        "em": pa.array([r["emb"] for r in rows], type=pa.list_(pa.float32(), EMBED_DIM)),
    })
    store.bulk_load(
        "LOAD FROM tbl WITH tid AS i, txt AS c, rl AS role, hs AS h, em AS e "
        "MERGE (p:Point {id: i}) ON CREATE SET p.createdAt = $now, p.status = 'draft' "
        "SET p.content = c, p.pointKind = 'event', p.is_operator = false, p.speaker = role, "
        "p.is_episodic = true, p.updatedAt = $now, p.content_hash = h, p.embedding = e RETURN count(*) AS n",
        table, {"now": now})
    store.bulk_load(
        "LOAD FROM tbl WITH tid AS i MATCH (s:Session {id:$s}), (p:Point {id: i}) "
        "MERGE (s)-[:CONTAINS]->(p) RETURN count(*) AS n", table, {"s": sid})


def _topics(contents: list[str]) -> list[str]:
    words = [w for c in contents for w in re.findall(r"[a-z]{3,}", c.lower()) if w not in STOPWORDS]
    counts = Counter(words)
    first = {}
    for i, w in enumerate(words):
        first.setdefault(w, i)
    return sorted(counts, key=lambda w: (-counts[w], first[w]))[:6]


def _session_event_and_source(store: TortoiseStore, sid: str, turns: list[dict[str, str]],
                              point_ids: list[str]) -> str:
    """Spec §3.8: deterministic sessionCaptured Event, eventId on this capture's points, Session Source."""
    eid = session_event_id(sid)
    now = store.now()
    texts = [f"[{t['role']}] {t['content']}" for t in turns]
    transcript = "\n".join(texts)[:8000]
    summary = next((t["content"].strip()[:200] for t in turns if len(t["content"].strip()) >= 10), "")
    with store.transaction():
        store.execute(
            "MERGE (e:Event {id:$e}) SET e.eventId = $e, e.eventKind = 'sessionCaptured', e.name = $name, "
            "e.startedAt = $now, e.endedAt = $now, e.sessionId = $s, e.is_episodic = true",
            {"e": eid, "name": f"session_{sid}", "now": now, "s": sid})
        if point_ids:
            store.by_ids(point_ids, "MATCH (p:Point {id:$id}) SET p.eventId = $e",
                         "MATCH (p:Point) WHERE p.id IN $ids SET p.eventId = $e", {"e": eid})
        store.execute(
            "MERGE (src:Source {url:$u}) ON CREATE SET src.ingestedAt = $now "
            "SET src.sourceKind = 'agentSession', src.sessionId = $s, src.capturedAt = $now, "
            "src.contentHash = $h, src.summary = $sum, src.topics = $top, src.eventId = $e "
            "WITH src MATCH (e:Event {id:$e}) MERGE (src)-[:references]->(e)",
            {"u": f"session:{sid}", "now": now, "s": sid, "h": sha256_hex(transcript), "sum": summary,
             "top": _topics([t["content"] for t in turns]), "e": eid})
    return eid


# ----------------------------------------------------------------------------------------- admission (§3.6)
def execute_embed(store: TortoiseStore, payload: dict[str, Any], *, priors: str | None = None) -> dict[str, Any]:
    """Deterministic admission gates (spec §3.6, TOR-07): kind repair -> in-payload dedupe -> consolidation
    against priors (NOOP / UPDATE) -> operators on unknown ids dropped -> MITIGATES strength clamp.

    ``priors`` picks how the consolidation priors are found (``tortoise_sim.priors``): ``"index"`` (default, the
    store's incrementally maintained map) or ``"scan"`` (a full Kuzu scan per call, the previous path); unset =
    ``store.admission_priors`` or ``"index"``. Both give the same result.

    Returns ``{entities, events, points (to write), noop (id -> prior id), remap, operators, supersessions,
    warnings}``; nothing is written here."""
    warnings: list[str] = []
    entities = []
    for e in payload.get("entities") or []:
        if not isinstance(e, dict) or not e.get("name"):
            warnings.append("entity_dropped:invalid")
            continue
        kind = e.get("kind") or "core:other"
        if kind not in ENTITY_KINDS:
            warnings.append(f"entity_kind_repaired:{kind}")
            kind = "core:other"
        entities.append({**e, "name": str(e["name"]), "kind": kind})
    events = []
    for ev in payload.get("events") or []:
        if not isinstance(ev, dict) or not ev.get("content"):
            continue
        kind = ev.get("eventKind") or "core:occurrence"
        if kind not in EVENT_KINDS:
            warnings.append(f"event_kind_repaired:{kind}")
            kind = "core:occurrence"
        content = str(ev["content"])[:1000]
        events.append({**ev, "eventKind": kind, "content": content, "id": ev.get("id") or ev_id(content)})
    # priors: plain, non-turn Points of any status, looked up for the keys of this payload's points
    raw_points = list(payload.get("points") or [])
    prior_of = prior_ids(store, (normalise_content(p["content"][:1000]) for p in raw_points
                                 if isinstance(p, dict) and isinstance(p.get("content"), str)
                                 and p["content"].strip()), priors)
    remap: dict[str, str] = {}
    noop: dict[str, str] = {}
    points: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    supersessions = [dict(s) for s in payload.get("supersessions") or [] if isinstance(s, dict)]
    for p in raw_points:
        if not isinstance(p, dict) or not isinstance(p.get("content"), str) or not p["content"].strip():
            warnings.append("point_dropped:invalid")
            continue
        content = p["content"][:1000]
        pid = p.get("id") or pt_id(content)
        orig = p.get("id") or pid
        kind = p.get("pointKind") or "statement"
        if kind not in POINT_KINDS:
            warnings.append(f"point_kind_repaired:{kind}")
            kind = "statement"
        key = normalise_content(content)
        if key in seen:  # gate 2: first wins
            remap[orig] = seen[key]
            continue
        cons = p.get("consolidation") or {}
        reason = p.get("reason") if p.get("reason") in ("NEW", "REVISES") else "NEW"
        if key in prior_of:
            noop[pid] = prior_of[key]
            remap[orig] = prior_of[key]
            seen[key] = prior_of[key]
            warnings.append(f"consolidated_noop:{pid}->{prior_of[key]}")
            continue
        if cons.get("op") == "NOOP" and cons.get("prior_id"):
            noop[pid] = cons["prior_id"]
            remap[orig] = cons["prior_id"]
            seen[key] = cons["prior_id"]
            warnings.append(f"consolidated_noop:{pid}->{cons['prior_id']}")
            continue
        if cons.get("op") == "UPDATE" and cons.get("prior_id"):
            reason = "REVISES"
            supersessions.append({"superseded": cons["prior_id"], "supersedes_by": pid,
                                  "evidence": "consolidation"})
            warnings.append(f"consolidated_update:{cons['prior_id']}->{pid}")
        keys = [str(k)[:60] for k in (p.get("search_keys") or []) if str(k)][:4]
        points.append({
            "id": pid, "content": content, "pointKind": kind, "reason": reason,
            "quote": (p.get("quote") or None) and str(p["quote"])[:200], "search_keys": keys,
            "source_turn_id": p.get("source_turn_id"), "tier": p.get("tier"), "when": p.get("when"),
            "about_entities": list(p.get("about_entities") or []),
        })
        remap[orig] = pid
        seen[key] = pid
    known = set(remap.values()) | set(remap) | {e["id"] for e in events}

    def res(ref: Any) -> str | None:
        return remap.get(ref, ref) if isinstance(ref, str) else None

    operators = []
    for op in payload.get("operators") or []:
        if not isinstance(op, dict):
            continue
        t = op.get("op_type")
        if t == "MITIGATES":
            tgt = op.get("target") or {}
            ids = [op.get("src"), tgt.get("src"), tgt.get("dst")]
            if not all(isinstance(i, str) and i in known for i in ids):
                warnings.append(f"operator_dropped:unknown_ref:{op.get('src')}")
                continue
            strength = min(max(float(op.get("strength", 0.3)), 0.10), 0.50)
            if strength != op.get("strength"):
                warnings.append(f"mitigation_strength_clamped:{op.get('strength')}->{strength}")
            operators.append({"op_type": "MITIGATES", "src": res(op["src"]), "strength": strength,
                              "target": {"src": res(tgt["src"]), "dst": res(tgt["dst"]), "op_type": "IMPL"}})
            continue
        if t not in ("IMPL", "NAND"):
            warnings.append(f"operator_dropped:op_type:{t}")
            continue
        if not (op.get("src") in known and op.get("dst") in known):
            warnings.append(f"operator_dropped:unknown_ref:{op.get('src')}->{op.get('dst')}")
            continue
        operators.append({"op_type": t, "src": res(op["src"]), "dst": res(op["dst"]),
                          "direction": op.get("direction")})
    for s in supersessions:
        if isinstance(s.get("supersedes_by"), str):
            s["supersedes_by"] = remap.get(s["supersedes_by"], s["supersedes_by"])
    return {"entities": entities, "events": events, "points": points, "noop": noop, "remap": remap,
            "operators": operators, "supersessions": supersessions, "warnings": warnings}


def apply_supersessions(store: TortoiseStore, records: list[dict[str, Any]], warnings: list[str]) -> int:
    """Spec §3.7 (TOR-08): best-effort; never fails the caller. Returns the number applied."""
    applied = 0
    for rec in records:
        ref = rec.get("superseded")
        try:
            row = store.get_point(ref) if isinstance(ref, str) and ref.startswith("pt_") else None
            if row is not None and row.get("status") not in store.cfg.guard_terminal:
                supersede_point(store, ref, rec.get("supersedes_by"))
                applied += 1
            elif isinstance(ref, str) and store.query("MATCH (o:Object {name:$n}) RETURN o.name AS n", {"n": ref}):
                now = store.now()
                store.emit_event("ObjectSuperseded", {"name": ref, "superseded_by": rec.get("supersedes_by")})
                store.execute("MATCH (o:Object {name:$n}) SET o.status = 'superseded', o.supersededBy = $b, "
                              "o.supersededAt = $now", {"n": ref, "b": rec.get("supersedes_by"), "now": now})
                applied += 1
            else:
                warnings.append(f"supersession_unresolved:{ref}")
        except Exception as exc:  # best-effort channel
            warnings.append(f"supersession_failed:{ref}:{exc}")
    return applied


def _write_payload(store: TortoiseStore, sid: str, admitted: dict[str, Any], *, apply_sups: bool,
                   warnings: list[str], in_session: bool = True) -> tuple[list[str], list[str]]:
    """Writers of ``_extract_session_v2`` in order; returns (written point ids, created operator ids)."""
    now = store.now()
    for e in admitted["entities"]:
        store.execute("MERGE (o:Object {name:$n}) SET o.id = $id, o.objectKind = $k, "
                      "o.status = coalesce(o.status, 'live')", {"n": e["name"], "id": object_id(e["name"]),
                                                                 "k": e["kind"]})
    written: list[str] = []
    for p in admitted["points"]:
        if store.point_exists(p["id"]):  # §2.5 item 1: MERGE, only updatedAt changes
            store.set_point_props(p["id"], {"updatedAt": now})
            warnings.append(f"duplicate_id_merged:{p['id']}")
            continue
        emb = store.embed([p["content"]])[0]
        cols = {
            "id": p["id"], "content": p["content"], "pointKind": p["pointKind"], "is_operator": False,
            "session_id": sid, "is_episodic": False, "status": "draft", "extractedFrom": f"session:{sid}",
            "quote": p["quote"], "search_keys": " ".join(p["search_keys"]) or None,
            "source_turn_id": p["source_turn_id"], "tier": p["tier"], "when": p["when"], "reason": p["reason"],
            "createdAt": now, "updatedAt": now, "content_hash": sha256_hex(p["content"]), "embedding": emb,
        }
        names = list(cols)
        store.execute("CREATE (n:Point {" + ", ".join(f"`{c}`: $p{i}" for i, c in enumerate(names)) + "})",
                      {f"p{i}": cols[c] for i, c in enumerate(names)})
        link_source(store, p["id"], f"session:{sid}", source_kind="agentSession")
        for name in p["about_entities"]:
            store.execute("MATCH (n:Point {id:$id}), (o:Object {name:$o}) MERGE (n)-[:aboutObject]->(o)",
                          {"id": p["id"], "o": str(name)})
        if in_session:
            store.execute("MATCH (s:Session {id:$s}), (n:Point {id:$id}) MERGE (s)-[:CONTAINS]->(n)",
                          {"s": sid, "id": p["id"]})
        written.append(p["id"])
    if apply_sups:
        apply_supersessions(store, admitted["supersessions"], warnings)
    for ev in admitted["events"]:
        content = ev["content"]
        store.execute(
            "CREATE (e:Event {id:$id, eventId:$id, eventKind:$k, name:$n, sessionId:$s, is_episodic:true, "
            "startedAt:$st})",
            {"id": store.new_id(), "k": ev["eventKind"].rsplit(":", 1)[-1], "n": content[:80], "s": sid,
             "st": ev.get("started_at")})
    ops: list[str] = []
    impl_ops: dict[tuple[str, str], str] = {}
    for op in admitted["operators"]:
        if op["op_type"] == "MITIGATES":
            continue
        try:
            oid = create_operator(store, op["op_type"], op["src"], [op["dst"]],
                                  direction=op.get("direction") or "unidirectional", promote_source=False)
            ops.append(oid)
            if op["op_type"] == "IMPL":
                impl_ops[(op["src"], op["dst"])] = oid
        except Exception as exc:
            warnings.append(f"operator_skipped:{op['src']}->{op['dst']}:{exc}")
    for op in admitted["operators"]:
        if op["op_type"] != "MITIGATES":
            continue
        target = impl_ops.get((op["target"]["src"], op["target"]["dst"]))
        src = store.get_point(op["src"])
        if target is None or src is None:
            warnings.append(f"mitigation_dropped:{op['src']}")
            continue
        reason = (src.get("content") or "").removeprefix(MITIGATION_MARKER)
        mitigate_operator(store, target, reason, op["strength"])
    return written, ops


def commit_payload(store: TortoiseStore, payload: dict[str, Any]) -> dict[str, Any]:
    """Commit entry point: same gates and writers; the supersession channel always applies (§3.7)."""
    sid = str(payload.get("session_id") or "commit")
    admitted = execute_embed(store, payload)
    warnings = list(admitted["warnings"])
    written, ops = _write_payload(store, sid, admitted, apply_sups=True, warnings=warnings, in_session=False)
    return {"session_id": sid, "points": written, "operators": ops, "warnings": warnings}


def capture_session(
    store: TortoiseStore,
    conversation: Any,
    session_id: str | None = None,
    max_turns: int = MAX_TURNS,
    *,
    extractor: Any = None,
    record_store: RecordStore | None = None,
) -> dict[str, Any]:
    """Spec §3.1 (TOR-01..09). ``extractor=None`` means "no extraction provider"."""
    cfg = store.cfg
    if extractor is None and cfg.capture_requires_provider:
        raise ProviderUnavailable("no extraction provider configured")
    if not isinstance(conversation, list):
        raise ValueError("conversation must be a list of {role, content}")
    if len(conversation) > max_turns:
        raise ValueError(f"conversation has {len(conversation)} turns (max {max_turns})")
    if session_id is not None and (not isinstance(session_id, str) or not session_id.strip()):
        raise ValueError("session_id must be a non-empty string")
    turns = window_turns(conversation)
    totals: dict[str, int] = {}
    if cfg.turn_writer == "analysed" or cfg.redactor == "hardened":
        scrub = redactor_for(cfg.redactor)  # "faithful": redact (spec 3.3); "hardened": redaction.py
        for t in turns:
            t["content"], counts = scrub(t["content"])
            for k, v in counts.items():
                totals[k] = totals.get(k, 0) + v
    if all(not t["content"].strip() for t in turns):
        return {"ok": False, "extraction_mode": "empty", "turns": 0, "extracted": 0}
    sid = session_id or f"session_{store.rng.getrandbits(48):012x}"
    warnings: list[str] = []
    errors: list[str] = []
    n_red = sum(totals.values())
    if cfg.turn_store in ("graph", "both"):
        _write_turns(store, sid, turns, len(conversation), n_red, warnings)
    else:  # "record": Session row only, no turn Points
        store.execute("MERGE (s:Session {id:$s}) ON CREATE SET s.created_at = $now "
                      "SET s.turn_count = $n, s.is_episodic = true",
                      {"s": sid, "now": store.now(), "n": len(conversation)})
    if cfg.turn_store in ("record", "both") and record_store is not None:
        record_store.append_session(sid, turns)
    written: list[str] = []
    ops: list[str] = []
    mode = "none"
    ok = True
    if extractor is None:
        warnings.append("no_extraction_provider")
    else:
        mode = getattr(extractor, "route", "scripted")
        try:
            payload = extractor.extract([dict(t) for t in turns], sid,
                                        lambda q, limit=10: search_points(store, q, limit)[0])
            if not isinstance(payload, dict):
                raise ValueError("extractor returned a non-object payload")
            admitted = execute_embed(store, payload)
            warnings.extend(admitted["warnings"])
            written, ops = _write_payload(store, sid, admitted, apply_sups=cfg.capture_applies_supersessions,
                                          warnings=warnings)
        except Exception as exc:
            mode, ok = "error", False
            errors.append(f"{type(exc).__name__}: {exc}")
    _session_event_and_source(store, sid, turns, written)
    dream: dict[str, Any] | None = None
    if cfg.capture_promotes and (written or ops):
        for pid in written:
            promote_point(store, pid, mark=False)
        for oid in ops:
            promote_point(store, oid, event="OperatorPromoted", mark=False)
        if written:
            store.mark_dirty(written)
        try:
            dream = store.run_ingest_dream(list(written))
        except Exception as exc:  # fail-open (§3.9)
            warnings.append(f"ingest_dream_failed:{exc}")
    points = []
    for pid in written:
        row = store.get_point(pid) or {}
        points.append({"id": pid, "kind": "statement", "text": (row.get("content") or "")[:200],
                       "props": {"pointKind": row.get("pointKind"), "reason": row.get("reason"),
                                 "status": row.get("status"), "search_keys": row.get("search_keys"),
                                 "source_turn_id": row.get("source_turn_id")}})
    resp = {"session_id": sid, "turns": len(conversation), "extracted": len(written), "points": points,
            "extraction_mode": mode, "ok": ok, "errors": errors, "warnings": warnings, "redactions": totals,
            "operators": ops}
    if dream is not None:
        resp["ingest_dream"] = dream
    return resp


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)
