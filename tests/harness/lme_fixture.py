"""Small LongMemEval files in the exact released schema, quirks included, written by tests (no real data here).

``question(...)`` builds one question object as the released files have it: the nine fields, ``has_answer`` on
every turn of an evidence session (``answer_`` in its id) and on no filler turn. ``quirky_questions()`` is a
handful of questions that together carry the real files' quirks: a session that starts with an assistant turn, a
session id listed twice (same content, different dates), a blank turn, dates out of order, a session dated after
the question, evidence only in assistant turns, an abstention question, an evidence session with no evidence turn,
and a number as answer. ``write(path, questions)`` writes them as one JSON array.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

Turn = dict[str, Any]


def user(content: str, has: bool | None = None) -> Turn:
    t: Turn = {"role": "user", "content": content}
    if has is not None:
        t["has_answer"] = has
    return t


def assistant(content: str, has: bool | None = None) -> Turn:
    t: Turn = {"role": "assistant", "content": content}
    if has is not None:
        t["has_answer"] = has
    return t


def question(qid: str, qtype: str, text: str, answer: Any, date: str,
             sessions: list[tuple[str, str, list[Turn]]], answer_session_ids: list[str] | None = None,
             **extra: Any) -> dict[str, Any]:
    """One question object; ``sessions`` is ``[(session_id, date, turns), ...]`` in haystack order."""
    obj: dict[str, Any] = {
        "question_id": qid, "question_type": qtype, "question": text, "answer": answer, "question_date": date,
        "haystack_session_ids": [s[0] for s in sessions], "haystack_dates": [s[1] for s in sessions],
        "haystack_sessions": [s[2] for s in sessions],
        "answer_session_ids": (answer_session_ids if answer_session_ids is not None
                               else list(dict.fromkeys(s[0] for s in sessions if "answer" in s[0]))),
    }
    obj.update(extra)
    return obj


def quirky_questions() -> list[dict[str, Any]]:
    """Five questions carrying the quirks listed in the module docstring."""
    filler_a = ("sharegpt_aa11_0", "2023/05/01 (Mon) 10:00",
                [user("How do I bake sourdough bread at home?"), assistant("Start with an active starter.")])
    filler_b = ("ultrachat_bb22", "2023/05/03 (Wed) 09:15",
                [assistant("Welcome back! What shall we plan today?"),  # starts with the assistant
                 user("Plan a weekend hiking trip near Denver."), assistant("Try the Mount Falcon trails."),
                 user("")])  # a blank turn
    return [
        question("q_user_1", "single-session-user", "What breed is my dog?", "a border collie",
                 "2023/05/30 (Tue) 21:56",
                 [filler_a,
                  ("answer_1111_1", "2023/05/10 (Wed) 08:00",
                   [user("I just adopted a border collie named Rex!", True),
                    assistant("Congratulations on Rex!", False),
                    user("He loves frisbees.", False), assistant("Border collies are energetic.", False)]),
                  filler_b]),
        question("q_asst_1", "single-session-assistant", "What trail did you suggest to me?", "Mount Falcon",
                 "2023/06/02 (Fri) 12:00",
                 [("answer_2222_1", "2023/05/20 (Sat) 18:30",
                   [user("Suggest a trail near Denver.", False),
                    assistant("Mount Falcon has a lovely loop.", True)]),
                  filler_a, filler_a]),  # the filler session id listed twice
        question("q_multi_1", "multi-session", "How many instruments do I play?", 2, "2023/07/01 (Sat) 20:00",
                 [("answer_3333_1", "2023/06/20 (Tue) 10:00",
                   [user("I started learning the violin.", True), assistant("Wonderful choice.", False)]),
                  ("answer_3333_2", "2023/06/10 (Sat) 10:00",  # earlier than the session before it
                   [assistant("Hi! How are your lessons?", False), user("I also play the piano.", True)]),
                  ("sharegpt_cc33_1", "2023/07/05 (Wed) 07:00",  # dated after the question
                   [user("Recommend a thriller novel."), assistant("Try 'Gone Girl'.")])]),
        question("q_temp_1_abs", "temporal-reasoning", "How many days ago did I buy the red bike?",
                 "The information provided is not enough: you mentioned a blue bike, not a red one.",
                 "2023/08/01 (Tue) 09:00",
                 [("answer_4444_1", "2023/07/20 (Thu) 09:00",
                   [user("I bought a blue bike today.", True), assistant("Enjoy the rides!", False)]),
                  filler_b]),
        question("q_ku_1", "knowledge-update", "Where do I work now?", "at the library", "2023/09/01 (Fri) 10:00",
                 [("answer_5555_1", "2023/08/01 (Tue) 10:00",
                   [user("Any tips for my first week?", False), assistant("Be curious.", False)]),  # no evidence turn
                  ("answer_5555_2", "2023/08/15 (Tue) 10:00",
                   [user("I moved to a job at the library.", True), assistant("Sounds calm.", False)]),
                  filler_a]),
    ]


def write(path: Path, questions: list[dict[str, Any]]) -> Path:
    """``questions`` as one JSON array (indented like the released files), returns ``path``."""
    path.write_text(json.dumps(questions, indent=2, ensure_ascii=False), encoding="utf-8")
    return path
