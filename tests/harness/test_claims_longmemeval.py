"""XD-16 .. XD-20 (LongMemEval cross-design claims): they hold on a file in the released schema, are skipped
without data, and each turns ``refuted`` when the behaviour it observes is changed (a mutated file or a
monkeypatched design); the two decided by a paired test (XD-18, XD-19) also turn ``refuted`` by that test when the
two sides it compares are swapped in the very runs the claim observed (the runs are cached per process, so the
swap costs no second ingest)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import torch

from harness.claims import all_claims
from harness.claims import cross_longmemeval as xl
from harness.ledger import run_claim
from tests.harness.lme_fixture import assistant, question, user, write

torch.set_num_threads(1)

IDS = ("XD-16", "XD-17", "XD-18", "XD-19", "XD-20")
WORDS = ("garden", "bike", "violin", "recipe", "trail", "library", "python", "camera", "coffee", "novel",
         "budget", "flight", "museum", "yoga", "guitar", "paint", "soccer", "market", "river", "lamp")
FACTS = {  # (question, user evidence, assistant evidence)
    "single-session-user": ("What breed is my dog?", "I just adopted a border collie named Rex.", None),
    "single-session-assistant": ("Which trail did you suggest to me?", None, "I suggest the Mount Falcon loop."),
    "single-session-preference": ("Any snack ideas for me?", "I love salty snacks, especially pretzels.", None),
    "multi-session": ("How many instruments do I play?", "I play the violin and the cello.", None),
    "knowledge-update": ("Where do I work now?", "I moved to a job at the city library.", None),
    "temporal-reasoning": ("How many days ago did I buy the bike?", "I bought a blue bike today.", None),
}


def _filler(rng: random.Random, n_turns: int, words: tuple[int, int]) -> list[dict[str, Any]]:
    out = []
    for i in range(n_turns):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(*words))) + "."
        out.append(user(text) if i % 2 == 0 else assistant(text))
    return out


def haystack_questions(n: int = 12, *, seed: int = 0, base_sessions: int = 3, step: int = 1,
                       turns: int = 4, words: tuple[int, int] = (6, 14), user_evidence_everywhere: bool = False,
                       abstention: bool = True, multi_gold: int = 1) -> list[dict[str, Any]]:
    """``n`` questions cycling through the six types, the i-th with ``base_sessions + step * (i // 6)`` filler
    sessions of ``turns`` turns (``words`` words each) plus one evidence session (evidence in a user turn, or in an assistant turn for
    single-session-assistant); question 3 is an abstention question unless ``abstention`` is false.
    ``user_evidence_everywhere`` also puts a user evidence turn in every single-session-assistant question;
    ``multi_gold`` is the number of evidence sessions of a multi-session question (placed side by side)."""
    rng = random.Random(seed)
    types = list(FACTS)
    out = []
    for i in range(n):
        qtype = types[i % 6]
        text, u_ev, a_ev = FACTS[qtype]
        ev_turns = [user(u_ev or "Suggest a trail near Denver.", bool(u_ev) or user_evidence_everywhere),
                    assistant(a_ev or "Happy to help with that.", bool(a_ev))]
        n_sessions = base_sessions + step * (i // 6) + (i % 6)
        sessions = [(f"sharegpt_{seed}_{i}_{j}", f"2023/05/{j % 28 + 1:02d} (Mon) 10:00",
                     _filler(rng, turns, words)) for j in range(n_sessions)]
        for g in range(multi_gold if qtype == "multi-session" else 1):
            sessions.insert(n_sessions // 2, (f"answer_{seed}_{i}_{g}", "2023/05/15 (Mon) 12:00",
                                              ev_turns if g == 0 else [user(f"I also play instrument {g}.", True)]))
        qid = f"q{i:03d}" + ("_abs" if abstention and i == 3 else "")
        out.append(question(qid, qtype, text, "the answer", "2023/06/30 (Fri) 09:00", sessions))
    return out


def _verdicts(ids: tuple[str, ...] = IDS) -> dict[str, Any]:
    xl.clear_cache()
    return {c.id: run_claim(c) for c in all_claims(ids=list(ids))}


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = write(tmp_path / "lme.json", haystack_questions())
    monkeypatch.setenv("MEMSIM_LONGMEMEVAL_DATA", str(path))
    yield path
    xl.clear_cache()


def test_registered_as_cross_consequences() -> None:
    claims = all_claims(ids=list(IDS))
    assert [c.id for c in claims] == list(IDS)
    assert all(c.design == "cross" and c.kind == "consequence" and c.record.startswith("LongMemEval workload")
               for c in claims)
    assert "MEM-RTE-source-expansion" in all_claims(ids=["XD-18"])[0].record


def test_skipped_without_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMSIM_LONGMEMEVAL_DATA", raising=False)
    monkeypatch.setenv("MEMSIM_DATA_DIR", str(tmp_path / "empty"))
    rows = _verdicts()
    assert {r.verdict for r in rows.values()} == {"skipped"}
    assert all("memsim data fetch longmemeval-s" in r.note for r in rows.values())


def test_skipped_on_the_oracle_file(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The quickstart's bare fetch brings the oracle file (evidence sessions only): the haystack claims skip on it,
    saying which file to fetch, instead of testing retrieval where there is no filler to retrieve from."""
    monkeypatch.setattr(xl, "release_of", lambda path: "LongMemEval oracle, cleaned release")
    rows = _verdicts()
    assert {r.verdict for r in rows.values()} == {"skipped"}
    assert all("oracle" in r.note and "longmemeval-s" in r.note for r in rows.values())


def test_a_missing_set_path_is_an_error_not_a_skip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSIM_LONGMEMEVAL_DATA", str(tmp_path / "typo.json"))
    row = _verdicts(("XD-17",))["XD-17"]
    assert row.verdict == "error" and "typo.json" in row.evidence and "\n" not in row.evidence


def test_hold_on_a_released_schema_file(data: Path) -> None:
    """XD-18 holds in its own test below (its Tortoise runs reused there for the swap)."""
    rows = _verdicts(tuple(i for i in IDS if i != "XD-18"))
    expected = {**dict.fromkeys(IDS, "holds"), "XD-20": "skipped"}  # one gold session per multi-session question
    del expected["XD-18"]
    assert {k: r.verdict for k, r in rows.items()} == expected, \
        {k: (r.measured, r.evidence[-400:]) for k, r in rows.items() if r.verdict != "holds"}
    m16, m17 = rows["XD-16"].measured, rows["XD-17"].measured
    # the builder: 2 single-session-assistant questions, both with assistant-only evidence
    assert (m16["questions"], m16["assistant_only"], m16["paper_kept"], m16["strict_kept"]) == (2, 2, 2, 0)
    # 12 questions: one abstention, two without user evidence -> paper keeps 11, strict 9
    assert (m17["paper_n"], m17["strict_n"]) == (11, 9)
    # the two single-session-assistant questions score recall_all 1 under paper averaging, so paper's
    # recall_all@5 is at least strict's, and ndcg 0 for them pulls paper's nDCG down
    assert m17["paper"]["recall_all@5"] >= m17["strict"]["recall_all@5"]
    assert m17["paper"]["ndcg_any@5"] < m17["strict"]["ndcg_any@5"]
    m19 = rows["XD-19"].measured
    assert m19["questions"] == xl.FRACTAL_QUESTIONS == 7  # q001 (single-session-assistant) is among them
    _decided_by_its_paired_test(rows["XD-19"], "whole haystack > first half (tokens)", 7)
    for cid, qids in (("XD-16", ["q001", "q007"]), ("XD-17", ["q001", "q007"]),
                      ("XD-19", [p["question_id"] for p in m19["per_question"]])):
        assert [(e["conversation"], e["probe"]) for e in rows[cid].measured["examples"]] == [(q, q) for q in qids]
    for cid in ("XD-16", "XD-17"):
        assert rows[cid].measured["test"].startswith("none: an identity") and "tests" not in rows[cid].measured


def _decided_by_its_paired_test(row: Any, name: str, n: int) -> None:
    """The claim holds by one paired test over its ``n`` questions, with the minimum question count (six: the
    smallest two-sided sign-flip p-value of n questions is 2 / 2^n) and the detectable difference recorded."""
    assert row.verdict == "holds", (row.measured.get("tests"), row.measured.get("failed_checks"))
    (t,) = row.measured["tests"]
    assert (t["name"], t["n"], t["outcome"], t["min_probes"]) == (name, n, "holds", 6)
    assert t["wins"] == n and t["p_holm"] < 0.05 and t["detectable"] > 0


def test_the_docs_table_states_each_tested_claims_question_counts() -> None:
    """docs/cross.md's table gives XD-18 and XD-19 the question counts the code runs, the minimum the test
    needs and the difference it detects at 80% power, in standard deviations of the per-question differences
    ((z_0.975 + z_0.8) / sqrt(n))."""
    from scipy.special import ndtri

    table = (Path(__file__).resolve().parents[2] / "docs" / "cross.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("| XD-")}
    z = float(ndtri(0.975) + ndtri(0.8))
    for cid, n in (("XD-18", xl.TORTOISE_QUESTIONS), ("XD-19", xl.FRACTAL_QUESTIONS)):
        assert f"{n} questions" in rows[cid] and "at least 6" in rows[cid], rows[cid]
        assert f"{z / n ** 0.5:.2f} sd" in rows[cid], rows[cid]
    assert "no test: an identity" in rows["XD-16, XD-17, XD-20"]


def test_xd16_refuted_when_assistant_questions_also_have_user_evidence(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "lme.json", haystack_questions(user_evidence_everywhere=True))
    monkeypatch.setenv("MEMSIM_LONGMEMEVAL_DATA", str(path))
    row = _verdicts(("XD-16",))["XD-16"]
    assert row.verdict == "refuted" and row.measured["assistant_only_share"] == 0.0


def test_xd17_refuted_without_abstention_and_with_user_evidence_everywhere(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "lme.json", haystack_questions(user_evidence_everywhere=True, abstention=False))
    monkeypatch.setenv("MEMSIM_LONGMEMEVAL_DATA", str(path))
    row = _verdicts(("XD-17",))["XD-17"]
    assert row.verdict == "refuted" and row.measured["paper_n"] == row.measured["strict_n"] == 12


def _swap_rows(results: list[dict[str, Any]], a: str, b: str) -> list[dict[str, Any]]:
    """Copies of runs with rows ``a`` and ``b`` swapped in their probe records."""
    swap = {a: b, b: a}
    return [{**res, "records": [{**r, "row": swap.get(r["row"], r["row"])} for r in res["records"]]}
            for res in results]


def test_xd18_holds_then_refuted_swapped_and_inconclusive_without_expansion(
        data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """XD-18 holds on the small file by its paired test over eight questions. With tortoise-eval and tortoise-eval-noexp swapped the paired test finds the tokens significant the other
    way (refuted); with an expansion that adds nothing both rows deliver the same tokens on every question: no
    difference either way, which the test cannot call significant (inconclusive, not refuted)."""
    from tortoise_sim.sdk import Tortoise

    (c,) = all_claims(ids=["XD-18"])
    xl.clear_cache()
    held = run_claim(c)
    m18 = held.measured
    assert m18["tokens_delta"] > 0 and m18["questions"] == xl.TORTOISE_QUESTIONS == 8
    # eligible: not temporal (q005, q011), not abstention (q003); the fewest turns first (question i has
    # 3 + i // 6 + i % 6 filler sessions), file order among equals; q010, the longest, is left out
    qids = ["q000", "q001", "q006", "q002", "q007", "q008", "q004", "q009"]
    assert [p["question_id"] for p in m18["per_question"]] == qids
    assert [(e["conversation"], e["probe"], e["row"]) for e in m18["examples"]] == [
        (q, q, "tortoise-eval") for q in qids]
    _decided_by_its_paired_test(held, "tortoise-eval > tortoise-eval-noexp (tokens)", 8)
    assert m18["checks"] == {"never_loses_evidence_each": True}

    real = xl._run
    with monkeypatch.context() as m:
        m.setattr(xl, "_run", lambda *a, **k: _swap_rows(real(*a, **k), "tortoise-eval", "tortoise-eval-noexp"))
        row = run_claim(c)
    assert row.verdict == "refuted"
    assert row.measured["refuted_tests"] == ["tortoise-eval > tortoise-eval-noexp (tokens)"]
    assert row.measured["tokens_delta"] < 0

    monkeypatch.setattr(Tortoise, "expand_pool", lambda self, pool, *a, **kw: (list(pool), {"ran": False,
                                                                                            "total": 0}))
    xl.clear_cache()
    row = run_claim(c)
    assert row.verdict == "inconclusive" and row.measured["tokens_delta"] == 0
    (t,) = row.measured["tests"]
    assert (t["estimate"], t["p"], t["ties"]) == (0, 1, xl.TORTOISE_QUESTIONS)


def test_xd18_tops_up_a_short_shared_selection_in_file_order(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One question per type leaves four eligible (q003 is abstention, q005 temporal): the next eligible
    questions of the file (q006 .. q009) fill the selection up to eight."""
    monkeypatch.setattr(xl, "PER_TYPE", 1)
    xl.clear_cache()
    picked = xl.tortoise_selection(data)
    assert sorted(q.question_id for q in picked) == ["q000", "q001", "q002", "q004", "q006", "q007", "q008",
                                                     "q009"]
    assert [q.n_turns for q in picked] == sorted(q.n_turns for q in picked)


def test_xd19_refuted_with_half_and_whole_swapped(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each question's half-haystack run labelled whole and its whole run labelled half: the paired test finds
    the tokens significant the other way."""
    (c,) = all_claims(ids=["XD-19"])
    xl.clear_cache()
    assert run_claim(c).verdict == "holds"
    real = xl._run

    def swapped(path: Path, arm: str, qs: Any, sessions: int | None = None) -> list[dict[str, Any]]:
        (q,) = qs
        return real(path, arm, qs, sessions=max(1, len(q.sessions) // 2) if sessions is None else None)

    monkeypatch.setattr(xl, "_run", swapped)
    row = run_claim(c)
    assert row.verdict == "refuted"
    assert row.measured["refuted_tests"] == ["whole haystack > first half (tokens)"]


def test_xd19_always_adds_a_question_with_assistant_evidence(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """When the first questions of the selection have no assistant evidence turn (here the first alone, a
    single-session-user question), the first that has one (q001) is added."""
    monkeypatch.setattr(xl, "FRACTAL_QUESTIONS", 1)
    xl.clear_cache()
    assert [q.question_id for q in xl.fractal_selection(data)] == ["q000", "q001"]


def test_xd19_refuted_when_fractal_summarises_a_bounded_tail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Fractal whose rendered summary keeps only its last 8 turns (a bounded memory, not the design) drops the
    evidence session of a haystack longer than its 20-turn history tail and stops growing with the haystack."""
    import fractal_sim.session as fs

    path = write(tmp_path / "lme.json", haystack_questions(base_sessions=24))
    monkeypatch.setenv("MEMSIM_LONGMEMEVAL_DATA", str(path))
    assert _verdicts(("XD-19",))["XD-19"].verdict == "holds"

    real = fs.render_session_summary

    def bounded(summary):
        return real(summary.model_copy(update={"turns": summary.turns[-8:]}))

    monkeypatch.setattr(fs, "render_session_summary", bounded)
    row = _verdicts(("XD-19",))["XD-19"]
    assert row.verdict == "refuted"
    assert "recall_1_on_every_run_with_evidence" in row.measured["failed_checks"], row.measured
    assert row.measured["tests"][0]["outcome"] != "holds"  # the tail does not grow with the haystack


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated file with S's type mix and quirks (8 sessions per question to stay quick), 100 questions so
    XD-20 has its minimum of multi-session questions; none of the first four questions of the shared selection is
    single-session-assistant."""
    from benchmarks.worlds.longmemeval import write_file

    path = tmp_path_factory.mktemp("generated") / "generated.json"
    write_file(path, 100, seed=0, sessions=8)
    return path


def test_hold_on_a_generated_s_like_file(generated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every claim but XD-18 holds on the generator's data, and the counts the verdicts rest on come from the
    file (re-counted here from the raw JSON). XD-18 (eight Tortoise ingests, over two minutes on these haystacks)
    is held on the small file above; the ledger runs it on generated S-shaped files by hand."""
    import json

    monkeypatch.setenv("MEMSIM_LONGMEMEVAL_DATA", str(generated))
    ids = tuple(i for i in IDS if i != "XD-18")
    rows = _verdicts(ids)
    assert {k: r.verdict for k, r in rows.items()} == dict.fromkeys(ids, "holds"), \
        {k: (r.measured.get("failed_checks"), r.note) for k, r in rows.items()}
    raw = json.loads(generated.read_text(encoding="utf-8"))
    ssa = [q for q in raw if q["question_type"] == "single-session-assistant"][:xl.SSA_QUESTIONS]
    only = [q for q in ssa if not any(t["role"] == "user" and t.get("has_answer") for s in q["haystack_sessions"]
                                      for t in s)]
    assert (rows["XD-16"].measured["questions"], rows["XD-16"].measured["assistant_only"]) == (len(ssa), len(only))
    multi = [q for q in raw if q["question_type"] == "multi-session"]
    def gold(q: dict[str, Any]) -> set[str]:  # evidence sessions with a flagged user turn (the others are noans)
        return {sid for sid, sess in zip(q["haystack_session_ids"], q["haystack_sessions"], strict=True)
                if "answer" in sid and any(t["role"] == "user" and t.get("has_answer") for t in sess)}

    scored = [q for q in multi if "_abs" not in q["question_id"] and len(gold(q)) >= 2]
    m20 = rows["XD-20"].measured
    assert (m20["multi_session_questions"], m20["questions"]) == (len(multi), len(scored))  # all, not the first
    m19 = rows["XD-19"].measured
    assert m19["questions"] >= xl.FRACTAL_QUESTIONS and rows["XD-19"].measured["tests"][0]["outcome"] == "holds"
    assert m19["assistant_evidence_turns_delivered"] == m19["assistant_evidence_turns"] > 0
    m20 = rows["XD-20"].measured
    assert m20["examples"] and all(e["conversation"] == e["probe"] for e in m20["examples"])
    gap = {p["question_id"] for p in m20["per_question"] if p["recall_any@5"] > p["recall_all@5"]}
    assert {e["probe"] for e in m20["examples"]} <= gap  # the questions with a gap are shown first
    for r in rows.values():  # the sidecar matches the file: labelled as generated
        assert r.measured["data"].startswith("generated.json: generated by benchmarks.worlds.longmemeval seed 0")
    xl.clear_cache()


def test_xd19_refuted_when_fractal_never_renders_agent_responses(generated: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A Fractal whose summary drops every agent response delivers no assistant-side evidence: the question with
    assistant evidence that XD-19 always includes sees it (the first four of the generated file have user evidence
    only, so without that question this Fractal held)."""
    import fractal_sim.session as fs

    monkeypatch.setenv("MEMSIM_LONGMEMEVAL_DATA", str(generated))
    real = fs.render_session_summary

    def mute(summary):
        turns = [t.model_copy(update={"agent": t.agent.model_copy(update={"response": ""})}) if t.agent else t
                 for t in summary.turns]
        return real(summary.model_copy(update={"turns": turns}))

    monkeypatch.setattr(fs, "render_session_summary", mute)
    row = _verdicts(("XD-19",))["XD-19"]
    assert row.verdict == "refuted"
    assert "assistant_evidence_delivered" in row.measured["failed_checks"], row.measured
    assert row.measured["assistant_evidence_turns_delivered"] == 0 < row.measured["assistant_evidence_turns"]


def multi_questions(decoys: list[int]) -> list[dict[str, Any]]:
    """One multi-session question per entry of ``decoys``, each with two gold sessions (one that shares the
    question's words, one that shares none) and that many filler sessions sharing some of the question's words:
    with 3 decoys the haystack is 5 sessions (the top 5 holds both gold sessions whatever the ranking); with 6 the
    word-less gold session ranks below them (recall_any@5 1, recall_all@5 0)."""
    out = []
    for i, n in enumerate(decoys):
        sessions = [(f"sharegpt_{i}_{j}", "2023/05/02 (Tue) 10:00",
                     [user(f"many instruments do people {WORDS[j % len(WORDS)]}"), assistant("Several.")])
                    for j in range(n)]
        sessions += [(f"answer_{i}_a", "2023/05/03 (Wed) 10:00",
                      [user("How many instruments do I play? I play the violin.", True), assistant("Nice.")]),
                     (f"answer_{i}_b", "2023/05/04 (Thu) 10:00", [user("Cello lessons on Tuesday.", True),
                                                                  assistant("Noted.")])]
        out.append(question(f"m{i:03d}", "multi-session", "How many instruments do I play?", "2",
                            "2023/06/30 (Fri) 09:00", sessions))
    return out


def test_xd20_scores_every_multi_session_question(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first eight multi-session questions show no gap, the later ones do: the claim reads them all (it was
    refuted on the first eight alone)."""
    path = write(tmp_path / "lme.json", multi_questions([3] * 8 + [6] * (xl.MIN_MULTI_QUESTIONS - 4)))
    monkeypatch.setenv("MEMSIM_LONGMEMEVAL_DATA", str(path))
    row = _verdicts(("XD-20",))["XD-20"]
    assert row.verdict == "holds", row.measured
    assert row.measured["questions"] == xl.MIN_MULTI_QUESTIONS + 4
    assert row.measured["questions_with_gap_at_5"] == xl.MIN_MULTI_QUESTIONS - 4


def test_xd20_skipped_below_its_minimum_with_the_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "lme.json", multi_questions([6] * (xl.MIN_MULTI_QUESTIONS - 1)))
    monkeypatch.setenv("MEMSIM_LONGMEMEVAL_DATA", str(path))
    row = _verdicts(("XD-20",))["XD-20"]
    assert row.verdict == "skipped"
    assert f"{xl.MIN_MULTI_QUESTIONS - 1} non-abstention multi-session question(s)" in row.note
    assert f"at least {xl.MIN_MULTI_QUESTIONS}" in row.note


def test_xd20_refuted_when_every_haystack_fits_in_the_top_5(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Multi-session questions of 5 sessions (2 gold): the top 5 holds every gold session whatever BM25 does, and
    recall_any@5 = recall_all@5 = 1 on each."""
    path = write(tmp_path / "lme.json", multi_questions([3] * xl.MIN_MULTI_QUESTIONS))
    monkeypatch.setenv("MEMSIM_LONGMEMEVAL_DATA", str(path))
    row = _verdicts(("XD-20",))["XD-20"]
    assert row.verdict == "refuted"
    assert row.measured["questions"] == xl.MIN_MULTI_QUESTIONS and row.measured["mean"]["recall_all@5"] == 1.0
