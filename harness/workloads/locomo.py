"""LoCoMo conversations as a typed workload (models here; the loader is filled in by the LoCoMo issue).

Models: ``Conversation`` -> ``Session`` (index, date-time text) -> ``Turn`` (``dia_id``, speaker, text, photo
caption), plus ``Probe`` (question, gold or adversarial answer, evidence ids, category).
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class Turn(BaseModel):
    """One utterance. ``caption`` is the generated photo caption (``blip_caption``) when the turn shares a photo."""

    dia_id: str
    speaker: str
    text: str
    caption: str | None = None
    session: int
    index_in_session: int


class Session(BaseModel):
    """One dated session of the conversation; ``date_time`` is the free text of ``session_<n>_date_time``."""

    index: int
    date_time: str
    turns: list[Turn]


class Probe(BaseModel):
    """One QA item. ``evidence`` holds the ids that name a turn of the conversation (split on ``;``);
    ``invalid_evidence`` the ones that name none (kept out of the metrics, counted in the report)."""

    index: int
    question: str
    answer: str | None = None
    adversarial_answer: str | None = None
    evidence: list[str] = Field(default_factory=list)
    invalid_evidence: list[str] = Field(default_factory=list)
    category: int


class Conversation(BaseModel):
    """A whole LoCoMo conversation: two speakers, sessions in order, probes asked after the last session."""

    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: list[Session]
    probes: list[Probe]
    source: str

    def turns(self) -> list[Turn]:
        """Every turn in conversation order (sessions in order, turns in order)."""
        return [t for s in self.sessions for t in s.turns]

    def session_of(self, dia_id: str) -> Session:
        """The session that holds ``dia_id`` (KeyError when none does)."""
        for s in self.sessions:
            for t in s.turns:
                if t.dia_id == dia_id:
                    return s
        raise KeyError(dia_id)
