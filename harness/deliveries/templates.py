"""The store's building blocks: format constants, the turn templates, escaping, rendering and rebuilding (see
:mod:`harness.deliveries` for the layout)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.workloads.locomo import Conversation, Probe, Turn

FORMAT = "memsim-deliveries"
VERSION = 1
SUFFIX = ".deliveries.json.gz"
WRITE_STEP = "deliveries.write"
"""Fault-hook step name of the store's one durable write (:meth:`DeliveryWriter.close`)."""
FANOUT = 8
"""Average parts per block (a boundary where a hash hits one in ``FANOUT``)."""
KEY_CHARS = 24
"""Characters of a rendering's body that select its candidates at an anchor."""
SHA_CHARS = 16

_PHOTO = ["caption", [" [photo: ", "$caption", "]"]]
_SHARED_PHOTO = ["caption", [" [shared a photo: ", "$caption", "]"]]
TEMPLATES: dict[str, list[Any]] = {
    "render_turn": ["[", "$id", "] ", ["date", ["$date", " | "]], "@", "$speaker", ": ", "#", "$text", _PHOTO],
    "render_turn_nodate": ["[", "$id", "] ", "@", "$speaker", ": ", "#", "$text", _PHOTO],
    "dated_line": [["date", ["[", "$date", "] "]], "@", "$speaker", ": ", "#", "$text", _SHARED_PHOTO],
    "turn_line": ["@", "$speaker", ": ", "#", "$text", _SHARED_PHOTO],
    "stored_turn": ["[", "@", "$speaker", "] ", "#", "$text", _SHARED_PHOTO],
}
"""How turns are rendered, as token lists: ``"$field"`` a turn field (``id``, ``speaker``, ``text``, ``caption``,
``date``: its session's date-time), ``[field, tokens]`` the tokens when that field is not empty, ``"@"`` the anchor
(where the speaker starts) and ``"#"`` where the body starts (both render nothing), anything else literal text.
Mirrors, in order: ``locomo.render_turn`` (baselines), the same with ``dates=False`` (``oracle-nodate``),
``arm_text.dated_line`` (AgentFly cases, Tortoise points), ``arm_text.turn_line`` (Fractal's messages and replies),
Tortoise's stored turn Point ``"[<speaker>] <body>"``. The page's script renders the same lists."""
ESCAPES = ("raw", "json")
"""``raw``: the rendering as is; ``json``: as inside a JSON string (``json.dumps(ensure_ascii=False)`` without
the quotes; JavaScript's ``JSON.stringify`` escapes the same way)."""


class DeliveryStoreError(ValueError):
    """A delivery store that cannot be read or trusted (one line naming the file)."""


def deliveries_path(run_dir: Path | str, name: str) -> Path:
    """``<run_dir>/<name>.deliveries.json.gz``: one of the run's own names (:mod:`harness.runs`)."""
    return Path(run_dir) / f"{name}{SUFFIX}"


def probe_key(probe: Probe, conversation: Conversation) -> tuple[str, str]:
    """(cluster, probe) as the per-probe table names a probe (:func:`harness.probes.from_probe_record`): LoCoMo
    (conversation id, question index); LongMemEval (question id, question id)."""
    if probe.question_type is not None:
        return str(probe.question_id), str(probe.question_id)
    return conversation.sample_id, str(probe.index)


def escape(text: str, how: str) -> str:
    """``text`` escaped as :data:`ESCAPES` names."""
    if how == "raw":
        return text
    if how == "json":
        return json.dumps(text, ensure_ascii=False)[1:-1]
    raise ValueError(f"unknown escape {how!r}; one of {', '.join(ESCAPES)}")


def render(template: Sequence[Any], fields: Mapping[str, str], how: str = "raw") -> tuple[str, int, int]:
    """A template rendered for one turn's ``fields`` and escaped: (text, anchor offset, body offset); the offsets
    are -1 when the template has no anchor or body mark. Escaping is per character, so escaping the pieces is
    escaping the whole."""
    out: list[str] = []
    marks = {"@": -1, "#": -1}
    size = 0

    def walk(tokens: Sequence[Any]) -> None:
        nonlocal size
        for tok in tokens:
            if isinstance(tok, list):
                if fields.get(tok[0]):
                    walk(tok[1])
            elif tok in marks:
                marks[tok] = size
            else:
                piece = escape(fields.get(tok[1:], "") if tok.startswith("$") else tok, how)
                out.append(piece)
                size += len(piece)

    walk(template)
    return "".join(out), marks["@"], marks["#"]


def turn_fields(turn: Turn, date: str) -> dict[str, str]:
    return {"id": turn.dia_id, "speaker": turn.speaker, "text": turn.text, "caption": turn.caption or "",
            "date": date}


def _mirrors() -> dict[str, Callable[[Turn, Any], str]]:
    """The functions each template mirrors: ``(turn, session) -> the text the arms render``."""
    from harness.workloads.arm_text import dated_line, turn_line
    from harness.workloads.locomo import render_turn
    from harness.workloads.tortoise_arm import turn_body

    return {"render_turn": lambda t, s: render_turn(t, s.date_time),
            "render_turn_nodate": lambda t, s: render_turn(t, s.date_time, dates=False),
            "dated_line": dated_line, "turn_line": lambda t, s: turn_line(t),
            "stored_turn": lambda t, s: f"[{t.speaker}] {turn_body(t)}"}



def rebuild(items: Iterable[int], lits: Sequence[str], unit_text: Callable[[int], str], slices: Sequence[Sequence[int]],
            blocks: Sequence[Sequence[int]], memo: dict[int, str] | None = None) -> str:
    """The text of a part list (see the module docstring); ``memo`` caches block texts across calls."""
    memo = {} if memo is None else memo
    out: list[str] = []

    def walk(codes: Iterable[int]) -> None:
        for code in codes:
            i, kind = divmod(code, 4)
            if kind == 0:
                out.append(lits[i])
            elif kind == 1:
                out.append(unit_text(i))
            elif kind == 2:
                u, a, b = slices[i]
                out.append(unit_text(u)[a:b])
            else:
                got = memo.get(i)
                if got is None:
                    mark = len(out)
                    walk(blocks[i])
                    got = memo[i] = "".join(out[mark:])
                    del out[mark:]
                out.append(got)

    walk(items)
    return "".join(out)
