"""Checks of a user's data before memsim reads it: an AgentFly checkout, LoCoMo conversations, LongMemEval files.

Each check returns a :class:`FileReport` per file: how many rows it has, the shapes (key sets) of those rows, the
quirks found (things the simulators reproduce rather than repair, with the claim they relate to), and ``errors``
for anything that makes the file unusable. Nothing is modified.

AgentFly: the upstream repository keeps its case banks under ``memory/`` and the benchmark questions in
``data/deepresearcher.jsonl``; a flat folder that holds the same file names side by side is accepted too.

LoCoMo: a file or a folder of ``*.json`` files, each either the canonical list layout (``locomo10.json``: a list of
``{"sample_id", "conversation": {...}, "qa": [...]}``) or the per-conversation object layout (``speaker_a``,
``session_<n>``, ``qa`` at the top). When :func:`harness.workloads.locomo.load_locomo` is available the file is also
loaded through it, and a failure there is reported as an error. A folder holding the same conversation (sample id;
a per-conversation file without one is named by its file name, as the loader names it) in two files is refused on
the later file, as the loader refuses it; the same turns under two different sample ids are a quirk.

Every entry of a folder that the checks would look at gets a row, including an entry that is a directory (a
``*.json`` or ``*.jsonl`` name the loaders skip, or a known AgentFly file name that is a folder, which is an error:
the file is missing).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

AGENTFLY_FILES: dict[str, str] = {
    "memory.jsonl": "memory",
    "training_data.jsonl": "memory",
    "dummy_memo.jsonl": "memory",
    "deepresearcher.jsonl": "data",
}
"""Known AgentFly files and the checkout sub-folder each lives in upstream."""

DIRECTORY = "directory (not read)"
"""The ``kind`` of a row for a folder entry that is a directory where a data file could be."""

_DIA_ID = re.compile(r"^D(\d+):(\d+)$")
_SESSION_KEY = re.compile(r"^session_(\d+)$")


@dataclass
class FileReport:
    """What one check found in one file."""

    path: str
    kind: str
    rows: int = 0
    shapes: dict[str, int] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    quirks: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def usable(self) -> bool:
        return not self.errors

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"usable": self.usable}


# ------------------------------------------------------------------------------------------------------ AgentFly
def locate_agentfly(root: Path) -> dict[str, Path | None]:
    """Where each known AgentFly file is under ``root``: ``root/<sub>/<name>`` (a checkout) or ``root/<name>``."""
    found: dict[str, Path | None] = {}
    for name, sub in AGENTFLY_FILES.items():
        found[name] = next((p for p in (root / sub / name, root / name) if p.is_file()), None)
    return found


def _read_lines(path: Path, rep: FileReport) -> list[tuple[int, Any]]:
    """Every non-blank line parsed; malformed lines are recorded in ``facts['malformed_lines']``."""
    rows: list[tuple[int, Any]] = []
    malformed: list[int] = []
    blank = 0
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        rep.errors.append(f"not UTF-8 text ({exc.reason} at byte {exc.start})")
        return rows
    for ln, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            blank += 1
            continue
        try:
            rows.append((ln, json.loads(line)))
        except json.JSONDecodeError:
            malformed.append(ln)
    rep.rows = len(rows)
    rep.facts["blank_lines"] = blank
    rep.facts["malformed_lines"] = malformed[:20]
    rep.facts["malformed_count"] = len(malformed)
    shapes = Counter(",".join(sorted(o)) if isinstance(o, dict) else type(o).__name__ for _, o in rows)
    rep.shapes = dict(shapes.most_common())
    return rows


def _parses(text: Any) -> bool:
    if not isinstance(text, str):
        return False
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    return True


def _dicts(rows: list[tuple[int, Any]], rep: FileReport) -> list[tuple[int, dict[str, Any]]]:
    bad = [ln for ln, o in rows if not isinstance(o, dict)]
    if bad:
        rep.errors.append(f"line {bad[0]} is not a JSON object ({len(bad)} such line(s))")
    return [(ln, o) for ln, o in rows if isinstance(o, dict)]


def _strict_rows(path: Path, rep: FileReport, consequence: str) -> list[tuple[int, dict[str, Any]]]:
    """The file's JSON-object rows, for a reader that fails on a malformed line: the first one is an error
    followed by ``consequence``."""
    rows = _dicts(_read_lines(path, rep), rep)
    if rep.facts.get("malformed_count"):
        rep.errors.append(f"malformed JSON on line {rep.facts['malformed_lines'][0]}: {consequence}")
    return rows


def _error_if_empty(rep: FileReport, found: list[Any], message: str) -> None:
    """Nothing usable in the file is an error (``message``), unless an earlier error already explains it."""
    if not found and not rep.errors:
        rep.errors.append(message)


def _check_pm_pool(path: Path, rep: FileReport) -> None:
    rows = _strict_rows(path, rep, "the PM pool loader fails the whole load on one bad line (AGF-07)")
    no_case = [ln for ln, o in rows if o.get("case") is None]
    if no_case:
        rep.errors.append(f"line {no_case[0]} has no 'case' ({len(no_case)} row(s)); the PM pool loader rejects it")
    labels = Counter(str(o.get("case_label", "<missing>")) for _, o in rows)
    rep.facts["case_label"] = dict(labels)
    plan_json = sum(1 for _, o in rows if _parses(o.get("plan")))
    rep.facts["plans_that_parse_as_json"] = plan_json
    if plan_json < len(rows):
        rep.quirks.append(f"{len(rows) - plan_json} plan(s) are not JSON text; they are inserted into the prompt "
                          "as they are")
    dup = len(rows) - len({str(o.get("case")) for _, o in rows})
    if dup:
        rep.quirks.append(f"{dup} duplicate case question(s); each stays a separate case in the pool")
    _error_if_empty(rep, rows, "empty pool: the PM loader raises 'Pool is empty'")


def _check_training(path: Path, rep: FileReport) -> None:
    rows = _strict_rows(path, rep, "the trainer's reader fails on it")
    need = ("query", "case", "truth_label")
    missing = [ln for ln, o in rows if any(k not in o for k in need)]
    if missing:
        rep.errors.append(f"line {missing[0]} lacks one of {', '.join(need)} ({len(missing)} row(s))")
    truth = Counter(repr(o.get("truth_label")) for _, o in rows)
    rep.facts["truth_label"] = dict(truth)
    non_bool = sum(v for k, v in truth.items() if k not in ("True", "False"))
    if non_bool:
        rep.quirks.append(f"{non_bool} truth_label value(s) are not booleans")
    by_query: dict[str, set[str]] = {}
    for _, o in rows:
        by_query.setdefault(str(o.get("query")), set()).add(repr(o.get("truth_label")))
    const = sum(1 for v in by_query.values() if len(v) == 1)
    rep.facts["queries"] = len(by_query)
    rep.facts["queries_with_one_label"] = const
    if by_query and const == len(by_query):
        rep.quirks.append(f"every one of the {len(by_query)} queries has a single truth_label across its cases: the "
                          "label is the query's judgement, not the case's usefulness (AGF-09, AGF-22)")
    elif by_query:
        rep.quirks.append(f"{const} of {len(by_query)} queries have a single truth_label across their cases "
                          "(AGF-09, AGF-22)")
    _error_if_empty(rep, rows, "no training pairs")


def _check_np_bank(path: Path, rep: FileReport) -> None:
    from agentfly_sim.bank import extract_pairs

    rows = _dicts(_read_lines(path, rep), rep)
    if rep.facts.get("malformed_count"):
        rep.quirks.append(f"{rep.facts['malformed_count']} malformed line(s) (first: line "
                          f"{rep.facts['malformed_lines'][0]}): the NP loader warns and skips them, shifting the "
                          "indices of later cases (AGF-05)")
    items = [o for _, o in rows]
    pairs = extract_pairs(items)
    direct = sum(1 for o in items if "question" in o and "plan" in o)
    fallback = len(pairs) - direct
    rep.facts["extracted_pairs"] = len(pairs)
    rep.facts["reward"] = dict(Counter(repr(o.get("reward")) for o in items))
    if fallback:
        rep.quirks.append(f"{fallback} two-key row(s) without question/plan are read first key -> question "
                          "(AGF-05)")
    skipped = len(items) - len(pairs)
    if skipped:
        rep.quirks.append(f"{skipped} row(s) are skipped silently by the NP pair extraction (AGF-05)")
    _error_if_empty(rep, pairs, "no (question, plan) pair can be extracted: the NP bank is empty")


def _check_dataset(path: Path, rep: FileReport) -> None:
    rows = _dicts(_read_lines(path, rep), rep)
    if rep.facts.get("blank_lines") or rep.facts.get("malformed_count"):
        first = (rep.facts["malformed_lines"] or ["(blank)"])[0]
        rep.errors.append(f"{rep.facts['malformed_count']} malformed and {rep.facts['blank_lines']} blank line(s) "
                          f"(first malformed: {first}): the driver refuses to start on any of them")
    no_q = [ln for ln, o in rows if "question" not in o]
    if no_q:
        rep.errors.append(f"line {no_q[0]} has no 'question' ({len(no_q)} row(s))")
    qs = Counter(str(o.get("question")) for _, o in rows)
    dups = {q: n for q, n in qs.items() if n > 1}
    rep.facts["distinct_questions"] = len(qs)
    rep.facts["data_source"] = dict(Counter(str(o.get("data_source", "<missing>")) for _, o in rows).most_common())
    no_gt = sum(1 for _, o in rows if o.get("ground_truth") in (None, ""))
    if no_gt:
        rep.quirks.append(f"{no_gt} question(s) without ground_truth")
    if dups:
        differing = sum(1 for q in dups if len({json.dumps(o.get("ground_truth")) for _, o in rows
                                                if str(o.get("question")) == q}) > 1)
        rep.quirks.append(f"{len(dups)} question(s) occur more than once ({sum(dups.values()) - len(dups)} extra "
                          f"rows; {differing} with differing ground truths): the last occurrence's ground truth "
                          "wins and a finished question suppresses its repeats on restart (AGF-29)")
    splits = sum(1 for _, o in rows if "<|answer_split|>" in str(o.get("ground_truth", "")))
    if splits:
        rep.quirks.append(f"{splits} ground truth(s) hold several answers joined by <|answer_split|>")
    _error_if_empty(rep, rows, "no questions")


def _check_other(path: Path, rep: FileReport) -> None:
    _read_lines(path, rep)
    if rep.facts.get("malformed_count"):
        rep.quirks.append(f"{rep.facts['malformed_count']} malformed line(s)")


_CHECKS = {"memory.jsonl": ("PM case pool", _check_pm_pool),
           "training_data.jsonl": ("retriever training pairs", _check_training),
           "dummy_memo.jsonl": ("NP case bank", _check_np_bank),
           "deepresearcher.jsonl": ("benchmark questions", _check_dataset)}


def check_agentfly(root: Path) -> list[FileReport]:
    """Check an AgentFly checkout (or flat folder). A missing known file is reported as an error row."""
    root = Path(root)
    if not root.is_dir():
        return [FileReport(str(root), "AgentFly folder", errors=["not a directory"])]
    reports: list[FileReport] = []
    located = locate_agentfly(root)
    for name, path in located.items():
        kind, fn = _CHECKS[name]
        if path is None:
            sub = AGENTFLY_FILES[name]
            dirs = [p for p in (root / sub / name, root / name) if p.is_dir()]
            reports.append(FileReport(str(dirs[0] if dirs else root / sub / name), kind, errors=[
                "is a directory, not a file" if dirs else f"missing (looked for {sub}/{name} and {name})"]))
            continue
        rep = FileReport(str(path), kind)
        fn(path, rep)
        reports.append(rep)
    known = {p.resolve() for p in located.values() if p is not None}
    for extra in sorted({*root.glob("memory/*.jsonl"), *root.glob("*.jsonl")}):
        if extra.resolve() in known or (extra.name in AGENTFLY_FILES and extra.is_dir()):
            continue
        rep = FileReport(str(extra), DIRECTORY if extra.is_dir() else "other JSONL")
        if extra.is_dir():
            rep.quirks.append("a directory, not a file: nothing reads it")
        else:
            _check_other(extra, rep)
        reports.append(rep)
    return reports


# -------------------------------------------------------------------------------------------------------- LoCoMo
def _locomo_files(path: Path) -> list[Path]:
    """Every ``*.json`` entry of a folder (directories included: each gets a row), or the one file."""
    if path.is_dir():
        return sorted(path.glob("*.json"))
    return [path]


def _conversations(obj: Any) -> list[tuple[str, dict[str, Any], list[Any]]]:
    """``(sample_id, conversation mapping, qa list)`` per conversation in either layout; ValueError otherwise."""
    if isinstance(obj, list):
        out = []
        for i, item in enumerate(obj):
            if not isinstance(item, dict) or not isinstance(item.get("conversation"), dict):
                raise ValueError(f"item {i} of the list has no 'conversation' object")
            out.append((str(item.get("sample_id", f"#{i}")), item["conversation"], item.get("qa")))
        return out
    if isinstance(obj, dict) and "speaker_a" in obj:
        return [("", obj, obj.get("qa"))]
    if isinstance(obj, dict) and isinstance(obj.get("conversation"), dict):
        return [(str(obj.get("sample_id", "")), obj["conversation"], obj.get("qa"))]
    raise ValueError(f"neither LoCoMo layout: found {_json_shape(obj)}; expected a list of {{sample_id, "
                     "conversation, qa}} or an object with speaker_a, session_<n> and qa")


def _json_shape(obj: Any) -> str:
    """A few words on what a JSON value is: its type, and for an object its first keys."""
    if isinstance(obj, dict):
        keys = list(obj)
        shown = ", ".join(repr(k) for k in keys[:5]) + (f", +{len(keys) - 5} more" if len(keys) > 5 else "")
        return f"an object with keys {shown}" if keys else "an empty object"
    if isinstance(obj, list):
        return f"a list of {len(obj)} item(s)" if obj else "an empty list"
    return f"a JSON {type(obj).__name__} ({json.dumps(obj)[:40]})"


def _check_conversation(sample: str, conv: dict[str, Any], qa: Any, facts: dict[str, Any], quirks: Counter,
                        errors: list[str]) -> None:
    for key in ("speaker_a", "speaker_b"):
        if key not in conv:
            errors.append(f"{sample}: no '{key}'")
    sessions = sorted(int(m.group(1)) for k in conv if (m := _SESSION_KEY.match(k)))
    if not sessions:
        errors.append(f"{sample}: no session_<n> lists")
        return
    ids: set[str] = set()
    turns = 0
    for n in sessions:
        turns_n = conv[f"session_{n}"]
        if not isinstance(turns_n, list):
            errors.append(f"{sample}: session_{n} is not a list of turns")
            continue
        if f"session_{n}_date_time" not in conv:
            quirks["session without session_<n>_date_time"] += 1
        for t in turns_n:
            if not isinstance(t, dict) or not all(k in t for k in ("speaker", "dia_id", "text")):
                errors.append(f"{sample}: a turn of session_{n} lacks speaker, dia_id or text")
                return
            turns += 1
            ids.add(str(t["dia_id"]))
            if t.get("img_url") or t.get("blip_caption"):
                quirks["turn sharing a photo (caption kept beside the text)"] += 1
    if sessions != list(range(1, len(sessions) + 1)):
        quirks["session numbers with gaps"] += 1
    if not isinstance(qa, list):
        errors.append(f"{sample}: no 'qa' list")
        return
    cats: Counter = Counter()
    for q in qa:
        if not isinstance(q, dict) or "question" not in q:
            errors.append(f"{sample}: a qa item has no 'question'")
            return
        cats[str(q.get("category"))] += 1
        if q.get("category") == 5 and "answer" not in q:
            quirks["category 5 item with adversarial_answer instead of answer"] += 1
        elif "answer" not in q and "adversarial_answer" not in q:
            quirks["qa item without any answer"] += 1
        for ev in q.get("evidence") or []:
            parts = [p.strip() for p in re.split(r"[;,]", str(ev)) if p.strip()]
            if len(parts) > 1:
                quirks["evidence string holding several ids (split on ';')"] += 1
            for p in parts:
                if not _DIA_ID.match(p):
                    quirks["evidence entry that is not a dia_id"] += 1
                elif p not in ids:
                    quirks["evidence id naming no turn of the conversation"] += 1
    facts["conversations"] += 1
    facts["sessions"] += len(sessions)
    facts["turns"] += turns
    facts["qa"] += len(qa)
    for c, n in cats.items():
        facts["qa_by_category"][c] = facts["qa_by_category"].get(c, 0) + n


def check_locomo(path: Path) -> list[FileReport]:
    """Check a LoCoMo file or folder; one report per file (a folder without ``*.json`` is an error)."""
    path = Path(path)
    if not path.exists():
        return [FileReport(str(path), "LoCoMo", errors=["no such file or folder"])]
    files = _locomo_files(path)
    if not any(f.is_file() for f in files):
        return [FileReport(str(f), DIRECTORY, quirks=["a directory, not a file: the loader skips it"])
                for f in files] + [FileReport(str(path), "LoCoMo", errors=["folder holds no *.json file"])]
    reports = []
    seen: dict[str, str] = {}  # sample id -> the file it was first found in (the loader refuses a second one)
    same_turns: dict[str, str] = {}  # digest of a conversation's sessions -> its sample id
    for f in files:
        if f.is_dir():
            reports.append(FileReport(str(f), DIRECTORY, quirks=["a directory, not a file: the loader skips it"]))
            continue
        rep = FileReport(str(f), "LoCoMo conversations")
        facts: dict[str, Any] = {"conversations": 0, "sessions": 0, "turns": 0, "qa": 0, "qa_by_category": {}}
        quirks: Counter = Counter()
        try:
            obj = json.loads(f.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            rep.errors.append(f"not loadable as JSON text: {exc}")
            reports.append(rep)
            continue
        try:  # valid JSON of another layout is a layout error, saying what was found and what is expected
            convs = _conversations(obj)
        except ValueError as exc:
            rep.errors.append(f"valid JSON, but not LoCoMo data: {exc}")
            reports.append(rep)
            continue
        rep.facts["layout"] = "list (locomo10.json)" if isinstance(obj, list) else "one conversation per file"
        twins: list[str] = []
        for j, (sample, conv, qa) in enumerate(convs):
            _check_conversation(sample or f.stem, conv, qa, facts, quirks, rep.errors)
            sid = _loader_id(sample, f, j, isinstance(obj, list))
            if sid in seen:
                rep.errors.append(f"conversation {sid} is already in {seen[sid]}: memsim refuses data holding the "
                                  "same conversation twice; keep one copy")
            seen.setdefault(sid, str(f))
            digest = _turns_digest(conv)
            if digest in same_turns and same_turns[digest] != sid:
                twins.append(f"{sid} has the same turns as {same_turns[digest]} (loaded twice under two ids)")
            same_turns.setdefault(digest, sid)
        rep.rows = facts["conversations"]
        rep.facts |= facts
        rep.facts["qa_by_category"] = dict(sorted(facts["qa_by_category"].items()))
        rep.shapes = {rep.facts["layout"]: len(convs)}
        rep.quirks = [f"{n} x {what}" for what, n in quirks.most_common()] + twins
        if not rep.errors:
            _through_loader(f, rep)
        reports.append(rep)
    return reports


def _loader_id(sample: str, f: Path, index: int, listed: bool) -> str:
    """The sample id the workload loader gives a conversation: its ``sample_id``, else ``<stem>#<index>`` in the
    list layout or the file's stem in the per-conversation layout."""
    if sample and not sample.startswith("#"):
        return sample
    return f"{f.stem}#{index}" if listed else f.stem


def _turns_digest(conv: dict[str, Any]) -> str:
    import hashlib

    sessions = {k: v for k, v in conv.items() if _SESSION_KEY.match(k)}
    return hashlib.sha256(json.dumps(sessions, sort_keys=True, default=str).encode()).hexdigest()


def _through_loader(path: Path, rep: FileReport) -> None:
    """Load ``path`` with the workload loader (when the project has one) and compare its counts with ours."""
    try:
        from harness.workloads.locomo import load_locomo  # type: ignore[attr-defined]
    except ImportError:
        rep.facts["loader"] = "harness.workloads.locomo.load_locomo not available; raw checks only"
        return
    try:
        convs = load_locomo(path)
    except Exception as exc:  # noqa: BLE001 - any loader failure makes the file unusable for memsim
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        rep.errors.append(f"the LoCoMo loader refused it: {first}")
        return
    convs = list(convs) if not hasattr(convs, "sessions") else [convs]
    turns = sum(len(c.turns()) for c in convs)
    probes = sum(len(c.probes) for c in convs)
    invalid = sum(len(p.invalid_evidence) for c in convs for p in c.probes)
    rep.facts["loader"] = {"conversations": len(convs), "turns": turns, "probes": probes,
                           "invalid_evidence_ids": invalid}
    if turns != rep.facts["turns"] or probes != rep.facts["qa"]:
        rep.quirks.append(f"load_locomo keeps {turns} turns / {probes} probes of the file's "
                          f"{rep.facts['turns']} / {rep.facts['qa']}")


# --------------------------------------------------------------------------------------------------- LongMemEval
def _spread(values: list[int]) -> dict[str, float | int]:
    """min / median / max of a list of counts (empty: all 0)."""
    import statistics

    if not values:
        return {"min": 0, "median": 0, "max": 0}
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def check_longmemeval(path: Path, progress: Callable[[int, int], None] | None = None) -> list[FileReport]:
    """Check one LongMemEval file by streaming it through the loader (:func:`iter_questions`, never one
    ``json.load``): the loader's strict rules make a file unusable (one error naming question and field), its
    lenient rules' counts become facts and quirks, and the release (by sha256) is named.

    Facts: questions per type, abstention questions, sessions and turns per question (min/median/max), duplicate
    session ids within a haystack, out-of-order dates, sessions dated after their question, unknown fields,
    ``has_answer`` true turns on the user and the assistant side, questions without a user evidence turn (the
    official strict averaging drops them), and the question counts of the two official averagings.
    ``progress(bytes_read, file_size)`` is called after each question (a bar over M's 2.7 GB)."""
    from harness.workloads.longmemeval import (
        LoadStats,
        LongMemEvalDataError,
        data_label,
        iter_questions,
        parse_date,
    )

    path = Path(path)
    rep = FileReport(str(path), "LongMemEval questions")
    if not path.exists():
        rep.errors.append("no such file")
        return [rep]
    if path.is_dir():
        rep.errors.append("a folder: give one LongMemEval file (a JSON array of question objects)")
        return [rep]
    st = LoadStats()
    sessions_per_q: list[int] = []
    turns_per_q: list[int] = []
    shapes: Counter = Counter()
    abstention = 0
    abs_types: Counter = Counter()
    dup_questions = dup_extra = 0
    out_of_order_q = after_q = after_sessions = 0
    user_true = asst_true = 0
    no_user_evidence = no_user_evidence_non_abs = 0
    evidence_sessions_without_user_evidence = 0
    start_assistant = non_alternating = blank = 0
    occurrences = 0
    try:
        size = path.stat().st_size
        for q in iter_questions(path, stats=st):
            if progress is not None:
                progress(st.bytes_read, size)
            keys = ["question_id", "question_type", "question", "answer", "question_date", "haystack_session_ids",
                    "haystack_dates", "haystack_sessions"]
            if q.answer_session_ids is not None:
                keys.append("answer_session_ids")
            shapes[",".join(sorted(keys + q.unknown_fields))] += 1
            if q.abstention:
                abstention += 1
                abs_types[q.question_type] += 1
            sessions_per_q.append(len(q.sessions))
            turns_per_q.append(q.n_turns)
            occurrences += len(q.sessions)
            ids = Counter(s.session_id for s in q.sessions)
            extra = sum(n - 1 for n in ids.values() if n > 1)
            if extra:
                dup_questions += 1
                dup_extra += extra
            dates = [parse_date(s.date) for s in q.sessions]
            known = [d for d in dates if d is not None]
            if any(b < a for a, b in zip(known, known[1:], strict=False)):
                out_of_order_q += 1
            qd = parse_date(q.question_date)
            late = sum(1 for d in known if qd is not None and d > qd)
            if late:
                after_q += 1
                after_sessions += late
            for s in q.sessions:
                roles = [t.role for t in s.turns]
                if roles and roles[0] == "assistant":
                    start_assistant += 1
                if any(a == b for a, b in zip(roles, roles[1:], strict=False)):
                    non_alternating += 1
                blank += sum(1 for t in s.turns if not t.content.strip())
                user_true += sum(1 for t in s.turns if t.role == "user" and t.has_answer is True)
                asst_true += sum(1 for t in s.turns if t.role == "assistant" and t.has_answer is True)
                if s.is_answer_session and not any(t.role == "user" and t.has_answer for t in s.turns):
                    evidence_sessions_without_user_evidence += 1
            if not q.has_user_evidence():
                no_user_evidence += 1
                no_user_evidence_non_abs += not q.abstention
    except LongMemEvalDataError as exc:
        rep.errors.append(str(exc).removeprefix(f"{path}: "))
    rep.rows = st.questions
    rep.shapes = dict(shapes.most_common())
    label = data_label(path)  # the one function every command names LongMemEval data with
    rep.facts = {
        "release": label["line"].removeprefix(f"{path.name}: "),
        "questions_by_type": dict(st.question_types),
        "abstention": abstention,
        "abstention_by_type": dict(abs_types),
        "sessions_per_question": _spread(sessions_per_q),
        "turns_per_question": _spread(turns_per_q),
        "session_occurrences": occurrences,
        "turns": sum(turns_per_q),
        "has_answer_true_turns": {"user": user_true, "assistant": asst_true},
        "questions_without_user_evidence": no_user_evidence,
        "averaging_n": {"paper": st.questions - abstention,
                        "strict": st.questions - abstention - no_user_evidence_non_abs},
        "unknown_fields": dict(st.unknown_fields),
    }
    q_ = rep.quirks
    if label["warning"]:
        q_.append(label["warning"])
    if dup_questions:
        q_.append(f"{dup_questions} question(s) list a session id more than once ({dup_extra} extra occurrence(s)); "
                  "every occurrence is kept, as the official code keeps it")
    if st.duplicate_question_ids:
        q_.append(f"{len(st.duplicate_question_ids)} question id(s) occur more than once in the file "
                  f"({sum(st.duplicate_question_ids.values())} extra); each occurrence is scored, but files keyed "
                  "by question id (hypotheses) cannot tell them apart")
    if out_of_order_q:
        q_.append(f"{out_of_order_q} question(s) have haystack dates out of order; the haystack is read in file "
                  "order")
    if after_q:
        q_.append(f"{after_sessions} session(s) in {after_q} question(s) are dated after their question")
    if st.bad_dates:
        q_.append(f"{st.bad_dates} date(s) do not parse as {'%Y/%m/%d (%a) %H:%M'}; kept as text (the official "
                  "retrieval code does not parse dates)")
    if no_user_evidence:
        q_.append(f"{no_user_evidence} question(s) have no user turn with has_answer true "
                  f"({no_user_evidence_non_abs} of them not abstention): the strict averaging drops them, the "
                  "paper averaging scores them recall_all 1, ndcg 0")
    if evidence_sessions_without_user_evidence:
        q_.append(f"{evidence_sessions_without_user_evidence} evidence session(s) have no user turn with "
                  "has_answer true: the official corpus renames them noans (not gold)")
    if asst_true:
        q_.append(f"{asst_true} assistant turn(s) have has_answer true: the official corpus (user turns only) "
                  "cannot deliver them")
    if st.assistant_evidence_turns_without_has_answer:
        q_.append(f"{st.assistant_evidence_turns_without_has_answer} assistant turn(s) of evidence sessions have "
                  "no boolean has_answer (read as absent; no official code reads them)")
    if st.non_boolean_has_answer:
        q_.append(f"{st.non_boolean_has_answer} has_answer value(s) are not booleans on turns no official code "
                  "reads (read as absent)")
    if start_assistant:
        q_.append(f"{start_assistant} session(s) start with an assistant turn")
    if non_alternating:
        q_.append(f"{non_alternating} session(s) have two turns in a row from the same role")
    if blank:
        q_.append(f"{blank} blank turn(s) (kept)")
    if st.answer_as_number:
        q_.append(f"{st.answer_as_number} answer(s) are numbers (read as text)")
    if st.answer_session_ids_absent or st.answer_session_ids_not_a_list:
        q_.append(f"answer_session_ids absent in {st.answer_session_ids_absent} and not a list of text in "
                  f"{st.answer_session_ids_not_a_list} question(s) (optional: no official code reads it)")
    if st.unknown_fields:
        q_.append(f"unknown fields ignored: {', '.join(f'{k} ({n})' for k, n in st.unknown_fields.most_common())}")
    if st.unknown_types:
        q_.append(f"question types outside the six published ones: "
                  f"{', '.join(f'{k} ({n})' for k, n in st.unknown_types.most_common())} (kept)")
    if st.other_roles:
        q_.append(f"turn roles other than user/assistant: "
                  f"{', '.join(f'{k} ({n})' for k, n in st.other_roles.most_common())} (kept; not in the corpus)")
    if not rep.errors and st.questions == 0:
        rep.errors.append("no questions (an empty array)")
    return [rep]
