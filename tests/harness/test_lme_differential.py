"""LongMemEval's official retrieval evaluation, twice: the test-only reference (``lme_reference.py``, written from
the spec alone) checked on cases worked by hand, then compared number for number with memsim's implementation on
generated files and on hypothesis-made haystacks."""

from __future__ import annotations

import hashlib
import json
import math
import random
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.workloads import lme_retrieval as R
from harness.workloads import longmemeval as lme
from tests.harness import lme_fixture as fx
from tests.harness import lme_reference as ref

# ---- the reference on hand-worked cases ---------------------------------------------------------------------


def test_reference_ndcg_matches_the_spec_checks():
    ids = ["d0", "d1", "d2", "d3"]
    # one gold document at rank 2 -> 1.0 (ranks 1 and 2 both weigh 1)
    assert ref.ndcg([0, 1, 2, 3], ["d1"], ids, 3) == pytest.approx(1.0)
    # at rank 3 -> 1/log2(3) = 0.631
    assert ref.ndcg([0, 1, 2, 3], ["d2"], ids, 3) == pytest.approx(0.6309, abs=1e-4)
    # two gold at ranks 1 and 3 -> (1 + 0.631) / (1 + 1) = 0.815
    assert ref.ndcg([0, 1, 2, 3], ["d0", "d2"], ids, 3) == pytest.approx(0.8155, abs=1e-4)
    # a gold document below the cut does not count; the ideal is cut at k too
    assert ref.ndcg([0, 1, 2, 3], ["d3"], ids, 3) == 0.0
    assert ref.ndcg([3, 0, 1, 2], ["d3", "d0"], ids, 1) == pytest.approx(1.0)


def test_reference_without_gold_scores_recall_all_one():
    assert ref.evaluate_retrieval([1, 0], [], ["a", "b"], 1) == (0.0, 1.0, 0.0)


def test_reference_recall_any_and_all():
    ids = ["answer_a", "x", "answer_b"]
    gold = ["answer_a", "answer_b"]
    assert ref.evaluate_retrieval([0, 1, 2], gold, ids, 1)[:2] == (1.0, 0.0)
    assert ref.evaluate_retrieval([0, 1, 2], gold, ids, 3)[:2] == (1.0, 1.0)
    assert ref.evaluate_retrieval([1, 0, 2], gold, ids, 1)[:2] == (0.0, 0.0)


def test_reference_turn2session_worked_by_hand():
    # turns of s1 (two), an evidence session A (turn 1 evidence, turn 3 not), s2, an evidence session B
    ids = ["s1_1", "s1_3", "answer_A_1", "noans_A_3", "s2_1", "answer_B_2"]
    gold = ["answer_A_1", "answer_B_2"]
    ranking = [0, 1, 3, 2, 4, 5]  # stripped: s1 s1 noans_A answer_A s2 answer_B
    # k=1: one turn covers one session id: nothing gold
    assert ref.evaluate_retrieval_turn2session(ranking, gold, ids, 1) == (0.0, 0.0, 0.0)
    # k=3: the top 3 turns cover 2 ids (s1, noans_A); at 4 turns 3 ids -> effective k 4: answer_A found at rank 4;
    # DCG 1/log2(4) = 0.5, ideal (two evidence turns) 1 + 1 = 2
    ra, rl, nd = ref.evaluate_retrieval_turn2session(ranking, gold, ids, 3)
    assert (ra, rl) == (1.0, 0.0) and nd == pytest.approx(0.25)
    # k=5: effective k 6 (5 distinct ids: s1 noans_A answer_A s2 answer_B); DCG 0.5 + 1/log2(6)
    expected = (0.5 + 1 / math.log2(6)) / 2
    ra, rl, nd = ref.evaluate_retrieval_turn2session(ranking, gold, ids, 5)
    assert (ra, rl) == (1.0, 1.0) and nd == pytest.approx(expected)
    # k=10: never 10 distinct ids; the whole corpus is used
    ra, rl, nd = ref.evaluate_retrieval_turn2session(ranking, gold, ids, 10)
    assert (ra, rl) == (1.0, 1.0) and nd == pytest.approx(expected)
    # not "deduplicate then score": deduplicated sessions would put answer_A at rank 3, not rank 4
    assert nd != pytest.approx((1 / math.log2(3) + 1 / math.log2(5)) / 2)


def test_reference_turn2session_one_gold_session_from_many_evidence_turns():
    # two evidence turns of one session: one gold session id, but the ideal DCG counts both turns
    ids = ["answer_A_1", "answer_A_3", "s_1"]
    ra, rl, nd = ref.evaluate_retrieval_turn2session([2, 0, 1], ["answer_A_1", "answer_A_3"], ids, 1)
    # effective k 1 (one turn = one id), s found, A not
    assert (ra, rl, nd) == (0.0, 0.0, 0.0)
    ra, rl, nd = ref.evaluate_retrieval_turn2session([2, 0, 1], ["answer_A_1", "answer_A_3"], ids, 2)
    # top 2 turns cover s and answer_A; gains [0, 1], ideal [1, 1]
    assert (ra, rl) == (1.0, 1.0) and nd == pytest.approx(0.5)


def test_reference_corpus_rules_on_the_quirky_fixture():
    qs = {q["question_id"]: q for q in fx.quirky_questions()}
    texts, ids = ref.build_corpus(qs["q_user_1"], "session")
    assert ids == ["sharegpt_aa11_0", "answer_1111_1", "ultrachat_bb22"]
    assert texts[1] == "I just adopted a border collie named Rex! He loves frisbees."
    assert texts[2] == "Plan a weekend hiking trip near Denver. "  # the blank user turn joins as ''
    texts, ids = ref.build_corpus(qs["q_user_1"], "turn")
    assert ids == ["sharegpt_aa11_0_1", "answer_1111_1_1", "noans_1111_1_3", "ultrachat_bb22_2", "ultrachat_bb22_4"]
    assert texts[-1] == ""
    # evidence only in an assistant turn: the session is not gold; the listed-twice filler stays twice
    _, ids = ref.build_corpus(qs["q_asst_1"], "session")
    assert ids == ["noans_2222_1", "sharegpt_aa11_0", "sharegpt_aa11_0"]
    # an evidence session with no evidence turn becomes noans; assistant-first session: turn 2 is the user turn
    _, ids = ref.build_corpus(qs["q_ku_1"], "session")
    assert ids == ["noans_5555_1", "answer_5555_2", "sharegpt_aa11_0"]
    _, ids = ref.build_corpus(qs["q_multi_1"], "turn")
    assert ids == ["answer_3333_1_1", "answer_3333_2_2", "sharegpt_cc33_1_1"]


def test_reference_missing_has_answer_in_an_evidence_session_fails():
    q = fx.question("q1", "multi-session", "Q?", "a", "2023/05/30 (Tue) 21:56",
                    [("answer_1", "2023/05/01 (Mon) 10:00", [fx.user("no flag here")])])
    for gran in ("session", "turn"):
        with pytest.raises(ref.ReferenceDataError):
            ref.build_corpus(q, gran)


def test_reference_bm25_tokenises_on_single_spaces_only():
    # idf of 'dog' (1 of 3 documents) = ln(2.5 / 1.5); 'the dog' has average length, tf 1 -> score = idf
    scores = ref.bm25_scores(["the Dog", "the dog", "a cat."], "dog")
    assert scores[0] == 0.0 and scores[2] == 0.0  # no lowercasing
    assert scores[1] == pytest.approx(math.log(2.5 / 1.5))
    assert ref.rank(ref.bm25_scores(["cat.", "cat", "dog"], "cat"))[0] == 1  # no punctuation stripping


def test_reference_averaging_counts_on_the_quirky_fixture():
    logs = [(q, ref.evaluate_entry(q, "session")) for q in fx.quirky_questions()]
    n_paper, paper = ref.average(logs, "paper")
    n_strict, strict = ref.average(logs, "strict")
    assert (n_paper, n_strict) == (4, 3)  # the _abs question out; then q_asst_1 (assistant-only evidence) out
    # q_asst_1 has no gold: recall_all 1 and ndcg 0 in the paper average, so paper >= strict on recall_all@50
    per = {q["question_id"]: m for q, m in logs}
    assert per["q_asst_1"]["session"]["recall_all@50"] == 1.0 and per["q_asst_1"]["session"]["ndcg_any@50"] == 0.0
    assert paper["session"]["recall_all@50"] == 1.0 and strict["session"]["recall_all@50"] == 1.0


# ---- memsim against the reference ---------------------------------------------------------------------------

WORDS = ["dog", "Dog", "dog.", "bike", "red", "blue", "the", "a", "I", "my", "violin", "piano", "library", "job",
         "trail", "Denver", "bought", "moved", "play", "", "answer", "noans"]
"""A small vocabulary: cased and punctuated variants (split(' ') keeps them apart), '' (double spaces), and the
id words themselves as content, so BM25 has overlaps, ties and zero scores."""
DATE = "2023/05/01 (Mon) 10:00"
QDATE = "2023/09/01 (Fri) 10:00"


def _text(rng: random.Random, lo: int = 0, hi: int = 8) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def _session(rng: random.Random, sid: str) -> tuple[str, str, list[dict[str, Any]]]:
    evidence = "answer" in sid
    turns = []
    first = rng.choice(["user", "user", "assistant"])  # some sessions start with the assistant
    for i in range(rng.randint(0, 6)):
        role = first if i % 2 == 0 else ("assistant" if first == "user" else "user")
        if rng.random() < 0.15:
            role = rng.choice(["user", "assistant"])  # not alternating
        has = (rng.random() < 0.35) if evidence else None
        turns.append(fx.user(_text(rng), has) if role == "user" else fx.assistant(_text(rng), has))
    return sid, DATE, turns


def generated_questions(n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` questions in the released schema: shared filler sessions (the same id in several haystacks, sometimes
    twice in one), evidence sessions with random ``has_answer`` patterns (some with no user evidence), ids with
    underscores, assistant-first and non-alternating sessions, blank turns, ``_abs`` questions."""
    rng = random.Random(seed)
    pool = [_session(rng, f"sharegpt_{j:02d}_{rng.randint(0, 3)}") for j in range(12)]
    out = []
    for i in range(n):
        sessions = rng.sample(pool, rng.randint(1, 8))
        if rng.random() < 0.2:
            sessions.append(rng.choice(sessions))  # a session id listed twice
        for e in range(rng.randint(0, 3)):
            sessions.insert(rng.randint(0, len(sessions)), _session(rng, f"answer_{i:03d}_{e + 1}"))
        if not any(t["role"] == "user" for _, _, turns in sessions for t in turns):
            # the official code cannot score an empty turn corpus (BM25Okapi divides by zero); real haystacks
            # always have user turns
            sessions.append(("sharegpt_fill_0", DATE, [fx.user(_text(rng, 1, 5))]))
        qid = f"q{i:03d}" + ("_abs" if rng.random() < 0.1 else "")
        qtype = rng.choice(["single-session-user", "multi-session", "knowledge-update", "temporal-reasoning"])
        out.append(fx.question(qid, qtype, _text(rng, 1, 6), "x", QDATE, sessions))
    return out


def _memsim_rows(questions: list[Any], retrievers: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for q in questions for r in R.question_rows(q, retrievers)]


def _reference_logs(entries: list[dict[str, Any]], scorer: ref.Scorer) -> dict[str, list]:
    return {g: [(e, ref.evaluate_entry(e, g, scorer)) for e in entries] for g in ("session", "turn")}


def _assert_per_question_equal(rows: list[dict[str, Any]], logs: dict[str, list], label: str) -> int:
    """Every per-question metric of memsim's rows equals the reference's (1e-9); returns the values compared."""
    mine = {(r["question_id"], r["granularity"], r["scored_as"]): r["metrics"] for r in rows if r["retriever"] == label}
    compared = 0
    for gran, items in logs.items():
        for e, metrics in items:
            for scored_as, ref_metrics in metrics.items():
                got = mine[(e["question_id"], gran, scored_as)]
                assert set(got) == set(ref_metrics), (e["question_id"], gran, scored_as)
                for name, v in ref_metrics.items():
                    assert got[name] == pytest.approx(v, abs=1e-9), (e["question_id"], gran, scored_as, name,
                                                                      got[name], v)
                    compared += 1
    return compared


def _assert_averages_equal(result_rows: list[dict[str, Any]], logs: dict[str, list], label: str) -> int:
    compared = 0
    by_key = {(r["retriever"], r["granularity"], r["scored_as"], r["averaging"]): r for r in result_rows}
    for gran, items in logs.items():
        for averaging in ("paper", "strict"):
            n, means = ref.average(items, averaging)
            for scored_as, ref_metrics in means.items():
                row = by_key[(label, gran, scored_as, averaging)]
                assert row["questions"] == n, (gran, scored_as, averaging, row["questions"], n)
                for name, v in ref_metrics.items():
                    assert row["metrics"][name] == pytest.approx(v, abs=1e-9), (gran, scored_as, averaging, name)
                    compared += 1
    # every memsim row was checked (no extra rows the reference lacks)
    assert {(g, s, a) for (lab, g, s, a) in by_key if lab == label} == {
        ("session", "session", "paper"), ("session", "session", "strict"), ("turn", "turn", "paper"),
        ("turn", "turn", "strict"), ("turn", "session", "paper"), ("turn", "session", "strict")}
    return compared


def test_bm25_file_every_row_metric_and_count_agree(tmp_path):
    entries = generated_questions(45, seed=7) + fx.quirky_questions()
    path = fx.write(tmp_path / "gen.json", entries)
    questions = list(lme.iter_questions(path))
    assert [q.question_id for q in questions] == [e["question_id"] for e in entries]
    logs = _reference_logs(json.loads(path.read_text(encoding="utf-8")), ref.bm25_scores)
    rows = _memsim_rows(questions, {"bm25": R.make_retriever("bm25")})
    assert _assert_per_question_equal(rows, logs, "bm25") == len(entries) * 3 * len(R.METRIC_NAMES)
    assert _assert_averages_equal(R.aggregate(rows), logs, "bm25") == 6 * len(R.METRIC_NAMES)
    # the generated file does exercise both filters (else the strict/paper comparison says nothing)
    n_paper, _ = ref.average(logs["session"], "paper")
    n_strict, _ = ref.average(logs["session"], "strict")
    assert len(entries) > n_paper > n_strict


def test_bm25_protocol_run_results_agree_with_the_reference(tmp_path):
    from benchmarks import longmemeval_protocol as P

    entries = generated_questions(30, seed=11) + fx.quirky_questions()
    path = fx.write(tmp_path / "gen.json", entries)
    logs = _reference_logs(entries, ref.bm25_scores)
    for workers in (1, 2):  # a worker pool returns the same numbers as the serial loop
        out = tmp_path / f"out{workers}"
        P.run(out, data=path, retrievers=("bm25",), workers=workers)
        payload = json.loads((out / "longmemeval-protocol.json").read_text(encoding="utf-8"))
        assert _assert_averages_equal(payload["rows"], logs, "bm25") == 6 * len(R.METRIC_NAMES)


def _sha_scores(corpus: list[str], query: str) -> np.ndarray:
    """A toy scorer: a stable hash of (query, document) per document, so identical documents tie exactly and the
    ranking is otherwise arbitrary (it probes the metrics on rankings BM25 would not produce)."""
    return np.array([int(hashlib.sha256(f"{query}\\x00{d}".encode()).hexdigest()[:8], 16) % 7 for d in corpus],
                    dtype=float)


class _ShaRetriever:
    name = "sha"

    def rank(self, texts: list[str], query: str) -> list[int]:
        return ref.rank(_sha_scores(texts, query))


_ids = st.sampled_from(["answer_a", "answer_b_1", "answer_answer_c", "answer", "sharegpt_x", "ultra_y_0", "s",
                        "noans_z", "f_answerish"])
_turn = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]),
                               "content": st.lists(st.sampled_from(WORDS), max_size=6).map(" ".join),
                               "has": st.sampled_from([None, True, False])})


@st.composite
def _haystack_question(draw: Any) -> dict[str, Any]:
    sessions = []
    for sid in draw(st.lists(_ids, min_size=1, max_size=7)):  # repeats = the same id listed twice
        turns = draw(st.lists(_turn, max_size=5))
        evidence = "answer" in sid
        made = []
        for t in turns:
            has = t["has"]
            if evidence and has is None and t["role"] == "user":
                # an evidence session's user turns carry a boolean (the missing case is tested apart); an
                # assistant turn without one is read by the official code without complaint
                has = False
            made.append((fx.user if t["role"] == "user" else fx.assistant)(t["content"], has))
        sessions.append((sid, DATE, made))
    qid = draw(st.sampled_from(["q1", "q2_abs"]))
    text = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join))
    return fx.question(qid, "multi-session", text, "x", QDATE, sessions)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_haystack_question())
def test_per_question_metrics_agree_on_generated_haystacks(entry):
    q = lme.parse_question(json.loads(json.dumps(entry)), source="hyp.json", index=0)
    if not any(t["role"] == "user" for s in entry["haystack_sessions"] for t in s):
        # no user turn: the official turn run fails (BM25Okapi divides by the corpus size); memsim says so
        with pytest.raises(ZeroDivisionError):
            ref.evaluate_entry(entry, "turn")
        with pytest.raises(lme.LongMemEvalDataError, match=r"^hyp\.json: question q.*empty"):
            R.question_rows(q, {"bm25": R.make_retriever("bm25")})
        return
    for gran in ("session", "turn"):
        texts, ids = R.build_corpus(q, gran)
        assert (texts, ids) == ref.build_corpus(entry, gran)
    assert q.has_user_evidence() == ref.has_user_evidence(entry)
    for label, scorer, retr in (("bm25", ref.bm25_scores, R.make_retriever("bm25")),
                                ("sha", _sha_scores, _ShaRetriever())):
        rows = R.question_rows(q, {label: retr})
        _assert_per_question_equal(rows, _reference_logs([entry], scorer), label)


@settings(max_examples=60, deadline=None)
@given(_haystack_question(), st.data())
def test_a_user_turn_without_has_answer_in_an_evidence_session_fails_on_both_sides(entry, data):
    candidates = [(i, j) for i, (sid, s) in enumerate(zip(entry["haystack_session_ids"], entry["haystack_sessions"],
                                                          strict=True))
                  if "answer" in sid for j, t in enumerate(s) if t["role"] == "user"]
    if not candidates:
        return
    i, j = data.draw(st.sampled_from(candidates))
    del entry["haystack_sessions"][i][j]["has_answer"]
    for gran in ("session", "turn"):
        with pytest.raises(ref.ReferenceDataError):
            ref.build_corpus(entry, gran)
    # memsim refuses it already while loading: one line naming the file, the question and the session
    with pytest.raises(lme.LongMemEvalDataError) as err:
        lme.parse_question(json.loads(json.dumps(entry)), source="hyp.json", index=0)
    line = str(err.value)
    assert "\n" not in line and line.startswith("hyp.json: question ")
    assert entry["question_id"] in line and entry["haystack_session_ids"][i] in line


@pytest.fixture(scope="module")
def minilm_pair():
    import torch  # a pinned dependency: a broken install fails here, never skips

    torch.set_num_threads(1)
    from harness.embedding import minilm_model_path

    return ref.ContrieverScorer(minilm_model_path()), R.make_retriever("minilm", cache=False), R.make_retriever(
        "minilm", cache=True)


def test_minilm_per_question_metrics_agree_with_the_reference(minilm_pair):
    """The uncached dense path encodes exactly as the official code (one corpus, batches of 128 in corpus order):
    every number equal. The per-run text cache reuses a vector encoded in another batch (other padding), which
    moves scores by float noise (~1e-6) and turns identical texts into exact ties: its rankings may reorder
    near-ties only, which is what is checked for it (not equality: measured, it changes a few per-question values
    where two identical texts have different gold status, e.g. blank turns)."""
    scorer, uncached, cached = minilm_pair
    entries = generated_questions(12, seed=3) + fx.quirky_questions()
    questions = [lme.parse_question(json.loads(json.dumps(e)), source="gen.json", index=i)
                 for i, e in enumerate(entries)]
    logs = _reference_logs(entries, scorer)
    rows = _memsim_rows(questions, {"minilm": uncached})
    assert _assert_per_question_equal(rows, logs, "minilm") == len(entries) * 3 * len(R.METRIC_NAMES)
    assert _assert_averages_equal(R.aggregate(rows), logs, "minilm") == 6 * len(R.METRIC_NAMES)
    for e, q in zip(entries, questions, strict=True):
        for gran in ("session", "turn"):
            texts, _ = ref.build_corpus(e, gran)
            scores = scorer(texts, e["question"])
            ranked = scores[cached.rank(texts, q.question)]
            assert sorted(cached.rank(texts, q.question)) == list(range(len(texts)))
            assert np.all(ranked[:-1] >= ranked[1:] - 1e-5), (e["question_id"], gran)
    assert cached.hits > 0  # filler sessions recur across the haystacks, so the cache was used


def test_bm25_on_the_world_generator_file_every_number_agrees(tmp_path):
    """The same comparison on the LongMemEval-format world generator's data (S's type mix, abstention, shared
    filler pool, real-file quirks), fewer sessions per haystack to stay fast."""
    from benchmarks.worlds import longmemeval as W

    path = tmp_path / "world.json"
    W.write_file(path, 40, seed=5, sessions=10)
    entries = json.loads(path.read_text(encoding="utf-8"))
    questions = list(lme.iter_questions(path))
    logs = _reference_logs(entries, ref.bm25_scores)
    rows = _memsim_rows(questions, {"bm25": R.make_retriever("bm25")})
    assert _assert_per_question_equal(rows, logs, "bm25") == len(entries) * 3 * len(R.METRIC_NAMES)
    assert _assert_averages_equal(R.aggregate(rows), logs, "bm25") == 6 * len(R.METRIC_NAMES)
    n_paper, _ = ref.average(logs["session"], "paper")
    assert n_paper < len(entries)  # the generator's abstention questions were skipped on both sides
