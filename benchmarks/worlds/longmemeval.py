"""Generated LongMemEval-format data: question objects in the released schema, with S's (or M's) shape.

The real files cannot be downloaded on the machines this project is built on, so the scale benchmark and the
committed LongMemEval results run on data made here. What is realised, and why:

- **Schema.** Every question object has exactly the nine released fields (``question_id``, ``question_type``,
  ``question``, ``answer``, ``question_date``, ``haystack_session_ids``, ``haystack_dates``, ``haystack_sessions``,
  ``answer_session_ids``), the three haystack lists parallel; a turn is ``{"role", "content"}`` and, on every turn
  of an evidence session (id prefix ``answer_``), also ``"has_answer"`` (true on the evidence turns); filler turns
  carry no ``has_answer`` key. Dates are ``"%Y/%m/%d (%a) %H:%M"`` with English day names (no locale).
- **Proportions.** The six types in S's counts per 500 (70/56/30/133/78/133), scaled to ``n_questions`` by largest
  remainder and shuffled by the seed; 6% abstention (``_abs`` appended to the id, base type kept), drawn from the
  types whose question can be given a false premise here (single-session-user, multi-session, knowledge-update,
  temporal-reasoning: a choice of this generator, the released split per type is not used).
- **Shape.** Sessions per question around ``sessions`` (S: 48; the draw is clipped to S's observed 38..62 relative
  range, 0.79x..1.29x), about 10.3 turns per session (S: 246,750 turns over 23,867 sessions) and about 1.1 kB per
  turn (S: 277 MB over 246,750 turns), so ~494 turns and ~0.55 MB per question at 48 sessions. ``--m-shape``: 500
  sessions per question (M's ~500).
- **Evidence.** single-session-user/-preference: one evidence session, the user states the fact; single-session-
  assistant: one evidence session whose evidence turn is the assistant's reply (in 8% of them the user's request is
  marked too), so most of these questions have no user evidence turn, as in S (470 non-abstention questions, 419
  with a user evidence turn); multi-session: 2-4 sessions; knowledge-update: an old and a newer value; temporal-
  reasoning: one or two dated events, the answer computed from the generated dates. In 2% of the other questions one
  evidence session has no evidence turn (``has_answer`` false throughout: the real files have such sessions).
- **Retrievable content.** An evidence turn names a subject and an attribute (e.g. "bike" and "color") that the
  question names too; filler turns are drawn from topic vocabularies that include the same subject and attribute
  nouns, so filler sessions are distractors and neither BM25 nor a dense encoder ranks trivially. Nothing here is
  tuned to any memory design or to any retriever's score.
- **Reuse.** Filler sessions recur across questions as in S (its fillers come from shared pools): each filler
  occurrence is drawn from a shared pool of ``pool_size`` sessions with probability ``reuse`` (default 0.6; without
  replacement inside one question), otherwise it is a fresh session that occurs once in the file. A pool session is
  the same (id and turns) wherever it occurs; it is regenerated from ``(seed, pool index)``, not cached, so memory
  stays bounded.
- **Quirks** of the real files, at stated rates: sessions starting with an assistant turn (8%), a pair of user
  turns in a row (1%), a blank user turn ending a session (0.5%), a filler session id listed twice in a haystack
  with the same content and another date (2.6% of questions, S: 13 of 500), two filler dates swapped out of order
  (10% of questions), a filler session dated after the question (3% of questions), a number as answer (10% of
  multi-session answers).

:func:`write_file` streams the file question by question (never the whole list in memory) through a temp file and
a rename, and writes a sidecar ``<file>.generator.json`` with the description that results carry under ``"data"``
and label as :func:`label` (``data: synthetic, benchmarks.worlds.longmemeval seed <S>``). Deterministic per seed.
The sidecar records the file's byte size and sha256, and counts only while both match the file
(``harness.workloads.longmemeval.data_label``, which every command asks): a file saved over a generated one is
never labelled synthetic. :func:`remove_file` deletes a generated file with its sidecar.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from harness.workloads.longmemeval import generator_description, sidecar_path, synthetic_label

GENERATOR = "benchmarks.worlds.longmemeval"
VERSION = 1

# S's counts per 500 questions (spec section 2)
TYPE_COUNTS_PER_500 = {
    "single-session-user": 70, "single-session-assistant": 56, "single-session-preference": 30,
    "multi-session": 133, "knowledge-update": 78, "temporal-reasoning": 133,
}
ABSTENTION_SHARE = 30 / 500
ABSTENTION_TYPES = ("single-session-user", "multi-session", "knowledge-update", "temporal-reasoning")
S_SESSIONS = 48
M_SESSIONS = 500
SESSION_RANGE = (38 / 48, 62 / 48)  # S's observed range relative to its median

# quirk rates (stated in the module docstring)
P_ASSISTANT_FIRST = 0.08
P_DOUBLE_USER = 0.01
P_BLANK_TURN = 0.005
P_DUPLICATE_SESSION = 13 / 500
P_OUT_OF_ORDER = 0.10
P_AFTER_QUESTION = 0.03
P_NO_EVIDENCE_TURN = 0.02
P_SSA_USER_EVIDENCE = 0.08
P_NUMERIC_ANSWER = 0.10

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"

_COMMON = ("the a and to of in that it for on with as this was but be have not at so if or we you they "
           "I my me is are what how many did do now today things thing new day days ago finally bought "
           "just really think about would could maybe also more some then there what when which because "
           "very much other time way good new first last long great little right old big high different "
           "small large next early young important few public same able help make know take see come "
           "want look use find give tell work call try ask need feel seem leave put mean keep let begin "
           "show hear play run move live believe bring happen write provide sit stand lose pay meet "
           "include continue set learn change lead understand watch follow stop create speak read allow "
           "add spend grow open walk win offer remember consider appear buy wait serve die send expect "
           "build stay fall cut reach kill remain suggest raise pass sell require report decide pull").split()

# topic vocabularies of the filler conversations; the subject and attribute nouns of the facts appear here too,
# so filler sessions mention them in other contexts (distractors)
_TOPICS: dict[str, tuple[str, ...]] = {
    "cooking": tuple("recipe oven flour butter garlic sauce simmer bake kitchen dinner spice onion pan "
                     "dough roast vegetables kitchen color price".split()),
    "travel": tuple("flight hotel passport itinerary beach museum train luggage visa airport tour city "
                    "booking schedule location trip car".split()),
    "programming": tuple("python function error compile library debug variable server database query "
                         "deploy laptop version api loop class".split()),
    "fitness": tuple("workout gym running stretch protein cardio muscle yoga schedule routine bike "
                     "marathon coach weight size".split()),
    "finance": tuple("budget savings loan interest invest stock tax account mortgage price insurance bank "
                     "salary apartment".split()),
    "gardening": tuple("garden soil seeds tomato compost water prune flowers shade roses sunlight pot "
                       "fertilizer color size".split()),
    "music": tuple("guitar piano chords melody concert album band practice lesson song rhythm tune "
                   "brand teacher".split()),
    "pets": tuple("dog cat vet leash treats breed kitten puppy walk training food collar name".split()),
    "home": tuple("apartment couch paint lamp rent landlord furniture shelf repair plumbing neighbor "
                  "color location size".split()),
    "work": tuple("manager meeting deadline project colleague office email promotion report team "
                  "schedule client name".split()),
    "books": tuple("novel author chapter library reading plot character series fiction poetry "
                   "publisher title".split()),
    "health": tuple("doctor sleep allergy vitamin appointment headache diet therapy stress clinic "
                    "schedule medicine".split()),
    "family": tuple("sister brother mother father cousin birthday wedding grandparents kids holiday "
                    "gift name".split()),
    "cars": tuple("car engine tires mileage insurance dealer brakes fuel model garage brand color "
                  "price".split()),
    "photography": tuple("camera lens shutter aperture portrait landscape editing tripod light photo "
                         "brand model".split()),
}
_TOPIC_NAMES = tuple(sorted(_TOPICS))

# the facts the questions ask about: subjects, attributes, values
_SUBJECTS = ("dog", "cat", "car", "bike", "apartment", "garden", "guitar", "laptop", "sister", "manager",
             "gym", "camera", "piano", "couch", "novel", "doctor", "kitchen", "office", "tent", "cousin")
_ATTRIBUTES = ("color", "name", "brand", "price", "location", "schedule", "size", "model", "teacher", "title")
_VALUES = ("crimson", "teal", "Marigold", "Juniper", "Orchid", "Halvorsen", "Kestrel", "Brightwater",
           "Northgate", "Cobalt", "Saffron", "Willowby", "Tamsin", "Rookwood", "Ember", "Lakeshore", "Vesper",
           "Quill", "Birchfield", "Ostrava", "Calloway", "Mirabel", "Thornbury", "Azalea", "Fennick", "Larkspur",
           "Greyhollow", "Pemberton", "Solace", "Ashby")
_ITEMS = ("headphones", "backpack", "blender", "jacket", "sneakers", "monitor", "kettle", "tent", "watch",
          "umbrella", "notebook", "speaker", "lamp", "scarf", "keyboard")
_EVENTS = (("repaired", "fixed"), ("painted", "painted"), ("sold", "sold"), ("cleaned", "cleaned"),
           ("insured", "insured"), ("photographed", "photographed"), ("registered", "registered"))


def _format_date(d: _dt.datetime) -> str:
    return f"{d.year:04d}/{d.month:02d}/{d.day:02d} ({_DAYS[d.weekday()]}) {d.hour:02d}:{d.minute:02d}"


def label(description: dict[str, Any]) -> str:
    """The one-line data label every results JSON and page shows for generated data."""
    return synthetic_label({"generator": GENERATOR, **description})


def type_sequence(n_questions: int, seed: int = 0) -> list[str]:
    """The question types of a file of ``n_questions``: S's counts scaled by largest remainder, then shuffled."""
    exact = {t: c * n_questions / 500 for t, c in TYPE_COUNTS_PER_500.items()}
    counts = {t: int(v) for t, v in exact.items()}
    rest = n_questions - sum(counts.values())
    for t in sorted(exact, key=lambda t: (-(exact[t] - counts[t]), t))[:rest]:
        counts[t] += 1
    seq = [t for t in TYPE_COUNTS_PER_500 for _ in range(counts[t])]
    random.Random(f"{seed}:types").shuffle(seq)
    return seq


def abstention_indices(types: list[str], seed: int = 0) -> set[int]:
    """Indices of the abstention questions: ``round(6% of n)`` drawn from the types that can take one."""
    eligible = [i for i, t in enumerate(types) if t in ABSTENTION_TYPES]
    k = min(len(eligible), round(ABSTENTION_SHARE * len(types)))
    return set(random.Random(f"{seed}:abs").sample(eligible, k))


class _Words:
    """Text of the filler turns: sentences of topic and common words, ~1.1 kB per turn on average."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def sentence_words(self, topic: str, n: int) -> list[str]:
        rng = self.rng
        pool = _TOPICS[topic]
        words = [rng.choice(pool) if rng.random() < 0.3 else rng.choice(_COMMON) for _ in range(n)]
        i = 0
        while i < n:  # sentences of 8..16 words
            words[i] = words[i].capitalize()
            j = min(n, i + rng.randint(8, 16))
            words[j - 1] += "."
            i = j
        return words

    def text(self, topic: str, role: str) -> str:
        # user turns are shorter than assistant turns, as in the released files
        n = self.rng.randint(10, 90) if role == "user" else self.rng.randint(140, 480)
        return " ".join(self.sentence_words(topic, n))


def _filler_turns(rng: random.Random) -> list[dict[str, Any]]:
    """One filler session's turns (no ``has_answer`` key): ~10.3 turns, with the quirks at their rates."""
    words = _Words(rng)
    topic = rng.choice(_TOPIC_NAMES)
    n_pairs = rng.randint(1, 9)
    turns: list[dict[str, Any]] = []
    if rng.random() < P_ASSISTANT_FIRST:
        turns.append({"role": "assistant", "content": words.text(topic, "assistant")})
    for _ in range(n_pairs):
        turns.append({"role": "user", "content": words.text(topic, "user")})
        if rng.random() < P_DOUBLE_USER:
            turns.append({"role": "user", "content": words.text(topic, "user")})
        turns.append({"role": "assistant", "content": words.text(topic, "assistant")})
    if rng.random() < P_BLANK_TURN:
        turns.append({"role": "user", "content": ""})
    return turns


def _pool_session(seed: int, k: int) -> tuple[str, list[dict[str, Any]]]:
    """Pool session ``k``: the same id and turns wherever it occurs (regenerated, not cached)."""
    rng = random.Random(f"{seed}:pool:{k}")
    token = "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") for _ in range(7))
    return f"sharegpt_{token}_{k % 3}", _filler_turns(rng)


def _evidence_session(rng: random.Random, statements: list[tuple[str, str, bool]]) -> list[dict[str, Any]]:
    """An evidence session: filler turns around the given ``(role, text, has_answer)`` turns, ``has_answer`` on
    every turn (false on the filler turns)."""
    words = _Words(rng)
    topic = rng.choice(_TOPIC_NAMES)
    n_pairs = rng.randint(2, 9)
    at = rng.randrange(n_pairs)
    turns: list[dict[str, Any]] = []
    for p in range(n_pairs):
        if p == at:
            for role, text, has in statements:
                turns.append({"role": role, "content": text, "has_answer": has})
            if statements[-1][0] == "user":
                turns.append({"role": "assistant", "content": words.text(topic, "assistant"), "has_answer": False})
        else:
            turns.append({"role": "user", "content": words.text(topic, "user"), "has_answer": False})
            turns.append({"role": "assistant", "content": words.text(topic, "assistant"), "has_answer": False})
    return turns


def _filler_prefix(rng: random.Random, topic_words: int = 12) -> str:
    return " ".join(_Words(rng).sentence_words(rng.choice(_TOPIC_NAMES), topic_words))


Statement = tuple[str, str, bool]  # (role, text, has_answer) of one evidence-session turn


def _question_content(qtype: str, abstention: bool, rng: random.Random, ev_dates: list[_dt.datetime],
                      qdate: _dt.datetime) -> tuple[str, Any, list[list[Statement]]]:
    """The question text, its answer and the statement turns of each evidence session."""
    subj, other = rng.sample(_SUBJECTS, 2)
    attr = rng.choice(_ATTRIBUTES)
    val, val2 = rng.sample(_VALUES, 2)
    pre = _filler_prefix(rng)
    not_enough = "The information provided is not enough."
    if qtype == "single-session-user":
        st = [[("user", f"{pre} By the way, the {attr} of my {subj} is {val}, I just found out.", True)]]
        if abstention:
            return (f"What is the {attr} of my {other}?",
                    f"{not_enough} You mentioned the {attr} of your {subj}, not of your {other}.", st)
        return f"What is the {attr} of my {subj}?", val, st
    if qtype == "single-session-assistant":
        st = [[("user", f"{pre} Could you suggest a {attr} for my {subj}?", rng.random() < P_SSA_USER_EVIDENCE),
               ("assistant", f"Sure. For your {subj} I would suggest the {attr} {val}; it suits it well.", True)]]
        return f"What {attr} did you suggest for my {subj}?", val, st
    if qtype == "single-session-preference":
        st = [[("user", f"{pre} For my {subj} I always prefer anything {val}, and I avoid {val2} things.", True)]]
        return (f"Can you recommend something new for my {subj}?",
                f"The user would prefer suggestions for their {subj} that are {val}, not {val2}.", st)
    if qtype == "multi-session":
        n = len(ev_dates)
        st = [[("user", f"{pre} I bought a new {it} for my {subj} today.", True)] for it in rng.sample(_ITEMS, n)]
        if abstention:
            return (f"How many things did I buy for my {other}?",
                    f"{not_enough} You mentioned buying things for your {subj}, not for your {other}.", st)
        answer: Any = n if rng.random() < P_NUMERIC_ANSWER else str(n)
        return f"How many things did I buy for my {subj}?", answer, st
    if qtype == "knowledge-update":
        st = [[("user", f"{pre} The {attr} of my {subj} is {val2} at the moment.", True)],
              [("user", f"{pre} Update: I changed the {attr} of my {subj}, it is {val} now.", True)]]
        if abstention:
            return (f"What is the {attr} of my {other} now?",
                    f"{not_enough} You mentioned the {attr} of your {subj}, not of your {other}.", st)
        return f"What is the {attr} of my {subj} now?", val, st
    if qtype == "temporal-reasoning":
        evs = rng.sample(_EVENTS, len(ev_dates))
        st = [[("user", f"{pre} Today I finally {e[0]} my {subj}.", True)] for e in evs]
        why = f"{not_enough} You mentioned your {subj}, not your {other}."
        if len(ev_dates) == 1:
            days = (qdate.date() - ev_dates[0].date()).days
            if abstention:
                return f"How many days ago did I {evs[0][1]} my {other}?", why, st
            return f"How many days ago did I {evs[0][1]} my {subj}?", f"{days} days", st
        days = abs((ev_dates[1].date() - ev_dates[0].date()).days)
        q = f"How many days passed between the day I {evs[0][1]} my {subj} and the day I {evs[1][1]} it?"
        if abstention:
            return q.replace(f"my {subj}", f"my {other}"), why, st
        return q, f"{days} days", st
    raise ValueError(f"unknown question type {qtype!r}")


def _n_evidence(qtype: str, rng: random.Random) -> int:
    if qtype == "multi-session":
        return rng.randint(2, 4)
    if qtype == "knowledge-update":
        return 2
    if qtype == "temporal-reasoning":
        return rng.randint(1, 2)
    return 1


def _question(i: int, qtype: str, abstention: bool, *, seed: int, sessions: int, reuse: float,
              pool_size: int) -> dict[str, Any]:
    rng = random.Random(f"{seed}:q:{i}")
    qid = hashlib.sha256(f"{seed}:{i}".encode()).hexdigest()[:8] + ("_abs" if abstention else "")
    lo, hi = round(sessions * SESSION_RANGE[0]), round(sessions * SESSION_RANGE[1])
    n_sess = max(lo, min(hi, round(rng.gauss(sessions, sessions * 0.1))))
    n_ev = _n_evidence(qtype, rng)
    duplicate = rng.random() < P_DUPLICATE_SESSION
    n_fill = n_sess - n_ev - (1 if duplicate else 0)
    if n_fill < 1:
        raise ValueError(f"sessions={sessions} leaves no filler session for question {i}")
    qdate = _dt.datetime(2023, 1, 1) + _dt.timedelta(days=rng.randint(120, 300), minutes=rng.randint(0, 1439))
    span_days = max(30, sessions)  # the haystack covers the weeks (M: months) before the question
    offsets = sorted((rng.uniform(1 / 24, span_days) for _ in range(n_sess)), reverse=True)
    dates = [(qdate - _dt.timedelta(days=o)).replace(second=0, microsecond=0) for o in offsets]
    positions = list(range(n_sess))
    ev_pos = sorted(rng.sample(positions, n_ev))
    ev_dates = [dates[p] for p in ev_pos]
    text, answer, statements = _question_content(qtype, abstention, rng, ev_dates, qdate)
    if qtype != "single-session-assistant" and not abstention and rng.random() < P_NO_EVIDENCE_TURN:
        e = rng.randrange(len(statements))  # an evidence session with no evidence turn
        statements[e] = [(role, text_, False) for role, text_, _ in statements[e]]
    # filler slots: pool draws (without replacement inside the question) or fresh sessions
    n_pool = sum(rng.random() < reuse for _ in range(n_fill))
    if n_pool > pool_size:
        raise ValueError(f"pool_size={pool_size} is smaller than the {n_pool} pool draws of question {i}")
    pool_ks = rng.sample(range(pool_size), n_pool)
    fillers: list[tuple[str, list[dict[str, Any]]]] = [_pool_session(seed, k) for k in pool_ks]
    for j in range(n_fill - n_pool):
        fillers.append((f"ultrachat_{i}{j:04d}{seed}", _filler_turns(rng)))
    rng.shuffle(fillers)
    if duplicate:
        fillers.insert(rng.randrange(len(fillers) + 1), rng.choice(fillers))  # same id and content, another date
    ids: list[str] = []
    sess: list[list[dict[str, Any]]] = []
    ev_iter = iter(range(n_ev))
    fill_iter = iter(fillers)
    filler_pos: list[int] = []
    for p in positions:
        if p in ev_pos:
            e = next(ev_iter)
            ids.append(f"answer_{qid[:8]}_{e + 1}")
            sess.append(_evidence_session(rng, statements[e]))
        else:
            sid, turns = next(fill_iter)
            ids.append(sid)
            sess.append(turns)
            filler_pos.append(p)
    hdates = [_format_date(d) for d in dates]
    if rng.random() < P_OUT_OF_ORDER and len(filler_pos) >= 2:
        a, b = rng.sample(filler_pos, 2)
        hdates[a], hdates[b] = hdates[b], hdates[a]
    if rng.random() < P_AFTER_QUESTION and filler_pos:
        hdates[rng.choice(filler_pos)] = _format_date(qdate + _dt.timedelta(days=rng.randint(1, 20)))
    return {
        "question_id": qid, "question_type": qtype, "question": text, "answer": answer,
        "question_date": _format_date(qdate), "haystack_session_ids": ids, "haystack_dates": hdates,
        "haystack_sessions": sess, "answer_session_ids": [s for s in dict.fromkeys(ids) if "answer" in s],
    }


def _check_args(n_questions: int, sessions: int, reuse: float, pool_size: int) -> None:
    if n_questions < 1:
        raise ValueError(f"n_questions must be at least 1, got {n_questions}")
    if sessions < 8:
        raise ValueError(f"sessions must be at least 8, got {sessions}")
    if not 0.0 <= reuse <= 1.0:
        raise ValueError(f"reuse must be in [0, 1], got {reuse}")
    if pool_size < 1:
        raise ValueError(f"pool_size must be at least 1, got {pool_size}")


def generate(n_questions: int, *, seed: int = 0, sessions: int = S_SESSIONS, reuse: float = 0.6,
             pool_size: int = 2000) -> Iterator[dict[str, Any]]:
    """Yield ``n_questions`` question objects in the released schema, one at a time (deterministic per seed)."""
    _check_args(n_questions, sessions, reuse, pool_size)
    types = type_sequence(n_questions, seed)
    abs_idx = abstention_indices(types, seed)
    for i, t in enumerate(types):
        yield _question(i, t, i in abs_idx, seed=seed, sessions=sessions, reuse=reuse, pool_size=pool_size)


def write_file(path: Path, n_questions: int, *, seed: int = 0, sessions: int = S_SESSIONS, reuse: float = 0.6,
               pool_size: int = 2000, progress: Callable[[int, int, int], None] | None = None,
               fault_hook: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Stream ``n_questions`` into ``path`` as one JSON array (compact, one question per line), through a temp
    file in the same folder and a rename; then write the sidecar ``<path>.generator.json``. Return the description.

    ``progress(done, total, bytes_written)`` is called after each question. Fault-hook steps:
    ``lme_world.data.rename`` (before the data file's rename) and ``lme_world.sidecar.write`` (before the sidecar's).
    """
    from benchmarks.common import write_atomic

    _check_args(n_questions, sessions, reuse, pool_size)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    sha = hashlib.sha256()
    nbytes = 0
    type_counts: dict[str, int] = {}
    n_abs = n_sess = n_turns = 0
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            def put(b: bytes) -> None:
                nonlocal nbytes
                fh.write(b)
                sha.update(b)
                nbytes += len(b)

            put(b"[\n")
            for i, q in enumerate(generate(n_questions, seed=seed, sessions=sessions, reuse=reuse,
                                           pool_size=pool_size)):
                put((b",\n" if i else b"") + json.dumps(q, ensure_ascii=False).encode("utf-8"))
                type_counts[q["question_type"]] = type_counts.get(q["question_type"], 0) + 1
                n_abs += "_abs" in q["question_id"]
                n_sess += len(q["haystack_sessions"])
                n_turns += sum(len(s) for s in q["haystack_sessions"])
                if progress:
                    progress(i + 1, n_questions, nbytes)
            put(b"\n]\n")
        os.chmod(tmp, 0o644)
        if fault_hook:
            fault_hook("lme_world.data.rename")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    desc = {
        "generator": GENERATOR, "version": VERSION, "seed": seed, "questions": n_questions,
        "sessions_per_question": sessions, "shape": "M" if sessions >= M_SESSIONS else "S" if sessions == S_SESSIONS
        else "custom", "reuse": reuse, "pool_size": pool_size,
        "reuse_rule": "each filler occurrence comes from the shared pool with probability `reuse` (without "
                      "replacement inside a question), otherwise it is a fresh session occurring once",
        "question_types": dict(sorted(type_counts.items())), "abstention": n_abs, "session_occurrences": n_sess,
        "turns": n_turns, "file": path.name, "bytes": nbytes, "sha256": sha.hexdigest(),
        "generate_s": round(time.perf_counter() - t0, 3),
    }
    desc["label"] = label(desc)
    write_atomic(sidecar_path(path), (json.dumps(desc, indent=2) + "\n").encode("utf-8"), fault_hook,
                 step="lme_world.sidecar.write")
    return desc


def describe(path: Path) -> dict[str, Any] | None:
    """The generator's description of ``path`` (its sidecar), or None when there is none or it does not record
    this file's byte size and sha256 (``harness.workloads.longmemeval.generator_description``)."""
    return generator_description(path)[0]


def remove_file(path: Path) -> None:
    """Delete a generated file and its sidecar (either may be missing already)."""
    Path(path).unlink(missing_ok=True)
    sidecar_path(Path(path)).unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.worlds.longmemeval",
                                 description="Write a generated LongMemEval-format file (released schema).")
    ap.add_argument("--questions", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--sessions", type=int, default=None, help=f"sessions per question (default {S_SESSIONS})")
    ap.add_argument("--m-shape", action="store_true", help=f"M's shape: {M_SESSIONS} sessions per question")
    ap.add_argument("--reuse", type=float, default=0.6)
    ap.add_argument("--pool-size", type=int, default=2000)
    a = ap.parse_args(argv)
    sessions = a.sessions or (M_SESSIONS if a.m_shape else S_SESSIONS)
    t0 = time.perf_counter()
    last = [0.0]

    def progress(done: int, total: int, nbytes: int) -> None:
        now = time.perf_counter()
        if now - last[0] >= 1.0 or done == total:
            last[0] = now
            el = now - t0
            eta = el / done * (total - done)
            print(f"\r{done}/{total} questions, {nbytes / 1e6:.1f} MB, {el:.0f}s elapsed, ETA {eta:.0f}s",
                  end="\n" if done == total else "", file=sys.stderr, flush=True)

    try:
        desc = write_file(a.out, a.questions, seed=a.seed, sessions=sessions, reuse=a.reuse,
                          pool_size=a.pool_size, progress=progress)
    except (ValueError, OSError) as e:
        print(f"{a.out}: {e}", file=sys.stderr)
        return 2
    print(f"{a.out}: {desc['questions']} questions, {desc['bytes']:,} bytes; {desc['label']}")
    print(f"wrote {a.out}")
    print(f"wrote {sidecar_path(a.out)} (the file's description: generator, seed, size, sha256)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
