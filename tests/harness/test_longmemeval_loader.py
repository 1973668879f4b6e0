"""The LongMemEval loader (streaming, strict/lenient rules), its release naming and its path resolver, on files
written by the tests in the released schema (tests/harness/lme_fixture.py); nothing here needs the real data."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from harness import datafetch
from harness.workloads import longmemeval as lme
from harness.workloads.longmemeval import (
    QUESTION_TYPES,
    LoadStats,
    LongMemEvalDataError,
    describe_data,
    find_longmemeval_path,
    iter_questions,
    parse_question,
    release_of,
    resolve_longmemeval_path,
)
from tests.harness import lme_fixture as F


def _qs() -> list[dict[str, Any]]:
    """The fixture's questions with no shared sub-objects (its filler sessions are shared), so a test can mutate
    one place."""
    return json.loads(json.dumps(F.quirky_questions()))


def _file(tmp_path: Path, qs: list[Any], name: str = "lme.json") -> Path:
    return F.write(tmp_path / name, qs)


def _one_error(path: Path, **kw: Any) -> str:
    with pytest.raises(LongMemEvalDataError) as err:
        list(iter_questions(path, **kw))
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"{path}: "), msg
    return msg


# ---------------------------------------------------------------------------------------------- good files
def test_the_quirky_file_loads_in_file_order_with_every_quirk_kept(tmp_path: Path) -> None:
    path = _file(tmp_path, _qs())
    st = LoadStats()
    qs = list(iter_questions(path, stats=st))
    assert [q.question_id for q in qs] == ["q_user_1", "q_asst_1", "q_multi_1", "q_temp_1_abs", "q_ku_1"]
    assert [q.index for q in qs] == [0, 1, 2, 3, 4] and all(q.source == str(path) for q in qs)
    asst = qs[1]
    # the session id listed twice stays twice, each with its own position
    assert [(s.session_id, s.position) for s in asst.sessions] == [
        ("answer_2222_1", 0), ("sharegpt_aa11_0", 1), ("sharegpt_aa11_0", 2)]
    assert not asst.has_user_evidence() and qs[0].has_user_evidence()
    assert qs[2].answer == "2" and st.answer_as_number == 1  # a number as answer, read as its text
    assert qs[3].abstention and not qs[0].abstention
    filler_b = qs[0].sessions[2]
    assert filler_b.turns[0].role == "assistant" and filler_b.turns[-1].content == ""  # blank turn kept
    assert all(t.has_answer is None for t in filler_b.turns)  # filler turns carry no has_answer
    assert [t.has_answer for t in qs[0].sessions[1].turns] == [True, False, False, False]
    assert qs[0].n_turns == 2 + 4 + 4
    assert st.questions == st.read == 5 and st.question_types == {t: 1 for t in (
        "single-session-user", "single-session-assistant", "multi-session", "temporal-reasoning",
        "knowledge-update")}
    assert st.bad_dates == 0 and not st.unknown_fields and not st.duplicate_question_ids


def test_lenient_rules_are_kept_and_counted(tmp_path: Path) -> None:
    qs = _qs()
    qs[0]["extra_note"] = "x"
    qs[0]["another"] = 1
    qs[1]["extra_note"] = "y"
    del qs[1]["answer_session_ids"]
    qs[2]["answer_session_ids"] = "answer_3333_1"  # not a list: read as absent
    qs[0]["haystack_sessions"][0][0]["has_answer"] = True  # has_answer on a filler turn: kept
    qs[0]["haystack_sessions"][2][1]["has_answer"] = "yes"  # not a boolean, where nothing reads it
    del qs[0]["haystack_sessions"][1][1]["has_answer"]  # an evidence session's assistant turn without it
    qs[3]["question_date"] = "next Tuesday"  # does not parse: counted, not fatal
    qs[3]["haystack_dates"][1] = "2023-05-03"
    qs[4]["haystack_sessions"][2][0]["role"] = "system"
    qs[4]["question_type"] = "made-up-type"
    st = LoadStats()
    got = list(iter_questions(_file(tmp_path, qs), stats=st))
    assert len(got) == 5
    assert got[0].unknown_fields == ["extra_note", "another"] and st.unknown_fields == {"extra_note": 2, "another": 1}
    assert got[1].answer_session_ids is None and st.answer_session_ids_absent == 1
    assert got[2].answer_session_ids is None and st.answer_session_ids_not_a_list == 1
    assert got[0].sessions[0].turns[0].has_answer is True
    assert got[0].sessions[2].turns[1].has_answer is None and st.non_boolean_has_answer == 1
    assert got[0].sessions[1].turns[1].has_answer is None and st.assistant_evidence_turns_without_has_answer == 1
    assert st.bad_dates == 2 and got[3].question_date == "next Tuesday"
    assert st.other_roles == {"system": 1} and got[4].sessions[2].turns[0].role == "system"
    assert st.unknown_types == {"made-up-type": 1} and got[4].question_type == "made-up-type"


def test_a_repeated_question_id_is_kept_and_counted(tmp_path: Path) -> None:
    qs = _qs()
    qs.append(copy.deepcopy(qs[0]))
    st = LoadStats()
    got = list(iter_questions(_file(tmp_path, qs), stats=st))
    assert [q.question_id for q in got].count("q_user_1") == 2 and [got[0].index, got[-1].index] == [0, 5]
    assert st.duplicate_question_ids == {"q_user_1": 1}


# ------------------------------------------------------------------------------------------- strict rules
def _mutated(fn: Any) -> list[dict[str, Any]]:
    qs = _qs()
    fn(qs[1])
    return qs


@pytest.mark.parametrize("field", [f for f in lme.FIELDS if f not in ("question_id", "answer_session_ids")])
def test_a_missing_required_field_names_question_and_field(tmp_path: Path, field: str) -> None:
    msg = _one_error(_file(tmp_path, _mutated(lambda q: q.pop(field))))
    assert msg == f"{tmp_path / 'lme.json'}: question q_asst_1: {field}: missing"


def _set(key: str, value: Any) -> Any:
    return lambda q: q.__setitem__(key, value)


def _turn(j: int, i: int, fn: Any) -> Any:
    return lambda q: fn(q["haystack_sessions"][j][i]) if i >= 0 else fn(q["haystack_sessions"], j)


@pytest.mark.parametrize(("mutate", "expected"), [
    (lambda q: q.pop("question_id"), "question #1: question_id: missing"),
    (_set("question_id", 7), "question #1: question_id: a number, expected text"),
    (_set("question_type", None), "question q_asst_1: question_type: null, expected text"),
    (_set("question", ["a"]), "question q_asst_1: question: a list, expected text"),
    (_set("question_date", 20230602), "question q_asst_1: question_date: a number, expected text"),
    (_set("answer", None), "question q_asst_1: answer: null, expected text or a number"),
    (_set("answer", True), "question q_asst_1: answer: a boolean, expected text or a number"),
    (_set("haystack_dates", "2023/05/20"), "haystack_dates: text, expected a list"),
    (lambda q: q["haystack_dates"].pop(), "lists of different lengths (3, 2, 3)"),
    (lambda q: q["haystack_session_ids"].append("x"), "lists of different lengths (4, 3, 3)"),
    (lambda q: q["haystack_session_ids"].__setitem__(2, 5), "haystack_session_ids[2]: a number, expected text"),
    (lambda q: q["haystack_dates"].__setitem__(0, None), "haystack_dates[0]: null, expected text"),
    (lambda q: q["haystack_sessions"].__setitem__(1, {"role": "user"}),
     "haystack_sessions[1] (session sharegpt_aa11_0): an object, expected a list of turns"),
    (_turn(1, 0, lambda t: t.clear()), "haystack_sessions[1][0] (session sharegpt_aa11_0, turn 1): role: missing"),
    (lambda q: q["haystack_sessions"][2].__setitem__(1, "hi"),
     "haystack_sessions[2][1] (session sharegpt_aa11_0, turn 2): text, expected a turn object"),
    (_turn(2, 1, lambda t: t.__setitem__("content", None)), "turn 2): content: null, expected text"),
    (_turn(2, 0, lambda t: t.pop("content")), "turn 1): content: missing, expected text"),
    (_turn(0, 0, lambda t: t.__setitem__("role", 1)), "turn 1): role: a number, expected text"),
    # an evidence session's user turn without a boolean has_answer: the official code fails there
    (_turn(0, 0, lambda t: t.pop("has_answer")),
     "haystack_sessions[0][0] (session answer_2222_1, turn 1): has_answer: missing on a user turn of an "
     "evidence session, expected a boolean"),
    (_turn(0, 0, lambda t: t.__setitem__("has_answer", "false")), "turn 1): has_answer: text on a user turn"),
])
def test_strict_rules_one_line_naming_question_and_field(tmp_path: Path, mutate: Any, expected: str) -> None:
    msg = _one_error(_file(tmp_path, _mutated(mutate)))
    assert expected in msg, msg
    # everything before the broken question was fine; the same question alone fails the same way
    assert msg.startswith(f"{tmp_path / 'lme.json'}: question ")


def test_parse_question_directly_and_a_non_object_item(tmp_path: Path) -> None:
    q = parse_question(_qs()[0], source="f.json", index=3)
    assert q.question_id == "q_user_1" and q.index == 3 and q.source == "f.json"
    with pytest.raises(LongMemEvalDataError, match=r"^f.json: question #2: not an object \(found a list\)$"):
        parse_question([1], source="f.json", index=2)
    path = tmp_path / "items.json"
    path.write_text(json.dumps([_qs()[0], "oops"]), encoding="utf-8")
    assert _one_error(path).endswith("question #1: not an object (found text)")


# ------------------------------------------------------------------------------------------- file errors
def test_file_level_errors_are_one_line(tmp_path: Path) -> None:
    good = json.dumps(_qs(), indent=2).encode()
    cases = {
        "object.json": (json.dumps({"questions": []}).encode(), "the top level is a JSON object"),
        "number.json": (b"  42", "the top level is not a JSON array"),
        "empty.json": (b"\n ", "empty (expected a JSON array"),
        "truncated.json": (good[: len(good) * 2 // 3], "not complete JSON: the file ends inside the array"),
        "garbage.json": (good + b"\n]x", "not valid JSON (parse error: trailing garbage, within bytes 0-"),
        "syntax.json": (good.replace(b'"question_type"', b'"question_type" "', 1), "not valid JSON (parse error"),
        "latin1.json": (json.dumps(_qs()).replace("Rex", "R\u00e9x").encode("latin-1"),
                        "not UTF-8 text"),
        "bom.json": (b"\xef\xbb\xbf" + good, "starts with a UTF-8 byte order mark"),
    }
    for name, (data, expected) in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        msg = _one_error(p)
        assert expected in msg, (name, msg)
    # the end of a cut file is where it ends: its size
    assert f"at byte {(tmp_path / 'truncated.json').stat().st_size})" in _one_error(tmp_path / "truncated.json")
    missing = tmp_path / "absent.json"
    assert "cannot read (No such file or directory)" in _one_error(missing)


def test_a_truncated_file_yields_the_questions_before_the_cut_then_fails(tmp_path: Path) -> None:
    """Streaming: the questions before the cut were already delivered; the failure is one line, not a traceback."""
    good = json.dumps(_qs(), indent=2).encode()
    cut = good.index(b'"q_temp_1_abs"')
    p = tmp_path / "cut.json"
    p.write_bytes(good[:cut])
    seen: list[str] = []
    with pytest.raises(LongMemEvalDataError, match="not complete JSON"):
        for q in iter_questions(p):
            seen.append(q.question_id)
    assert seen == ["q_user_1", "q_asst_1", "q_multi_1"]


# ------------------------------------------------------------------------------------------ types and limit
def test_types_filter_and_limit_counts_after_the_filter(tmp_path: Path) -> None:
    qs = _qs()
    qs += [dict(copy.deepcopy(q), question_id=q["question_id"] + "_b") for q in qs]
    path = _file(tmp_path, qs)
    st = LoadStats()
    got = [q.question_id for q in iter_questions(path, stats=st, types=["multi-session", "knowledge-update"])]
    assert got == ["q_multi_1", "q_ku_1", "q_multi_1_b", "q_ku_1_b"] and st.questions == 4 and st.read == 10
    got = [q.question_id for q in iter_questions(path, types=["knowledge-update"], limit=1)]
    assert got == ["q_ku_1"]
    assert [q.question_id for q in iter_questions(path, limit=3)] == ["q_user_1", "q_asst_1", "q_multi_1"]
    assert list(iter_questions(path, limit=0)) == []


def test_an_unknown_type_is_refused_before_any_reading(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as err:
        iter_questions(tmp_path / "does-not-exist.json", types=["multi-session", "multisession"])  # not iterated
    msg = str(err.value)
    assert "\n" not in msg and "'multisession'" in msg and all(t in msg for t in QUESTION_TYPES)


def test_reading_stops_at_the_limit(tmp_path: Path) -> None:
    """Past the limit the file is not parsed: a broken tail after it goes unnoticed (and is reported without)."""
    good = json.dumps(_qs(), indent=2).encode()
    p = tmp_path / "tail.json"
    p.write_bytes(good[: good.index(b'"q_multi_1"')])
    assert [q.question_id for q in iter_questions(p, limit=2)] == ["q_user_1", "q_asst_1"]
    assert "not complete JSON" in _one_error(p)


# ---------------------------------------------------------------------------------------------------- memory
def _big_file(path: Path, n: int, turns: int) -> int:
    """``n`` questions of ``turns`` turns each, written one question at a time; returns the byte size."""
    base = _qs()[0]
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("[")
        for k in range(n):
            q = copy.deepcopy(base)
            q["question_id"] = f"gen_{k}"
            q["haystack_sessions"][0] = [F.user(f"turn {k} {i} " + "word " * 40) for i in range(turns)]
            fh.write(("," if k else "") + json.dumps(q))
        fh.write("]")
    return path.stat().st_size


def test_the_loader_never_holds_the_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    size = _big_file(path, 240, 400)  # about 24 MB
    assert size > 20_000_000
    count = 0
    tracemalloc.start()
    try:
        for q in iter_questions(path):
            count += 1
            del q
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 240
    assert peak < size / 10, (peak, size)  # one question at a time (about 100 kB of text each)


# -------------------------------------------------------------------------------------------- releases
def test_the_release_table_matches_the_fetch_registry() -> None:
    """Every fetchable LongMemEval file is a known release of the same size, and the table has all five files."""
    lme_files = [f for f in datafetch.REGISTRY if f.dataset == "longmemeval"]
    assert len(lme_files) == 4
    for f in lme_files:
        assert f.sha256 in lme.RELEASES and lme.RELEASES[f.sha256][1] == f.size, f.name
    names = sorted(name for name, _ in lme.RELEASES.values())
    assert len(names) == 5 and sum(n.endswith("original release") for n in names) == 2
    assert any(n.startswith("LongMemEval M, original") for n in names)


def test_release_of_names_a_known_file_by_its_bytes_and_accepts_any_other(tmp_path: Path, monkeypatch) -> None:
    path = _file(tmp_path, _qs(), "longmemeval_s_cleaned.json")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert release_of(path) is None  # no release has this size: not even read
    assert describe_data(path) == (f"longmemeval_s_cleaned.json: not a published release (sha256 {digest[:16]}..., "
                                   f"{path.stat().st_size} bytes); read as LongMemEval-format data")
    monkeypatch.setitem(lme.RELEASES, digest, ("LongMemEval S, cleaned release", path.stat().st_size))
    assert release_of(path) == "LongMemEval S, cleaned release"
    assert describe_data(path) == "longmemeval_s_cleaned.json: LongMemEval S, cleaned release (sha256 ok)"
    # same size, other bytes (one byte changed): not the release
    data = bytearray(path.read_bytes())
    data[10] = ord("X") if data[10] != ord("X") else ord("Y")
    other = tmp_path / "copy.json"
    other.write_bytes(bytes(data))
    assert release_of(other) is None


def test_the_hash_is_computed_once_per_unchanged_file(tmp_path: Path) -> None:
    path = _file(tmp_path, _qs())
    reads: list[int] = []
    first = datafetch.sha256_of(path, reads.append)
    assert sum(reads) == path.stat().st_size
    reads.clear()
    assert datafetch.sha256_of(path, reads.append) == first and reads == []  # cached
    path.write_bytes(path.read_bytes().replace(b"border collie", b"border terrier"))
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert datafetch.sha256_of(path, reads.append) != first and sum(reads) == path.stat().st_size


def _sidecar(path: Path, **over: Any) -> dict[str, Any]:
    """Write the sidecar the generator would write for ``path`` (its size and sha256), with ``over`` applied."""
    data = path.read_bytes()
    desc = {"generator": "benchmarks.worlds.longmemeval", "seed": 9, "questions": 5, "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(), **over}
    lme.sidecar_path(path).write_text(json.dumps(desc), encoding="utf-8")
    return desc


def test_a_sidecar_labels_its_file_only_while_size_and_sha256_match(tmp_path: Path) -> None:
    path = _file(tmp_path, _qs())
    plain = lme.data_label(path)
    assert (plain["synthetic"], plain["warning"], plain["generator"]) == (False, None, None)
    assert plain["label"] == f"data: {plain['line']}" and "not a published release" in plain["line"]
    desc = _sidecar(path)
    got = lme.data_label(path)
    assert got["synthetic"] and got["generator"] == desc and got["warning"] is None
    assert got["label"] == "data: synthetic, benchmarks.worlds.longmemeval seed 9"
    assert got["line"].startswith("lme.json: generated by benchmarks.worlds.longmemeval seed 9, not a published")
    assert describe_data(path) == got["line"]  # one function: data check, benches and claims say the same
    # the same size, another byte: the size alone would have let it through
    data = bytearray(path.read_bytes())
    data[20] = ord("X") if data[20] != ord("X") else ord("Y")
    path.write_bytes(bytes(data))
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    other = lme.data_label(path)
    assert not other["synthetic"] and other["label"] == f"data: {other['line']}"
    assert other["warning"] == ("lme.json.generator.json does not describe lme.json (it records another sha256 than "
                                "the file's): not labelled synthetic")
    _sidecar(path, bytes=7)
    assert "it records 7 bytes, the file has" in lme.data_label(path)["warning"]
    _sidecar(path, bytes=None, sha256=None)  # an old sidecar that records neither: never taken on trust
    assert "records no byte size and sha256" in lme.data_label(path)["warning"]
    lme.sidecar_path(path).write_text("{not json", encoding="utf-8")
    assert "cannot be read" in lme.data_label(path)["warning"]
    assert not lme.data_label(path)["synthetic"]


def test_the_label_hashes_a_file_once_per_process(tmp_path: Path) -> None:
    path = _file(tmp_path, _qs(), "once.json")
    _sidecar(path)
    reads: list[int] = []
    for _ in range(3):
        assert lme.data_label(path, on_bytes=reads.append)["synthetic"]
    assert sum(reads) == path.stat().st_size


# --------------------------------------------------------------------------------------------- resolver
@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for env in ("MEMSIM_LONGMEMEVAL_DATA", "MEMSIM_DATA_DIR"):
        monkeypatch.delenv(env, raising=False)
    h = tmp_path / "data-home"
    monkeypatch.setenv("MEMSIM_DATA_DIR", str(h))
    return h


def test_resolver_order_given_then_environment_then_fetched_s_first(home: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.datapaths import lookup

    assert find_longmemeval_path() is None
    with pytest.raises(LongMemEvalDataError, match="run `memsim data fetch longmemeval-s`"):
        resolve_longmemeval_path()
    d = home / "longmemeval"
    d.mkdir(parents=True)
    order = ["longmemeval_oracle.json", "longmemeval_m_cleaned.json", "longmemeval_s_original.json",
             "longmemeval_s_cleaned.json"]  # placed from least to most preferred
    for name in order:
        (d / name).write_text("[]")
        assert resolve_longmemeval_path() == d / name, name  # each newly placed one is preferred
    path, source, looked = lookup("longmemeval")
    assert path == d / "longmemeval_s_cleaned.json" and source == "the copy in the data folder"
    assert "longmemeval_oracle.json" in looked[-1] and "not read" in looked[-1]
    (d / "longmemeval_s_cleaned.json").unlink()
    assert resolve_longmemeval_path() == d / "longmemeval_s_original.json"
    env = tmp_path / "mine.json"
    env.write_text("[]")
    monkeypatch.setenv("MEMSIM_LONGMEMEVAL_DATA", str(env))
    assert resolve_longmemeval_path() == env and lookup("longmemeval")[1] == "from $MEMSIM_LONGMEMEVAL_DATA"
    given = tmp_path / "given.json"
    given.write_text("[]")
    assert resolve_longmemeval_path(given) == given and find_longmemeval_path(given) == given


def test_a_missing_or_folder_path_is_an_error_never_a_fall_through(home: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    d = home / "longmemeval"
    d.mkdir(parents=True)
    (d / "longmemeval_oracle.json").write_text("[]")
    for fn in (resolve_longmemeval_path, find_longmemeval_path):
        with pytest.raises(LongMemEvalDataError) as err:
            fn(tmp_path / "typo.json")
        assert str(err.value) == f"{tmp_path / 'typo.json'}: no such file (given with --data)"
        with pytest.raises(LongMemEvalDataError, match="a folder"):
            fn(tmp_path)
    monkeypatch.setenv("MEMSIM_LONGMEMEVAL_DATA", str(tmp_path / "gone.json"))
    with pytest.raises(LongMemEvalDataError, match=r"\(from \$MEMSIM_LONGMEMEVAL_DATA\)"):
        find_longmemeval_path()


def test_the_pure_python_ijson_backend_gives_the_same_one_line_errors(tmp_path: Path, monkeypatch) -> None:
    """Without the yajl2 C library ijson falls back to its Python backend, whose messages differ."""
    import ijson
    import ijson.backends.python as pure

    monkeypatch.setattr(ijson, "items", pure.items)
    good = json.dumps(_qs(), indent=2).encode()
    (tmp_path / "cut.json").write_bytes(good[: len(good) // 2])
    (tmp_path / "latin1.json").write_bytes(json.dumps(_qs()).replace("Rex", "R\u00e9x").encode("latin-1"))
    assert "not complete JSON" in _one_error(tmp_path / "cut.json")
    assert "not UTF-8 text" in _one_error(tmp_path / "latin1.json")
    assert len(list(iter_questions(_file(tmp_path, _qs())))) == 5
