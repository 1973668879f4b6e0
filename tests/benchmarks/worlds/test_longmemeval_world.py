"""The LongMemEval-format generator: released schema, S's proportions, determinism, reuse, quirks, streaming."""

from __future__ import annotations

import datetime as dt
import json
import tracemalloc
from collections import Counter, defaultdict

import numpy as np
import pytest

from benchmarks.worlds import longmemeval as gen
from harness.faults import FaultInjected, FaultPlan

FIELDS = {"question_id", "question_type", "question", "answer", "question_date", "haystack_session_ids",
          "haystack_dates", "haystack_sessions", "answer_session_ids"}
TYPES = {"single-session-user", "single-session-assistant", "single-session-preference", "multi-session",
         "knowledge-update", "temporal-reasoning"}


def _date(s: str) -> dt.datetime:
    return dt.datetime.strptime(s, "%Y/%m/%d (%a) %H:%M")


@pytest.fixture(scope="module")
def qs200() -> list[dict]:
    return list(gen.generate(200, seed=7, sessions=20))


def test_schema_exact(qs200):
    for q in qs200:
        assert set(q) == FIELDS
        assert q["question_type"] in TYPES
        assert isinstance(q["question_id"], str) and isinstance(q["question"], str)
        assert isinstance(q["answer"], str | int)
        d = _date(q["question_date"])
        assert gen._format_date(d) == q["question_date"]  # the weekday name is the date's own
        n = len(q["haystack_session_ids"])
        assert n == len(q["haystack_dates"]) == len(q["haystack_sessions"])
        for sid, date, sess in zip(q["haystack_session_ids"], q["haystack_dates"], q["haystack_sessions"], strict=True):
            assert isinstance(sid, str)
            assert gen._format_date(_date(date)) == date
            assert sess, "a session has turns"
            for t in sess:
                assert t["role"] in ("user", "assistant") and isinstance(t["content"], str)
                if "answer" in sid:
                    assert set(t) == {"role", "content", "has_answer"} and isinstance(t["has_answer"], bool)
                else:
                    assert set(t) == {"role", "content"}
        assert q["answer_session_ids"] == list(dict.fromkeys(s for s in q["haystack_session_ids"] if "answer" in s))
        assert q["answer_session_ids"], "every question has evidence sessions"


def test_released_loader_reads_it(tmp_path):
    from harness.workloads import longmemeval as lme
    p = tmp_path / "g.json"
    desc = gen.write_file(p, 12, seed=1, sessions=12)
    got = list(lme.iter_questions(p))
    assert len(got) == 12 == desc["questions"]
    assert sum(q.n_turns for q in got) == desc["turns"]


def test_proportions_at_500_are_s_counts():
    types = gen.type_sequence(500, seed=3)
    assert Counter(types) == Counter({"single-session-user": 70, "single-session-assistant": 56,
                                      "single-session-preference": 30, "multi-session": 133,
                                      "knowledge-update": 78, "temporal-reasoning": 133})
    assert len(gen.abstention_indices(types, seed=3)) == 30


def test_proportions_scale(qs200):
    c = Counter(q["question_type"] for q in qs200)
    # 200/500 of S's counts: 28, 22.4, 12, 53.2, 31.2, 53.2; floors sum to 199, the one left goes to the largest
    # remainder (0.4: single-session-assistant)
    assert c == Counter({"single-session-user": 28, "single-session-assistant": 23, "single-session-preference": 12,
                         "multi-session": 53, "knowledge-update": 31, "temporal-reasoning": 53})
    assert sum("_abs" in q["question_id"] for q in qs200) == 12  # 6% of 200


def test_s_shape_sessions_and_turns():
    qs = list(gen.generate(30, seed=2))
    ns = [len(q["haystack_sessions"]) for q in qs]
    assert 38 <= min(ns) and max(ns) <= 62 and 44 <= np.median(ns) <= 52
    turns = np.mean([sum(map(len, q["haystack_sessions"])) for q in qs])
    assert 400 < turns < 600  # S: 494 per question


def test_user_evidence_ratio_near_s(qs200):
    nonabs = [q for q in qs200 if "_abs" not in q["question_id"]]
    with_user = [q for q in nonabs if any(t["role"] == "user" and t.get("has_answer") is True
                                          for s in q["haystack_sessions"] for t in s)]
    assert abs(len(with_user) / len(nonabs) - 419 / 470) < 0.06
    for q in qs200:
        if q["question_type"] == "single-session-assistant":  # its evidence is the assistant's reply
            assert any(t["role"] == "assistant" and t.get("has_answer") for s in q["haystack_sessions"] for t in s)


def test_deterministic_per_seed(tmp_path):
    a = gen.write_file(tmp_path / "a.json", 6, seed=11, sessions=10)
    b = gen.write_file(tmp_path / "b.json", 6, seed=11, sessions=10)
    c = gen.write_file(tmp_path / "c.json", 6, seed=12, sessions=10)
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert a["sha256"] == b["sha256"] != c["sha256"]
    assert json.loads((tmp_path / "a.json").read_text()) == list(gen.generate(6, seed=11, sessions=10))


def test_reuse_rate_measured():
    # a small pool, so that (almost) every pool session is drawn by several questions: the share of filler
    # occurrences whose session recurs in another question then estimates `reuse`
    qs = list(gen.generate(60, seed=4, sessions=16, reuse=0.6, pool_size=25))
    where: dict[str, set[int]] = defaultdict(set)
    content: dict[str, list] = {}
    occ = []
    for qi, q in enumerate(qs):
        for sid, sess in zip(q["haystack_session_ids"], q["haystack_sessions"], strict=True):
            if "answer" in sid:
                continue
            where[sid].add(qi)
            occ.append(sid)
            assert content.setdefault(sid, sess) == sess  # one id, one content, wherever it occurs
    shared = sum(len(where[s]) > 1 for s in occ) / len(occ)
    assert abs(shared - 0.6) < 0.05
    none = list(gen.generate(20, seed=4, sessions=16, reuse=0.0))
    ids = Counter(s for q in none for s in dict.fromkeys(q["haystack_session_ids"]))
    assert max(ids.values()) == 1  # no reuse: no session in two questions


def test_quirks_present(qs200):
    found = Counter()
    for q in qs200:
        qd = _date(q["question_date"])
        ids = q["haystack_session_ids"]
        dup = [s for s, n in Counter(ids).items() if n > 1]
        if dup:
            found["duplicate id"] += 1
            i, j = [k for k, s in enumerate(ids) if s == dup[0]][:2]
            assert q["haystack_sessions"][i] == q["haystack_sessions"][j]
            assert q["haystack_dates"][i] != q["haystack_dates"][j]
        dates = [_date(d) for d in q["haystack_dates"]]
        found["out of order"] += any(b < a for a, b in zip(dates, dates[1:], strict=False))
        found["after question"] += any(d > qd for d in dates)
        found["numeric answer"] += isinstance(q["answer"], int)
        for sid, s in zip(ids, q["haystack_sessions"], strict=True):
            found["assistant first"] += s[0]["role"] == "assistant"
            found["blank turn"] += any(t["content"] == "" for t in s)
            found["two user turns"] += any(a["role"] == b["role"] == "user" for a, b in zip(s, s[1:], strict=False))
            found["evidence session without evidence turn"] += "answer" in sid and not any(t["has_answer"] for t in s)
    for quirk in ("duplicate id", "out of order", "after question", "numeric answer", "assistant first",
                  "blank turn", "two user turns", "evidence session without evidence turn"):
        assert found[quirk] > 0, quirk


def test_temporal_answers_follow_the_dates(qs200):
    checked = 0
    for q in qs200:
        if q["question_type"] == "temporal-reasoning" and "_abs" not in q["question_id"] and \
                q["question"].startswith("How many days ago"):
            (i,) = [k for k, s in enumerate(q["haystack_session_ids"]) if "answer" in s]
            days = (_date(q["question_date"]).date() - _date(q["haystack_dates"][i]).date()).days
            assert q["answer"] == f"{days} days"
            checked += 1
    assert checked > 5


def test_question_shares_words_with_its_evidence(qs200):
    for q in qs200:
        if q["question_type"] != "single-session-user" or "_abs" in q["question_id"]:
            continue
        ev = [t["content"] for s in q["haystack_sessions"] for t in s if t.get("has_answer")]
        words = {w.strip("?.,").lower() for w in q["question"].split()} - {"what", "is", "the", "of", "my"}
        assert any(w in ev[0].lower() for w in words)
        assert q["answer"] in ev[0]


def test_streaming_memory_is_small_against_file(tmp_path):
    p = tmp_path / "big.json"
    tracemalloc.start()
    try:
        desc = gen.write_file(p, 24, seed=0, sessions=16)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    size = p.stat().st_size
    assert size == desc["bytes"] and size > 3_000_000
    assert peak < size / 4  # one question at a time, never the whole list


def test_atomic_write_and_sidecar(tmp_path):
    p = tmp_path / "f.json"
    with pytest.raises(FaultInjected):
        gen.write_file(p, 3, seed=0, sessions=10, fault_hook=FaultPlan({"lme_world.data.rename": 1}))
    assert list(tmp_path.iterdir()) == []  # no data, no temp file
    with pytest.raises(FaultInjected):
        gen.write_file(p, 3, seed=0, sessions=10, fault_hook=FaultPlan({"lme_world.sidecar.write": 1}))
    assert gen.describe(p) is None  # data without its sidecar is not described
    desc = gen.write_file(p, 3, seed=0, sessions=10)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["f.json", "f.json.generator.json"]
    got = gen.describe(p)
    assert got == desc and got["label"] == "data: synthetic, benchmarks.worlds.longmemeval seed 0"
    assert got["reuse"] == 0.6 and got["sessions_per_question"] == 10 and got["questions"] == 3
    p.write_bytes(p.read_bytes() + b" ")  # another file now: the sidecar no longer describes it
    assert gen.describe(p) is None
    gen.write_file(p, 3, seed=0, sessions=10)
    data = bytearray(p.read_bytes())
    data[5] = ord("X") if data[5] != ord("X") else ord("Y")  # one byte changed, the size kept
    p.write_bytes(bytes(data))
    assert gen.describe(p) is None  # the sha256 is checked, not the size alone
    gen.remove_file(p)
    assert list(tmp_path.iterdir()) == []  # the data file and its sidecar


def test_cli(tmp_path, capsys):
    out = tmp_path / "cli.json"
    assert gen.main(["--questions", "2", "--seed", "5", "--out", str(out), "--sessions", "10"]) == 0
    said = capsys.readouterr().out
    assert "seed 5" in said and f"wrote {out}\n" in said
    assert f"wrote {gen.sidecar_path(out)} " in said and gen.sidecar_path(out).is_file()  # where the sidecar went
    assert len(json.loads(out.read_text())) == 2
    assert gen.main(["--questions", "0", "--out", str(tmp_path / "z.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "z.json" in err
