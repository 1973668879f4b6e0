"""``assemble_why_blocks`` (spec §6.4): per-candidate EP read, support chain, conflicts, supersession,
tradeoffs and dig-deeper hints. Read-only, bounded batch reads."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import changes
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


def assemble_why_blocks(store: TortoiseStore, ids: Sequence[str], *, cached: bool | None = None
                        ) -> dict[str, dict[str, Any]]:
    """``cached`` (default ``SimConfig.search_cache``): read the candidates' neighbourhoods from the exact
    per-process graph snapshot of :class:`_WhyCache` (rebuilt when ``store.write_seq`` moved) instead of nine
    ``c.id IN $ids`` Kuzu queries, each of which scans the whole Point table; same rows, same blocks."""
    ids = list(dict.fromkeys(ids))
    if not ids:
        return {}
    use_cache = store.cfg.search_cache if cached is None else cached
    fetch = _fetch_cached if use_cache else _fetch_queries
    rows, sup, nand, corr_in, corr_out, options = fetch(store, ids)
    return _blocks(ids, rows, sup, nand, corr_in, corr_out, options)


_Fetched = tuple[dict[str, dict[str, Any]], dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]],
                 list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]


def _fetch_queries(store: TortoiseStore, ids: list[str]) -> _Fetched:
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
    return rows, sup, nand, corr_in, corr_out, options


def _blocks(ids: list[str], rows: dict[str, dict[str, Any]], sup: dict[str, list[dict[str, Any]]],
            nand: dict[str, list[dict[str, Any]]], corr_in: list[dict[str, Any]], corr_out: list[dict[str, Any]],
            options: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
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


# ---------------------------------------------------------------------------------------------------------------
# Exact graph snapshot for the why blocks (``SimConfig.search_cache=True``)

_SNAP_COLS = ("id", "content", "status", "outdated", "pointKind", "posterior_alpha", "posterior_beta", "ep_alpha",
              "ep_beta")


def _arrow(store: TortoiseStore, query: str) -> Any:
    """A read as a pyarrow table, the Kuzu result closed at once (one left to the garbage collector crashed a
    later write, measured)."""
    res = store.conn.execute(query)
    try:
        return res.get_as_arrow(0)
    finally:
        res.close()


class _WhyCache:
    """Every Point's ``_COLS`` + operator/plain flags + createdAt, and the Point->Point IMPL/NAND/CORRECTS edges,
    at ``seq`` (= ``store.write_seq`` when built or last updated from the change log). Each pattern of :func:`_fetch_queries` is evaluated on it with
    the same (three-valued) predicate semantics."""

    def __init__(self, store: TortoiseStore) -> None:
        self.log = changes.attach(store)
        self.seq = store.write_seq
        self.updates = 0
        tbl = _arrow(store, f"MATCH (n:Point) RETURN {_COLS}, n.is_operator AS is_operator, "
                     "n.op_type AS op_type, n.createdAt AS createdAt")
        cols = {c: tbl.column(c).to_pylist() for c in tbl.column_names}
        self.node: dict[str, dict[str, Any]] = {}
        self.is_op: dict[str, bool] = {}
        self.is_plain: dict[str, bool] = {}
        self.strict_not_op: dict[str, bool] = {}
        self.created: dict[str, Any] = {}
        for i, pid in enumerate(cols["id"]):
            self._set_node(pid, {c: cols[c][i] for c in (*_SNAP_COLS, "is_operator", "op_type", "createdAt")})
        # out[rel][src] / inn[rel][tgt] -> list of (other end, idx)
        self.out: dict[str, dict[str, list[tuple[str, Any]]]] = {}
        self.inn: dict[str, dict[str, list[tuple[str, Any]]]] = {}
        for rel in ("IMPL", "NAND", "CORRECTS"):
            idx = "r.idx" if rel != "CORRECTS" else "NULL"
            et = _arrow(store, f"MATCH (a:Point)-[r:{rel}]->(b:Point) RETURN a.id AS a, b.id AS b, {idx} AS i")
            o: dict[str, list[tuple[str, Any]]] = {}
            n: dict[str, list[tuple[str, Any]]] = {}
            for a, b, i in zip(et.column("a").to_pylist(), et.column("b").to_pylist(), et.column("i").to_pylist(),
                               strict=True):
                o.setdefault(a, []).append((b, i))
                n.setdefault(b, []).append((a, i))
            self.out[rel], self.inn[rel] = o, n

    def _set_node(self, pid: str, r: dict[str, Any]) -> None:
        self.node[pid] = {c: r[c] for c in _SNAP_COLS}
        iso, opt = r["is_operator"], r["op_type"]
        self.is_op[pid] = iso is True or opt is not None
        self.is_plain[pid] = iso is False and opt is None
        self.strict_not_op[pid] = iso is False
        self.created[pid] = r["createdAt"]

    def row(self, pid: str, **extra: Any) -> dict[str, Any]:
        return {**extra, **self.node[pid]}

    def refresh(self, store: TortoiseStore) -> bool:
        """Re-read the Points the writes since ``seq`` touched (row and every IMPL/NAND/CORRECTS edge at either
        end) and apply them; False when the change log cannot name them (then the caller rebuilds)."""
        touched = self.log.touched_since(self.seq)
        if touched is None:
            return False
        seq = store.write_seq
        for pid in sorted(touched):
            self._reread(store, pid)
        self.seq = seq
        self.updates += 1
        return True

    def _reread(self, store: TortoiseStore, pid: str) -> None:
        row = changes.point_row(store, pid)
        if row is None and pid not in self.node:
            return  # not a Point before or after (a touched name is a superset of the ids)
        for rel in ("IMPL", "NAND", "CORRECTS"):
            o, n = self.out[rel], self.inn[rel]
            for b in {b for b, _ in o.pop(pid, [])}:
                if b != pid:
                    n[b] = [(a, i) for a, i in n.get(b, []) if a != pid]
            for a in {a for a, _ in n.pop(pid, [])}:
                if a != pid:
                    o[a] = [(b, i) for b, i in o.get(a, []) if b != pid]
        if row is None:
            for table in (self.node, self.is_op, self.is_plain, self.strict_not_op, self.created):
                table.pop(pid, None)
            return
        self._set_node(pid, row)
        for r in changes.read_rows(store, "MATCH (a:Point {id: $id})-[r:IMPL|NAND|CORRECTS]->(b:Point) "
                                   "RETURN label(r) AS rel, b.id AS b, r.idx AS i", {"id": pid}):
            i = None if r["rel"] == "CORRECTS" else r["i"]
            self.out[r["rel"]].setdefault(pid, []).append((r["b"], i))
            self.inn[r["rel"]].setdefault(r["b"], []).append((pid, i))
        for r in changes.read_rows(store, "MATCH (a:Point)-[r:IMPL|NAND|CORRECTS]->(b:Point {id: $id}) "
                                   "RETURN label(r) AS rel, a.id AS a, r.idx AS i", {"id": pid}):
            if r["a"] == pid:
                continue  # a self-edge, added with the outgoing ones
            i = None if r["rel"] == "CORRECTS" else r["i"]
            self.inn[r["rel"]].setdefault(pid, []).append((r["a"], i))
            self.out[r["rel"]].setdefault(r["a"], []).append((pid, i))


def _why_cache_for(store: TortoiseStore) -> _WhyCache:
    """The store's why-block snapshot at ``store.write_seq``: updated from the touched rows (search cache mode
    "incremental", the default) or rebuilt (mode "rebuild", or a write the change log cannot attribute)."""
    from .search import cache_following_writes

    return cache_following_writes(store, "_why_cache", _WhyCache)


def _fetch_cached(store: TortoiseStore, ids: list[str]) -> _Fetched:
    w = _why_cache_for(store)
    present = [c for c in ids if c in w.node]
    rows = {c: w.row(c) for c in present}
    out, inn = w.out, w.inn
    sup: dict[str, list[dict[str, Any]]] = {}
    nand: dict[str, list[dict[str, Any]]] = {}
    corr_in: list[dict[str, Any]] = []
    corr_out: list[dict[str, Any]] = []
    options: list[dict[str, Any]] = []
    for c in present:
        found = []
        # operator o -[t:IMPL {idx >= 1}]-> c, o -[s:IMPL {idx = 0}]-> plain n
        for o, t in inn["IMPL"].get(c, []):
            if w.is_op[o] and t is not None and t >= 1:
                found += [n for n, s in out["IMPL"].get(o, []) if s is not None and s == 0 and w.is_plain[n]]
        # plain n -[:IMPL]-> c
        found += [n for n, _ in inn["IMPL"].get(c, []) if w.is_plain[n]]
        for n in found:
            r = w.row(n, cid=c)
            if r["id"] != r["cid"] and not _terminal(r):
                sup.setdefault(c, []).append(r)
        found = []
        # operator o -[:NAND]-> c, o -[:NAND]-> n (any Point), n <> c
        for o, _ in inn["NAND"].get(c, []):
            if w.is_op[o]:
                found += [n for n, _ in out["NAND"].get(o, []) if n != c]
        # c -[:NAND]- plain n (either direction), c.is_operator = false
        if w.strict_not_op[c]:
            found += [n for n, _ in out["NAND"].get(c, []) + inn["NAND"].get(c, []) if w.is_plain[n]]
        for n in found:
            r = w.row(n, cid=c)
            if not _terminal(r):
                nand.setdefault(c, []).append(r)
        corr_in += [w.row(n, cid=c, created=w.created[n]) for n, _ in inn["CORRECTS"].get(c, [])]
        corr_out += [w.row(n, cid=c) for n, _ in out["CORRECTS"].get(c, [])]
        opt = []
        for rel in ("IMPL", "NAND"):
            # c -[:IMPL|NAND]- option n (either direction)
            opt += [n for n, _ in out[rel].get(c, []) + inn[rel].get(c, [])]
            # operator o -[:IMPL|NAND]-> c, o -[:IMPL|NAND]-> option n
            for o, _ in inn[rel].get(c, []):
                if w.is_op[o]:
                    opt += [n for rel2 in ("IMPL", "NAND") for n, _ in out[rel2].get(o, [])]
        options += [w.row(n, cid=c) for n in opt if w.node[n]["pointKind"] == "option"]
    return rows, sup, nand, corr_in, corr_out, options
