"""LongMemEval questions as typed records: the models (this part), the streaming loader and the path resolver.

One LongMemEval file is a JSON array of question objects; each question carries its own haystack (a list of
dated sessions, each a list of ``{"role", "content"}`` turns, evidence sessions' turns with a boolean
``has_answer``). The models below mirror that schema field for field (see ``docs/longmemeval.md`` for what each
field means); the loader (:func:`iter_questions`) turns a file into a stream of :class:`LmeQuestion`, one at a
time, so memory stays bounded whatever the file's size.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

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


# ------------------------------------------------------------------------------------------------ the loader
_REQUIRED = tuple(f for f in FIELDS if f != "answer_session_ids")
"""The fields a question must have: every released field but ``answer_session_ids`` (no official code reads it)."""


@dataclass
class LoadStats:
    """What :func:`iter_questions` saw, filled while it streams (counts are over the questions it yielded).

    Every count here is a lenient rule's trace: something the loader accepted without failing, so that a check or a
    results file can say how much of it there was."""

    questions: int = 0
    """Questions yielded (after the ``types`` filter and the ``limit``)."""
    read: int = 0
    """Questions parsed, including those the ``types`` filter passed over."""
    question_types: Counter = field(default_factory=Counter)
    unknown_types: Counter = field(default_factory=Counter)
    """``question_type`` values outside :data:`QUESTION_TYPES` (kept: the retrieval protocol does not read it)."""
    unknown_fields: Counter = field(default_factory=Counter)
    """Keys beyond :data:`FIELDS`, by name (ignored)."""
    answer_as_number: int = 0
    answer_session_ids_absent: int = 0
    answer_session_ids_not_a_list: int = 0
    """``answer_session_ids`` present but not a list of strings (read as absent)."""
    bad_dates: int = 0
    """``question_date`` and ``haystack_dates`` entries that do not parse with :data:`DATE_FORMAT`."""
    other_roles: Counter = field(default_factory=Counter)
    """Turn roles other than ``user`` and ``assistant`` (kept; the official corpus reads only user turns)."""
    assistant_evidence_turns_without_has_answer: int = 0
    """Assistant turns of evidence sessions without a boolean ``has_answer`` (no official code reads them)."""
    non_boolean_has_answer: int = 0
    """``has_answer`` values that are not booleans on turns the official code does not read (read as absent)."""
    duplicate_question_ids: Counter = field(default_factory=Counter)
    """Question ids met again later in the file, with the number of extra occurrences (each is kept)."""
    bytes_read: int = 0
    """Bytes of the file the parser has taken so far (a progress bar over a big file reads it)."""


def _qname(qid: Any, index: int) -> str:
    return f"question {qid}" if isinstance(qid, str) and qid else f"question #{index}"


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int | float):
        return "a number"
    if isinstance(v, str):
        return "text"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__


@functools.lru_cache(maxsize=65536)
def parse_date(text: str) -> datetime | None:
    """``text`` read with :data:`DATE_FORMAT`, or ``None`` when it does not parse (the loader counts, never fails:
    the official retrieval code does not parse dates)."""
    try:
        return datetime.strptime(text, DATE_FORMAT)
    except (TypeError, ValueError):
        return None


def parse_question(obj: Any, *, source: str, index: int, stats: LoadStats | None = None) -> LmeQuestion:
    """One question object of a LongMemEval file as an :class:`LmeQuestion`, by the loader's rules.

    Strict where the official code depends on a field (raises :class:`LongMemEvalDataError`, one line naming
    ``source``, the question id (``#index`` when the id itself is missing or not text) and the field): a missing
    required field, a field of the wrong type, ``haystack_session_ids`` / ``haystack_dates`` / ``haystack_sessions``
    of different lengths, a turn that is not an object with text ``role`` and ``content``, and a user turn of an
    evidence session (an id containing ``answer``) without a boolean ``has_answer`` (the official code fails there).

    Lenient where it does not (counted in ``stats`` when given): unknown fields (ignored, named in
    ``unknown_fields``), ``answer_session_ids`` absent or not a list of text (read as absent), ``answer`` as a
    number (its ``str``), ``has_answer`` on filler turns (kept), a non-boolean ``has_answer`` where no official
    code reads it (read as absent), assistant turns of evidence sessions without ``has_answer``, blank turns,
    roles other than user/assistant, dates that do not parse, an unknown ``question_type`` and a session id
    listed twice (both occurrences kept, in file order)."""
    st = stats if stats is not None else LoadStats()
    if not isinstance(obj, dict):
        raise LongMemEvalDataError(f"{source}: question #{index}: not an object (found {_kind(obj)})")
    qid = obj.get("question_id")
    where = f"{source}: {_qname(qid, index)}"
    if "question_id" not in obj:
        raise LongMemEvalDataError(f"{where}: question_id: missing")
    if not isinstance(qid, str):
        raise LongMemEvalDataError(f"{where}: question_id: {_kind(qid)}, expected text")
    for name in _REQUIRED:
        if name not in obj:
            raise LongMemEvalDataError(f"{where}: {name}: missing")
    for name in ("question_type", "question", "question_date"):
        if not isinstance(obj[name], str):
            raise LongMemEvalDataError(f"{where}: {name}: {_kind(obj[name])}, expected text")
    answer = obj["answer"]
    if isinstance(answer, bool) or not isinstance(answer, str | int | float):
        raise LongMemEvalDataError(f"{where}: answer: {_kind(answer)}, expected text or a number")
    if not isinstance(answer, str):
        st.answer_as_number += 1
        answer = str(answer)
    ids, dates, sessions = obj["haystack_session_ids"], obj["haystack_dates"], obj["haystack_sessions"]
    for name, value in (("haystack_session_ids", ids), ("haystack_dates", dates), ("haystack_sessions", sessions)):
        if not isinstance(value, list):
            raise LongMemEvalDataError(f"{where}: {name}: {_kind(value)}, expected a list")
    if not len(ids) == len(dates) == len(sessions):
        raise LongMemEvalDataError(f"{where}: haystack_session_ids, haystack_dates, haystack_sessions: lists of "
                                   f"different lengths ({len(ids)}, {len(dates)}, {len(sessions)})")
    for j, sid in enumerate(ids):
        if not isinstance(sid, str):
            raise LongMemEvalDataError(f"{where}: haystack_session_ids[{j}]: {_kind(sid)}, expected text")
    for j, d in enumerate(dates):
        if not isinstance(d, str):
            raise LongMemEvalDataError(f"{where}: haystack_dates[{j}]: {_kind(d)}, expected text")
        if parse_date(d) is None:
            st.bad_dates += 1
    if parse_date(obj["question_date"]) is None:
        st.bad_dates += 1
    out_sessions: list[LmeSession] = []
    for j, (sid, date, sess) in enumerate(zip(ids, dates, sessions, strict=True)):
        if not isinstance(sess, list):
            raise LongMemEvalDataError(f"{where}: haystack_sessions[{j}] (session {sid}): {_kind(sess)}, "
                                       "expected a list of turns")
        evidence = "answer" in sid
        turns: list[LmeTurn] = []
        for i, t in enumerate(sess):
            at = f"{where}: haystack_sessions[{j}][{i}] (session {sid}, turn {i + 1})"
            if not isinstance(t, dict):
                raise LongMemEvalDataError(f"{at}: {_kind(t)}, expected a turn object")
            role, content = t.get("role"), t.get("content")
            if not isinstance(role, str):
                raise LongMemEvalDataError(f"{at}: role: {'missing' if 'role' not in t else _kind(role)}, "
                                           "expected text")
            if not isinstance(content, str):
                raise LongMemEvalDataError(f"{at}: content: {'missing' if 'content' not in t else _kind(content)}, "
                                           "expected text")
            has = t.get("has_answer")
            if role not in ("user", "assistant"):
                st.other_roles[role] += 1
            if not isinstance(has, bool):
                if evidence and role == "user":
                    raise LongMemEvalDataError(
                        f"{at}: has_answer: {'missing' if 'has_answer' not in t else _kind(has)} on a user turn of "
                        "an evidence session, expected a boolean (the official retrieval code fails there)")
                if evidence and role == "assistant":
                    st.assistant_evidence_turns_without_has_answer += 1
                elif "has_answer" in t:
                    st.non_boolean_has_answer += 1
                has = None
            turns.append(LmeTurn.model_construct(role=role, content=content, has_answer=has))
        out_sessions.append(LmeSession.model_construct(session_id=sid, date=date, turns=turns, position=j))
    asids = obj.get("answer_session_ids")
    if "answer_session_ids" not in obj:
        st.answer_session_ids_absent += 1
    elif not (isinstance(asids, list) and all(isinstance(a, str) for a in asids)):
        st.answer_session_ids_not_a_list += 1
        asids = None
    unknown = [k for k in obj if k not in FIELDS]
    st.unknown_fields.update(unknown)
    qtype = obj["question_type"]
    if qtype not in QUESTION_TYPES:
        st.unknown_types[qtype] += 1
    return LmeQuestion.model_construct(
        question_id=qid, question_type=qtype, question=obj["question"], answer=answer,
        question_date=obj["question_date"], sessions=out_sessions, answer_session_ids=asids,
        unknown_fields=unknown, source=source, index=index)


class _CountingReader:
    """A binary file that remembers how many bytes the parser has taken (to place a syntax error in the file)."""

    def __init__(self, fh: BinaryIO, stats: LoadStats) -> None:
        self._fh = fh
        self._stats = stats
        self.consumed = 0
        self.last = 0

    def read(self, n: int = -1) -> bytes:
        data = self._fh.read(n)
        self.last = len(data)
        self.consumed += len(data)
        self._stats.bytes_read = self.consumed
        return data


def _syntax_line(source: str, exc: Exception, reader: _CountingReader) -> str:
    """ijson's multi-line message as one line, placed within the bytes the parser had read (the yajl2 C backend's
    messages and the pure-Python backend's, which ijson falls back to without the C library)."""
    text = str(exc)
    if text.startswith(("b'", 'b"')):
        text = text[2:]
    first = text.replace("\\n", "\n").splitlines()[0].strip() if text.strip() else type(exc).__name__
    lo, hi = reader.consumed - reader.last, reader.consumed
    span = f"at byte {hi}" if lo == hi else f"within bytes {lo}-{hi}"
    if "UTF8" in first or "UTF-8" in first or "codec can't decode" in first:
        return f"{source}: not UTF-8 text ({first.rstrip('.')}, {span})"
    if "premature EOF" in first or "Incomplete JSON" in first:  # the C backend's words, then the Python one's
        return f"{source}: not complete JSON: the file ends inside the array ({first}, {span}); a truncated copy?"
    return f"{source}: not valid JSON ({first}, {span})"


def _check_start(fh: BinaryIO, source: str) -> None:
    """The file must open a JSON array (after white space): anything else is one line saying what it holds."""
    head = fh.read(4096)
    fh.seek(0)
    if head.startswith(b"\xef\xbb\xbf"):
        raise LongMemEvalDataError(f"{source}: starts with a UTF-8 byte order mark, which JSON readers (the "
                                   "official code's json.load among them) refuse; save the file without it")
    stripped = head.lstrip(b" \t\r\n")
    if not stripped:
        raise LongMemEvalDataError(f"{source}: empty (expected a JSON array of question objects)")
    if stripped[:1] != b"[":
        what = "a JSON object" if stripped[:1] == b"{" else "not a JSON array"
        raise LongMemEvalDataError(f"{source}: the top level is {what}; a LongMemEval file is one JSON array of "
                                   "question objects")


def iter_questions(path: Path | str, *, stats: LoadStats | None = None, limit: int | None = None,
                   types: Sequence[str] | None = None) -> Iterator[LmeQuestion]:
    """Stream the questions of a LongMemEval file in file order, one in memory at a time (ijson), by
    :func:`parse_question`'s rules.

    ``types`` keeps only those question types (an unknown name is a one-line ``ValueError`` listing
    :data:`QUESTION_TYPES`, raised here, before any reading); ``limit`` counts the questions yielded after that
    filter, and reading stops once it is reached (the rest of the file is not parsed). A question id met again
    later in the file is kept (the official retrieval code scores every occurrence) and counted in
    ``stats.duplicate_question_ids``. Input problems are :class:`LongMemEvalDataError`, one line each."""
    if types is not None:
        bad = [t for t in types if t not in QUESTION_TYPES]
        if bad:
            raise ValueError(f"unknown question type {bad[0]!r}; choose from {', '.join(QUESTION_TYPES)}")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be 0 or more, got {limit}")
    return _stream(Path(path), stats if stats is not None else LoadStats(), limit,
                   frozenset(types) if types is not None else None)


def count_questions(path: Path | str, types: Sequence[str] | None = None) -> int | None:
    """How many questions (of ``types``, when given) the file holds, by one streaming pass that keeps only each
    question's type (the progress bar's total for a file that is no known release); ``None`` when the file cannot
    be read that way (the run itself then reports the problem, with the loader's one-line error)."""
    import ijson

    wanted = frozenset(types) if types else None
    try:
        with open(path, "rb") as fh:
            return sum(1 for t in ijson.items(fh, "item.question_type")
                       if wanted is None or t in wanted)
    except (OSError, ValueError, ijson.JSONError):
        return None


def _stream(path: Path, st: LoadStats, limit: int | None, types: frozenset[str] | None) -> Iterator[LmeQuestion]:
    import ijson

    source = str(path)
    if limit == 0:
        return
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed in the finally below (a generator may be abandoned)
    except OSError as exc:
        raise LongMemEvalDataError(f"{source}: cannot read ({exc.strerror or exc})") from None
    seen: set[str] = set()
    try:
        _check_start(fh, source)
        reader = _CountingReader(fh, st)
        items = ijson.items(reader, "item", use_float=True)
        index = 0
        while True:
            try:
                obj = next(items)
            except StopIteration:
                return
            except ijson.JSONError as exc:
                raise LongMemEvalDataError(_syntax_line(source, exc, reader)) from None
            except UnicodeDecodeError as exc:
                raise LongMemEvalDataError(f"{source}: not UTF-8 text ({exc.reason}, within bytes "
                                           f"{reader.consumed - reader.last}-{reader.consumed})") from None
            i = index
            index += 1
            st.read += 1
            if types is not None and isinstance(obj, dict) and obj.get("question_type") not in types:
                continue
            q = parse_question(obj, source=source, index=i, stats=st)
            if q.question_id in seen:
                st.duplicate_question_ids[q.question_id] += 1
            seen.add(q.question_id)
            st.questions += 1
            st.question_types[q.question_type] += 1
            yield q
            if limit is not None and st.questions >= limit:
                return
    finally:
        fh.close()


# ------------------------------------------------------------------------------------ releases and the resolver
RELEASES: dict[str, tuple[str, int]] = {
    "821a2034d219ab45846873dd14c14f12cfe7776e73527a483f9dac095d38620c":
        ("LongMemEval oracle, cleaned release (byte-identical in the original release)", 15_388_478),
    "d6f21ea9d60a0d56f34a05b609c79c88a451d2ae03597821ea3d5a9678c3a442": ("LongMemEval S, cleaned release",
                                                                          277_383_467),
    "9d79e5524794a2e6900a3aa9cb7d9152c5a3e8319c9a87c25494ba1eacee495f": ("LongMemEval M, cleaned release",
                                                                          2_737_100_077),
    "08d8dad4be43ee2049a22ff5674eb86725d0ce5ff434cde2627e5e8e7e117894": ("LongMemEval S, original release",
                                                                          278_025_796),
    "fb5413e3b077c62927daab794836991a2fcfa61ceacab57dc679fb02daaff2d9": ("LongMemEval M, original release",
                                                                          2_745_274_681),
}
"""Every published LongMemEval file by sha256: its name and byte size (the spec's table: cleaned revision
98d7416, original revision 2ec2a55)."""


def release_of(path: Path | str, *, on_bytes: Callable[[int], None] | None = None) -> str | None:
    """The published release ``path`` is (``"LongMemEval S, cleaned release"``), by the sha256 of its bytes, or
    ``None`` for any other file. A file whose size is no release's is not read at all; otherwise the hash is
    streamed and cached in-process by (path, size, mtime) (:func:`harness.datafetch.sha256_of`)."""
    from harness.datafetch import sha256_of

    p = Path(path)
    if p.stat().st_size not in {size for _, size in RELEASES.values()}:
        return None
    hit = RELEASES.get(sha256_of(p, on_bytes))
    return hit[0] if hit else None


SIDECAR_SUFFIX = ".generator.json"
"""A generated file's description lies beside it as ``<file>.generator.json`` (``benchmarks.worlds.longmemeval``
writes it, recording the file's byte size and sha256)."""


def sidecar_path(path: Path | str) -> Path:
    """Where the generator's description of ``path`` lies: ``<file>.generator.json`` beside it."""
    p = Path(path)
    return p.with_name(p.name + SIDECAR_SUFFIX)


def synthetic_label(description: dict[str, Any]) -> str:
    """The results label of a generated file: ``data: synthetic, <generator> seed <S>``."""
    return f"data: synthetic, {description.get('generator')} seed {description.get('seed')}"


def generator_description(path: Path | str, *, on_bytes: Callable[[int], None] | None = None
                          ) -> tuple[dict[str, Any] | None, str | None]:
    """The generator's description of ``path`` when its sidecar vouches for these very bytes, else a warning line
    when a sidecar is there but does not: ``(description, None)``, ``(None, warning)``, or ``(None, None)`` when
    there is no sidecar. A sidecar is never taken on trust: it counts only when it is a JSON object naming its
    generator and recording the file's byte size and sha256. The size is compared first (no read); the sha256
    through :func:`harness.datafetch.sha256_of` (once per process while the file is unchanged: files are GBs)."""
    from harness.datafetch import sha256_of

    p = Path(path)
    side = sidecar_path(p)
    if not side.is_file():
        return None, None
    why = None
    try:
        desc = json.loads(side.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        desc, why = None, f"cannot be read ({type(exc).__name__})"
    if why is None and not (isinstance(desc, dict) and isinstance(desc.get("generator"), str)):
        why = "names no generator"
    elif why is None and not (isinstance(desc.get("bytes"), int) and isinstance(desc.get("sha256"), str)):
        why = "records no byte size and sha256"
    elif why is None and desc["bytes"] != p.stat().st_size:
        why = f"records {desc['bytes']:,} bytes, the file has {p.stat().st_size:,}"
    elif why is None and desc["sha256"] != sha256_of(p, on_bytes):
        why = "records another sha256 than the file's"
    if why is not None:
        return None, f"{side.name} does not describe {p.name} (it {why}): not labelled synthetic"
    return desc, None


def data_label(path: Path | str, *, on_bytes: Callable[[int], None] | None = None) -> dict[str, Any]:
    """What ``path`` is, the one function every command that names LongMemEval data asks (``memsim data check``,
    both protocols of ``memsim bench longmemeval``, the claims):

    - ``release``: the published release by sha256 (:func:`release_of`), else ``None``;
    - ``generator``: the generator's description when a sidecar vouches for the file's size and sha256
      (:func:`generator_description`), else ``None``; ``synthetic`` whether it did;
    - ``line``: one line naming the file and what it is (``"<file>: LongMemEval S, cleaned release (sha256 ok)"``,
      ``"<file>: generated by <generator> seed <S> ..."``, ``"<file>: not a published release (sha256 ...)..."``);
    - ``label``: the data line of a results JSON and page (``data: synthetic, <generator> seed <S>`` for a
      generated file, else ``data: <line>``);
    - ``warning``: one line when a sidecar is there but does not describe the file, else ``None``."""
    from harness.datafetch import sha256_of

    p = Path(path)
    release = release_of(p, on_bytes=on_bytes)
    desc, warning = generator_description(p, on_bytes=on_bytes) if release is None else (None, None)
    if release is not None:
        line = f"{p.name}: {release} (sha256 ok)"
        if sidecar_path(p).is_file():
            warning = f"{sidecar_path(p).name} does not describe {p.name} (a published release): ignored"
    elif desc is not None:
        line = (f"{p.name}: generated by {desc['generator']} seed {desc.get('seed')}, not a published release "
                f"({sidecar_path(p).name} matches the file's {p.stat().st_size} bytes and sha256)")
    else:
        line = (f"{p.name}: not a published release (sha256 {sha256_of(p, on_bytes)[:16]}..., "
                f"{p.stat().st_size} bytes); read as LongMemEval-format data")
    label = synthetic_label(desc) if desc is not None else f"data: {line}"
    return {"file": p.name, "synthetic": desc is not None, "generator": desc, "release": release, "line": line,
            "label": label, "warning": warning}


def describe_data(path: Path | str, *, on_bytes: Callable[[int], None] | None = None) -> str:
    """One line naming what ``path`` is (``data_label(path)["line"]``): ``"longmemeval_s_cleaned.json: LongMemEval
    S, cleaned release (sha256 ok)"``, a generated file whose sidecar matches it, or ``"<file>: not a published
    release (sha256 <first 16 hex>, <size> bytes); read as LongMemEval-format data"`` (data a user made is
    accepted as it is)."""
    return data_label(path, on_bytes=on_bytes)["line"]


def resolve_longmemeval_path(cli_path: Path | str | None = None) -> Path:
    """The LongMemEval file to read: ``cli_path`` (``--data``), ``$MEMSIM_LONGMEMEVAL_DATA``, or the fetched copy
    (S cleaned, S original, M, oracle: the first present). Raises :class:`LongMemEvalDataError` (one line) when a
    given path is missing or a folder, or nothing is found (the message says how to fetch)."""
    from harness.datapaths import DataPathError, resolve_longmemeval

    try:
        return resolve_longmemeval(cli_path)
    except DataPathError as exc:
        raise LongMemEvalDataError(str(exc)) from None


def find_longmemeval_path(explicit: Path | str | None = None) -> Path | None:
    """Like :func:`resolve_longmemeval_path`, but ``None`` when nothing is given, set or fetched (claims skip
    then). A path given or set that does not exist is still an error, never a skip: a typo must not look like
    absent data."""
    from harness.datapaths import DataPathError, find_longmemeval

    try:
        return find_longmemeval(explicit)
    except DataPathError as exc:
        raise LongMemEvalDataError(str(exc)) from None
