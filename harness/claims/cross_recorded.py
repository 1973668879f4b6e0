"""Cross-design claims XD-14, XD-15: what replaying LoCoMo's recorded LM facts as Tortoise's extraction changes.

Both claims observe the conversation the other XD claims use (``cross.CLAIM_CONVERSATION``, named by sample id),
cut to its first ``SLICE_SESSIONS`` sessions with the probes whose evidence lies in them. Two Tortoise arms ingest
that slice through the simulator's public API: ``tortoise`` (verbatim capture: one dated point per turn beside
the turn Points) and ``tortoise-recorded`` (the conversation's recorded LoCoMo facts replayed as the extractor's
output, one derived point per fact beside the same turn Points; its gate-opened row lowers the volunteer gate to
``OPEN_GATE``). Every probe of the slice is delivered by both, and the claims compare the delivered evidence ids,
the volunteered pointers and the EP confidence the hook's gate reads (``Tortoise.why``). The run is cached per
process. Without the LoCoMo data, the named conversation or its recorded facts, both claims are skipped with the
reason. XD-14 states a difference between two rows on the same probes and is decided by a paired test; XD-15 is
an identity of the gate (every fact point at the prior mean, below it), checked exactly.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.claims import ClaimContext, Observation, Tested, guarded_claim
from harness.claims.cross import _conversation, _skip, examples
from harness.workloads.metrics import HEADLINE_CATEGORIES, probe_record, summarize

D = "cross"
REC = "LoCoMo recorded extraction through Tortoise"
SLICE_SESSIONS = 6
OPEN_GATE = 0.5
FAITHFUL_GATE = 0.7
_ROOT: list[Path] = []


def _root() -> Path:
    if not _ROOT:
        _ROOT.append(Path(tempfile.mkdtemp(prefix="memsim-xdr-")))
        atexit.register(shutil.rmtree, _ROOT[0], True)
    return _ROOT[0]


def _unavailable() -> Observation | None:
    conv = _conversation()
    if conv is None:
        return _skip()
    reason = conv.recorded_unavailable("observation")
    if reason is not None:
        return Observation.skipped(f"recorded LoCoMo facts unavailable: {reason}")
    return None


def _xdr(id: str, statement: str) -> Any:
    return guarded_claim(id, design=D, record=REC, kind="consequence", statement=statement,
                         skip_reason=_unavailable)


@lru_cache(maxsize=1)
def _observe() -> dict[str, Any]:
    """Ingest the slice into both arms, deliver every probe, read the fact points' EP confidence."""
    import torch

    from harness.workloads.base import ArmContext
    from harness.workloads.tortoise_arm import TortoiseArm, TortoiseRecordedArm

    torch.set_num_threads(1)
    full = _conversation()
    assert full is not None
    conv = full.sliced(max_sessions=SLICE_SESSIONS)
    records: list[dict[str, Any]] = []
    out: dict[str, Any] = {"conversation": conv.sample_id, "sessions": len(conv.sessions),
                           "turns": len(conv.turns()), "probes": len(conv.probes)}
    for cls, kw in ((TortoiseArm, {}), (TortoiseRecordedArm, {"volunteer_min_confidence": OPEN_GATE})):
        arm = cls(ArmContext(workdir=_root() / cls.__name__), **kw)
        try:
            arm.ingest(conv)
            stored = arm.stored()
            for probe in conv.probes:
                t0 = time.perf_counter()
                got = arm.deliver(probe)
                ms = (time.perf_counter() - t0) * 1000
                for row in arm.rows:
                    rec = probe_record(conv.sample_id, probe, row, got[row], stored, ms)
                    rec["meta"] = got[row].meta
                    rec["text"] = got[row].text
                    rec["evidence"] = list(probe.evidence)
                    records.append(rec)
            if isinstance(arm, TortoiseRecordedArm):
                fact_ids = sorted(arm.facts.provenance)
                stored_facts = [p for p in fact_ids if arm.t.get_point(p) is not None]
                blocks = arm.t.why(stored_facts)
                out["fact_confidence"] = {p: float(blocks[p]["ep"]["confidence_mean"]) for p in stored_facts
                                          if p in blocks}
                out["fact_points_without_why"] = len(stored_facts) - len(out["fact_confidence"])
                out["facts_recorded"] = arm.facts.facts
                out["stored_counts"] = dict(arm.stored_counts)
                out["fact_provenance"] = {p: list(v) for p, v in arm.facts.provenance.items()}
        finally:
            arm.close()
    out["records"] = records
    out["summary"] = summarize(records)
    return out


def _head(res: dict[str, Any], row: str, key: str = "evidence_recall") -> float:
    return float(res["summary"][row]["headline"][key])


def _r(x: float) -> float:
    return round(float(x), 4)


def _example_record(res: dict[str, Any], row: str) -> dict[str, Any] | None:
    return next((r for r in res["records"] if r["row"] == row and r["category"] != 5
                 and set(r["evidence"]) & set(r["meta"].get("ids_via_facts", []))), None)


def _example(res: dict[str, Any], row: str, n: int = 700) -> str:
    r = _example_record(res, row)
    if r is None:
        return ""
    return f"[{row}] probe {r['probe']} evidence recall {r['recall']}, ids via facts " \
           f"{r['meta'].get('ids_via_facts')}\n{r['text'][-n:]}"


def _recall(res: dict[str, Any], row: str) -> dict[int, float]:
    """Per headline probe with evidence: the row's evidence recall."""
    return {r["probe"]: float(r["recall"]) for r in res["records"]
            if r["row"] == row and r["category"] in HEADLINE_CATEGORIES and r["recall"] is not None}


@_xdr("XD-14",
      statement="Replaying LoCoMo's recorded LM facts as Tortoise's extraction raises the evaluation path's "
                "evidence recall over verbatim capture (one dated point per turn) on the same questions: the "
                "delivered fact points credit evidence turns their tags name")
def xd_14(ctx: ClaimContext) -> Observation:
    """Paired test of evidence recall (the two evaluation rows on the same headline probes); a fact crediting
    evidence is checked."""
    res = _observe()
    verbatim, recorded = _head(res, "tortoise-eval"), _head(res, "tortoise-recorded-eval")
    eval_recs = [r for r in res["records"] if r["row"] == "tortoise-recorded-eval" and r["category"] != 5]
    via_facts = sum(1 for r in eval_recs if set(r["evidence"]) & set(r["meta"].get("ids_via_facts", [])))
    measured = {
        "conversation": res["conversation"], "sessions": res["sessions"], "probes": res["probes"],
        "eval_recall_verbatim": _r(verbatim), "eval_recall_recorded": _r(recorded),
        "tokens_verbatim": _r(_head(res, "tortoise-eval", "tokens_mean")),
        "tokens_recorded": _r(_head(res, "tortoise-recorded-eval", "tokens_mean")),
        "probes_with_evidence_credited_by_a_fact": via_facts, "stored": res["stored_counts"],
    }
    ex = _example_record(res, "tortoise-recorded-eval")
    measured["examples"] = examples(res["conversation"], *([(ex["probe"], "tortoise-recorded-eval")] if ex else []))
    rec, verb = _recall(res, "tortoise-recorded-eval"), _recall(res, "tortoise-eval")
    probes = sorted(set(rec) & set(verb))
    return Observation.from_test(
        Tested.paired("tortoise-recorded-eval > tortoise-eval (recall)", [rec[p] for p in probes],
                      [verb[p] for p in probes], ">"),
        checks={"a_fact_credits_evidence": via_facts > 0},
        measured=measured, evidence=_example(res, "tortoise-recorded-eval"))


@_xdr("XD-15",
      statement="Under the faithful 0.7 volunteer gate, Tortoise volunteers none of the recorded fact points: "
                "capture's promotion and ingest dream leave every one at EP confidence 0.5 (no operator supports "
                "a fact), below the gate, while the same hook with the gate lowered to 0.5 points at fact points "
                "on some questions")
def xd_15(ctx: ClaimContext) -> Observation:
    """An identity of the gate, checked exactly: no statistical test applies."""
    res = _observe()
    conf = res["fact_confidence"]
    faithful = [r for r in res["records"] if r["row"] == "tortoise-recorded-volunteer"]
    opened = [r for r in res["records"] if r["row"] == f"tortoise-recorded-volunteer-min{OPEN_GATE:g}"]
    facts = set(res["fact_provenance"])
    faithful_fact_pointers = sum(1 for r in faithful for p in r["meta"].get("pointers", []) if p in facts)
    opened_fact_pointers = sum(1 for r in opened for p in r["meta"].get("pointers", []) if p in facts)
    opened_probes = sum(1 for r in opened if any(p in facts for p in r["meta"].get("pointers", [])))
    values = sorted(conf.values())
    measured = {
        "conversation": res["conversation"], "probes": res["probes"], "fact_points": len(conf),
        "confidence_min": _r(values[0]) if values else None, "confidence_max": _r(values[-1]) if values else None,
        "faithful_fact_pointers": faithful_fact_pointers, "open_gate": OPEN_GATE,
        "open_gate_fact_pointers": opened_fact_pointers, "open_gate_probes_with_fact_pointers": opened_probes,
        "test": "none (an identity of the gate)",
    }
    example = next((r for r in opened if any(p in facts for p in r["meta"].get("pointers", []))), None)
    measured["examples"] = examples(res["conversation"], *([(example["probe"], example["row"])] if example else []))
    evidence = f"gate {OPEN_GATE:g}, probe {example['probe']}: pointers {example['meta']['pointers']}" if example \
        else ""
    return Observation.from_checks({
        "fact_points_stored": bool(values),
        "every_fact_point_read": res["fact_points_without_why"] == 0,
        "all_below_gate": bool(values) and values[-1] < FAITHFUL_GATE,
        "all_at_prior_mean": bool(values) and all(abs(v - 0.5) < 1e-6 for v in values),
        "faithful_gate_volunteers_no_fact": faithful_fact_pointers == 0,
        "open_gate_volunteers_facts": opened_fact_pointers > 0,
    }, measured=measured, evidence=evidence)
