from __future__ import annotations

import json

from harness.workloads.arm_text import turn_line
from harness.workloads.base import ArmContext
from harness.workloads.fractal_arm import FractalArm, pair_turns, session_header
from tests.harness.locomo_arms_fixture import ALL_IDS, DATES, tiny_conversation


def _arm(tmp_path):
    conv = tiny_conversation()
    arm = FractalArm(ArmContext(workdir=tmp_path))
    arm.ingest(conv)
    return conv, arm


def test_pairs_follow_speaker_changes_and_leave_leftovers():
    conv = tiny_conversation()
    s1, s2 = conv.sessions
    assert [(u.dia_id, r.dia_id if r else None) for u, r in pair_turns(s1.turns)] == [("D1:1", "D1:2"),
                                                                                       ("D1:3", None)]
    assert [(u.dia_id, r.dia_id if r else None) for u, r in pair_turns(s2.turns)] == [("D2:1", "D2:2"),
                                                                                       ("D2:3", None)]


def test_session_file_holds_every_turn_as_submits(tmp_path):
    conv, arm = _arm(tmp_path)
    assert set(arm.deliver(conv.probes[0])) == set(arm.rows)  # one Delivery per named row (Arm protocol)
    data = json.loads(arm.session_file().read_text(encoding="utf-8"))
    turns = data["summary"]["turns"]
    assert len(turns) == 4  # six LoCoMo turns -> four submits
    assert turns[0]["user"]["message"] == session_header(1, DATES[0]) + "\n" + turn_line(conv.sessions[0].turns[0])
    assert turns[0]["agent"]["response"] == turn_line(conv.sessions[0].turns[1])
    assert turns[1]["agent"]["response"] == ""  # leftover turn: empty response
    assert turns[2]["user"]["message"].startswith(session_header(2, DATES[1]))
    assert arm.stored() == ALL_IDS


def test_probe_delivers_whole_summary_with_dates_and_question(tmp_path):
    conv, arm = _arm(tmp_path)
    probe = conv.probes[2]
    d = arm.deliver(probe)["fractal"]
    assert d.dia_ids == ALL_IDS  # the summary keeps every turn verbatim
    assert probe.question in d.text and DATES[0] in d.text and DATES[1] in d.text
    assert "shared a photo: a photo of a cello on a stand" in d.text
    assert d.meta["summary_turns"] == 5  # four stored submits + the pending probe turn


def test_probes_do_not_leak_into_each_other_or_the_file(tmp_path):
    conv, arm = _arm(tmp_path)
    before = arm.session_file().read_bytes()
    first = arm.deliver(conv.probes[0])["fractal"]
    second = arm.deliver(conv.probes[1])["fractal"]
    third = arm.deliver(conv.probes[2])["fractal"]
    assert conv.probes[0].question not in second.text and conv.probes[0].question not in third.text
    assert conv.probes[1].question not in third.text
    assert arm.session_file().read_bytes() == before  # no probe reached the session file
    again = arm.deliver(conv.probes[0])["fractal"]
    assert len(again.text) == len(first.text) and again.dia_ids == first.dia_ids
    state = arm.runtime.session.state
    assert len(state.summary.turns) == 4 and len(state.history) == 4


def test_history_tail_caps_at_twenty_but_summary_keeps_all(tmp_path):
    from harness.workloads.locomo import Conversation, Probe, Session, Turn

    turns = [Turn(dia_id=f"D1:{i + 1}", speaker="Alice" if i % 2 == 0 else "Bob", text=f"line number {i}",
                  session=1, index_in_session=i) for i in range(50)]
    conv = Conversation(sample_id="long", speaker_a="Alice", speaker_b="Bob",
                        sessions=[Session(index=1, date_time="today", turns=turns)],
                        probes=[Probe(index=0, question="Which line came first?", evidence=["D1:1"], category=4)],
                        source="<hand-made>")
    arm = FractalArm(ArmContext(workdir=tmp_path))
    arm.ingest(conv)
    d = arm.deliver(conv.probes[0])["fractal"]
    assert d.meta["history_turns"] == 20
    assert d.dia_ids == frozenset(t.dia_id for t in turns)


def test_forked_probe_sees_exactly_what_a_real_submit_gives_the_agent(tmp_path):
    import re

    conv, arm = _arm(tmp_path)
    probe = conv.probes[1]
    forked = arm.deliver(probe)["fractal"].text
    arm.agent.calls.clear()
    arm.runtime.submit_sync(probe.question)  # the real thing (it saves and keeps the turn: done last)
    real = arm.agent.calls[-1].model_visible_text()

    def norm(text: str) -> str:
        text = re.sub(r"turn-[0-9a-f]{32}", "turn-ID", text)
        return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00", "TIME", text)

    assert norm(forked) == norm(real)
