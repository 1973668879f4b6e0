"""LoCoMo loader: both layouts, the data quirks, and one-line errors naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.workloads.locomo import (
    LocomoDataError,
    find_locomo_path,
    load_locomo,
    resolve_locomo_path,
    select_conversations,
)

SHIPPED = find_locomo_path()


def tiny_conv() -> dict:
    return {
        "speaker_a": "Ann", "speaker_b": "Bob",
        "session_1_date_time": "1:00 pm on 1 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat."},
            {"speaker": "Bob", "dia_id": "D1:2", "img_url": ["http://x"],
             "blip_caption": "a photo of a dog", "query": "dog"},
        ],
        "session_2_date_time": "2:00 pm on 9 May, 2023",
        "session_3_date_time": "never happened",
        "session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "The cat is called Tom."}],
        "qa": [
            {"question": "Pet name?", "answer": "Tom", "evidence": ["D1:1; D2:1"], "category": 1},
            {"question": "Year?", "answer": 2023, "evidence": ["D", "D9:9", "D2:01"], "category": 2},
            {"question": "Bob's cat?", "adversarial_answer": "Tom", "evidence": [], "category": 5},
        ],
    }


def test_v2_layout_and_quirks(tmp_path: Path) -> None:
    f = tmp_path / "conv-x.json"
    f.write_text(json.dumps(tiny_conv()))
    [c] = load_locomo(f)
    assert c.sample_id == "conv-x" and c.speaker_a == "Ann"
    assert [s.index for s in c.sessions] == [1, 2]  # the dangling session_3 date has no turns
    assert c.sessions[1].date_time == "2:00 pm on 9 May, 2023"
    assert [t.dia_id for t in c.turns()] == ["D1:1", "D1:2", "D2:1"]
    assert c.turns()[1].caption == "a photo of a dog" and c.turns()[0].caption is None
    assert c.turns()[1].text == ""  # a photo-only turn keeps its caption
    p0, p1, p2 = c.probes
    assert p0.evidence == ["D1:1", "D2:1"] and p0.invalid_evidence == []
    assert p1.answer == "2023" and p1.evidence == ["D2:1"] and p1.normalised_evidence == ["D2:01"]
    assert p1.invalid_evidence == ["D", "D9:9"]
    assert p2.answer is None and p2.adversarial_answer == "Tom" and p2.category == 5
    assert c.quirk_counts() == {"invalid_evidence": 2, "normalised_evidence": 1, "probes_without_evidence": 1,
                                "observation_ids_naming_no_turn": 0}
    assert c.session_of("D2:1").index == 2


def test_canonical_layout_and_folder(tmp_path: Path) -> None:
    conv = tiny_conv()
    qa = conv.pop("qa")
    (tmp_path / "locomo10.json").write_text(json.dumps([
        {"sample_id": "conv-a", "conversation": conv, "qa": qa, "event_summary": {}},
        {"sample_id": "conv-b", "conversation": conv, "qa": []},
    ]))
    (tmp_path / "README.md").write_text("not json, not loaded")
    convs = load_locomo(tmp_path)
    assert [c.sample_id for c in convs] == ["conv-a", "conv-b"]
    assert len(convs[0].probes) == 3 and convs[1].probes == []
    assert [c.sample_id for c in select_conversations(convs, ["conv-b"])] == ["conv-b"]
    with pytest.raises(LocomoDataError, match="unknown conversation conv-z"):
        select_conversations(convs, ["conv-z"])


@pytest.mark.parametrize("content,problem", [
    ("{not json", "not JSON"),
    ("42", "expected a conversation object"),
    ('{"speaker_a": "A", "speaker_b": "B", "session_1": []}', "conversation has no turns"),
    ('{"speaker_a": "A", "speaker_b": "B"}', "conversation has no turns"),
    ('{"speaker_b": "B", "session_1": []}', "speaker_a"),
    ('{"speaker_a": "A", "speaker_b": "B", "session_1": [{"speaker": "A", "text": "t"}]}', "dia_id"),
    ('{"speaker_a": "A", "speaker_b": "B", "session_1": [{"speaker": "A", "dia_id": "D1:1"}]}', "no photo caption"),
    ('[{"sample_id": "x"}]', "entry 0"),
    ('{"speaker_a": "A", "speaker_b": "B", "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "t"}], '
     '"qa": [{"question": "q", "evidence": [3], "category": 1}]}', "evidence"),
])
def test_errors_are_one_line_naming_the_file(tmp_path: Path, content: str, problem: str) -> None:
    f = tmp_path / "bad.json"
    f.write_text(content)
    with pytest.raises(LocomoDataError) as ei:
        load_locomo(f)
    msg = str(ei.value)
    assert "\n" not in msg and str(f) in msg and problem in msg


def test_missing_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(LocomoDataError, match="no such file"):
        load_locomo(tmp_path / "absent")
    with pytest.raises(LocomoDataError, match="no \\*.json"):
        load_locomo(tmp_path)
    with pytest.raises(LocomoDataError, match="--data"):
        resolve_locomo_path(tmp_path / "absent")
    monkeypatch.setenv("MEMSIM_LOCOMO_DATA", str(tmp_path / "nope"))
    with pytest.raises(LocomoDataError, match="MEMSIM_LOCOMO_DATA"):
        resolve_locomo_path(None)
    monkeypatch.setenv("MEMSIM_LOCOMO_DATA", str(tmp_path))
    assert resolve_locomo_path(None) == tmp_path
    assert resolve_locomo_path(tmp_path / ".") == tmp_path / "."


def test_duplicate_sample_id_across_files(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps([{"sample_id": "s", "conversation": tiny_conv()}]))
    (tmp_path / "b.json").write_text(json.dumps([{"sample_id": "s", "conversation": tiny_conv()}]))
    with pytest.raises(LocomoDataError, match="already loaded"):
        load_locomo(tmp_path)


@pytest.mark.skipif(SHIPPED is None, reason="LoCoMo data not present (../shared/data/locomo)")
def test_shipped_counts() -> None:
    convs = load_locomo(SHIPPED)
    by = {c.sample_id: c for c in convs}
    assert {"conv-26", "conv-30", "conv-41", "conv-42"} <= set(by)
    four = [by[s] for s in ("conv-26", "conv-30", "conv-41", "conv-42")]
    assert sum(len(c.turns()) for c in four) == 2080
    assert sum(len(c.probes) for c in four) == 757
    assert [len(c.sessions) for c in four] == [19, 19, 32, 29]
    p = next(p for p in by["conv-26"].probes if len(p.evidence) == 2 and "D8:6" in p.evidence)
    assert p.evidence == ["D8:6", "D9:17"]
    assert sorted(e for p in by["conv-42"].probes for e in p.invalid_evidence) == ["D", "D10:19"]
    cats = [sum(1 for p in by["conv-30"].probes if p.category == k) for k in range(1, 6)]
    assert cats == [11, 26, 0, 44, 24]


@pytest.mark.skipif(SHIPPED is None, reason="LoCoMo data not present (../shared/data/locomo)")
def test_canonical_layout_of_shipped_files_loads_the_same(tmp_path: Path) -> None:
    files = sorted(Path(SHIPPED).glob("*.json"))
    entries = []
    for f in files:
        obj = json.loads(f.read_text())
        qa = obj.pop("qa")
        entries.append({"sample_id": f.stem, "conversation": obj, "qa": qa, "event_summary": {}})
    canon = tmp_path / "locomo10.json"
    canon.write_text(json.dumps(entries))
    a = {c.sample_id: c for c in load_locomo(SHIPPED)}
    b = {c.sample_id: c for c in load_locomo(canon)}
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].sessions == b[k].sessions and a[k].probes == b[k].probes


def _recorded(conv: dict) -> tuple[dict, dict]:
    """Observation and summary blocks for ``tiny_conv`` (string, comma-string and list tags; one id naming no
    turn; one zero-padded id)."""
    obs = {
        "session_1_observation": {
            "Ann": [["Ann adopted a cat.", "D1:1"], ["Ann and Bob talked pets.", "D1:1, D1:2"]],
            "Bob": [["Bob shared a dog photo.", ["D1:2"]]],
        },
        "session_2_observation": {"Ann": [["The cat is Tom.", "D2:01"], ["Ghost fact.", "D7:7"]]},
    }
    summ = {"session_1_summary": "Ann adopted a cat.", "session_2_summary": "Ann named the cat Tom."}
    return obs, summ


def _check_recorded(c) -> None:  # type: ignore[no-untyped-def]
    assert [o.text for o in c.observations] == ["Ann adopted a cat.", "Ann and Bob talked pets.",
                                                 "Bob shared a dog photo.", "The cat is Tom.", "Ghost fact."]
    assert c.observations[1].ids == ["D1:1", "D1:2"]  # comma tag split, spaces stripped
    assert c.observations[2].ids == ["D1:2"]  # a list is taken as is
    assert c.observations[3].ids == ["D2:01"] and c.observations[3].evidence == ["D2:1"]
    assert c.observations[4].invalid_ids == ["D7:7"] and c.observations[4].evidence == []
    assert [o.session for o in c.observations] == [1, 1, 1, 2, 2]
    assert c.summaries == {1: "Ann adopted a cat.", 2: "Ann named the cat Tom."}
    assert c.quirk_counts()["observation_ids_naming_no_turn"] == 1
    assert c.recorded_unavailable("observation") is None and c.recorded_unavailable("summary") is None
    assert c.probes[0].raw_evidence == ["D1:1; D2:1"] and c.probes[0].evidence == ["D1:1", "D2:1"]


def test_recorded_outputs_v2_layout(tmp_path: Path) -> None:
    conv = tiny_conv()
    obs, summ = _recorded(conv)
    conv.update(obs)
    conv.update(summ)
    f = tmp_path / "conv-9.json"
    f.write_text(json.dumps(conv))
    _check_recorded(load_locomo(f)[0])


def test_recorded_outputs_canonical_layout(tmp_path: Path) -> None:
    conv = tiny_conv()
    qa = conv.pop("qa")
    obs, summ = _recorded(conv)
    f = tmp_path / "locomo10.json"
    f.write_text(json.dumps([{"sample_id": "conv-9", "conversation": conv, "qa": qa, "observation": obs,
                              "session_summary": summ}]))
    _check_recorded(load_locomo(f)[0])


def test_conversation_without_recorded_outputs_loads_and_says_why(tmp_path: Path) -> None:
    f = tmp_path / "conv-9.json"
    f.write_text(json.dumps(tiny_conv()))
    c = load_locomo(f)[0]
    assert c.observations is None and c.summaries is None
    assert "no 'observation' field" in c.recorded_unavailable("observation")
    assert "no 'session_summary' field" in c.recorded_unavailable("summary")
    assert str(f) in c.recorded_unavailable("summary")


def test_bad_observation_shape_is_one_line_naming_the_file(tmp_path: Path) -> None:
    conv = tiny_conv()
    conv["session_1_observation"] = {"Ann": [["only text"]]}
    f = tmp_path / "conv-9.json"
    f.write_text(json.dumps(conv))
    with pytest.raises(LocomoDataError, match=r"conv-9\.json.*session_1_observation"):
        load_locomo(f)


@pytest.mark.skipif(SHIPPED is None, reason="LoCoMo data not present")
def test_shipped_recorded_counts() -> None:
    convs = {c.sample_id: c for c in load_locomo(SHIPPED)}
    if "conv-26" not in convs:
        pytest.skip("shipped conversations not in this data path")
    c = convs["conv-26"]
    assert len(c.observations) == 184 and len(c.summaries) == len(c.sessions)
