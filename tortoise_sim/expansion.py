"""Source-session expansion (spec §11): request-driven widening of a retrieval pool with retained turns of the
sessions the pool came from. Wired only into an evaluation driver (off by default), never into volunteering."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .store import TortoiseStore

__all__ = ["expand_pool", "seeded_sessions", "source_session_chunk_pass", "reinjection_merge_order"]


def seeded_sessions(pool: Sequence[dict[str, Any]], window: int = 40, limit: int = 5) -> list[tuple[str, int, str]]:
    """First distinct sessions among ``pool[:window]`` (hits without id, empty or ``idx:`` keys skipped)."""
    seeds: list[tuple[str, int, str]] = []
    seen: set[str] = set()
    for rank, hit in enumerate(pool[:window]):
        sid, pid = hit.get("session_id"), hit.get("id")
        if not pid or not sid or str(sid).startswith("idx:") or sid in seen:
            continue
        seen.add(sid)
        seeds.append((sid, rank, pid))
        if len(seeds) >= limit:
            break
    return seeds


def source_session_chunk_pass(store: TortoiseStore, seed_point_ids: Sequence[str], pool_ids: Sequence[str],
                              chunk_kind: str = "event", per_session_cap: int = 3,
                              total_cap: int = 10) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One query: seeds -> Sessions that CONTAIN them -> their CONTAINS Points of ``chunk_kind`` not in the
    pool, ordered by (coalesce(session_id, s.id), coalesce(lme_chunk_index, -1), id) -- **string** id order,
    so ``<sid>_t10`` precedes ``<sid>_t2`` (TOR-45). Budget: total cap, then per-session cap."""
    report: dict[str, Any] = {"ok": True, "by_session": {}, "total": 0, "dropped_by_cap": 0,
                              "total_cap_hit": False}
    try:
        turn_filter = " AND p.is_episodic = true AND p.content STARTS WITH '['" if chunk_kind == "event" else ""
        rows = store.query(
            "MATCH (seed:Point)<-[:CONTAINS]-(s:Session)-[:CONTAINS]->(p:Point) WHERE seed.id IN $seeds "
            f"AND p.pointKind = $kind AND NOT p.id IN $pool{turn_filter} "
            "RETURN DISTINCT s.id AS sid, p.id AS id, p.content AS content, p.session_id AS psid, "
            "p.lme_chunk_index AS ci",
            {"seeds": list(seed_point_ids), "kind": chunk_kind, "pool": list(pool_ids)},
        )
        rows.sort(key=lambda r: (r["psid"] if r["psid"] is not None else r["sid"],
                                 r["ci"] if r["ci"] is not None else -1, r["id"]))
        fetched: list[dict[str, Any]] = []
        taken: set[str] = set()
        for r in rows:
            if r["id"] in taken:
                continue
            if report["total"] >= total_cap:
                report["total_cap_hit"] = True
                continue
            n = report["by_session"].get(r["sid"], 0)
            if n >= per_session_cap:
                report["dropped_by_cap"] += 1
                continue
            taken.add(r["id"])
            report["by_session"][r["sid"]] = n + 1
            report["total"] += 1
            fetched.append({"id": r["id"], "content": r["content"], "session_id": r["sid"],
                            "point_kind": chunk_kind, "expanded": True})
        return fetched, report
    except Exception as exc:
        return [], {**report, "ok": False, "error": repr(exc), "by_session": {}, "total": 0}


def reinjection_merge_order(pool: Sequence[dict[str, Any]], seeds: Sequence[tuple[str, int, str]],
                            fetched: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """In seed order, insert each session's group right after the pool position of that session's **last**
    base hit; ids already present are dropped; groups without a position go to the tail."""
    out = list(pool)
    present = {h.get("id") for h in out}
    tail: list[dict[str, Any]] = []
    for sid, _rank, _pid in seeds:
        group = [f for f in fetched if f["session_id"] == sid and f["id"] not in present]
        if not group:
            continue
        present.update(f["id"] for f in group)
        pos = max((i for i, h in enumerate(out) if h.get("session_id") == sid and not h.get("expanded")),
                  default=None)
        if pos is None:
            tail.extend(group)
        else:
            out[pos + 1:pos + 1] = group
    return out + tail


def expand_pool(store: TortoiseStore, pool: Sequence[dict[str, Any]], enabled: bool = False,
                is_temporal: bool = False, **kw: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Caller (TOR-44): runs only if enabled, not temporal and the pool is non-empty; failure => original pool."""
    pool = list(pool)
    if not enabled or is_temporal or not pool:
        return pool, {"ok": True, "ran": False, "total": 0}
    try:
        seeds = seeded_sessions(pool)
        fetched, report = source_session_chunk_pass(store, [s[2] for s in seeds], [h.get("id") for h in pool], **kw)
        if not report.get("ok"):
            return pool, {**report, "ran": True}
        return reinjection_merge_order(pool, seeds, fetched), {**report, "ran": True}
    except Exception as exc:
        return pool, {"ok": False, "ran": True, "error": repr(exc), "total": 0}
