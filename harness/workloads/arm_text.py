"""Turn rendering and text provenance shared by the design arms (Fractal, AgentFly NP/PM, Tortoise).

Every design arm writes a LoCoMo turn into its memory as text and later has to say which turns a delivered text
carries. Both halves live here so they cannot drift apart:

- ``turn_line(turn)``: ``"<speaker>: <text>"``, plus ``" [shared a photo: <caption>]"`` when the turn shares a photo
  (the caption is the only trace of the photo the dataset gives).
- ``dated_line(turn, session)``: ``"[<session date-time>] <turn_line>"``, for memories that hold single turns out of
  their session (an NP case, a Tortoise point) and so need the date inside the text. A session without a date
  (LongMemEval's, whose date is a header line inside the session's first turn) gives the bare ``turn_line``: no
  ``"[] "``.
- ``ids_in_text(text, snippets)``: the ids whose snippet occurs in ``text`` after both sides had every whitespace run
  collapsed to one space. This is how provenance is *observed*: a turn counts as delivered only when its whole
  rendered content is in the text the model gets, wherever the arm put it (a summary, a JSON payload, a synopsis).
  Two turns with identical content are both counted when that content is present; a turn whose text is cut
  (a 160-character synopsis, say) is not. A turn with no content at all (LongMemEval has blank turns; LoCoMo's
  loader refuses a turn with neither text nor caption) has no snippet and is never counted: its bare
  ``"user: "`` would otherwise occur in every text that holds any user turn.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from harness.workloads.locomo import Conversation, Session, Turn

_WS = re.compile(r"\s+")


def squash(text: str) -> str:
    """Collapse whitespace runs to one space and strip (the form provenance is matched in)."""
    return _WS.sub(" ", text).strip()


def turn_line(turn: Turn) -> str:
    """``"<speaker>: <text>"`` with the photo caption appended when there is one."""
    line = f"{turn.speaker}: {turn.text}"
    if turn.caption:
        line += f" [shared a photo: {turn.caption}]"
    return line


def dated_line(turn: Turn, session: Session) -> str:
    """``"[<date-time>] <speaker>: <text>"``: a turn that stands alone in memory, with its session date."""
    return f"[{session.date_time}] {turn_line(turn)}" if session.date_time else turn_line(turn)


def ids_in_text(text: str, snippets: Mapping[str, str]) -> frozenset[str]:
    """Ids whose (whitespace-squashed) snippet occurs in the (whitespace-squashed) ``text``."""
    hay = squash(text)
    return frozenset(i for i, s in snippets.items() if s and squash(s) in hay)


def turn_snippets(conversation: Conversation) -> dict[str, str]:
    """``dia_id -> turn_line`` for every turn (the content provenance looks for); ``""`` for a turn without
    content (never counted)."""
    return {t.dia_id: turn_line(t) if has_content(t) else "" for t in conversation.turns()}


def has_content(turn: Turn) -> bool:
    """Whether the turn has any text or photo caption (a blank LongMemEval turn has neither)."""
    return bool(turn.text.strip() or turn.caption)


def dated_turns(conversation: Conversation) -> Iterable[tuple[Turn, Session]]:
    """Every turn with its session, in conversation order."""
    for s in conversation.sessions:
        for t in s.turns:
            yield t, s
