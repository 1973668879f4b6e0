"""``assemble_why_blocks`` (spec §6.4): per-candidate EP read, support chain, conflicts, supersession,
tradeoffs and dig-deeper hints. Read-only, bounded batch reads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .config import READ_TERMINAL
from .store import TortoiseStore
from .text import label_of, synopsis

__all__ = ["assemble_why_blocks", "ep_view", "NO_EP"]

NO_EP = {"confidence_mean": 0.5, "variance": 0.0, "contested": False, "has_ep": False}
_OP = "(o.is_operator = true OR o.op_type IS NOT NULL)"
_PLAIN = "n.is_operator = false AND n.op_type IS NULL"


def ep_view(row: dict[str, Any]) -> dict[str, Any]:
    """α = coalesce(posterior_alpha, ep_alpha, 1), β likewise; ``confidence`` is never read (TOR-39)."""
    pa, pb, ea, eb = (row.get(k) for k in ("posterior_alpha", "posterior_beta", "ep_alpha", "ep_beta"))
    has_ep = (pa is not None and pb is not None) or (ea is not None and eb is not None)
    if not has_ep:
        return dict(NO_EP)
    a = pa if pa is not None else ea if ea is not None else 1.0
    b = pb if pb is not None else eb if eb is not None else 1.0
    s = a + b
    var = a * b / (s * s * (s + 1))
    return {"confidence_mean": round(a / s, 4), "variance": round(var, 6), "contested": var > 0.04,
            "has_ep": True}


def _terminal(row: dict[str, Any]) -> bool:
    return row.get("status") in READ_TERMINAL or bool(row.get("outdated"))


def _mean(row: dict[str, Any]) -> float:
    return float(ep_view(row)["confidence_mean"])


_COLS = ("n.id AS id, n.content AS content, n.status AS status, n.outdated AS outdated, n.pointKind AS pointKind, "
         "n.posterior_alpha AS posterior_alpha, n.posterior_beta AS posterior_beta, n.ep_alpha AS ep_alpha, "
         "n.ep_beta AS ep_beta")


def assemble_why_blocks(store: TortoiseStore, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    ids = list(dict.fromkeys(ids))
    if not ids:
        return {}
    rows = {r["id"]: r for r in store.query(f"MATCH (n:Point) WHERE n.id IN $ids RETURN {_COLS}", {"ids": ids})}
    # supporters: idx-0 sources of IMPL operators targeting c, and sources of direct IMPL edges into c
    sup: dict[str, list[dict[str, Any]]] = {}
    for r in store.query(
        f"MATCH (o:Point)-[t:IMPL]->(c:Point) WHERE {_OP} AND c.id IN $ids AND t.idx >= 1 "
        f"MATCH (o)-[s:IMPL]->(n:Point) WHERE s.idx = 0 AND {_PLAIN} RETURN c.id AS cid, {_COLS}", {"ids": ids}
    ) + store.query(
        f"MATCH (n:Point)-[:IMPL]->(c:Point) WHERE {_PLAIN} AND c.id IN $ids RETURN c.id AS cid, {_COLS}",
        {"ids": ids},
    ):
        if r["id"] != r["cid"] and not _terminal(r):
            sup.setdefault(r["cid"], []).append(r)
    # nanders: co-inputs of NAND operators and other endpoints of direct NAND edges (either direction)
    nand: dict[str, list[dict[str, Any]]] = {}
    for r in store.query(
        f"MATCH (o:Point)-[:NAND]->(c:Point) WHERE {_OP} AND c.id IN $ids "
        f"MATCH (o)-[:NAND]->(n:Point) WHERE n.id <> c.id RETURN c.id AS cid, {_COLS}", {"ids": ids}
    ) + store.query(
        f"MATCH (c:Point)-[:NAND]-(n:Point) WHERE c.id IN $ids AND {_PLAIN} AND c.is_operator = false "
        f"RETURN c.id AS cid, {_COLS}", {"ids": ids}
    ):
        if not _terminal(r):
            nand.setdefault(r["cid"], []).append(r)
    corr_in = store.query(  # newer -> this (successors)
        f"MATCH (n:Point)-[:CORRECTS]->(c:Point) WHERE c.id IN $ids RETURN c.id AS cid, n.createdAt AS created, "
        f"{_COLS}", {"ids": ids})
    corr_out = store.query(  # this -> older (what it supersedes)
        f"MATCH (c:Point)-[:CORRECTS]->(n:Point) WHERE c.id IN $ids RETURN c.id AS cid, {_COLS}", {"ids": ids})
    options = store.query(
        f"MATCH (c:Point)-[:IMPL|NAND]-(n:Point) WHERE c.id IN $ids AND n.pointKind = 'option' "
        f"RETURN c.id AS cid, {_COLS}", {"ids": ids}
    ) + store.query(
        f"MATCH (o:Point)-[:IMPL|NAND]->(c:Point) WHERE {_OP} AND c.id IN $ids "
        f"MATCH (o)-[:IMPL|NAND]->(n:Point) WHERE n.pointKind = 'option' RETURN c.id AS cid, {_COLS}", {"ids": ids})
    out: dict[str, dict[str, Any]] = {}
    for pid in ids:
        row = rows.get(pid)
        if row is None:
            continue
        ep = ep_view(row)
        entry: dict[str, Any] = {"point_id": pid, "ep": ep}
        seen: set[str] = set()
        chain = []
        for s in sup.get(pid, []):
            if s["id"] in seen:
                continue
            seen.add(s["id"])
            chain.append({"point_id": s["id"], "content_snippet": synopsis(s["content"]), "edge": "IMPL",
                          "weight": round(_mean(s), 4)})
        chain.sort(key=lambda x: (-x["weight"], x["point_id"]))
        entry["support_chain"] = chain[:3]
        nanders = {n["id"]: n for n in nand.get(pid, []) if n["id"] != pid}
        if ep["contested"] or nanders:
            ordered = sorted(nanders.values(), key=lambda n: (-_mean(n), n["id"]))[:2]
            entry["conflicts"] = {"contested": ep["contested"], "nands": [
                {"point_id": n["id"], "content_snippet": synopsis(n["content"]),
                 "severity": "high" if _mean(n) >= 0.6 else "medium"} for n in ordered]}
        succ = sorted((r for r in corr_in if r["cid"] == pid), key=lambda r: (r["created"] or "", r["id"]),
                      reverse=True)
        prev = sorted({r["id"]: r for r in corr_out if r["cid"] == pid}.values(), key=lambda r: r["id"])
        if row.get("status") == "superseded" or succ or prev:
            by = succ[0] if succ else None
            entry["supersession"] = {
                "status": row.get("status") or "live",
                "superseded_by": {"point_id": by["id"], "content_snippet": synopsis(by["content"])} if by else None,
                "supersedes": [{"point_id": r["id"], "content_snippet": synopsis(r["content"])} for r in prev],
                "successor_label": label_of(by["content"]) if by else None,
            }
        if row.get("pointKind") == "decision":
            opts = sorted({r["id"]: r for r in options if r["cid"] == pid and r["id"] != pid}.values(),
                          key=lambda r: r["id"])[:3]
            if opts:
                entry["tradeoffs"] = [{"point_id": r["id"], "content_snippet": synopsis(r["content"])}
                                      for r in opts]
        dig: list[dict[str, Any]] = []
        for c in entry["support_chain"]:
            dig.append({"label": "supported by: " + label_of(c["content_snippet"]), "kind": "supports",
                        "target": c["point_id"]})
        for n in entry.get("conflicts", {}).get("nands", []):
            dig.append({"label": "in tension with: " + label_of(n["content_snippet"]), "kind": "nand",
                        "target": n["point_id"]})
        for t in entry.get("tradeoffs", []):
            dig.append({"label": "option: " + label_of(t["content_snippet"]), "kind": "tradeoff",
                        "target": t["point_id"]})
        sb = entry.get("supersession", {}).get("superseded_by")
        if sb:
            dig.append({"label": "replaced by: " + label_of(sb["content_snippet"]), "kind": "superseded",
                        "target": sb["point_id"]})
        if dig:
            entry["dig_deeper"] = dig[:3]
        out[pid] = entry
    return out
