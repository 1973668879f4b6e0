"""Cross-design claims XD-16 .. XD-20 on LongMemEval: what the official retrieval view can and cannot see, how its
two averaging rules and its two recall metrics differ, and what two designs deliver on a question's own haystack,
at what cost.

Data: the LongMemEval file the resolver finds without a command-line option (``$MEMSIM_LONGMEMEVAL_DATA``, else
the copy ``memsim data fetch longmemeval-s`` (or another LongMemEval fetch name) placed in the data folder); any
file in the released schema is accepted (a generated one too), and every observation names it
(``describe_data``). Without a file every claim is skipped with the reason; a path that is set but missing is an
``error`` (one line), never a skip, so a typo does not look like absent data.

Selections, all stable (file order, the first questions that qualify, counts stated in ``measured``):

- the **shared selection**: the first ``PER_TYPE`` questions of each of the six question types, read in one
  streaming pass that stops once every quota is met (XD-17; XD-18 and XD-19 take their questions from it first);
- XD-16: the first ``SSA_QUESTIONS`` ``single-session-assistant`` questions;
- XD-20: every ``multi-session`` question of the file (BM25 is cheap: no first-few sample decides the verdict);
  skipped, with the count, when fewer than ``MIN_MULTI_QUESTIONS`` of them can be scored;
- XD-18: the ``TORTOISE_QUESTIONS`` questions with the fewest turns among the eligible questions of the shared
  selection (neither abstention nor ``temporal-reasoning``, for which upstream skips the expansion, and with
  evidence turns), topped up in file order with the file's next eligible questions when the shared selection has
  fewer;
- XD-19: the first ``FRACTAL_QUESTIONS`` questions of the shared selection and, when none of them has an
  assistant evidence turn, the first question of the shared selection (else of the file's first
  ``SSA_QUESTIONS`` single-session-assistant questions) that has one, so assistant-side evidence is always
  tested; each run on the first half of its haystack's sessions and on the whole haystack.

How each claim is decided: XD-16, XD-17 and XD-20 are identities of the file and the protocol (what the corpus
holds, which questions an averaging keeps, recall_any >= recall_all by construction), checked exactly on every
question they read; no statistical test applies. XD-18 and XD-19 state a difference on the same questions (tokens
with and without the expansion; tokens on the whole haystack and on its half), so each is decided by a paired test
(``Tested.paired``: sign-flip randomization over the questions, ``Observation.from_test``), the rest of their
statement (no evidence lost, recall 1, assistant evidence delivered, tokens tracking the haystack) kept as exact
checks. A paired test of n questions can reach p < 0.05 only from n = 6 (its smallest two-sided p-value is
2 / 2^n), so both run more than that. Every claim lists the questions its evidence shows under
``measured["examples"]``: for LongMemEval the ``conversation`` and the ``probe`` are both the question id (one
question is one conversation with one probe, and the per-probe tables name it so).

XD-16, XD-17 and XD-20 drive the official protocol (``harness.workloads.lme_retrieval``: corpus, gold, BM25 ranking,
averaging); XD-18 and XD-19 run design arms through ``harness.workloads.runner.run_conversation`` on
``harness.workloads.lme_workload.to_conversation(q)``, each arm driving its simulator's public API, and read the
delivered ids and token counts the runner recorded. Question loads and arm runs are cached per process (keyed by
the file's path, size and modification time); :func:`clear_cache` empties the caches (tests that change a
behaviour call it). An arm that is unavailable or fails makes the claim an ``error`` with the arm's message.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harness.claims import ClaimContext, Demonstrate, Observation, Tested, guarded_claim
from harness.workloads.longmemeval import (
    QUESTION_TYPES,
    LmeQuestion,
    LongMemEvalDataError,
    describe_data,
    find_longmemeval_path,
    iter_questions,
    release_of,
)

D = "cross"
REC = "LongMemEval workload"
REC_EXPANSION = "LongMemEval workload (+ MEM-RTE-source-expansion)"
PER_TYPE = 2
"""Questions per question type in the shared selection (six types: at most 12 questions)."""
SSA_QUESTIONS = 8
"""``single-session-assistant`` questions XD-16 inspects."""
TORTOISE_QUESTIONS = 8
"""Questions XD-18 runs Tortoise on: the eligible questions with the fewest turns (file order among equals). The
paired test on their tokens needs six at least (2 / 2^6 < 0.05); eight leave room for a question whose expansion
adds nothing. The cost: a Tortoise ingest of an S-shaped haystack (about 360-600 turns) takes 60-120 s on one
CPU thread of a loaded two-core machine (the MiniLM encoding of every turn and point is most of it), so XD-18 is
the slowest claim of this file, about 8 to 15 minutes."""
MIN_MULTI_QUESTIONS = 20
"""XD-20 scores every non-abstention ``multi-session`` question of the file with two or more gold sessions; with
fewer than this many it is skipped with the count (S has about 120; a verdict decided by two questions flipped
between an 8-question and a 60-question file)."""
FRACTAL_QUESTIONS = 7
"""Questions XD-19 runs Fractal on (each twice: the first half of its sessions, then the whole haystack; the
released S haystacks are all about 115k tokens, so the halves give the size its spread), plus one question with
assistant-side evidence when none of them has any: seven pairs for the paired test of the tokens (at least six
needed), about 10 s a question on an S-shaped file."""
MIN_ASSISTANT_ONLY_SHARE = 0.5
"""XD-16: more than this share of the inspected single-session-assistant questions must have their evidence in
assistant turns only (51 of 56 on S, cleaned)."""
MIN_RANK_CORRELATION = 0.8
FLOAT_NOISE = 1e-9
_CACHE: dict[tuple[Any, ...], Any] = {}
_ROOT: list[Path] = []


class ArmFailed(RuntimeError):
    """A design arm a claim needs did not run (the message is the arm's)."""


def clear_cache() -> None:
    """Forget every cached question load and arm run of this process."""
    _CACHE.clear()


def _root() -> Path:
    if not _ROOT:
        _ROOT.append(Path(tempfile.mkdtemp(prefix="memsim-xdl-")))
        atexit.register(shutil.rmtree, _ROOT[0], True)
    return _ROOT[0]


def _unavailable() -> Observation | None:
    try:
        path = find_longmemeval_path()
    except LongMemEvalDataError as exc:  # set but missing: an error, not a skip
        msg = f"LongMemEval data: {exc}"
        return Observation(verdict="error", evidence=msg, note=msg)
    if path is None:
        return Observation.skipped("LongMemEval data not found: run `memsim data fetch longmemeval-s` or set "
                                   "$MEMSIM_LONGMEMEVAL_DATA")
    release = release_of(path)
    if release and release.startswith("LongMemEval oracle"):
        # the quickstart's bare fetch brings the oracle file: its haystacks are the evidence sessions alone, so
        # statements about retrieval from a haystack (filler included) cannot be tested on it
        return Observation.skipped(f"{path.name} is LongMemEval's oracle file (evidence sessions only, no filler "
                                   f"haystack): run `memsim data fetch longmemeval-s` or set "
                                   f"$MEMSIM_LONGMEMEVAL_DATA to an S or M file")
    return None


def _xl(id: str, statement: str, record: str = REC) -> Callable[[Demonstrate], Demonstrate]:
    """Register a LongMemEval cross-design consequence claim, skipped with the reason without data."""
    return guarded_claim(id, design=D, record=record, kind="consequence", statement=statement,
                         skip_reason=_unavailable)


def _path() -> Path:
    path = find_longmemeval_path()
    assert path is not None  # the guard ran first
    return path


def _file_key(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return (str(path.resolve()), st.st_size, st.st_mtime_ns)


def _data_line(path: Path) -> str:
    key = ("describe", _file_key(path))
    if key not in _CACHE:
        _CACHE[key] = describe_data(path)
    return _CACHE[key]


def shared_selection(path: Path) -> list[LmeQuestion]:
    """The first ``PER_TYPE`` questions of each type, in file order (one pass, stopping when every quota is met)."""
    key = ("shared", _file_key(path), PER_TYPE)
    if key not in _CACHE:
        quota = dict.fromkeys(QUESTION_TYPES, PER_TYPE)
        out: list[LmeQuestion] = []
        for q in iter_questions(path):
            if quota.get(q.question_type, 0) > 0:
                quota[q.question_type] -= 1
                out.append(q)
                if not any(quota.values()):
                    break
        _CACHE[key] = out
    return list(_CACHE[key])


def _typed(path: Path, qtype: str, n: int) -> list[LmeQuestion]:
    key = ("typed", _file_key(path), qtype, n)
    if key not in _CACHE:
        _CACHE[key] = list(iter_questions(path, types=[qtype], limit=n))
    return list(_CACHE[key])


def _run(path: Path, arm: str, questions: Sequence[LmeQuestion],
         sessions: int | None = None) -> list[dict[str, Any]]:
    """``run_conversation`` of ``arm`` on each question's conversation, or on the conversation of its first
    ``sessions`` haystack sessions when given (cached), with ``delivered_ids`` (row -> the turn ids the delivered
    text carries) added; raises ``ArmFailed``."""
    from harness.workloads.lme_workload import to_conversation
    from harness.workloads.runner import run_conversation

    out = []
    for q in questions:
        key = ("run", _file_key(path), arm, q.index, q.question_id, sessions)
        if key not in _CACHE:
            cut = q if sessions is None else q.model_copy(update={"sessions": q.sessions[:sessions]})
            delivered: dict[str, list[str]] = {}
            res = run_conversation(to_conversation(cut), [arm], _root() / f"{len(_CACHE)}",
                                   on_delivery=lambda row, probe, d, got=delivered: got.__setitem__(
                                       row, sorted(d.dia_ids)))
            res["delivered_ids"] = delivered
            info = res["arms"][arm]
            if info["status"] != "ok":
                raise ArmFailed(f"{q.question_id}: {arm}: {info['status']}: {info.get('message', '')}")
            _CACHE[key] = res
        out.append(_CACHE[key])
    return out


def _rec(res: dict[str, Any], row: str) -> dict[str, Any]:
    (rec,) = [r for r in res["records"] if r["row"] == row]
    return rec


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 4)


def _spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman's rank correlation (ties averaged); ``None`` when it is undefined (fewer than 3 points or a
    constant side)."""
    from scipy.stats import spearmanr

    if len(a) < 3 or len(set(a)) < 2 or len(set(b)) < 2:
        return None
    return float(spearmanr(a, b).statistic)


def examples(question_ids: Sequence[str], row: str | None = None) -> list[dict[str, Any]]:
    """``measured["examples"]``: one ``{"conversation", "probe"}`` per question (both the question id, as the
    per-probe tables name a LongMemEval question), with ``row`` when the example shows that row's delivery."""
    out: list[dict[str, Any]] = []
    for qid in dict.fromkeys(question_ids):
        out.append({"conversation": qid, "probe": qid, **({"row": row} if row is not None else {})})
    return out


IDENTITY = "none: an identity of the file and the protocol, checked exactly on every question read"


# --------------------------------------------------------------------------------------------------- XD-16
@_xl("XD-16",
     statement="The official retrieval corpus (user turns only) cannot deliver assistant-side evidence: most "
               "single-session-assistant questions (51 of 56 on S) have every evidence turn in an assistant turn; "
               "for each of those the corpus at session and at turn granularity holds no gold id and no document "
               "containing an evidence turn's text, so the paper averaging scores it recall_all@k 1 and "
               "ndcg_any@k 0 at every k (BM25's ranking shown; nothing being gold, any ranking scores so) and the "
               "strict averaging drops it, while the "
               "design view (to_conversation) keeps those turns as evidence an arm must deliver")
def xd_16(ctx: ClaimContext) -> Observation:
    from harness.workloads import lme_retrieval as lr
    from harness.workloads.lme_workload import to_conversation

    path = _path()
    qs = _typed(path, "single-session-assistant", SSA_QUESTIONS)
    if not qs:
        return Observation.skipped(f"{path.name}: no single-session-assistant question")
    bm25 = lr.Bm25Retriever()
    per: list[dict[str, Any]] = []
    for q in qs:
        ev = [t for s in q.sessions for t in s.turns if t.has_answer is True]
        assistant_only = bool(ev) and all(t.role == "assistant" for t in ev)
        row: dict[str, Any] = {"question_id": q.question_id, "evidence_turns": len(ev),
                               "assistant_only": assistant_only}
        if assistant_only:
            texts = [t.content.strip() for t in ev if t.content.strip()]
            gold, contains, scores = {}, {}, {}
            for gran in lr.GRANULARITIES:
                docs, ids = lr.build_corpus(q, gran)  # type: ignore[arg-type]
                gold[gran] = lr.gold_ids(ids)
                contains[gran] = sum(1 for d in docs if any(x in d for x in texts))
                m = lr.evaluate(bm25.rank(docs, q.question), ids)
                scores[gran] = {"recall_all_1": all(m[f"recall_all@{k}"] == 1.0 for k in lr.KS),
                                "ndcg_0": all(m[f"ndcg_any@{k}"] == 0.0 for k in lr.KS)}
            conv_ev = to_conversation(q).probes[0]
            facts = {"abstention": q.abstention, "user_evidence": q.has_user_evidence()}
            row.update(gold_ids=gold, docs_containing_evidence=contains, scores=scores,
                       kept_paper=lr.keep(facts, "paper"), kept_strict=lr.keep(facts, "strict"),
                       design_evidence=len(conv_ev.evidence), official_evidence=len(conv_ev.official_evidence or []))
        per.append(row)
    only = [p for p in per if p["assistant_only"]]
    share = len(only) / len(per)
    return Observation.from_checks(
        {"most_assistant_only": share > MIN_ASSISTANT_ONLY_SHARE,
         "no_gold_in_corpus": all(not g for p in only for g in p["gold_ids"].values()),
         "no_document_holds_evidence_text": all(c == 0 for p in only for c in p["docs_containing_evidence"].values()),
         "paper_scores_recall_all_1_ndcg_0": all(s["recall_all_1"] and s["ndcg_0"] for p in only
                                                 for s in p["scores"].values()),
         "strict_drops_paper_keeps_non_abstention": all(not p["kept_strict"]
                                                        and p["kept_paper"] == ("_abs" not in p["question_id"])
                                                        for p in only),
         "design_view_keeps_evidence": all(p["design_evidence"] == p["evidence_turns"] > 0
                                           and p["official_evidence"] == 0 for p in only)},
        measured={"data": _data_line(path), "questions": len(per), "assistant_only": len(only),
                  "assistant_only_share": _r(share), "paper_kept": sum(1 for p in only if p["kept_paper"]),
                  "strict_kept": sum(1 for p in only if p["kept_strict"]), "test": IDENTITY,
                  "examples": examples([p["question_id"] for p in only]), "per_question": per},
        evidence=(f"{only[0]['question_id']}: evidence turns {only[0]['evidence_turns']} (all assistant); "
                  f"gold ids {only[0]['gold_ids']}; scores {only[0]['scores']}; assistant-only too: "
                  f"{', '.join(p['question_id'] for p in only[1:]) or 'none'}") if only else
                 f"none of the first {len(per)} single-session-assistant questions has assistant-only evidence")


# --------------------------------------------------------------------------------------------------- XD-17
@_xl("XD-17",
     statement="The official protocol's two averaging rules change both the count and the numbers: for BM25 at "
               "session granularity on the first questions of each type, the paper averaging (skip abstention) "
               "keeps more questions than the strict one (also skip questions without a user evidence turn), and "
               "at least one averaged metric differs between them by more than float noise")
def xd_17(ctx: ClaimContext) -> Observation:
    from harness.workloads import lme_retrieval as lr

    path = _path()
    qs = shared_selection(path)
    if not qs:
        return Observation.skipped(f"{path.name}: no question")
    bm25 = {"bm25": lr.Bm25Retriever()}
    rows = [r for q in qs for r in lr.question_rows(q, bm25, granularities=("session",))]
    agg = {a["averaging"]: a for a in lr.aggregate(rows, by_type=False)}
    paper, strict = agg["paper"], agg["strict"]
    diffs = {m: _r(paper["metrics"][m] - strict["metrics"][m]) for m in lr.METRIC_NAMES
             if paper["metrics"][m] is not None and strict["metrics"][m] is not None}
    big = {m: d for m, d in diffs.items() if d is not None and abs(d) > FLOAT_NOISE}
    paper_only = [q.question_id for q in qs if not q.abstention and not q.has_user_evidence()]
    return Observation.from_checks(
        {"paper_n_above_strict_n": paper["questions"] > strict["questions"],
         "a_metric_differs": bool(big)},
        measured={"data": _data_line(path), "questions": len(qs),
                  "abstention": sum(1 for q in qs if q.abstention),
                  "without_user_evidence": sum(1 for q in qs if not q.abstention and not q.has_user_evidence()),
                  "paper_n": paper["questions"], "strict_n": strict["questions"],
                  "paper": {m: _r(paper["metrics"][m]) for m in ("recall_all@5", "ndcg_any@5", "recall_any@5",
                                                                  "recall_all@10", "ndcg_any@10")},
                  "strict": {m: _r(strict["metrics"][m]) for m in ("recall_all@5", "ndcg_any@5", "recall_any@5",
                                                                    "recall_all@10", "ndcg_any@10")},
                  "paper_minus_strict": big, "test": IDENTITY, "examples": examples(paper_only)},
        evidence=f"bm25 session: paper n={paper['questions']} recall_all@5={_r(paper['metrics']['recall_all@5'])} "
                 f"ndcg_any@5={_r(paper['metrics']['ndcg_any@5'])}; strict n={strict['questions']} "
                 f"recall_all@5={_r(strict['metrics']['recall_all@5'])} "
                 f"ndcg_any@5={_r(strict['metrics']['ndcg_any@5'])}; kept by paper only (no user evidence turn): "
                 f"{', '.join(paper_only) or 'none'}")


# --------------------------------------------------------------------------------------------------- XD-18
def _expansion_eligible(q: LmeQuestion) -> bool:
    return (not q.abstention and q.question_type != "temporal-reasoning"
            and any(t.has_answer is True for s in q.sessions for t in s.turns))


def tortoise_selection(path: Path) -> list[LmeQuestion]:
    """XD-18's questions: the ``TORTOISE_QUESTIONS`` with the fewest turns (file order among equals) among the
    eligible questions of the shared selection, topped up in file order with the file's next eligible questions
    when the shared selection has fewer than ``TORTOISE_QUESTIONS`` (cached)."""
    key = ("tortoise", _file_key(path), PER_TYPE, TORTOISE_QUESTIONS)
    if key not in _CACHE:
        shared = shared_selection(path)
        pool = [q for q in shared if _expansion_eligible(q)]
        if len(pool) < TORTOISE_QUESTIONS:
            taken = {q.index for q in shared}
            for q in iter_questions(path):
                if len(pool) >= TORTOISE_QUESTIONS:
                    break
                if q.index not in taken and _expansion_eligible(q):
                    pool.append(q)
        _CACHE[key] = sorted(pool, key=lambda q: q.n_turns)[:TORTOISE_QUESTIONS]  # stable: file order among equals
    return list(_CACHE[key])


@_xl("XD-18", record=REC_EXPANSION,
     statement="Tortoise's source-session expansion on LongMemEval costs tokens and never loses delivered "
               "evidence: on the eight non-temporal, non-abstention questions with evidence turns and the fewest "
               "turns among the first questions of each type, the evaluation row with the expansion "
               "(tortoise-eval) delivers more tokens than the same search pool without it (tortoise-eval-noexp), "
               "and on each question at least its evidence recall (both deltas measured)")
def xd_18(ctx: ClaimContext) -> Observation:
    """Paired test of the delivered tokens per question (with against without the expansion); "never loses
    evidence" is a per-question check (recall with >= recall without on every question)."""
    path = _path()
    qs = tortoise_selection(path)
    if not qs:
        return Observation.skipped(f"{path.name}: no non-temporal, non-abstention question with evidence turns")
    per = []
    for q, res in zip(qs, _run(path, "tortoise", qs), strict=True):
        w, wo = _rec(res, "tortoise-eval"), _rec(res, "tortoise-eval-noexp")
        per.append({"question_id": q.question_id, "question_type": q.question_type, "turns": res["n_turns"],
                    "recall_with": _r(w["recall"]),
                    "recall_without": _r(wo["recall"]), "tokens_with": w["tokens"], "tokens_without": wo["tokens"],
                    "expansion_added": w["meta"].get("expansion_added"),
                    "expansion_ran": w["meta"].get("expansion_ran")})
    scored = [p for p in per if p["recall_with"] is not None and p["recall_without"] is not None]
    rw = float(np.mean([p["recall_with"] for p in scored])) if scored else None
    ro = float(np.mean([p["recall_without"] for p in scored])) if scored else None
    tw = float(np.mean([p["tokens_with"] for p in per]))
    to = float(np.mean([p["tokens_without"] for p in per]))
    test = Tested.paired("tortoise-eval > tortoise-eval-noexp (tokens)", [p["tokens_with"] for p in per],
                         [p["tokens_without"] for p in per], ">")
    return Observation.from_test(
        test,
        checks={"never_loses_evidence_each": bool(scored) and all(p["recall_with"] >= p["recall_without"]
                                                                  for p in scored)},
        measured={"data": _data_line(path), "questions": len(per), "questions_with_recall": len(scored),
                  "recall_with": _r(rw), "recall_without": _r(ro),
                  "recall_delta": None if rw is None or ro is None else _r(rw - ro), "tokens_with": _r(tw),
                  "tokens_without": _r(to), "tokens_delta": _r(tw - to),
                  "examples": examples([p["question_id"] for p in per], "tortoise-eval"), "per_question": per},
        evidence="; ".join(f"{p['question_id']}: recall {p['recall_without']} -> {p['recall_with']}, tokens "
                           f"{p['tokens_without']} -> {p['tokens_with']} (+{p['expansion_added']} turns)"
                           for p in per))


# --------------------------------------------------------------------------------------------------- XD-19
def _haystack(q: LmeQuestion, sessions: int | None = None) -> tuple[int, int]:
    """(turns, characters of turn content) of the question's haystack, or of its first ``sessions`` sessions."""
    kept = q.sessions if sessions is None else q.sessions[:sessions]
    return sum(len(s.turns) for s in kept), sum(len(t.content) for s in kept for t in s.turns)


def _assistant_evidence(q: LmeQuestion, sessions: int | None = None) -> list[str]:
    """The turn ids (as ``to_conversation`` names them) of the assistant evidence turns of the question's haystack,
    or of its first ``sessions`` sessions."""
    from harness.workloads.lme_workload import to_conversation

    cut = q if sessions is None else q.model_copy(update={"sessions": q.sessions[:sessions]})
    return [t.dia_id for s in to_conversation(cut).sessions for t in s.turns
            if t.role == "assistant" and t.has_answer is True]


def fractal_selection(path: Path) -> list[LmeQuestion]:
    """XD-19's questions: the first ``FRACTAL_QUESTIONS`` of the shared selection, plus (when none of them has an
    assistant evidence turn) the first question of the shared selection, else of the file's first
    ``SSA_QUESTIONS`` single-session-assistant questions, that has one."""
    shared = shared_selection(path)
    qs = shared[:FRACTAL_QUESTIONS]
    if not any(_assistant_evidence(q) for q in qs):
        extra = next((q for q in [*shared, *_typed(path, "single-session-assistant", SSA_QUESTIONS)]
                      if _assistant_evidence(q)), None)
        if extra is not None:
            qs.append(extra)
    return qs


@_xl("XD-19",
     statement="Fractal's delivered tokens grow with the haystack while its delivered evidence recall stays "
               "complete: on seven or more questions (a question with assistant-side evidence always among them), "
               "Fractal fed the whole haystack delivers more tokens than fed the first half of its sessions; over "
               "those runs the delivered tokens rank-correlate with the haystack's size (its characters) above "
               "0.8; every run with evidence turns in its haystack has delivered recall 1 (user and assistant "
               "evidence); and every assistant evidence turn of a haystack is delivered")
def xd_19(ctx: ClaimContext) -> Observation:
    """Paired test of the delivered tokens per question (whole haystack against its first half); recall 1, the
    assistant evidence delivered and the rank correlation above 0.8 are checks."""
    path = _path()
    qs = fractal_selection(path)
    if not qs:
        return Observation.skipped(f"{path.name}: no question")
    if not any(_assistant_evidence(q) for q in qs):
        return Observation.skipped(f"{path.name}: no question with an assistant evidence turn among the first "
                                   f"questions of each type and the first {SSA_QUESTIONS} single-session-assistant "
                                   "questions: the assistant side cannot be tested")
    per = []
    for q in qs:
        row: dict[str, Any] = {"question_id": q.question_id, "question_type": q.question_type,
                               "sessions": len(q.sessions)}
        for label, cut in (("half", max(1, len(q.sessions) // 2)), ("whole", None)):
            (res,) = _run(path, "fractal", [q], sessions=cut)
            rec = _rec(res, "fractal")
            turns, chars = _haystack(q, cut)
            wanted = _assistant_evidence(q, cut)
            got = set(res["delivered_ids"].get("fractal", []))
            row[label] = {"sessions": cut or len(q.sessions), "turns": turns, "chars": chars,
                          "tokens": rec["tokens"], "recall": _r(rec["recall"]),
                          "delivered_turns": rec["delivered_turns"], "assistant_evidence": len(wanted),
                          "assistant_evidence_delivered": sum(1 for i in wanted if i in got)}
        per.append(row)
    runs = [p[h] for p in per for h in ("half", "whole")]
    rho_chars = _spearman([r["chars"] for r in runs], [r["tokens"] for r in runs])
    rho_turns = _spearman([r["turns"] for r in runs], [r["tokens"] for r in runs])
    scored = [r for r in runs if r["recall"] is not None]
    assistant = [r for r in runs if r["assistant_evidence"]]
    grow = [p["whole"]["tokens"] - p["half"]["tokens"] for p in per]
    added = [p["whole"]["chars"] - p["half"]["chars"] for p in per]
    test = Tested.paired("whole haystack > first half (tokens)", [p["whole"]["tokens"] for p in per],
                         [p["half"]["tokens"] for p in per], ">")
    return Observation.from_test(
        test,
        checks={"tokens_track_haystack": rho_chars is not None and rho_chars > MIN_RANK_CORRELATION,
                "recall_1_on_every_run_with_evidence": bool(scored) and all(r["recall"] == 1.0 for r in scored),
                "assistant_evidence_delivered": bool(assistant) and all(
                    r["assistant_evidence_delivered"] == r["assistant_evidence"] for r in assistant)},
        measured={"data": _data_line(path), "questions": len(per), "runs": len(runs), "runs_with_evidence":
                  len(scored), "runs_with_assistant_evidence": len(assistant),
                  "assistant_evidence_turns": sum(r["assistant_evidence"] for r in assistant),
                  "assistant_evidence_turns_delivered": sum(r["assistant_evidence_delivered"] for r in assistant),
                  "rank_correlation_tokens_chars": _r(rho_chars),
                  "rank_correlation_tokens_turns": _r(rho_turns),
                  "added_tokens_per_added_char": _r(float(np.mean([g / a for g, a in zip(grow, added, strict=True)
                                                                   if a > 0] or [float("nan")]))),
                  "examples": examples([p["question_id"] for p in per], "fractal"), "per_question": per},
        evidence="; ".join(f"{p['question_id']} ({p['question_type']}): {p['half']['sessions']} sessions "
                           f"{p['half']['tokens']} tokens (recall {p['half']['recall']}) -> {p['whole']['sessions']} "
                           f"sessions {p['whole']['tokens']} tokens (recall {p['whole']['recall']}, assistant "
                           f"evidence {p['whole']['assistant_evidence_delivered']}/{p['whole']['assistant_evidence']})"
                           for p in per))


# --------------------------------------------------------------------------------------------------- XD-20
def multi_session_rows(path: Path) -> tuple[int, list[dict[str, Any]]]:
    """XD-20's data: how many ``multi-session`` questions the file holds, and BM25's session-level recall_any and
    recall_all at 5 and 10 for every one that is not abstention and has two or more gold sessions (one streaming
    pass, cached)."""
    from harness.workloads import lme_retrieval as lr

    key = ("multi", _file_key(path))
    if key not in _CACHE:
        bm25 = lr.Bm25Retriever()
        n, per = 0, []
        for q in iter_questions(path, types=["multi-session"]):
            n += 1
            if q.abstention:
                continue
            docs, ids = lr.build_corpus(q, "session")
            gold = lr.gold_ids(ids)
            if len(gold) < 2:
                continue
            m = lr.evaluate(bm25.rank(docs, q.question), ids)
            per.append({"question_id": q.question_id, "sessions": len(docs), "gold_sessions": len(gold),
                        **{f"{k}@{c}": m[f"{k}@{c}"] for c in (5, 10) for k in ("recall_any", "recall_all")}})
        _CACHE[key] = (n, per)
    n, per = _CACHE[key]
    return n, list(per)


@_xl("XD-20",
     statement="The paper's Recall@k (recall_all: every gold session in the top k) and the recall_any@k that "
               "package READMEs quote as R@k are different numbers where a question has several evidence "
               "sessions: over every multi-session question of the file (non-abstention, two or more gold "
               "sessions in the official corpus; at least 20 of them), BM25's session-level recall_any@5 averages "
               "above its recall_all@5")
def xd_20(ctx: ClaimContext) -> Observation:
    path = _path()
    n_multi, per = multi_session_rows(path)
    if len(per) < MIN_MULTI_QUESTIONS:
        return Observation.skipped(f"{path.name}: {len(per)} non-abstention multi-session question(s) with two or "
                                   f"more gold sessions (of {n_multi} multi-session question(s)); the claim needs "
                                   f"at least {MIN_MULTI_QUESTIONS}")
    mean = {k: _r(float(np.mean([p[k] for p in per]))) for k in ("recall_any@5", "recall_all@5", "recall_any@10",
                                                                  "recall_all@10")}
    assert mean["recall_any@5"] is not None and mean["recall_all@5"] is not None
    gap = [p for p in per if p["recall_any@5"] > p["recall_all@5"]]
    shown = (gap + [p for p in per if p not in gap])[:8]  # the questions with a gap first
    return Observation.from_checks(
        {"recall_any_above_recall_all_at_5": mean["recall_any@5"] > mean["recall_all@5"]},
        measured={"data": _data_line(path), "multi_session_questions": n_multi, "questions": len(per),
                  "mean": mean, "gap_at_5": _r(mean["recall_any@5"] - mean["recall_all@5"]),
                  "questions_with_gap_at_5": len(gap), "test": IDENTITY,
                  "examples": examples([p["question_id"] for p in shown]), "per_question": per},
        evidence=f"{len(per)} questions scored, {len(gap)} with recall_any@5 above recall_all@5: " + "; ".join(
            f"{p['question_id']}: {p['gold_sessions']} gold of {p['sessions']} sessions, recall_any@5 "
            f"{p['recall_any@5']} recall_all@5 {p['recall_all@5']}" for p in shown)
        + ("; ..." if len(per) > len(shown) else ""))
