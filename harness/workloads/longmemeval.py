"""LongMemEval questions as typed records: the models (this part), the streaming loader and the path resolver.

One LongMemEval file is a JSON array of question objects; each question carries its own haystack (a list of
dated sessions, each a list of ``{"role", "content"}`` turns, evidence sessions' turns with a boolean
``has_answer``). The models below mirror that schema field for field (see ``docs/longmemeval.md`` for what each
field means); the loader (:func:`iter_questions`) turns a file into a stream of :class:`LmeQuestion`, one at a
time, so memory stays bounded whatever the file's size.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

ENV_VAR = "MEMSIM_LONGMEMEVAL_DATA"
QUESTION_TYPES = ("single-session-user", "single-session-assistant", "single-session-preference",
                  "multi-session", "knowledge-update", "temporal-reasoning")
"""The six question types of the released files, in the paper's order (abstention questions keep their base type)."""
FIELDS = ("question_id", "question_type", "question", "answer", "question_date", "haystack_session_ids",
          "haystack_dates", "haystack_sessions", "answer_session_ids")
"""Every field a released question object has; anything else is counted as unknown and ignored."""
DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"
"""The format of ``question_date`` and ``haystack_dates`` (``"2023/05/30 (Tue) 21:56"``)."""


class LongMemEvalDataError(ValueError):
    """A LongMemEval input problem, as one line naming the file (and the question id and field when known)."""


class LmeTurn(BaseModel):
    """One turn of a haystack session. ``has_answer`` is ``None`` when the file's turn has no such key (filler
    sessions' turns carry none; evidence sessions' turns carry a boolean)."""

    role: str
    content: str
    has_answer: bool | None = None


class LmeSession(BaseModel):
    """One haystack session occurrence: its id as the file gives it (an id may occur twice in one haystack),
    its date text and its turns. ``position`` is its 0-based place in the haystack (unique, unlike the id)."""

    session_id: str
    date: str
    turns: list[LmeTurn]
    position: int

    @property
    def is_answer_session(self) -> bool:
        """The official code's test for an evidence session: the id contains ``answer``."""
        return "answer" in self.session_id


class LmeQuestion(BaseModel):
    """One LongMemEval question with its own haystack, in file order.

    ``answer`` is text (a number in the file becomes its string); ``answer_session_ids`` is ``None`` when the
    field is absent (the official retrieval code never reads it); ``unknown_fields`` names the keys the question
    had beyond :data:`FIELDS` (ignored, counted); ``source`` is the file and ``index`` the question's 0-based
    position in it."""

    question_id: str
    question_type: str
    question: str
    answer: str
    question_date: str
    sessions: list[LmeSession]
    answer_session_ids: list[str] | None = None
    unknown_fields: list[str] = Field(default_factory=list)
    source: str = ""
    index: int = 0

    @property
    def abstention(self) -> bool:
        """A false-premise question: ``'_abs' in question_id`` (the official routing rule)."""
        return "_abs" in self.question_id

    @property
    def n_turns(self) -> int:
        return sum(len(s.turns) for s in self.sessions)

    def has_user_evidence(self) -> bool:
        """Whether some user turn has ``has_answer`` true (the strict averaging keeps only such questions)."""
        return any(t.role == "user" and t.has_answer is True for s in self.sessions for t in s.turns)
