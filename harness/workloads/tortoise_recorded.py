"""LoCoMo's recorded LM facts as Tortoise extractor outputs: one ``RecordedExtractions`` per conversation.

LoCoMo ships, for every session, the facts an LLM extracted from it (``observation``: per speaker, ``[fact,
ids]``). ``recorded_observations`` turns them into the draft v2 payloads (spec §3.6) a model would have returned
for each session, so ``tortoise_sim.extraction.ReplayExtractor`` can replay them through the real capture ->
admission path (``execute_embed`` gates, writers, promotion, ingest dream) exactly where an LM extractor plugs in.

Mapping, one session's payload:

- **points**: one per fact of the session, in file order (speakers, then facts): ``content`` = the fact text as
  recorded (a paraphrase; no date, no speaker prefix is added), ``id = pt_id(content)`` (what admission derives
  anyway), ``pointKind "observation"``, ``reason "NEW"``, ``confidence``/``c_cal`` 0.5 (the §3.6 draft values),
  ``about_entities = [speaker]`` (the speaker the record files the fact under), ``search_keys`` = the first four
  significant tokens (the simulator's marker-extractor rule; the record carries none), ``when`` = the session's
  date-time text (what a transcript's timestamp gives an extractor; stored, not shown by search or the block).
- **source**: the schema has one source turn per point, so a fact is sourced to its *first tagged turn*:
  ``source_turn_id`` = that turn's index in the session window, ``source_ref = "turn:<index>"``. A tagged id that
  names no turn is skipped; when no tagged turn lies in this session (LoCoMo tags a fact with turns of its own
  session, so this is the exception), the fact gets no source turn and is counted in ``facts_unsourced``. No ``quote`` (the record has
  none).
- **entities**: both speakers as ``core:person``. **No operators, events or supersessions**: the record has none,
  and none are invented.
- A session with no fact gets an empty recorded payload (it was recorded; the model found nothing).

Facts are paraphrases, so matching turn text cannot credit them. ``RecordedFacts.provenance`` maps each point id
to the fact's tagged turn ids (``Observation.evidence``: the tagged ids that name a turn, in tag order); an arm
credits those ids when it delivers the point. Two facts with the same normalised text become one point
(admission's dedupe/consolidation, first wins): the point keeps the first fact's ids and the other fact counts in
``facts_merged``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from harness.workloads.locomo import Conversation, Observation, Session
from tortoise_sim.extraction import RecordedExtractions, RecordedPayload, RecordedSession
from tortoise_sim.text import normalise_content, pt_id, significant_tokens

ROUTE = "locomo-observation"


@dataclass
class RecordedFacts:
    """The recording of one conversation plus what the metrics need beside it."""

    recorded: RecordedExtractions
    provenance: dict[str, tuple[str, ...]] = field(default_factory=dict)
    content: dict[str, str] = field(default_factory=dict)
    facts: int = 0
    facts_unsourced: int = 0
    facts_merged: int = 0
    sessions_without_facts: int = 0


def _source_index(obs: Observation, session: Session) -> int | None:
    index = {t.dia_id: i for i, t in enumerate(session.turns)}
    return next((index[e] for e in obs.evidence if e in index), None)


def fact_point(obs: Observation, session: Session) -> dict[str, object]:
    """The draft point a fact becomes (see the module docstring)."""
    content = obs.text[:1000]
    src = _source_index(obs, session)
    point: dict[str, object] = {
        "id": pt_id(content), "content": content, "pointKind": "observation", "reason": "NEW",
        "confidence": 0.5, "c_cal": 0.5, "about_entities": [obs.speaker], "status": "draft",
        "search_keys": significant_tokens(content)[:4], "when": session.date_time or None,
    }
    if src is not None:
        point["source_turn_id"] = src
        point["source_ref"] = f"turn:{src}"
    return point


def recorded_observations(conv: Conversation, session_id: Callable[[Session], str]) -> RecordedFacts:
    """One recorded payload per session of ``conv``, keyed by ``session_id(session)``.

    ``conv.observations`` must not be ``None`` (check ``conv.recorded_unavailable("observation")`` first)."""
    if conv.observations is None:
        raise ValueError(conv.recorded_unavailable("observation") or "no observations")
    by_session: dict[int, list[Observation]] = {}
    for obs in conv.observations:
        by_session.setdefault(obs.session, []).append(obs)
    people = [{"name": s, "kind": "core:person", "passes_frequency_gate": True}
              for s in dict.fromkeys((conv.speaker_a, conv.speaker_b))]
    out = RecordedFacts(recorded=RecordedExtractions(route=ROUTE))
    seen: set[str] = set()
    for session in conv.sessions:
        facts = by_session.get(session.index, [])
        points = []
        for obs in facts:
            point = fact_point(obs, session)
            pid = str(point["id"])
            out.facts += 1
            out.facts_unsourced += "source_turn_id" not in point
            key = normalise_content(obs.text[:1000])
            if key in seen:
                out.facts_merged += 1
            else:
                seen.add(key)
                out.provenance[pid] = tuple(obs.evidence)
                out.content[pid] = str(point["content"])
            points.append(point)
        out.sessions_without_facts += not facts
        payload = RecordedPayload.model_validate({"entities": people, "points": points, "summary": ""})
        out.recorded.sessions[session_id(session)] = RecordedSession(payload=payload)
    return out
