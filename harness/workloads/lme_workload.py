"""LongMemEval as the second loader of the one workload protocol: one question becomes one ``Conversation``.

Every arm (the baselines, Fractal, AgentFly NP/PM, Tortoise, an external arm) reads the models of
``harness.workloads.locomo``; :func:`to_conversation` maps one :class:`~harness.workloads.longmemeval.LmeQuestion`
(one question with its own haystack) onto them, so an arm runs on LongMemEval with no LongMemEval-specific code.
The mapping, every choice deliberate:

- **One conversation per question**: ``sample_id`` = ``question_id``, ``workload = "longmemeval"``, ``speaker_a`` /
  ``speaker_b`` = ``"user"`` / ``"assistant"``, ``source`` = the question's file. Arms ingest it, then answer its
  one probe: every question has its own haystack, so a store never holds two questions' sessions.
- **Sessions** in file (haystack) order, every occurrence kept, duplicates included (a released haystack can list
  one session id twice). ``Session.index`` = 1-based haystack position (unique); ``Session.session_id`` = the file's
  id (may repeat).
- **Turn ids** (``dia_id``): ``f"{session_id}:{i + 1}"``, ``i`` the 0-based position of the turn in its session,
  assistant turns included; the k-th occurrence (k >= 2) of a repeated session id gets ``f"{session_id}#{k}:{i + 1}"``,
  so every id is unique and the first occurrence keeps the plain form.
- **Speaker = role**: ``Turn.speaker`` and ``Turn.role`` are the file's role (``"user"`` / ``"assistant"``);
  ``Turn.has_answer`` the released flag (``None`` where the file has none).
- **Dates**: the session's date travels as text, a header line on the session's first turn:
  ``Turn.text = f"Session date: {date}\\n{content}"`` (later turns carry their content only). ``Session.date_time``
  is ``""``: no design has a clock an arm could set, so every arm gets the date the same way, inside the first turn,
  and none adds a date form of its own (``render_turn``, ``arm_text.dated_line``, Fractal's session header and
  Tortoise's extractor all drop their date prefix when the date is empty). A session with no turn carries no date.
- **The probe**: ``question = f"Current date: {question_date}\\n{question}"`` (the reader prompt of the official
  code gives the model the question date the same way), ``answer`` the released answer, ``category`` =
  ``LME_CATEGORY`` (0, no LoCoMo category), ``question_type`` / ``question_id`` / ``question_date`` /
  ``abstention`` (``'_abs' in question_id``) as released.
- **Evidence**: ``evidence`` = the ids of every turn with ``has_answer`` true, user *and* assistant turns (what an
  arm has to deliver for the answer to be in front of the model; single-session-assistant questions have their
  evidence in assistant turns only); ``official_evidence`` = the user turns among them (LongMemEval's own
  turn-level retrieval scores user turns only, its corpus holds no assistant turn); ``evidence_sessions`` = the
  ``Session.index`` of every session whose id contains ``answer`` (the official evidence-session rule, which also
  counts an evidence session without a ``has_answer`` turn). ``raw_evidence`` = ``evidence``.
- **Tortoise's source-session expansion** (MEM-RTE-source-expansion; spec tortoise §11): on a LongMemEval
  conversation the Tortoise arm delivers its evaluation row with and without the expansion
  (``tortoise-eval`` and ``tortoise-eval-noexp``, see ``harness.workloads.tortoise_arm``), ``is_temporal`` from
  ``question_type == "temporal-reasoning"`` (``Probe.is_temporal``), as the upstream LongMemEval driver decides it.
- **Recorded LM outputs**: LongMemEval has none; ``Conversation.recorded_unavailable`` says so, and the
  ``tortoise-recorded`` arm reports itself unavailable with that reason.
"""

from __future__ import annotations

from collections import Counter

from harness.workloads.locomo import LME_CATEGORY, Conversation, Probe, Session, Turn
from harness.workloads.longmemeval import LmeQuestion

WORKLOAD = "longmemeval"
DATE_HEADER = "Session date: {date}"
QUESTION_FORMAT = "Current date: {question_date}\n{question}"


def turn_id(session_id: str, occurrence: int, i: int) -> str:
    """The ``dia_id`` of the ``i``-th (0-based) turn of the ``occurrence``-th (1-based) occurrence of a session id."""
    return f"{session_id}:{i + 1}" if occurrence == 1 else f"{session_id}#{occurrence}:{i + 1}"


def to_conversation(q: LmeQuestion) -> Conversation:
    """One LongMemEval question as one ``Conversation`` with one ``Probe`` (see the module docstring)."""
    seen: Counter[str] = Counter()
    sessions: list[Session] = []
    evidence: list[str] = []
    official: list[str] = []
    evidence_sessions: list[int] = []
    for s in q.sessions:
        seen[s.session_id] += 1
        index = s.position + 1
        turns: list[Turn] = []
        for i, t in enumerate(s.turns):
            did = turn_id(s.session_id, seen[s.session_id], i)
            text = f"{DATE_HEADER.format(date=s.date)}\n{t.content}" if i == 0 else t.content
            turns.append(Turn(dia_id=did, speaker=t.role, text=text, session=index, index_in_session=i,
                              role=t.role, has_answer=t.has_answer))
            if t.has_answer is True:
                evidence.append(did)
                if t.role == "user":
                    official.append(did)
        if s.is_answer_session:
            evidence_sessions.append(index)
        sessions.append(Session(index=index, date_time="", turns=turns, session_id=s.session_id))
    probe = Probe(index=0, question=QUESTION_FORMAT.format(question_date=q.question_date, question=q.question),
                  answer=q.answer, evidence=evidence, raw_evidence=list(evidence), category=LME_CATEGORY,
                  question_type=q.question_type, question_id=q.question_id, question_date=q.question_date,
                  abstention=q.abstention, official_evidence=official, evidence_sessions=evidence_sessions)
    return Conversation(sample_id=q.question_id, speaker_a="user", speaker_b="assistant", sessions=sessions,
                        probes=[probe], source=q.source, workload=WORKLOAD)
