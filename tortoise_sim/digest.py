"""Session-start context digest (spec §7.4-§7.5): four recency queries without a status predicate, the
post-LIMIT noise filter, and the renderer with its fixed caps. Task-independent by construction."""

from __future__ import annotations

from typing import Any

from .config import READ_TERMINAL
from .store import TortoiseStore

__all__ = ["session_context", "render_digest", "DIGEST_TITLE", "NO_MEMORY_LINE", "HEADINGS", "CLOSING_HINT"]

DIGEST_TITLE = "# Memory digest from earlier sessions"
NO_MEMORY_LINE = "No prior memory is stored for this workspace yet."
HEADINGS = {"diary": "## Recent diary entries", "points": "## Recent points",
            "confidence": "## Confidence snapshot"}
CLOSING_HINT = "Ask memory for details on any of these before relying on them."
_PLAIN = "n.is_operator = false AND n.op_type IS NULL"
_NOISE_KINDS = {"event", "session", "sessionLog"}


def _rows(store: TortoiseStore, where: str, order: str, limit: int, params: dict[str, Any]) -> list[dict]:
    rows = store.query(f"MATCH (n:Point) WHERE {where} RETURN n ORDER BY {order} LIMIT {int(limit)}", params)
    return [r["n"] for r in rows]


def _noise(row: dict[str, Any]) -> bool:
    """[SIM] noise predicate (the report states only that a filter runs after the query)."""
    return (row.get("pointKind") in _NOISE_KINDS or row.get("is_episodic") is True
            or not (row.get("content") or "").strip())


def session_context(store: TortoiseStore) -> dict[str, Any]:
    """Spec §7.4 (TOR-27, 30, 31): diary (10), points (20), events (20), confidence (20), newest first."""
    cfg = store.cfg
    status = ""
    params: dict[str, Any] = {}
    if cfg.digest_status_filter:  # counterfactual [SIM] option
        status = " AND (n.status IS NULL OR NOT n.status IN $rt) AND (n.outdated IS NULL OR n.outdated = false)"
        params["rt"] = list(READ_TERMINAL)
    diary = _rows(store, f"{_PLAIN} AND n.pointKind = 'diary'{status}", "n.createdAt DESC, n.id DESC", 10, params)
    points = _rows(store, f"{_PLAIN}{status}", "n.createdAt DESC, n.id DESC", 20, params)
    events = [r["e"] for r in store.query(
        "MATCH (e:Event) RETURN e ORDER BY e.startedAt DESC, e.id DESC LIMIT 20")]
    conf = [{k: r.get(k) for k in ("id", "content", "pointKind", "confidence", "updatedAt", "is_episodic")}
            for r in _rows(store, f"{_PLAIN} AND n.confidence IS NOT NULL{status}", "n.updatedAt DESC, n.id DESC",
                           20, params)]
    if cfg.digest_noise_filter:
        points = [r for r in points if not _noise(r)]
        conf = [r for r in conf if not _noise(r)]
    for r in conf:
        r.pop("is_episodic", None)
    return {"diary": diary, "points": points, "events": events, "confidence": conf,
            "no_prior_sessions": not diary and not points and not events}


def render_digest(ctx: dict[str, Any]) -> str:
    """Spec §7.5: title, non-empty sections (diary 5 x 160, points 8 x 160, confidence 5 x 120), closing hint.
    Plain slicing, no sanitation; events never printed. Snapshot field defaults: missing pointKind prints
    ``(point)``, missing confidence ``[0.00]``; a null confidence or content raises ``TypeError``.

    The emptiness test looks at diary, points and events only (spec §7.5 (a)): a context whose only rows are
    confidence rows prints the one-line notice whatever ``no_prior_sessions`` says. A diary row whose
    ``createdAt`` is null prints an empty date ``- [] ...``, like a missing one (§7.5 (b))."""
    diary, points, conf = ctx.get("diary") or [], ctx.get("points") or [], ctx.get("confidence") or []
    if ctx.get("no_prior_sessions") or not (diary or points or ctx.get("events")):
        return NO_MEMORY_LINE + "\n"
    lines = [DIGEST_TITLE]
    if diary:
        lines += ["", HEADINGS["diary"]]
        for r in diary[:5]:
            lines.append(f"- [{(r.get('createdAt') or '')[:10]}] {r.get('content', '')[:160]}")
    if points:
        lines += ["", HEADINGS["points"]]
        for r in points[:8]:
            lines.append(f"- ({r.get('pointKind', 'point')}) {r.get('content', '')[:160]}")
    if conf:
        lines += ["", HEADINGS["confidence"]]
        for r in conf[:5]:
            c = r.get("confidence", 0.0)
            if c is None or r.get("content", "") is None:
                raise TypeError("confidence row with null confidence/content")
            lines.append(f"- [{c:.2f}] {r.get('content', '')[:120]}")
    lines += ["", CLOSING_HINT]
    return "\n".join(lines) + "\n"
