"""What the explorer page holds: the run's questions, rows, per-probe numbers and deliveries, read from the per-probe
table and the delivery store and checked against each other (one line naming the file for anything missing).

The page data is one JSON document (:func:`page_data`):

- ``meta``: the run's name, data label (``synthetic`` when generated), workload, code identity, the metric
  columns shown;
- ``templates`` / ``escapes``: how a unit renders (the store's :data:`harness.deliveries.TEMPLATES`);
- ``convs``: per conversation, its turns, sessions and the store's parts (cut to the shown questions,
  :func:`harness.deliveries.compact`) and the ids each row stored;
- ``rows``: every row of the table with its arm, kind (design, baseline, external) and whether it is ranked;
  ``defaults``: the rows a question view shows first;
- ``questions``: per probe of the table (first-seen order): its conversation, display id, category, abstention,
  question, date, gold answer, evidence turns, and per row the table's numbers (evidence recall, all-evidence,
  stored recall, evidence hits, cl100k tokens) and the delivery (parts, credited evidence, ranking);
- ``claims``: the XD claims of a ledger that quote probe ids (:func:`claim_ids`).

A probe's **display id** is ``<conversation>/<question index>`` on LoCoMo and the question id on LongMemEval (where
the cluster and the probe are the same id); the URL fragment uses it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.deliveries import DeliveryStoreError, compact, read_deliveries

NUMBERS = ("evidence_recall", "all_evidence", "stored_recall", "evidence_hits", "n_evidence", "tokens_cl100k")
"""Per (probe, row) numbers the page shows, in this order (null where the table has no such column or value)."""
CATEGORY_NAMES = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop", "5": "adversarial"}


class ExploreError(ValueError):
    """A run the explorer cannot show (one line naming the folder or file and what is missing)."""


def display_id(cluster: str, probe: str) -> str:
    return cluster if cluster == probe else f"{cluster}/{probe}"


def row_kind(arm: str) -> str:
    """``design``, ``baseline`` or ``external`` (an arm the registry does not know)."""
    from harness.workloads.arms import SPECS

    spec = SPECS.get(arm)
    return spec.kind if spec is not None else "external"


def default_rows(rows: Sequence[str], arms: dict[str, str], config: dict[str, Any]) -> list[str]:
    """The rows a question view shows first: the design (and external) rows, then every row the run's
    configuration names in a comparator pair (``config["pairs"]``: ``[[row, baseline], ...]``), in table order;
    all rows when the run has no design row."""
    pairs = config.get("pairs") or []
    named = {str(x) for p in pairs if isinstance(p, list | tuple) for x in p}
    out = [r for r in rows if row_kind(arms[r]) != "baseline" or r in named]
    return out or list(rows)


def claim_ids(ledger: Path) -> list[dict[str, Any]]:
    """The XD claims of a ledger JSON (``ledger.json`` of ``memsim claims``) that quote probes: each claim whose
    ``measured["examples"]`` is a list of ``{"conversation": ..., "probe": ...}`` objects or ``[conversation,
    probe]`` pairs (the conversation or question id and the probe id, as the per-probe table names them) gives
    ``{"id", "verdict", "statement", "ids": [display ids]}``."""
    try:
        data = json.loads(ledger.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ExploreError(f"{ledger}: not a readable ledger JSON ({type(exc).__name__})") from None
    rows = data.get("rows") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise ExploreError(f"{ledger}: not a claims ledger (no 'rows' list)")
    out = []
    for r in rows:
        if not isinstance(r, dict) or not str(r.get("id", "")).startswith("XD-"):
            continue
        examples = (r.get("measured") or {}).get("examples")
        if not isinstance(examples, list):
            continue
        ids = []
        for ex in examples:
            if isinstance(ex, dict) and "conversation" in ex and "probe" in ex:
                ids.append(display_id(str(ex["conversation"]), str(ex["probe"])))
            elif isinstance(ex, list | tuple) and len(ex) == 2:
                ids.append(display_id(str(ex[0]), str(ex[1])))
        if ids:
            out.append({"id": r["id"], "verdict": r.get("verdict"), "statement": r.get("statement", ""),
                        "ids": list(dict.fromkeys(ids))})
    return out


def _value(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, bool):
        return v
    if isinstance(v, float):
        return None if v != v else round(v, 6)
    return v


def _select(keys: list[tuple[str, str]], cats: dict[tuple[str, str], str], types: Sequence[str] | None,
            limit: int | None) -> list[tuple[str, str]]:
    """The probe keys a page shows: those of the given categories or types (a LoCoMo category by number or name,
    a LongMemEval type), then the first ``limit``."""
    if types:
        want = {t.strip() for t in types if t.strip()}
        names = {k: CATEGORY_NAMES.get(v, v) for k, v in cats.items()}
        keys = [k for k in keys if cats[k] in want or names[k] in want]
    if limit is not None:
        keys = keys[:limit]
    return keys


def _cl100k() -> Any:
    from harness.workloads.metrics import token_counter

    return token_counter().count_cl100k


def _verify(conv: Any, prec: dict[str, Any], store_path: Path, count: Any) -> dict[str, int | None]:
    """Rebuild every delivery of one probe and check it against its recorded SHA-1 prefix (a damaged store is one
    line naming the file); the cl100k tokens of each text when ``count`` is given (a table without them)."""
    import hashlib

    from harness.deliveries.templates import SHA_CHARS

    out: dict[str, int | None] = {}
    for p, row, d in conv.deliveries():
        if p is not prec:
            continue
        text = conv.text(d)
        if hashlib.sha1(text.encode("utf-8")).hexdigest()[:SHA_CHARS] != d[5]:
            raise ExploreError(f"{store_path}: damaged: {display_id(conv.id, prec['key'])} row {row!r} does not "
                               f"rebuild to the text it recorded")
        out[row] = count(text) if count is not None else None
    return out


def page_data(table_path: Path, store_path: Path, *, name: str, rows: Sequence[str] | None = None,
              types: Sequence[str] | None = None, limit: int | None = None, ledger: Path | None = None
              ) -> dict[str, Any]:
    """The page's JSON document (see the module docstring); :class:`ExploreError` for a run it cannot show."""
    from harness.probes import ProbeTableError, read_probes

    try:
        run = read_probes(table_path)
    except ProbeTableError as exc:
        raise ExploreError(str(exc)) from None
    try:
        store = read_deliveries(store_path)
    except DeliveryStoreError as exc:
        raise ExploreError(str(exc)) from None
    label, stored_label = str(run.meta.get("data", "")), str(store.meta.get("data", ""))
    if stored_label and label and stored_label != label:
        raise ExploreError(f"{store_path}: its data ({stored_label}) is not the table's ({label}): they come from "
                           f"different runs")
    t = run.table
    cols = {c: t.column(c).to_pylist() for c in ("cluster", "probe", "category", "abstention", "has_evidence",
                                                  "row", "arm")}
    numbers = {m: (t.column(m).to_pylist() if m in t.column_names else [None] * len(t)) for m in NUMBERS}
    all_rows = run.rows
    arms = {r: a for r, a in zip(cols["row"], cols["arm"], strict=True)}
    for r in rows or ():
        if r not in arms:
            raise ExploreError(f"{table_path}: no row {r!r} in this run (rows: {', '.join(all_rows)})")
    keys = list(dict.fromkeys(zip(cols["cluster"], cols["probe"], strict=True)))
    cats = {(c, p): cat for c, p, cat in zip(cols["cluster"], cols["probe"], cols["category"], strict=True)}
    chosen = _select(keys, cats, types, limit)
    if not chosen:
        raise ExploreError(f"{table_path}: no question matches --types {','.join(types or [])}" if types
                           else f"{table_path}: the run has no question to show")
    at = {k: i for i, k in enumerate(chosen)}
    per: dict[tuple[str, str], dict[str, Any]] = {k: {"abs": False, "he": False, "m": {}} for k in chosen}
    for i in range(len(t)):
        k = (cols["cluster"][i], cols["probe"][i])
        if k not in at:
            continue
        q = per[k]
        q["abs"], q["he"] = bool(cols["abstention"][i]), bool(cols["has_evidence"][i])
        q["m"][cols["row"][i]] = [_value(numbers[m][i]) for m in NUMBERS]
    # deliveries from the store, checked against the table
    convs: list[dict[str, Any]] = []
    conv_at: dict[str, int] = {}
    questions: list[dict[str, Any]] = []
    found: dict[tuple[str, str], tuple[Any, dict[str, Any]]] = {}
    for k in chosen:
        got = store.find(*k)
        if got is None:
            raise ExploreError(f"{store_path}: no deliveries for {display_id(*k)}, which the table "
                               f"{table_path.name} has (the store and the table come from different runs)")
        found[k] = got
    wanted: dict[str, set[int]] = {}
    for conv, prec in found.values():
        wanted.setdefault(conv.id, set()).add(conv.record["probes"].index(prec))
    for cid, positions in wanted.items():
        conv = store.conversations[cid]
        rec = compact(conv.record, positions)
        conv_at[cid] = len(convs)
        convs.append({"id": cid, "workload": rec.get("workload"), "turns": rec["turns"], "sessions": rec["sessions"],
                      "lits": rec["lits"], "units": rec["units"], "slices": rec["slices"], "blocks": rec["blocks"],
                      "stored": rec.get("stored", {}), "_deliveries": rec["deliveries"]})
    row_index = {r: i for i, r in enumerate(all_rows)}
    count = None if "tokens_cl100k" in t.column_names else _cl100k()
    tok_at = NUMBERS.index("tokens_cl100k")
    for k in chosen:
        conv, prec = found[k]
        tokens = _verify(conv, prec, store_path, count)
        for r, n in tokens.items():
            if per[k]["m"].get(r) is not None and n is not None:
                per[k]["m"][r][tok_at] = n
    for k in chosen:
        conv, prec = found[k]
        c = convs[conv_at[conv.id]]
        pos = conv.record["probes"].index(prec)
        delivered: list[Any] = [None] * len(all_rows)
        for d in c["_deliveries"]:
            if d[0] == pos and d[1] in row_index:
                delivered[row_index[d[1]]] = [d[2], d[3], d[4]]
        q = per[k]
        missing = [r for r in q["m"] if delivered[row_index[r]] is None]
        if missing:
            raise ExploreError(f"{store_path}: no delivery of row {missing[0]!r} for {display_id(*k)}"
                               + (f" (and {len(missing) - 1} more rows)" if len(missing) > 1 else "")
                               + f", which the table {table_path.name} has")
        questions.append({
            "c": conv_at[conv.id], "id": display_id(*k), "cluster": k[0], "probe": k[1], "cat": cats[k],
            "type": prec.get("type"), "abs": q["abs"], "he": q["he"], "q": prec["question"],
            "date": prec.get("question_date"), "answer": prec.get("answer"), "adv": prec.get("adversarial_answer"),
            "gold": bool(prec.get("has_gold", True)), "ev": prec["evidence"],
            "m": [q["m"].get(r) for r in all_rows], "d": delivered})
    for c in convs:
        del c["_deliveries"]
    shown = list(rows) if rows else default_rows(all_rows, arms, dict(run.meta.get("config") or {}))
    ranked = {r: False for r in all_rows}
    for q in questions:
        for r, d in zip(all_rows, q["d"], strict=True):
            ranked[r] = ranked[r] or (d is not None and d[2] is not None)
    return {
        "meta": {"name": name, "data": label, "synthetic": bool(store.meta.get("synthetic"))
                 or label.startswith("data: synthetic"), "workload": convs[0].get("workload") if convs else None,
                 "code": run.meta.get("code") or store.meta.get("code"), "numbers": list(NUMBERS),
                 "questions_in_run": len(keys), "selected": {"types": list(types or []), "limit": limit}},
        "templates": list(store.meta["templates"].values()), "escapes": store.meta["escapes"],
        "convs": convs,
        "rows": [{"name": r, "arm": arms[r], "kind": row_kind(arms[r]), "ranked": ranked[r]} for r in all_rows],
        "defaults": shown, "questions": questions,
        "claims": claim_ids(ledger) if ledger is not None else [],
    }
