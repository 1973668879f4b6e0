"""A tiny hand-made LoCoMo conversation for the design-arm tests: two sessions, six turns, three probes.

Session 1 ends with a speaker talking twice (a leftover turn); session 2 ends with a turn nobody answers; one turn
shares a photo. Each probe's evidence is one or two turns whose wording overlaps the question.
"""

from __future__ import annotations

from harness.workloads.locomo import Conversation, Probe, Session, Turn

DATES = ("1:56 pm on 8 May, 2023", "10:20 am on 2 June, 2023")

_TURNS = [
    # session 1
    ("D1:1", "Alice", "I adopted a golden retriever puppy named Biscuit last week.", None),
    ("D1:2", "Bob", "Congratulations! I started learning the cello in March.", None),
    ("D1:3", "Bob", "My cello teacher says I have a good ear for music.", "a photo of a cello on a stand"),
    # session 2
    ("D2:1", "Alice", "Biscuit chewed my running shoes, so I bought new ones in Lisbon.", None),
    ("D2:2", "Bob", "Lisbon sounds lovely; my sister moved there to teach chemistry.", None),
    ("D2:3", "Alice", "I will visit your sister when I travel to Lisbon in August.", None),
]


def tiny_conversation(sample_id: str = "tiny-1") -> Conversation:
    sessions = []
    for index, date in enumerate(DATES, start=1):
        turns = [Turn(dia_id=d, speaker=s, text=t, caption=c, session=index, index_in_session=i)
                 for i, (d, s, t, c) in enumerate(x for x in _TURNS if x[0].startswith(f"D{index}:"))]
        sessions.append(Session(index=index, date_time=date, turns=turns))
    probes = [
        Probe(index=0, question="What is the name of the golden retriever puppy Alice adopted?", answer="Biscuit",
              evidence=["D1:1"], category=4),
        Probe(index=1, question="Which instrument did Bob start learning, and what does his teacher say?",
              answer="cello; he has a good ear", evidence=["D1:2", "D1:3"], category=1),
        Probe(index=2, question="Where does Bob's sister teach chemistry?", answer="Lisbon", evidence=["D2:2"],
              category=4),
    ]
    return Conversation(sample_id=sample_id, speaker_a="Alice", speaker_b="Bob", sessions=sessions, probes=probes,
                        source="<hand-made>")


ALL_IDS = frozenset(t[0] for t in _TURNS)
