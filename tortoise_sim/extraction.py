"""Extraction model seam (spec §1.5): ``ScriptedExtractor`` (default), ``MarkerExtractor`` [SIM], ``DspyExtractor``,
and record/replay [SIM]: ``RecordingExtractor`` (wraps any extractor and keeps what it returned, per session) and
``ReplayExtractor`` (returns recorded outputs in place of a model).

An extractor turns the windowed, redacted turns into a draft v2 payload (§3.6). The deterministic admission
stage (``execute_embed``) is simulator code in ``capture.py`` shared by all extractors.

Record/replay. ``RecordedExtractions`` is the typed form of a recording: ``route`` (the route of the extractor
whose outputs these are) and ``sessions`` (session id -> ``RecordedSession``: the draft ``payload`` and, when the
recorder saw them, ``turns_sha256`` = ``turns_digest`` of the turns it was given). ``load_recorded(path)`` reads
one from a JSON file; any problem is one ``RecordedExtractionError`` line naming the file.
``ReplayExtractor`` is deterministic and offline: every ``extract`` returns a fresh copy of the recorded payload
of that session (so admission can never alter the recording), with ``session_id`` set to the session captured;
the turns are not read except for the digest check. A session with no recording raises ``RecordingMissing``
(capture is fail-open: the turns are kept, ``extraction_mode="error"``); ``on_missing="empty"`` replays an empty
payload instead. When the recording has a turn digest and ``check_turns`` is on, different turns raise
``RecordingMismatch`` the same way. ``RecordingExtractor`` never changes a run: it returns exactly what the inner
extractor returned and lets its exceptions through; a payload that is not a JSON object of the recorded shape is
not recorded (the reason is kept in ``unrecordable``). A session captured twice keeps its last payload.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .durable import after_write
from .errors import TortoiseError
from .text import pt_id, significant_tokens

__all__ = [
    "Extractor", "ScriptedExtractor", "MarkerExtractor", "DspyExtractor", "SearchFn", "RecordedPoint",
    "RecordedPayload", "RecordedSession", "RecordedExtractions", "RecordedExtractionError", "RecordingMissing",
    "RecordingMismatch", "ReplayExtractor", "RecordingExtractor", "load_recorded", "turns_digest",
    "RECORD_STEP",
]

SearchFn = Callable[[str, int], list[dict[str, Any]]]


class Extractor(Protocol):
    route: str

    def extract(self, turns: list[dict], session_id: str, search: SearchFn) -> dict: ...


_POINT_RE = re.compile(r"^(decision|statement|observation|hypothesis|plan|goal)\s*:\s*(.+)$", re.I)
_ENTITY_RE = re.compile(r"^entity\s*:\s*(.+)$", re.I)
_OP_RE = re.compile(r"^(impl|nand)\s*:\s*(\d+)\s*(->|<->)\s*(\d+)$", re.I)
_SUPERSEDE_RE = re.compile(r"^supersede\s*:\s*(\S+)\s*=>\s*(\d+)$", re.I)


class MarkerExtractor:
    """[SIM] line markers: ``decision: …`` (and statement/observation/hypothesis/plan/goal), ``entity: X``,
    ``impl|nand: n -> m`` / ``n <-> m`` (1-based point numbers), ``supersede: <ref> => n``."""

    route = "scripted"

    def extract(self, turns: list[dict], session_id: str, search: SearchFn | None = None) -> dict:
        points: list[dict[str, Any]] = []
        entities: list[dict[str, Any]] = []
        ops: list[tuple[str, int, str, int]] = []
        sups: list[tuple[str, int]] = []
        for ti, turn in enumerate(turns):
            lines = [ln.strip() for ln in str(turn.get("content") or "").splitlines()]
            names = [m.group(1).strip() for ln in lines if (m := _ENTITY_RE.match(ln))]
            for ln in lines:
                if m := _POINT_RE.match(ln):
                    content = m.group(2).strip()
                    points.append({
                        "id": pt_id(content), "content": content, "pointKind": m.group(1).lower(),
                        "reason": "NEW", "confidence": 0.5, "c_cal": 0.5, "about_entities": list(names),
                        "source_ref": f"turn:{ti}", "quote": ln[:200], "status": "draft",
                        "search_keys": significant_tokens(content)[:4], "source_turn_id": ti,
                    })
                elif m := _ENTITY_RE.match(ln):
                    name = m.group(1).strip()
                    if all(e["name"] != name for e in entities):
                        entities.append({"name": name, "kind": "core:other", "passes_frequency_gate": True})
                elif m := _OP_RE.match(ln):
                    ops.append((m.group(1).upper(), int(m.group(2)), m.group(3), int(m.group(4))))
                elif m := _SUPERSEDE_RE.match(ln):
                    sups.append((m.group(1), int(m.group(2))))
        operators = []
        for op_type, n, arrow, k in ops:
            if 1 <= n <= len(points) and 1 <= k <= len(points):
                op: dict[str, Any] = {"src": points[n - 1]["id"], "dst": points[k - 1]["id"], "op_type": op_type}
                if arrow == "<->":
                    op["direction"] = "bidirectional"
                operators.append(op)
        supersessions = [
            {"superseded": ref, "supersedes_by": points[n - 1]["id"], "evidence": "marker"}
            for ref, n in sups if 1 <= n <= len(points)
        ]
        return {"session_id": session_id, "extractor": "marker", "summary": "", "entities": entities,
                "events": [], "points": points, "operators": operators, "supersessions": supersessions}


class ScriptedExtractor:
    """Default offline extractor: ``script`` maps session id -> payload dict or ``callable(turns) -> payload``;
    sessions not in the script fall back to ``MarkerExtractor``. ``calls`` records every input it saw."""

    route = "scripted"

    def __init__(self, script: dict[str, Any] | None = None) -> None:
        self.script = dict(script or {})
        self.calls: list[dict[str, Any]] = []
        self._marker = MarkerExtractor()

    def extract(self, turns: list[dict], session_id: str, search: SearchFn | None = None) -> dict:
        self.calls.append({"session_id": session_id, "turns": [dict(t) for t in turns]})
        entry = self.script.get(session_id)
        if entry is None:
            return self._marker.extract(turns, session_id, search)
        if callable(entry):
            return entry(turns)
        return json.loads(json.dumps(entry))


class DspyExtractor:
    """Optional seam for a real (or scripted offline) ``dspy.LM``: one ``dspy.Predict`` over the transcript
    returning the v2 payload as JSON. ``route = "llm:<lm.model>"``."""

    def __init__(self, lm: Any) -> None:
        self.lm = lm
        self.route = f"llm:{getattr(lm, 'model', 'unknown')}"

    def extract(self, turns: list[dict], session_id: str, search: SearchFn | None = None) -> dict:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import dspy

        class ExtractPayload(dspy.Signature):
            """Read an agent session transcript and propose graph knowledge: entities, points (decisions,
            statements, observations, hypotheses, plans, goals), IMPL/NAND operators between points, and
            supersessions, as a JSON object with keys entities, events, points, operators, supersessions."""

            session_id: str = dspy.InputField()
            transcript: str = dspy.InputField(desc="turns as '[role] content' lines")
            payload_json: str = dspy.OutputField(desc="the v2 payload as one JSON object")

        transcript = "\n".join(f"[{t.get('role')}] {t.get('content')}" for t in turns)
        with dspy.context(lm=self.lm):
            pred = dspy.Predict(ExtractPayload)(session_id=session_id, transcript=transcript)
        text = str(pred.payload_json).strip()
        if text.startswith("```"):
            text = text.strip("`").removeprefix("json").strip()
        payload = json.loads(text)
        if not isinstance(payload, dict):
            raise ValueError("extractor payload is not a JSON object")
        payload.setdefault("session_id", session_id)
        payload.setdefault("extractor", self.route)
        return payload


# ------------------------------------------------------------------------------------------ record / replay [SIM]
RECORD_STEP = "extraction.record"
RECORDED_FORMAT = "tortoise-recorded-extractions"


class RecordedExtractionError(TortoiseError, ValueError):
    """A recorded-extractions file that cannot be used, as one line naming the file."""


class RecordingMissing(TortoiseError, KeyError):
    """``ReplayExtractor.extract`` for a session the recording does not hold (``on_missing="error"``)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "no recording"


class RecordingMismatch(TortoiseError, ValueError):
    """The turns handed to ``ReplayExtractor.extract`` differ from the ones the recording was made from."""


class RecordedPoint(BaseModel):
    """One proposed point of a recorded payload: ``content`` is required, every other §3.6 key is kept as given
    (admission repairs or drops what it must, exactly as for a live extractor)."""

    model_config = ConfigDict(extra="allow")
    content: str


class RecordedPayload(BaseModel):
    """One session's recorded draft v2 payload (spec §3.6); keys beyond these are kept as given."""

    model_config = ConfigDict(extra="allow")
    entities: list[dict[str, Any]] = Field(default_factory=list)
    events: list[dict[str, Any]] = Field(default_factory=list)
    points: list[RecordedPoint] = Field(default_factory=list)
    operators: list[dict[str, Any]] = Field(default_factory=list)
    supersessions: list[dict[str, Any]] = Field(default_factory=list)
    summary: str | None = ""


class RecordedSession(BaseModel):
    """What one extractor call returned for a session; ``turns_sha256`` is ``turns_digest`` of its input."""

    model_config = ConfigDict(extra="forbid")
    payload: RecordedPayload
    turns_sha256: str | None = None


class RecordedExtractions(BaseModel):
    """A recording: the producing extractor's ``route`` and one ``RecordedSession`` per session id."""

    model_config = ConfigDict(extra="forbid")
    format: Literal["tortoise-recorded-extractions"] = RECORDED_FORMAT
    version: Literal[1] = 1
    route: str = "recorded"
    sessions: dict[str, RecordedSession] = Field(default_factory=dict)


def turns_digest(turns: list[dict]) -> str:
    """sha256 of the ``[role, content]`` pairs an extractor was given (JSON, in order)."""
    pairs = [[str(t.get("role")), str(t.get("content") or "")] for t in turns]
    return hashlib.sha256(json.dumps(pairs, ensure_ascii=False).encode("utf-8")).hexdigest()


def _validation_line(exc: ValidationError) -> str:
    errs = exc.errors()
    first = errs[0]
    where = ".".join(str(x) for x in first.get("loc", ())) or "top level"
    more = f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""
    return f"{where}: {first.get('msg', 'invalid')}{more}"


def load_recorded(path: str | os.PathLike[str]) -> RecordedExtractions:
    """Read a recording written by ``RecordingExtractor.save`` (or by hand in the same shape)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecordedExtractionError(f"{p}: no such file") from None
    except UnicodeDecodeError as exc:
        raise RecordedExtractionError(f"{p}: not UTF-8 text ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise RecordedExtractionError(f"{p}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except (ValueError, RecursionError) as exc:
        raise RecordedExtractionError(f"{p}: not loadable JSON ({type(exc).__name__})") from None
    except OSError as exc:
        raise RecordedExtractionError(f"{p}: cannot read ({exc.strerror})") from None
    if not isinstance(data, dict):
        raise RecordedExtractionError(f"{p}: expected a JSON object with 'sessions', got {type(data).__name__}")
    try:
        return RecordedExtractions.model_validate(data)
    except ValidationError as exc:
        raise RecordedExtractionError(f"{p}: {_validation_line(exc)}") from None


class ReplayExtractor:
    """Recorded outputs in place of a model (see the module docstring). ``route = "replay:<recorded route>"``
    unless given; ``calls`` lists ``{session_id, turns, replayed}`` per call."""

    def __init__(self, recorded: RecordedExtractions | Mapping[str, Any], *,
                 on_missing: Literal["error", "empty"] = "error", check_turns: bool = True,
                 route: str | None = None) -> None:
        if on_missing not in ("error", "empty"):
            raise ValueError(f"on_missing must be 'error' or 'empty', got {on_missing!r}")
        if not isinstance(recorded, RecordedExtractions):
            recorded = RecordedExtractions(sessions={
                sid: v if isinstance(v, RecordedSession) else RecordedSession(payload=v)
                for sid, v in recorded.items()})
        self.recorded = recorded
        self.on_missing = on_missing
        self.check_turns = check_turns
        self.route = route or f"replay:{recorded.route}"
        self.calls: list[dict[str, Any]] = []

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], **kw: Any) -> ReplayExtractor:
        """``ReplayExtractor(load_recorded(path), **kw)``."""
        return cls(load_recorded(path), **kw)

    def extract(self, turns: list[dict], session_id: str, search: SearchFn | None = None) -> dict:
        rec = self.recorded.sessions.get(session_id)
        self.calls.append({"session_id": session_id, "turns": len(turns), "replayed": rec is not None})
        if rec is None:
            if self.on_missing == "error":
                raise RecordingMissing(f"no recorded extraction for session {session_id!r}")
            payload = RecordedPayload().model_dump(mode="json")
        else:
            if self.check_turns and rec.turns_sha256 is not None and rec.turns_sha256 != turns_digest(turns):
                raise RecordingMismatch(f"session {session_id!r}: the turns differ from the recorded ones")
            payload = rec.payload.model_dump(mode="json")
        payload["session_id"] = session_id
        payload.setdefault("extractor", self.route)
        return payload


class RecordingExtractor:
    """Wraps any extractor; records what it returned per session (see the module docstring). ``route`` is the
    inner extractor's, so a recorded capture reads exactly like an unrecorded one."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.sessions: dict[str, RecordedSession] = {}
        self.unrecordable: dict[str, str] = {}

    @property
    def route(self) -> str:
        return str(getattr(self.inner, "route", "scripted"))

    def extract(self, turns: list[dict], session_id: str, search: SearchFn | None = None) -> dict:
        digest = turns_digest(turns)
        payload = self.inner.extract(turns, session_id, search)
        try:
            copy = json.loads(json.dumps(payload, ensure_ascii=False))
            if not isinstance(copy, dict):
                raise ValueError(f"payload is {type(copy).__name__}, not an object")
            self.sessions[session_id] = RecordedSession(payload=RecordedPayload.model_validate(copy),
                                                        turns_sha256=digest)
            self.unrecordable.pop(session_id, None)
        except ValidationError as exc:
            self.sessions.pop(session_id, None)
            self.unrecordable[session_id] = _validation_line(exc)
        except (TypeError, ValueError) as exc:
            self.sessions.pop(session_id, None)
            self.unrecordable[session_id] = str(exc)
        return payload

    def recorded(self) -> RecordedExtractions:
        """The recording so far (a copy)."""
        return RecordedExtractions(route=self.route, sessions={k: v.model_copy(deep=True)
                                                               for k, v in self.sessions.items()})

    def save(self, path: str | os.PathLike[str], *, fault_hook: Callable[[str], None] | None = None) -> Path:
        """Write the recording as JSON, atomically (temp file, fsync, rename): a crash leaves the old file or the
        new one, never half of one. Fault-hook step ``extraction.record`` before the write; ``after_write``
        reports ``extraction.record.tmp`` and ``extraction.record.replace``."""
        p = Path(path)
        data = (self.recorded().model_dump_json(indent=1) + "\n").encode("utf-8")
        if fault_hook is not None:
            fault_hook(RECORD_STEP)
        tmp = p.with_name(p.name + f".tmp{os.getpid()}")
        try:
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        after_write(fault_hook, RECORD_STEP + ".tmp", tmp, 0)
        os.replace(tmp, p)
        after_write(fault_hook, RECORD_STEP + ".replace", None, None)
        return p
