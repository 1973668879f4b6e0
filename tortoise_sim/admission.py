"""Direct admission (spec §4): create_point and the other writers, diary, checkpoint with its dedup tiers.

Every function takes the ``TortoiseStore`` first. Values always travel as Cypher parameters.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .embed import batch_encode
from .errors import (
    CheckpointValidationError,
    DuplicatePointId,
    FaultInjected,
    LifecycleError,
    QuotaError,
    UnknownPoint,
)
from .store import POINT_COLUMNS, TortoiseStore
from .text import object_id, sha256_hex, subject_id

__all__ = [
    "POINT_KINDS", "STATUSES", "TIER_PRIORS", "create_point", "create_point_tool", "update_point", "promote_point",
    "set_point_baseline", "create_operator", "create_direct_edge", "mitigate_operator", "diary_write",
    "diary_read", "checkpoint", "tier_prior", "MITIGATION_MARKER", "bulk_create_points",
]

log = logging.getLogger("tortoise_sim")

POINT_KINDS = frozenset(
    "statement decision vision strategy plan goal target observation hypothesis jobToBeDone useCase userJourney "
    "workflow requirement issue session meeting milestone incident humanApproval diary checkpoint-item option "
    "evidence".split()
)
STATUSES = ("draft", "live", "retracted", "superseded", "outdated", "archived")
SERVER_MANAGED = ("sourcePath", "source_path", "is_episodic")
OP_TYPES = ("IMPL", "NAND", "composedOf", "decomposesInto", "contains", "wraps")
MITIGATION_MARKER = "[MITIGATION] "
_PLAIN = "n.is_operator = false AND n.op_type IS NULL"

TIER_PRIORS: dict[str, tuple[float, float]] = {}
for _keys, _prior in (
    (("gold", "T0", "0"), (10.0, 1.0)),
    (("high", "T1", "1"), (5.0, 1.0)),
    (("medium", "T2", "2"), (3.0, 1.0)),
    (("low", "T3", "3"), (2.0, 1.0)),
    (("unverified", "T4", "4"), (1.1, 1.0)),
):
    for _k in _keys:
        TIER_PRIORS[_k] = _prior


def tier_prior(credibility: Any) -> tuple[float, float]:
    """Credibility tier map (spec §4.1): gold/T0/0 -> Beta(10,1) ... anything else -> (1,1)."""
    return TIER_PRIORS.get(str(credibility), (1.0, 1.0))


def _flatten(props: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in props.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict):
            out.update(_flatten(v, key))
        else:
            out[key] = v
    return out


def _require_point(store: TortoiseStore, point_id: str) -> dict[str, Any]:
    row = store.get_point(point_id)
    if row is None:
        raise UnknownPoint(point_id)
    return row


def _is_operator(row: dict[str, Any]) -> bool:
    return bool(row.get("is_operator")) or row.get("op_type") is not None


def _checked_point_props(kind: str, content: Any, props: dict[str, Any]) -> dict[str, Any]:
    """The input checks shared by ``create_point`` and ``bulk_create_points``, in create_point's order:
    kind check (unknown => warning) -> flatten props -> reject server-managed keys (ValueError) ->
    search_keys list joined -> reject ``context`` (TypeError) -> content must be a str (TypeError)."""
    if kind not in POINT_KINDS:
        log.warning("unknown point kind %r accepted (open vocabulary)", kind)
    flat = _flatten(props)
    bad = [k for k in flat if k in SERVER_MANAGED]
    if bad:
        raise ValueError(f"server-managed keys are not accepted: {bad}")
    if "search_keys" in flat and isinstance(flat["search_keys"], list | tuple):
        flat["search_keys"] = " ".join(str(x) for x in flat["search_keys"])
    if "context" in flat:
        raise TypeError("create_point() does not accept 'context'")
    if not isinstance(content, str):
        raise TypeError("content must be a string")
    return flat


def create_point(
    store: TortoiseStore,
    kind: str,
    content: str,
    *,
    is_episodic: bool | None = None,
    dedup: bool = False,
    credibility: Any = None,
    id: str | None = None,  # noqa: A002 - the reference parameter name
    status: str = "draft",
    **props: Any,
) -> dict[str, Any]:
    """Spec §4.1 (SDK default ``dedup=False``). Returns the stored row (the existing one on a dedup hit).

    Order: kind check (unknown => warning) -> flatten props -> reject server-managed keys (ValueError) ->
    search_keys -> reject ``context`` (TypeError) -> content_hash -> dedup -> status check -> embedding ->
    CREATE -> tags -> props -> extractedFrom Source stub -> credibility baseline -> ``_mark_dirty`` -> PointAdded.
    """
    if store.cfg.redactor == "hardened" and isinstance(content, str):  # hardened option (redaction.py)
        from .redaction import hardened_redact

        content = hardened_redact(content)[0]
    flat = _checked_point_props(kind, content, props)
    content_hash = sha256_hex(content)
    if dedup:
        rows = store.query(
            f"MATCH (n:Point) WHERE {_PLAIN} AND n.content_hash = $h AND n.pointKind = $k RETURN n.id AS id "
            "ORDER BY id LIMIT 1",
            {"h": content_hash, "k": kind},
        ) or store.query(
            f"MATCH (n:Point) WHERE {_PLAIN} AND n.content_hash IS NULL AND n.content = $c RETURN n.id AS id "
            "ORDER BY id LIMIT 1",
            {"c": content},
        )
        if rows:
            existing = rows[0]["id"]
            rest = {k: v for k, v in flat.items() if k in POINT_COLUMNS and k not in ("id", "status")}
            if rest:
                update_point(store, existing, **rest)
            return _require_point(store, existing)
    if status not in STATUSES:
        raise ValueError(f"invalid status {status!r}")
    tags = flat.pop("tags", None)
    if tags is not None:
        if not isinstance(tags, list | tuple) or len(tags) > 50 or any(len(str(t)) > 200 for t in tags):
            raise ValueError("tags: at most 50, each at most 200 characters")
        tags = [str(t) for t in tags]
    store.faults.create_point_calls += 1
    if store.faults.fail_create_point_at is not None and (
        store.faults.create_point_calls == store.faults.fail_create_point_at
    ):
        raise FaultInjected(f"create_point call {store.faults.create_point_calls}")
    if id is not None and store.point_exists(id):
        raise DuplicatePointId(id)
    pid = id or store.new_id()
    now = store.now()
    embedding = store.embed([content])[0]
    columns: dict[str, Any] = {
        "id": pid, "content": content, "pointKind": kind, "is_operator": False, "status": status,
        "createdAt": now, "updatedAt": now, "content_hash": content_hash, "embedding": embedding,
        "is_episodic": bool(is_episodic) if is_episodic is not None else False,
    }
    extra: dict[str, Any] = {}
    for k, v in flat.items():
        if k in POINT_COLUMNS and k not in columns:
            columns[k] = v
        elif k not in columns:
            extra[k] = v
    if tags:
        columns["tags"] = tags
    if extra:
        columns["extra_props"] = json.dumps(extra, default=str, sort_keys=True)
    store.fault("point.create")
    with store.transaction():
        _create_point_row(store, columns)
        for t in tags or []:
            store.execute(
                "MERGE (t:Tag {name:$t}) WITH t MATCH (n:Point {id:$id}) MERGE (n)-[:TAGGED]->(t)",
                {"t": t, "id": pid},
            )
        if columns.get("extractedFrom"):
            link_source(store, pid, str(columns["extractedFrom"]), source_kind="document")
    if credibility is not None:
        set_point_baseline(store, pid, *tier_prior(credibility))
    store.mark_dirty([pid])
    row = _require_point(store, pid)
    store.emit_event("PointAdded", {"id": pid, "kind": kind, "content_hash": content_hash}, snapshot=row)
    return row


_ARROW_TYPES = {"STRING": "string", "BOOLEAN": "bool_", "DOUBLE": "float64", "INT64": "int64"}
_BULK_CHUNK = 20_000


def bulk_create_points(
    store: TortoiseStore,
    rows: Sequence[dict[str, Any]],
    *,
    embed_batch: int = 1,
) -> list[str]:
    """Seeding / benchmark bulk loader: write many plain Points through pyarrow ``LOAD FROM`` (20,000 per
    statement, one transaction per call). NOT a faithful writer: ``create_point`` stays the default path.

    Each row is a dict with ``kind`` and ``content`` and optionally ``id``, ``status`` (default ``draft``),
    ``credibility``, ``is_episodic`` and further scalar properties (``props``-style keys, nested dicts flattened
    as in ``create_point``). Every Point gets exactly the columns and values ``create_point(store, kind, content,
    **row)`` (``dedup=False``) writes: ``id``, ``content``, ``pointKind``, ``is_operator=false``, ``status``,
    ``createdAt``/``updatedAt``, ``content_hash``, ``embedding`` (``store.embed``, fail-open NULL),
    ``is_episodic``, whitelisted props, ``extra_props`` JSON for the rest, and for a credibility tier the baseline
    columns (``baseline_set``, ``baseline_source='explicit'``, ``ep_alpha``, ``ep_beta``), then ``ep_dirty=true``.

    Differences, by design (it is a seeding path):
    - no per-point provenance: no ``PointAdded`` GraphEvent / journal line, no fault hooks, no
      ``create_point_calls`` count;
    - one timestamp (``store.now()``) for every row and one ``_mark_dirty`` over all ids, so
      ``EpMeta.ep_version`` moves once per call and every row shares that ``ep_dirty_at`` (``create_point`` bumps
      the epoch once per point, twice with a credibility); messages are invalidated once when any row has a
      credibility (``set_point_baseline`` does it graph-wide per point);
    - ``tags`` and ``extractedFrom`` (which create Tag / Source nodes and edges) and ``dedup`` are not supported
      (ValueError);
    - ``embed_batch`` > 1 embeds that many contents per encoder call (faster with MiniLM; padded batches may
      differ from one-at-a-time vectors in the last float bits); the default 1 embeds like ``create_point``.

    Returns the ids in row order.
    """
    import pyarrow as pa

    from .embed import EMBED_DIM

    prepared: list[dict[str, Any]] = []
    seen: set[str] = set()
    for row in rows:
        row = dict(row)
        kind, content = row.pop("kind"), row.pop("content")
        status = row.pop("status", "draft")
        credibility = row.pop("credibility", None)
        is_episodic = row.pop("is_episodic", None)
        pid = row.pop("id", None)
        if row.pop("dedup", False):
            raise ValueError("bulk_create_points does not deduplicate")
        flat = _checked_point_props(kind, content, row)
        if status not in STATUSES:
            raise ValueError(f"invalid status {status!r}")
        unsupported = [k for k in ("tags", "extractedFrom") if k in flat]
        if unsupported:
            raise ValueError(f"bulk_create_points does not write {unsupported}; use create_point")
        if pid is not None:
            if pid in seen:
                raise DuplicatePointId(pid)
            seen.add(pid)
        prepared.append({"kind": kind, "content": content, "status": status, "credibility": credibility,
                         "is_episodic": is_episodic, "id": pid, "flat": flat})
    if not prepared:
        return []
    given = [p["id"] for p in prepared if p["id"] is not None]
    if given:
        clash = store.query("MATCH (n:Point) WHERE n.id IN $ids RETURN n.id AS id ORDER BY id LIMIT 1",
                            {"ids": given})
        if clash:
            raise DuplicatePointId(clash[0]["id"])
    now = store.now()
    contents = [p["content"] for p in prepared]
    step = max(1, int(embed_batch))
    embeddings: list[list[float] | None] = []
    for s in range(0, len(contents), step):
        embeddings.extend(store.embed(contents[s:s + step]))
    records: list[dict[str, Any]] = []
    for p, emb in zip(prepared, embeddings, strict=True):
        pid = p["id"] or store.new_id()
        cols: dict[str, Any] = {
            "id": pid, "content": p["content"], "pointKind": p["kind"], "is_operator": False, "status": p["status"],
            "createdAt": now, "updatedAt": now, "content_hash": sha256_hex(p["content"]), "embedding": emb,
            "is_episodic": bool(p["is_episodic"]) if p["is_episodic"] is not None else False,
        }
        extra: dict[str, Any] = {}
        for k, v in p["flat"].items():
            if k in POINT_COLUMNS and k not in cols:
                cols[k] = v
            elif k not in cols:
                extra[k] = v
        if extra:
            cols["extra_props"] = json.dumps(extra, default=str, sort_keys=True)
        if p["credibility"] is not None:
            a, b = tier_prior(p["credibility"])
            cols.update(baseline_set=True, baseline_source="explicit", ep_alpha=float(a), ep_beta=float(b))
        records.append(cols)
    ids = [r["id"] for r in records]
    with store.transaction():
        # ``_mark_dirty(ids)`` for fresh points (no operator has an edge to them yet): one epoch bump, the flags
        # written with the rows themselves
        epoch = int(store.query(
            "MATCH (m:EpMeta {key:'ep'}) SET m.ep_version = m.ep_version + 1 RETURN m.ep_version AS v")[0]["v"])
        for r in records:
            r["ep_dirty"], r["ep_dirty_at"] = True, epoch
        names = [c for c in POINT_COLUMNS if any(c in r for r in records)]
        types = {c: (pa.list_(pa.float32(), EMBED_DIM) if c == "embedding"
                     else getattr(pa, _ARROW_TYPES[POINT_COLUMNS[c]])()) for c in names}
        pattern = ", ".join(f"`{c}`: c{i}" for i, c in enumerate(names))
        for s in range(0, len(records), _BULK_CHUNK):
            chunk = records[s:s + _BULK_CHUNK]
            table = pa.table({f"c{i}": pa.array([r.get(c) for r in chunk], type=types[c])
                              for i, c in enumerate(names)})
            store.bulk_load(f"LOAD FROM tbl CREATE (n:Point {{{pattern}}}) RETURN count(*) AS n", table)
        if any(p["credibility"] is not None for p in prepared):
            store.invalidate_messages()
    store.dirty_roots.update(ids)
    return ids


def create_point_tool(store: TortoiseStore, kind: str, content: str, **kw: Any) -> dict[str, Any]:
    """The MCP tool flavour: ``dedup=True`` by default (spec §4.1)."""
    kw.setdefault("dedup", True)
    return create_point(store, kind, content, **kw)


def _create_point_row(store: TortoiseStore, columns: dict[str, Any]) -> None:
    names = list(columns)
    pattern = ", ".join(f"`{c}`: $p{i}" for i, c in enumerate(names))
    store.execute(f"CREATE (n:Point {{{pattern}}})", {f"p{i}": columns[c] for i, c in enumerate(names)})


def link_source(store: TortoiseStore, point_id: str, url: str, *, source_kind: str = "document") -> None:
    """MERGE ``Source{url}`` stub (``sourceKind`` set on create) and the ``extractedFrom`` edge."""
    store.execute(
        "MERGE (s:Source {url:$u}) ON CREATE SET s.sourceKind = $k, s.ingestedAt = $now "
        "WITH s MATCH (n:Point {id:$id}) MERGE (n)-[:extractedFrom]->(s)",
        {"u": url, "k": source_kind, "now": store.now(), "id": point_id},
    )


def update_point(store: TortoiseStore, point_id: str, **props: Any) -> dict[str, Any]:
    """Spec §4.2: only status draft -> live is allowed; bumps ``updatedAt``; ``_mark_dirty``."""
    row = _require_point(store, point_id)
    flat = _flatten(props)
    if "status" in flat:
        new = flat["status"]
        if new != row.get("status") and not (row.get("status") == "draft" and new == "live"):
            raise LifecycleError("invalid_transition", f"update_point may only move draft -> live, not "
                                 f"{row.get('status')} -> {new}")
    if any(k in SERVER_MANAGED for k in flat):
        raise ValueError("server-managed keys are not accepted")
    if "search_keys" in flat and isinstance(flat["search_keys"], list | tuple):
        flat["search_keys"] = " ".join(str(x) for x in flat["search_keys"])
    cols = {k: v for k, v in flat.items() if k in POINT_COLUMNS and k != "id"}
    extra = {k: v for k, v in flat.items() if k not in POINT_COLUMNS}
    if "content" in cols:
        cols["content_hash"] = sha256_hex(str(cols["content"]))
        cols["embedding"] = store.embed([str(cols["content"])])[0]
    if extra:
        merged = json.loads(row.get("extra_props") or "{}")
        merged.update(extra)
        cols["extra_props"] = json.dumps(merged, default=str, sort_keys=True)
    cols["updatedAt"] = store.now()
    store.fault("point.update")
    store.set_point_props(point_id, cols)
    store.mark_dirty([point_id])
    return _require_point(store, point_id)


def promote_point(store: TortoiseStore, point_id: str, *, event: str = "PointPromoted",
                  mark: bool = True) -> bool:
    """draft -> live + ``PointPromoted`` + ``promotedAt``. Returns False when the point was not a draft."""
    now = store.now()
    rows = store.query(
        "MATCH (n:Point {id:$id}) WHERE n.status = 'draft' SET n.status = 'live', n.promotedAt = $now, "
        "n.updatedAt = $now RETURN n.id AS id",
        {"id": point_id, "now": now},
    )
    if not rows:
        return False
    if mark:
        store.mark_dirty([point_id])
    store.emit_event(event, {"id": point_id})
    return True


def _set_baseline_columns(store: TortoiseStore, pid: str, alpha: float, beta: float, source: str) -> None:
    store.set_point_props(pid, {"baseline_set": True, "baseline_source": source, "ep_alpha": float(alpha),
                                "ep_beta": float(beta)})


def set_point_baseline(store: TortoiseStore, point_id: str, alpha: float, beta: float,
                       source: str = "explicit") -> None:
    """Spec §4.2: set the prior; invalidates **all** messages graph-wide; ``_mark_dirty([id])``."""
    _require_point(store, point_id)
    if alpha <= 0 or beta <= 0:
        raise ValueError("alpha and beta must be > 0")
    if source not in ("explicit", "inherited"):
        raise ValueError("source must be 'explicit' or 'inherited'")
    _set_baseline_columns(store, point_id, alpha, beta, source)
    store.invalidate_messages()
    store.mark_dirty([point_id])


def _input_label(store: TortoiseStore, node_id: str) -> str | None:
    if store.point_exists(node_id):
        return "Point"
    if store.query("MATCH (e:Event {id:$id}) RETURN e.id AS id", {"id": node_id}):
        return "Event"
    return None


def create_operator(
    store: TortoiseStore,
    op_type: str,
    source_id: str,
    target_ids: Sequence[str],
    label: str | None = None,
    direction: str = "bidirectional",
    promote_source: bool = True,
) -> str:
    """Spec §4.2: operator Point + edges with ``idx`` (0 = source). Returns the operator id."""
    if op_type not in OP_TYPES:
        raise ValueError(f"unknown op_type {op_type!r}")
    if direction not in ("bidirectional", "unidirectional"):
        raise ValueError(f"direction must be bidirectional|unidirectional, not {direction!r}")
    targets = list(target_ids)
    if not targets or len(targets) > 500:
        raise ValueError("an operator needs 1..500 targets")
    inputs = [source_id, *targets]
    labels = [_input_label(store, i) for i in inputs]
    missing = [i for i, lab in zip(inputs, labels, strict=True) if lab is None]
    if missing:
        raise UnknownPoint(f"operator inputs do not exist: {missing}")
    op_id = store.new_id()
    rel = op_type if op_type in ("IMPL", "NAND") else "hasPart"
    store.fault("operator.create")
    with store.transaction():
        _create_point_row(store, {
            "id": op_id, "is_operator": True, "op_type": op_type, "direction": direction, "label": label,
            "status": None if promote_source else "draft", "updatedAt": store.now(),
        })
        for idx, (node, lab) in enumerate(zip(inputs, labels, strict=True)):
            store.execute(
                f"MATCH (o:Point {{id:$o}}), (x:{lab} {{id:$x}}) CREATE (o)-[:{rel} {{idx:$i}}]->(x)",
                {"o": op_id, "x": node, "i": idx},
            )
    if promote_source and labels[0] == "Point":
        promote_point(store, source_id, mark=False)
    store.invalidate_messages(inputs)
    store.mark_dirty([i for i, lab in zip(inputs, labels, strict=True) if lab == "Point"])
    store.emit_event("OperatorAdded", {"id": op_id, "op_type": op_type, "inputs": inputs})
    return op_id


def create_direct_edge(
    store: TortoiseStore,
    src: str,
    tgt: str,
    type: str,  # noqa: A002 - the reference parameter name
    direction: str | None = None,
    weight: float | None = None,
    confidence: float | None = None,
    label: str | None = None,
) -> dict[str, Any]:
    """Spec §4.2: one edge per (src, tgt, type) (MERGE, last writer wins)."""
    if type not in ("IMPL", "NAND"):
        raise ValueError("type must be IMPL or NAND")
    guard = store.cfg.guard_terminal
    for pid in (src, tgt):
        row = _require_point(store, pid)
        if _is_operator(row):
            raise LifecycleError("operator", pid)
        if row.get("status") in guard:
            raise LifecycleError("already_terminal", pid)
    direction = direction or ("bidirectional" if type == "IMPL" else "unidirectional")
    existed = bool(store.query(
        f"MATCH (a:Point {{id:$s}})-[r:{type}]->(b:Point {{id:$t}}) RETURN count(r) AS c", {"s": src, "t": tgt}
    )[0]["c"])
    params = {"s": src, "t": tgt, "d": direction, "w": weight, "c": confidence, "l": label}
    store.fault("edge.create")
    if existed:
        store.execute(
            f"MATCH (a:Point {{id:$s}})-[r:{type}]->(b:Point {{id:$t}}) "
            "SET r.direction = $d, r.weight = $w, r.confidence = $c, r.label = $l", params)
    else:
        store.execute(
            f"MATCH (a:Point {{id:$s}}), (b:Point {{id:$t}}) "
            f"CREATE (a)-[:{type} {{direction:$d, weight:$w, confidence:$c, label:$l}}]->(b)", params)
        promote_point(store, src, mark=False)
    store.invalidate_messages([src, tgt])
    store.mark_dirty([src, tgt])
    return {"src": src, "tgt": tgt, "type": type, "direction": direction, "created": not existed}


def mitigate_operator(store: TortoiseStore, op_id: str, reason: str, strength: float) -> str:
    """Spec §4.2: mitigation Point (``[MITIGATION] `` + reason, ``mitigation_strength``, status NULL), edges
    ``(m)-[:IMPL]->(op)`` and ``(op)-[:mitigated_by]->(m)``; idempotent per (op, reason); no EP factor."""
    op = _require_point(store, op_id)
    if not _is_operator(op):
        raise LifecycleError("not_operator", op_id)
    content = MITIGATION_MARKER + reason
    existing = store.query(
        "MATCH (o:Point {id:$o})-[:mitigated_by]->(m:Point) WHERE m.content = $c RETURN m.id AS id",
        {"o": op_id, "c": content},
    )
    now = store.now()
    if existing:
        mid = existing[0]["id"]
        store.set_point_props(mid, {"mitigation_strength": float(strength), "updatedAt": now})
    else:
        mid = store.new_id()
        with store.transaction():
            _create_point_row(store, {
                "id": mid, "content": content, "pointKind": "statement", "is_operator": False,
                "content_hash": sha256_hex(content), "mitigation_strength": float(strength), "createdAt": now,
                "updatedAt": now, "is_episodic": False, "embedding": store.embed([content])[0],
            })
            store.execute("MATCH (m:Point {id:$m}), (o:Point {id:$o}) CREATE (m)-[:IMPL]->(o)",
                          {"m": mid, "o": op_id})
            store.execute("MATCH (m:Point {id:$m}), (o:Point {id:$o}) CREATE (o)-[:mitigated_by]->(m)",
                          {"m": mid, "o": op_id})
    store.mark_dirty([mid])
    return mid


# ---------------------------------------------------------------------------------------------- diary
def diary_write(store: TortoiseStore, agent_name: str, entry: str, topic: str | None = None,
                wing: str | None = None) -> dict[str, Any]:
    """Spec §4.5: ``create_point("diary", entry, authoredBy=agent_name, ...)`` (draft, no dedup)."""
    props: dict[str, Any] = {"authoredBy": agent_name}
    if topic is not None:
        props["topic"] = topic
    if wing is not None:
        props["wing"] = wing
    return create_point(store, "diary", entry, **props)


def diary_read(store: TortoiseStore, agent_name: str, last_n: int = 10, wing: str | None = None) -> list[dict]:
    """Spec §4.5 (TOR-14): identity/recency-scoped, **no status filter, no query relevance**, full rows."""
    where = f"{_PLAIN} AND n.pointKind = 'diary' AND n.authoredBy = $a"
    params: dict[str, Any] = {"a": agent_name, "n": int(last_n)}
    if wing is not None:
        where += " AND n.wing = $w"
        params["w"] = wing
    rows = store.query(
        f"MATCH (n:Point) WHERE {where} RETURN n ORDER BY n.createdAt DESC, n.id DESC LIMIT $n", params)
    return [r["n"] for r in rows]


# ---------------------------------------------------------------------------------------------- checkpoint
def _validate_items(items: Any) -> None:
    if not isinstance(items, list):
        raise CheckpointValidationError("items must be a list")
    for i, it in enumerate(items):
        if not isinstance(it, dict):
            raise CheckpointValidationError(f"item {i}: not an object")
        c = it.get("content")
        if not isinstance(c, str) or not c.strip():
            raise CheckpointValidationError(f"item {i}: content must be a non-empty string")
        for k in ("wing", "room"):
            if k in it and it[k] is not None and not isinstance(it[k], str):
                raise CheckpointValidationError(f"item {i}: {k} must be a string")


def checkpoint(
    store: TortoiseStore,
    items: Any,
    agent_name: str = "checkpoint",
    threshold: float = 0.95,
    *,
    encode_fn: Callable[[Sequence[str]], np.ndarray] | None = None,
) -> dict[str, Any]:
    """Spec §4.6 (TOR-10..13): precheck -> hash tier -> semantic tier (existing items only) -> sequential
    filing without rollback -> provenance (Event/Subject/Object stub, failure = warning).

    ``encode_fn`` replaces the batch encoder ``_encode`` (model -> TF-IDF -> zeros); an ``ImportError`` from it
    means hash-only dedup (info), any other exception hash-only (warning).
    """
    if isinstance(items, list) and len(items) > 500:
        raise QuotaError("ERR_QUOTA")
    if store.cfg.checkpoint_precheck:
        _validate_items(items)
    elif not isinstance(items, list):
        raise CheckpointValidationError("items must be a list")
    if store.cfg.redactor == "hardened":  # redact before the hash/semantic tiers, so dedup sees stored text
        from .redaction import hardened_redact

        items = [{**it, "content": hardened_redact(it["content"])[0]}
                 if isinstance(it, dict) and isinstance(it.get("content"), str) else it for it in items]
    warnings: list[str] = []
    info: list[str] = []
    # Tier 1: hash, in-batch and global over kinds and statuses. [SNAP] without precheck: a malformed item
    # fails while processing (below), after earlier items were filed.
    seen: set[str] = set()
    candidates: list[dict[str, Any]] = []
    dup = 0

    def _hash_dup(content: str) -> bool:
        h = sha256_hex(content)
        if h in seen:
            return True
        seen.add(h)
        return bool(store.query(
            f"MATCH (n:Point) WHERE {_PLAIN} AND n.content_hash = $h RETURN n.id AS id LIMIT 1", {"h": h}))

    semantic = threshold < 1.0
    if store.cfg.checkpoint_precheck:
        for it in items:
            if _hash_dup(it["content"]):
                dup += 1
            else:
                candidates.append(it)
        if semantic and candidates:
            kept, tier2 = _semantic_filter(store, candidates, threshold, encode_fn, warnings, info)
            dup += tier2
            candidates = kept
        return _file_items(store, candidates, agent_name, dup, warnings, info)
    # snapshot flow: sequential, no precheck; errors surface mid-batch
    filed = 0
    for i, it in enumerate(items):
        if not isinstance(it, dict) or not isinstance(it.get("content"), str):
            raise CheckpointValidationError(f"item {i}: missing content (after {filed} filed)")
        if _hash_dup(it["content"]):
            dup += 1
            continue
        if semantic:
            kept, tier2 = _semantic_filter(store, [it], threshold, encode_fn, warnings, info)
            if tier2:
                dup += 1
                continue
        res = _file_items(store, [it], agent_name, 0, warnings, info)
        filed += res["filed"]
    return {"filed": filed, "duplicates": dup, "warnings": warnings, "info": info}


def _semantic_filter(store: TortoiseStore, candidates: list[dict[str, Any]], threshold: float,
                     encode_fn: Callable[[Sequence[str]], np.ndarray] | None, warnings: list[str],
                     info: list[str]) -> tuple[list[dict[str, Any]], int]:
    existing = [r["c"] for r in store.query(
        f"MATCH (n:Point) WHERE {_PLAIN} AND n.pointKind = 'checkpoint-item' AND n.content IS NOT NULL "
        "RETURN n.content AS c ORDER BY n.id")]
    if not existing:
        return candidates, 0
    texts = [c["content"] for c in candidates] + existing
    try:
        vecs = encode_fn(texts) if encode_fn is not None else batch_encode(store.encoder, texts)
        vecs = np.asarray(vecs, dtype=np.float64)
    except ImportError as exc:
        info.append(f"semantic_dedup_unavailable:{exc}")
        return candidates, 0
    except Exception as exc:
        warnings.append(f"semantic_dedup_failed:{exc}")
        return candidates, 0
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    unit = np.divide(vecs, norms, out=np.zeros_like(vecs), where=norms > 0)
    cand, prior = unit[: len(candidates)], unit[len(candidates):]
    sims = cand @ prior.T
    kept = [c for c, row in zip(candidates, sims, strict=True) if float(row.max()) < threshold]
    return kept, len(candidates) - len(kept)


def _file_items(store: TortoiseStore, items: list[dict[str, Any]], agent_name: str, dup: int,
                warnings: list[str], info: list[str]) -> dict[str, Any]:
    filed = 0
    ids: list[str] = []
    for it in items:
        row = create_point(store, "checkpoint-item", it["content"], wing=it.get("wing") or "",
                           room=it.get("room") or "")
        filed += 1
        ids.append(row["id"])
        try:
            store.fault("checkpoint.provenance")
            ev = store.new_id()
            now = store.now()
            with store.transaction():
                store.execute(
                    "CREATE (e:Event {id:$e, eventId:$e, eventKind:'pointAdded', subject:$a, object:$p, "
                    "startedAt:$now, is_episodic:false})", {"e": ev, "a": agent_name, "p": row["id"], "now": now})
                store.execute(
                    "MERGE (s:Subject {name:$a}) ON CREATE SET s.id = $sid, s.subjectKind = 'agent' "
                    "WITH s MATCH (e:Event {id:$e}) CREATE (s)-[:performs]->(e)",
                    {"a": agent_name, "sid": subject_id(agent_name), "e": ev})
                store.execute(
                    "MERGE (o:Object {name:$p}) ON CREATE SET o.id = $oid, o.objectKind = 'point', "
                    "o.status = 'live' WITH o MATCH (e:Event {id:$e}) CREATE (e)-[:produces]->(o)",
                    {"p": row["id"], "oid": object_id(row["id"]), "e": ev})
        except Exception as exc:
            warnings.append(f"provenance_failed:{row['id']}:{exc}")
    return {"filed": filed, "duplicates": dup, "ids": ids, "warnings": warnings, "info": info}
