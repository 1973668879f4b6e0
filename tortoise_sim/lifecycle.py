"""Lifecycle (spec §8): retract (guarded, event-before-CAS), supersede, invalidate, delete."""

from __future__ import annotations

from typing import Any

from .errors import LifecycleError
from .store import TortoiseStore

__all__ = ["retract_point", "supersede_point", "invalidate_point", "delete_point", "ALLOWED_TRANSITIONS",
           "transition_allowed"]

_DECAY = {"confidence": 0.5, "posterior_alpha": 1.0, "posterior_beta": 1.0}


def ALLOWED_TRANSITIONS(outdated_terminal: bool = True) -> dict[str | None, set[str]]:  # noqa: N802
    """Spec §2.2 status transitions (NULL status reads as live)."""
    return {
        "draft": {"live", "retracted", "superseded"},
        "live": {"retracted", "superseded"},
        None: {"retracted", "superseded"},
        "outdated": set() if outdated_terminal else {"retracted"},
        "retracted": set(), "superseded": set(), "archived": set(),
    }


def transition_allowed(old: str | None, new: str | None, outdated_terminal: bool = True) -> bool:
    if old == new:
        return True
    return new in ALLOWED_TRANSITIONS(outdated_terminal).get(old, set())


def _is_operator(row: dict[str, Any]) -> bool:
    return bool(row.get("is_operator")) or row.get("op_type") is not None


def _guard(store: TortoiseStore, point_id: str) -> dict[str, Any]:
    row = store.get_point(point_id)
    if row is None:
        raise LifecycleError("not_found", point_id)
    if _is_operator(row):
        raise LifecycleError("operator", point_id)
    if row.get("status") in store.cfg.guard_terminal:
        raise LifecycleError("already_terminal", point_id)
    return row


def retract_point(store: TortoiseStore, point_id: str, valid_to: str | None = None,
                  dry_run: bool = False) -> dict[str, Any]:
    """Spec §8.1 [A] (TOR-23..26): guard -> window -> dry run -> ``PointRetracted`` **before** the CAS -> CAS.

    Not done (faithful): no ``_mark_dirty``, no message invalidation, no deletion; belief columns are kept
    unless ``terminal_decay``. A CAS miss raises ``cas_failed`` while the emitted event stays (TOR-24).
    """
    row = _guard(store, point_id)
    if valid_to is not None and row.get("validFrom") and valid_to < row["validFrom"]:
        raise LifecycleError("inverted_window", f"{valid_to} < {row['validFrom']}")
    now = store.now()
    if dry_run:
        would: dict[str, Any] = {"status": "retracted", "updatedAt": now}
        if valid_to is not None:
            would["validTo"] = valid_to
        return {"dry_run": True, "id": point_id, "current_status": row.get("status"), "would_set": would}
    payload: dict[str, Any] = {"id": point_id}
    if valid_to is not None:
        payload["validTo"] = valid_to
    payload["recorded_ts"] = now
    store.emit_event("PointRetracted", payload)
    if store.faults.before_cas is not None:
        store.faults.before_cas(point_id)
    store.fault("retract.cas")
    sets = "n.status = 'retracted', n.updatedAt = $now"
    params: dict[str, Any] = {"id": point_id, "now": now, "g": store.cfg.guard_terminal}
    if valid_to is not None:
        sets += ", n.validTo = $vt"
        params["vt"] = valid_to
    if store.cfg.terminal_decay:
        sets += ", n.confidence = 0.5, n.posterior_alpha = 1.0, n.posterior_beta = 1.0"
    rows = store.query(
        f"MATCH (n:Point {{id:$id}}) WHERE n.status IS NULL OR NOT n.status IN $g SET {sets} RETURN n", params)
    if not rows:
        raise LifecycleError("cas_failed", point_id)
    return rows[0]["n"]


def _move_edges(store: TortoiseStore, old: str, new: str) -> None:
    """Supersession edge transfer (spec §8.2): operator input edges (keep idx/attributes; skip operators
    labelled ``alreadyDecided``), direct IMPL/NAND both ways (MERGE, self-edge dropped), aboutObject,
    extractedFrom."""
    attrs = ("idx", "direction", "weight", "confidence", "label", "batch_id", "msg_alpha", "msg_beta",
             "back_msg_alpha", "back_msg_beta")
    ret = ", ".join(f"r.{a} AS {a}" for a in attrs)
    setp = ", ".join(f"{a}: ${a}" for a in attrs)
    for rel in ("IMPL", "NAND"):
        # operator input edges (o)-[rel]->(old)
        for r in store.query(
            f"MATCH (o:Point)-[r:{rel}]->(x:Point {{id:$old}}) WHERE (o.is_operator = true OR o.op_type IS NOT "
            f"NULL) AND (o.label IS NULL OR o.label <> 'alreadyDecided') RETURN o.id AS o, {ret}", {"old": old}
        ):
            store.execute(f"MATCH (o:Point {{id:$o}})-[r:{rel}]->(x:Point {{id:$old}}) DELETE r",
                          {"o": r["o"], "old": old})
            store.execute(f"MATCH (o:Point {{id:$o}}), (n:Point {{id:$new}}) CREATE (o)-[:{rel} {{{setp}}}]->(n)",
                          {"o": r["o"], "new": new, **{a: r[a] for a in attrs}})
        # direct edges old -> t and s -> old (plain sources only)
        for r in store.query(
            f"MATCH (a:Point {{id:$old}})-[r:{rel}]->(t:Point) RETURN t.id AS t, {ret}", {"old": old}
        ):
            store.execute(f"MATCH (a:Point {{id:$old}})-[r:{rel}]->(t:Point {{id:$t}}) DELETE r",
                          {"old": old, "t": r["t"]})
            if r["t"] != new:
                _merge_direct(store, rel, new, r["t"], {a: r[a] for a in attrs})
        for r in store.query(
            f"MATCH (s:Point)-[r:{rel}]->(b:Point {{id:$old}}) WHERE s.is_operator = false AND s.op_type IS NULL "
            f"RETURN s.id AS s, {ret}", {"old": old}
        ):
            store.execute(f"MATCH (s:Point {{id:$s}})-[r:{rel}]->(b:Point {{id:$old}}) DELETE r",
                          {"old": old, "s": r["s"]})
            if r["s"] != new:
                _merge_direct(store, rel, r["s"], new, {a: r[a] for a in attrs})
    for rel, label, key in (("aboutObject", "Object", "name"), ("extractedFrom", "Source", "url")):
        for r in store.query(f"MATCH (a:Point {{id:$old}})-[r:{rel}]->(x:{label}) RETURN x.{key} AS k",
                             {"old": old}):
            store.execute(f"MATCH (a:Point {{id:$old}})-[r:{rel}]->(x:{label} {{{key}:$k}}) DELETE r",
                          {"old": old, "k": r["k"]})
            store.execute(f"MATCH (n:Point {{id:$new}}), (x:{label} {{{key}:$k}}) MERGE (n)-[:{rel}]->(x)",
                          {"new": new, "k": r["k"]})


def _merge_direct(store: TortoiseStore, rel: str, s: str, t: str, attrs: dict[str, Any]) -> None:
    exists = store.query(f"MATCH (a:Point {{id:$s}})-[r:{rel}]->(b:Point {{id:$t}}) RETURN count(r) AS c",
                         {"s": s, "t": t})[0]["c"]
    sets = ", ".join(f"r.{a} = ${a}" for a in attrs)
    if exists:
        store.execute(f"MATCH (a:Point {{id:$s}})-[r:{rel}]->(b:Point {{id:$t}}) SET {sets}",
                      {"s": s, "t": t, **attrs})
    else:
        setp = ", ".join(f"{a}: ${a}" for a in attrs)
        store.execute(f"MATCH (a:Point {{id:$s}}), (b:Point {{id:$t}}) CREATE (a)-[:{rel} {{{setp}}}]->(b)",
                      {"s": s, "t": t, **attrs})


def supersede_point(store: TortoiseStore, old_id: str, new_id: str, valid_from: str | None = None) -> dict:
    """Spec §8.2 (TOR-49): guards on both, ``PointSuperseded``, edge transfer, old marked superseded +
    ``outdated=true`` + window, ``(new)-[:CORRECTS]->(old)``, ``_mark_dirty([old, new])``, messages of both
    cleared."""
    if old_id == new_id:
        raise LifecycleError("same_point", old_id)
    _guard(store, old_id)
    new = _guard(store, new_id)
    now = store.now()
    valid_to = valid_from or new.get("validFrom") or new.get("createdAt") or now
    store.emit_event("PointSuperseded", {"id": old_id, "new_id": new_id, "valid_from": valid_from,
                                         "valid_to": valid_to, "expired_at": now})
    store.fault("supersede.write")
    with store.transaction():
        _move_edges(store, old_id, new_id)
        props: dict[str, Any] = {"status": "superseded", "outdated": True, "updatedAt": now, "validTo": valid_to,
                                 "expiredAt": now}
        if store.cfg.terminal_decay:
            props.update(_DECAY)
        store.set_point_props(old_id, props)
        store.execute("MATCH (n:Point {id:$n}), (o:Point {id:$o}) CREATE (n)-[:CORRECTS]->(o)",
                      {"n": new_id, "o": old_id})
    store.mark_dirty([old_id, new_id])
    store.invalidate_messages([old_id, new_id])
    return {"id": old_id, "new_id": new_id, "validTo": valid_to, "expiredAt": now}


def invalidate_point(store: TortoiseStore, point_id: str, corrected_by: str) -> dict[str, Any]:
    """Spec §8.3: ``outdated=true``, ``validTo=expiredAt=now``, status unchanged, CORRECTS edge, dirty +
    message invalidation."""
    if store.get_point(point_id) is None:
        raise LifecycleError("not_found", point_id)
    if store.get_point(corrected_by) is None:
        raise LifecycleError("not_found", corrected_by)
    now = store.now()
    with store.transaction():
        store.set_point_props(point_id, {"outdated": True, "validTo": now, "expiredAt": now, "updatedAt": now})
        store.execute("MATCH (n:Point {id:$n}), (o:Point {id:$o}) CREATE (n)-[:CORRECTS]->(o)",
                      {"n": corrected_by, "o": point_id})
    store.mark_dirty([point_id, corrected_by])
    store.invalidate_messages([point_id, corrected_by])
    return {"id": point_id, "corrected_by": corrected_by, "validTo": now}


def delete_point(store: TortoiseStore, point_id: str) -> dict[str, Any]:
    """Spec §8.3: ``_mark_dirty`` before removal (reaches operator co-inputs), DETACH DELETE,
    ``PointRetracted{id}`` (indistinguishable from a tombstone on the feed), all messages invalidated."""
    if store.get_point(point_id) is None:
        raise LifecycleError("not_found", point_id)
    store.mark_dirty([point_id])
    store.fault("point.delete")
    store.execute("MATCH (n:Point {id:$id}) DETACH DELETE n", {"id": point_id})
    store.dirty_roots.discard(point_id)
    store.emit_event("PointRetracted", {"id": point_id})
    store.invalidate_messages()
    return {"id": point_id, "deleted": True}
