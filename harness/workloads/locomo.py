"""LoCoMo conversations as a typed workload: models and the loader.

Models: ``Conversation`` -> ``Session`` (index, date-time text) -> ``Turn`` (``dia_id``, speaker, text, photo
caption), plus ``Probe`` (question, gold or adversarial answer, evidence ids, category).

The models are the one workload protocol every arm reads, with two loaders: this module's ``load_locomo`` and
``harness.workloads.lme_workload.to_conversation`` (one LongMemEval question as one conversation). The fields
LongMemEval needs beyond LoCoMo's all have defaults that leave a LoCoMo object exactly as before: ``Turn.role`` and
``Turn.has_answer`` (the chat role and the released evidence flag; ``None`` for LoCoMo, whose two speakers are
people), ``Session.session_id`` (the file's haystack session id, which may repeat; ``None`` for LoCoMo),
``Probe.question_type`` / ``question_id`` / ``question_date`` / ``abstention`` / ``official_evidence`` (the
user-only evidence LongMemEval's own retrieval code scores) / ``evidence_sessions``, and ``Conversation.workload``
(``"locomo"`` or ``"longmemeval"``). Code that means something generic reads the ``Probe`` properties instead of
LoCoMo's category numbers: ``type_name`` (LoCoMo: ``CATEGORY_NAMES[category]``; LongMemEval: the question type),
``has_gold`` (LoCoMo: category != 5; LongMemEval: not an abstention question) and ``is_temporal`` (LoCoMo: category
2; LongMemEval: ``temporal-reasoning``). A LongMemEval probe has category ``LME_CATEGORY`` (0), outside LoCoMo's
1-5, so LoCoMo's per-category and headline summaries never count it.

Loader (``load_locomo``) mapping choices, all deliberate and counted rather than fixed:

- Input is a file or a folder. A folder loads every ``*.json`` in it (sorted by name, non-recursive). A file is
  either the "v2" layout (one conversation object per file, ``sample_id`` taken from the file stem) or the
  canonical ``locomo10.json`` layout (a JSON list of ``{"sample_id", "conversation", "qa", ...}``).
- Sessions are the keys ``session_<n>`` whose value is a list, ordered by ``n``. Files carry extra
  ``session_<n>_date_time`` keys for sessions that never happened (conv-26 has 35 date keys, 19 sessions): those
  are ignored. A session without a date-time key keeps an empty ``date_time``. A session listed with zero turns
  is kept (it is part of the conversation's order) but a conversation with no turn at all is an error.
- A turn's ``caption`` is its ``blip_caption`` (the generated description of a shared photo); ``img_url`` and
  ``query`` (the image-search query) are not dialogue and are dropped. A turn that only shares a photo (no
  ``text``, a caption) keeps an empty text; a turn with neither is an error.
- Gold answers may be numbers in the files (``2022``): they become strings. Category-5 items have
  ``adversarial_answer`` and usually no ``answer``; both are kept as given.
- Evidence: each entry is split on ``;`` and ``,`` and stripped (conv-26 has ``"D8:6; D9:17"``). An id that names
  a turn of the conversation goes to ``evidence``. An id that does not match exactly but names a turn once
  leading zeros and inner spaces are removed (``"D3:05"`` -> ``"D3:5"``) is mapped to that turn and listed in
  ``normalised_evidence``. Everything else (``"D"``, ``"D10:19"`` in conv-42, which names no turn) goes to
  ``invalid_evidence``: kept out of the metrics, counted in the report. Duplicates are dropped, order kept.
- A probe whose evidence is empty after this is kept (answer scoring can still use it) and is excluded from
  recall averages by the metrics.
- Recorded LM outputs (``observation`` and ``session_summary``), read in both layouts: v2 files carry top-level
  ``session_<n>_observation`` / ``session_<n>_summary`` keys; canonical entries carry them under the entry's
  ``observation`` / ``session_summary`` objects with the same inner keys. An observation block maps each speaker
  to a list of ``[fact, ids]``; ``ids`` is a string (possibly ``"D1:3, D1:5"``), split on ``,`` with spaces
  stripped as LoCoMo's own retrieval code does, or a list taken as is (``Observation.ids``). Each of those ids
  that names a turn (after the same zero/space normalisation as evidence) goes to ``Observation.evidence``; the
  rest are counted in ``invalid_ids``, never fatal. Observations keep the file's key order (sessions, then
  speakers, then facts), which is the unit order the paper protocol indexes. A conversation without these fields
  still loads: ``observations`` / ``summaries`` are then ``None`` and ``recorded_unavailable()`` gives the reason
  every arm that needs them reports.
- ``Probe.raw_evidence`` keeps the evidence strings exactly as given (the paper protocol matches those, quirks
  included); ``evidence`` holds the cleaned ids.
- Duplicate ``sample_id`` across the loaded files, duplicate ``dia_id`` within a conversation, a missing path,
  non-JSON, a wrong shape, or a conversation without turns: ``LocomoDataError``, one line naming the file.

Rendering (``render_turn``): the one turn format every baseline delivers and indexes, one line per turn:
``[D1:3] 1:56 pm on 8 May, 2023 | Caroline: text [photo: a photo of ...]``. The dia_id tag makes the provenance
readable in the text; the session date-time sits on every line so a retrieved turn keeps its date; the caption
is appended because LoCoMo questions are asked about shared photos. ``dates=False`` drops the date (used to
measure what temporal questions lose without it).

Path resolution (``resolve_locomo_path``, through :mod:`harness.datapaths`, the one resolver for all data): the
explicit ``--data`` path, else ``$MEMSIM_LOCOMO_DATA``, else the ``locomo10.json`` that ``memsim data fetch`` placed
in the data folder. An explicit or environment path that does not exist is an error, never a silent fall-through
to the fetched copy.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

ENV_VAR = "MEMSIM_LOCOMO_DATA"
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
LOCOMO_TEMPORAL = 2
LOCOMO_ADVERSARIAL = 5
LME_CATEGORY = 0
"""``Probe.category`` of a LongMemEval probe: no LoCoMo category (LoCoMo's are 1-5)."""
LME_TEMPORAL = "temporal-reasoning"
_SESSION_KEY = re.compile(r"^session_(\d+)$")
_DIA_ID = re.compile(r"^D\s*0*(\d+)\s*:\s*0*(\d+)$")


class LocomoDataError(ValueError):
    """A LoCoMo input problem, as one line naming the file."""


class Turn(BaseModel):
    """One utterance. ``caption`` is the generated photo caption (``blip_caption``) when the turn shares a photo.

    ``role`` is the chat role (``"user"`` / ``"assistant"``) when the workload has roles (LongMemEval; ``speaker``
    then equals it), ``None`` for LoCoMo's two named people; ``has_answer`` is LongMemEval's per-turn evidence flag
    as released (``None`` when the turn carries none, and always for LoCoMo)."""

    dia_id: str
    speaker: str
    text: str
    caption: str | None = None
    session: int
    index_in_session: int
    role: str | None = None
    has_answer: bool | None = None


class Session(BaseModel):
    """One dated session of the conversation; ``date_time`` is the free text of ``session_<n>_date_time``.

    ``index`` is unique within the conversation (LoCoMo's ``n``; LongMemEval's 1-based haystack position);
    ``session_id`` is LongMemEval's haystack session id, which can repeat within one haystack (``None`` for
    LoCoMo)."""

    index: int
    date_time: str
    turns: list[Turn]
    session_id: str | None = None


class Probe(BaseModel):
    """One QA item. ``evidence`` holds the ids that name a turn of the conversation (split on ``;``);
    ``invalid_evidence`` the ones that name none (kept out of the metrics, counted in the report);
    ``raw_evidence`` the strings exactly as the file gives them (the paper protocol matches these)."""

    index: int
    question: str
    answer: str | None = None
    adversarial_answer: str | None = None
    evidence: list[str] = Field(default_factory=list)
    raw_evidence: list[str] = Field(default_factory=list)
    invalid_evidence: list[str] = Field(default_factory=list)
    normalised_evidence: list[str] = Field(default_factory=list)
    category: int
    question_type: str | None = None
    question_id: str | None = None
    question_date: str | None = None
    abstention: bool = False
    official_evidence: list[str] | None = None
    evidence_sessions: list[int] | None = None

    @property
    def type_name(self) -> str:
        """The probe's question type in words: LongMemEval's ``question_type``, else LoCoMo's category name."""
        if self.question_type is not None:
            return self.question_type
        return CATEGORY_NAMES.get(self.category, str(self.category))

    @property
    def has_gold(self) -> bool:
        """Whether the probe has a gold answer to look for: LongMemEval's non-abstention questions; LoCoMo's
        categories other than 5 (adversarial items hold an ``adversarial_answer`` instead)."""
        if self.question_type is not None:
            return not self.abstention
        return self.category != LOCOMO_ADVERSARIAL

    @property
    def is_temporal(self) -> bool:
        """Whether the question is a temporal one: LongMemEval's ``temporal-reasoning``, LoCoMo's category 2."""
        if self.question_type is not None:
            return self.question_type == LME_TEMPORAL
        return self.category == LOCOMO_TEMPORAL


class Observation(BaseModel):
    """One recorded LM fact about a session (LoCoMo's ``observation`` field).

    ``ids`` is the fact's tag as LoCoMo's retrieval code splits it (a string split on ``,`` with spaces
    stripped; a list taken as is); ``evidence`` the ids among them that name a turn of the conversation
    (normalised like probe evidence); ``invalid_ids`` the ones that name none (counted, not fatal)."""

    session: int
    speaker: str
    text: str
    ids: list[str]
    evidence: list[str] = Field(default_factory=list)
    invalid_ids: list[str] = Field(default_factory=list)


class Conversation(BaseModel):
    """A whole LoCoMo conversation: two speakers, sessions in order, probes asked after the last session.

    ``observations`` (file order) and ``summaries`` (session index -> text) are the recorded LM outputs; ``None``
    when the file has no such field (see ``recorded_unavailable``)."""

    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: list[Session]
    probes: list[Probe]
    source: str
    observations: list[Observation] | None = None
    summaries: dict[int, str] | None = None
    workload: str = "locomo"

    def recorded_unavailable(self, kind: str) -> str | None:
        """Why the recorded ``kind`` (``"observation"`` or ``"summary"``) cannot be used for this conversation,
        or ``None`` when it can."""
        if kind not in ("observation", "summary"):
            raise ValueError(f"unknown recorded kind {kind!r} (expected 'observation' or 'summary')")
        if self.workload == "longmemeval":
            return (f"{self.sample_id} ({self.source}) is a LongMemEval question: LongMemEval records no LM "
                    f"{'facts' if kind == 'observation' else 'session summaries'} (LoCoMo's "
                    f"'{'observation' if kind == 'observation' else 'session_summary'}' field has no counterpart there)")
        if kind == "observation":
            if self.observations is None:
                return f"{self.sample_id} ({self.source}) has no 'observation' field"
            if not self.observations:
                return f"{self.sample_id} ({self.source}) has an empty 'observation' field"
            return None
        if kind == "summary":
            if self.summaries is None:
                return f"{self.sample_id} ({self.source}) has no 'session_summary' field"
            if not self.summaries:
                return f"{self.sample_id} ({self.source}) has an empty 'session_summary' field"
            return None
        raise ValueError(f"unknown recorded kind {kind!r} (expected 'observation' or 'summary')")

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

    def turn_map(self) -> dict[str, Turn]:
        """``dia_id`` -> turn, for every turn."""
        return {t.dia_id: t for t in self.turns()}

    def session_dates(self) -> dict[int, str]:
        """Session index -> its date-time text."""
        return {s.index: s.date_time for s in self.sessions}

    def quirk_counts(self) -> dict[str, int]:
        """How many evidence ids were invalid or normalised, and how many probes have no valid evidence."""
        return {
            "invalid_evidence": sum(len(p.invalid_evidence) for p in self.probes),
            "normalised_evidence": sum(len(p.normalised_evidence) for p in self.probes),
            "probes_without_evidence": sum(1 for p in self.probes if not p.evidence),
            "observation_ids_naming_no_turn": sum(len(o.invalid_ids) for o in self.observations or []),
        }

    def sliced(self, max_sessions: int | None = None, max_probes: int | None = None,
               categories: tuple[int, ...] | None = None) -> Conversation:
        """A smaller copy: the first ``max_sessions`` sessions and the probes whose evidence all lies in them
        (at most ``max_probes`` of them, optionally only the given categories). Used by ``--quick`` and claims."""
        sessions = self.sessions[:max_sessions] if max_sessions else list(self.sessions)
        kept = {t.dia_id for s in sessions for t in s.turns}
        probes = [p for p in self.probes if p.evidence and set(p.evidence) <= kept
                  and (categories is None or p.category in categories)]
        if max_probes is not None:
            probes = probes[:max_probes]
        update: dict[str, Any] = {"sessions": sessions, "probes": probes}
        if self.observations is not None:
            nums = {s.index for s in sessions}
            update["observations"] = [o for o in self.observations if o.session in nums]
        if self.summaries is not None:
            update["summaries"] = {n: t for n, t in self.summaries.items() if n in {s.index for s in sessions}}
        return self.model_copy(update=update)


def render_turn(turn: Turn, date_time: str | None, *, dates: bool = True) -> str:
    """One turn as a line of delivered text (see the module docstring for the format)."""
    when = f"{date_time} | " if dates and date_time else ""
    photo = f" [photo: {turn.caption}]" if turn.caption else ""
    return f"[{turn.dia_id}] {when}{turn.speaker}: {turn.text}{photo}"


def render_turns(turns: list[Turn], dates_by_session: dict[int, str], *, dates: bool = True) -> str:
    """Turns as delivered text, one ``render_turn`` line each, in the order given."""
    return "\n".join(render_turn(t, dates_by_session.get(t.session), dates=dates) for t in turns)


def _err(path: Path | str, problem: str) -> LocomoDataError:
    return LocomoDataError(f"{path}: {problem}")


def resolve_locomo_path(cli_path: Path | str | None = None) -> Path:
    """The LoCoMo file or folder to load: ``cli_path``, ``$MEMSIM_LOCOMO_DATA`` or the fetched ``locomo10.json``.
    Raises ``LocomoDataError`` when a given path is missing or nothing is found (the message says how to fetch)."""
    from harness.datapaths import DataPathError, resolve_locomo

    try:
        return resolve_locomo(cli_path)
    except DataPathError as exc:
        raise LocomoDataError(str(exc)) from None


def find_locomo_path(explicit: Path | str | None = None) -> Path | None:
    """Like ``resolve_locomo_path`` but ``None`` instead of an error (claims skip when the data is absent)."""
    try:
        return resolve_locomo_path(explicit)
    except LocomoDataError:
        return None


def _str(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool | dict | list):
        return json.dumps(v, ensure_ascii=False)
    return str(v)


_OBS_KEY = re.compile(r"^session_(\d+)_observation$")
_SUM_KEY = re.compile(r"^session_(\d+)_summary$")


def _canonical_ids(seen: set[str]) -> dict[str, str]:
    canon: dict[str, str] = {}
    for d in seen:
        m = _DIA_ID.match(d.strip())
        if m:
            canon.setdefault(f"D{int(m.group(1))}:{int(m.group(2))}", d)
    return canon


def _match_turn(e: str, ids: set[str], canon: dict[str, str]) -> str | None:
    """The turn id ``e`` names, exactly or after zero/space normalisation; ``None`` when it names none."""
    if e in ids:
        return e
    m = _DIA_ID.match(e)
    return canon.get(f"D{int(m.group(1))}:{int(m.group(2))}") if m else None


def _parse_observations(block: Any, ids: set[str], canon: dict[str, str], source: Path,
                        where: str) -> list[Observation] | None:
    """Observations from a ``{"session_<n>_observation": {speaker: [[fact, ids], ...]}}`` mapping (file order)."""
    if block is None:
        return None
    if not isinstance(block, dict):
        raise _err(source, f"{where}: 'observation' must be an object, got {type(block).__name__}")
    out: list[Observation] = []
    for key, per_speaker in block.items():
        m = _OBS_KEY.match(key)
        if not m:
            continue
        if not isinstance(per_speaker, dict):
            raise _err(source, f"{where}: {key} must map speakers to fact lists")
        for speaker, facts in per_speaker.items():
            if not isinstance(facts, list):
                raise _err(source, f"{where}: {key}[{speaker!r}] must be a list of [fact, ids]")
            for j, fact in enumerate(facts):
                if (not isinstance(fact, list) or len(fact) != 2 or not isinstance(fact[0], str)
                        or not (isinstance(fact[1], str)
                                or (isinstance(fact[1], list) and all(isinstance(x, str) for x in fact[1])))):
                    raise _err(source, f"{where}: {key}[{speaker!r}][{j}] is not [fact text, ids]")
                tag = fact[1]
                tag_ids = [x.strip() for x in tag.split(",")] if isinstance(tag, str) else list(tag)
                good: list[str] = []
                bad: list[str] = []
                for e in tag_ids:
                    target = _match_turn(e.strip(), ids, canon)
                    if target is None:
                        bad.append(e)
                    elif target not in good:
                        good.append(target)
                out.append(Observation(session=int(m.group(1)), speaker=str(speaker), text=fact[0], ids=tag_ids,
                                       evidence=good, invalid_ids=bad))
    return out


def _parse_summaries(block: Any, source: Path, where: str) -> dict[int, str] | None:
    """Session summaries from a ``{"session_<n>_summary": text}`` mapping."""
    if block is None:
        return None
    if not isinstance(block, dict):
        raise _err(source, f"{where}: 'session_summary' must be an object, got {type(block).__name__}")
    out: dict[int, str] = {}
    for key, text in block.items():
        m = _SUM_KEY.match(key)
        if not m:
            continue
        if not isinstance(text, str):
            raise _err(source, f"{where}: {key} must be text, got {type(text).__name__}")
        out[int(m.group(1))] = text
    return out


def _v2_recorded(obj: dict[str, Any], pattern: re.Pattern[str]) -> dict[str, Any] | None:
    """The v2 layout's top-level ``session_<n>_<kind>`` keys as one mapping; ``None`` when there are none."""
    found = {k: v for k, v in obj.items() if pattern.match(k)}
    return found or None


def _parse_conversation(obj: Any, qa: Any, sample_id: str, source: Path, where: str,
                        observation: Any = None, session_summary: Any = None) -> Conversation:
    if not isinstance(obj, dict):
        raise _err(source, f"{where}: expected a JSON object with speaker_a, speaker_b and session_<n> keys, "
                           f"got {type(obj).__name__}")
    for key in ("speaker_a", "speaker_b"):
        if not isinstance(obj.get(key), str):
            raise _err(source, f"{where}: missing or non-text '{key}'")
    numbers = sorted(int(m.group(1)) for k in obj if (m := _SESSION_KEY.match(k)) and isinstance(obj[k], list))
    sessions: list[Session] = []
    seen: set[str] = set()
    for n in numbers:
        turns = []
        for i, raw in enumerate(obj[f"session_{n}"]):
            if not isinstance(raw, dict):
                raise _err(source, f"{where}: session_{n}[{i}] is not an object")
            for key in ("speaker", "dia_id"):
                if not isinstance(raw.get(key), str):
                    raise _err(source, f"{where}: session_{n}[{i}] has no text field '{key}'")
            text = raw.get("text")
            if not isinstance(text, str):
                if not raw.get("blip_caption"):
                    raise _err(source, f"{where}: session_{n}[{i}] has no text field 'text' (and no photo caption)")
                text = ""
            if raw["dia_id"] in seen:
                raise _err(source, f"{where}: dia_id {raw['dia_id']!r} appears twice")
            seen.add(raw["dia_id"])
            cap = raw.get("blip_caption")
            turns.append(Turn(dia_id=raw["dia_id"], speaker=raw["speaker"], text=text,
                              caption=_str(cap) if cap else None, session=n, index_in_session=i))
        dt = obj.get(f"session_{n}_date_time")
        sessions.append(Session(index=n, date_time=_str(dt) or "", turns=turns))
    if not seen:
        raise _err(source, f"{where}: conversation has no turns (no non-empty session_<n> list)")
    if qa is None:
        qa = []
    if not isinstance(qa, list):
        raise _err(source, f"{where}: 'qa' must be a list, got {type(qa).__name__}")
    canon = _canonical_ids(seen)
    probes = [_parse_probe(item, i, seen, canon, source, where) for i, item in enumerate(qa)]
    if observation is None:
        observation = _v2_recorded(obj, _OBS_KEY)
    if session_summary is None:
        session_summary = _v2_recorded(obj, _SUM_KEY)
    return Conversation(sample_id=sample_id, speaker_a=obj["speaker_a"], speaker_b=obj["speaker_b"],
                        sessions=sessions, probes=probes, source=str(source),
                        observations=_parse_observations(observation, seen, canon, source, where),
                        summaries=_parse_summaries(session_summary, source, where))


def _parse_probe(item: Any, i: int, ids: set[str], canon: dict[str, str], source: Path, where: str) -> Probe:
    if not isinstance(item, dict) or not isinstance(item.get("question"), str):
        raise _err(source, f"{where}: qa[{i}] is not an object with a text 'question'")
    cat = item.get("category")
    if isinstance(cat, bool) or not isinstance(cat, int | str) or not str(cat).strip().isdigit():
        raise _err(source, f"{where}: qa[{i}] has no integer 'category'")
    raw_ev = item.get("evidence", [])
    if isinstance(raw_ev, str):
        raw_ev = [raw_ev]
    if not isinstance(raw_ev, list) or not all(isinstance(e, str) for e in raw_ev):
        raise _err(source, f"{where}: qa[{i}] 'evidence' must be a list of strings")
    good: list[str] = []
    bad: list[str] = []
    normed: list[str] = []
    for entry in raw_ev:
        for part in re.split(r"[;,]", entry):
            e = part.strip()
            if not e:
                continue
            target = _match_turn(e, ids, canon)
            if target is None:
                if e not in bad:
                    bad.append(e)
                continue
            if target != e and e not in normed:
                normed.append(e)
            if target not in good:
                good.append(target)
    return Probe(index=i, question=item["question"], answer=_str(item.get("answer")),
                 adversarial_answer=_str(item.get("adversarial_answer")), evidence=good, raw_evidence=list(raw_ev),
                 invalid_evidence=bad,
                 normalised_evidence=normed, category=int(cat))


def _load_file(path: Path) -> list[Conversation]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise _err(path, f"not UTF-8 text ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise _err(path, f"not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except (ValueError, RecursionError) as exc:  # 5000-digit integers, nesting deeper than the parser's stack
        raise _err(path, f"not loadable JSON ({type(exc).__name__}: {str(exc)[:120]})") from None
    except OSError as exc:
        raise _err(path, f"cannot read ({exc.strerror})") from None
    if isinstance(data, list):
        if not data:
            raise _err(path, "empty list (expected locomo10.json entries with 'sample_id' and 'conversation')")
        out = []
        for j, entry in enumerate(data):
            if not isinstance(entry, dict) or "conversation" not in entry:
                raise _err(path, f"entry {j} is not an object with a 'conversation' (canonical locomo10 layout)")
            sid = _str(entry.get("sample_id")) or f"{path.stem}#{j}"
            out.append(_parse_conversation(entry["conversation"], entry.get("qa"), sid, path, f"entry {j}",
                                           entry.get("observation"), entry.get("session_summary")))
        return out
    if isinstance(data, dict):
        if "conversation" in data and isinstance(data["conversation"], dict):  # one canonical entry on its own
            sid = _str(data.get("sample_id")) or path.stem
            return [_parse_conversation(data["conversation"], data.get("qa"), sid, path, sid,
                                        data.get("observation"), data.get("session_summary"))]
        return [_parse_conversation(data, data.get("qa"), path.stem, path, path.stem)]
    raise _err(path, f"expected a conversation object or a list of them, got {type(data).__name__}")


def load_locomo(path: Path | str) -> list[Conversation]:
    """Load every conversation from a LoCoMo file or folder (either layout); see the module docstring."""
    p = Path(path)
    if not p.exists():
        raise _err(p, "no such file or folder")
    if p.is_dir():
        files = sorted(f for f in p.glob("*.json") if f.is_file())
        if not files:
            raise _err(p, "folder holds no *.json conversation files")
    else:
        files = [p]
    convs: list[Conversation] = []
    origin: dict[str, Path] = {}
    for f in files:
        for c in _load_file(f):
            if c.sample_id in origin:
                raise _err(f, f"sample_id {c.sample_id!r} already loaded from {origin[c.sample_id]}")
            origin[c.sample_id] = f
            convs.append(c)
    return convs


def select_conversations(convs: list[Conversation], wanted: list[str] | None) -> list[Conversation]:
    """The conversations named in ``wanted`` (sample ids such as ``conv-26``), in the given order; all when empty."""
    if not wanted:
        return convs
    by_id = {c.sample_id: c for c in convs}
    missing = [w for w in wanted if w not in by_id]
    if missing:
        raise LocomoDataError(f"unknown conversation {', '.join(missing)} (loaded: {', '.join(by_id)})")
    return [by_id[w] for w in wanted]
