"""Encoding deliveries: :class:`ConversationEncoder` (one conversation, usable in a worker process) and
:class:`DeliveryWriter` (the hook a design run calls; one atomic write)."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.deliveries.templates import (
    ESCAPES,
    FANOUT,
    FORMAT,
    KEY_CHARS,
    SHA_CHARS,
    TEMPLATES,
    VERSION,
    WRITE_STEP,
    escape,
    probe_key,
    rebuild,
    render,
    turn_fields,
)

if TYPE_CHECKING:
    from harness.workloads.base import Delivery
    from harness.workloads.locomo import Conversation, Probe, Turn


def _mirrors() -> dict[str, Callable[[Turn, Any], str]]:
    """The functions each template mirrors: ``(turn, session) -> the text the arms render``."""
    from harness.workloads.arm_text import dated_line, turn_line
    from harness.workloads.locomo import render_turn
    from harness.workloads.tortoise_arm import turn_body

    return {"render_turn": lambda t, s: render_turn(t, s.date_time),
            "render_turn_nodate": lambda t, s: render_turn(t, s.date_time, dates=False),
            "dated_line": dated_line, "turn_line": lambda t, s: turn_line(t),
            "stored_turn": lambda t, s: f"[{t.speaker}] {turn_body(t)}"}


def _mix(a: int, b: int) -> int:
    """A well-mixed 32-bit hash of two part codes (the block boundary rule)."""
    h = (a * 0x9E3779B1 + b * 0x85EBCA77 + 0x165667B1) & 0xFFFFFFFF
    h ^= h >> 15
    h = (h * 0x2C1B3C6D) & 0xFFFFFFFF
    h ^= h >> 12
    h = (h * 0x297A2D39) & 0xFFFFFFFF
    return h ^ (h >> 15)


def _common_prefix(text: str, start: int, r: str) -> int:
    """Length of the longest prefix of ``r`` that ``text`` has at ``start``."""
    lo, hi = 0, min(len(r), len(text) - start)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if text.startswith(r[:mid], start):
            lo = mid
        else:
            hi = mid - 1
    return lo


class ConversationEncoder:
    """The store's record of one conversation, built delivery by delivery (see the module docstring).

    ``template_mismatches`` counts, per template, the turns it renders differently from the function it mirrors
    (such a template is not used for those turns)."""

    def __init__(self, conversation: Conversation) -> None:
        self.conversation = conversation
        self.turns = conversation.turns()
        self.pos = {t.dia_id: i for i, t in enumerate(self.turns)}
        self.sessions = {s.index: s for s in conversation.sessions}
        self.lits: list[str] = []
        self._lits: dict[str, int] = {}
        self.units: list[list[int]] = []
        self._units: dict[tuple[int, int, int], int] = {}
        self.slices: list[list[int]] = []
        self._slices: dict[tuple[int, int, int], int] = {}
        self.blocks: list[list[int]] = []
        self._blocks: dict[tuple[int, ...], int] = {}
        self.probes: list[dict[str, Any]] = []
        self._probes: dict[str, int] = {}
        self.deliveries: list[list[Any]] = []
        self._seen: set[tuple[int, str]] = set()
        self.stored: dict[str, list[int]] = {}
        self._by_sha: dict[str, list[int]] = {}
        self._rendered: dict[int, str] = {}
        self.template_mismatches: dict[str, int] = {}
        self._index()

    # ------------------------------------------------------------------------------------------ candidates
    def _index(self) -> None:
        mirrors = _mirrors()
        names = list(TEMPLATES)
        cands: dict[str, list[tuple[int, int, int, str, int, int]]] = {}
        anchors: set[str] = set()
        for i, t in enumerate(self.turns):
            session = self.sessions[t.session]
            fields = turn_fields(t, session.date_time)
            seen: set[str] = set()
            for ti, name in enumerate(names):
                raw, _, _ = render(TEMPLATES[name], fields)
                if raw != mirrors[name](t, session):
                    self.template_mismatches[name] = self.template_mismatches.get(name, 0) + 1
                    continue
                for ei, how in enumerate(ESCAPES):
                    r, a, b = render(TEMPLATES[name], fields, how)
                    if r in seen or b >= len(r):  # the same text from an earlier template; a turn with no body
                        continue
                    seen.add(r)
                    cands.setdefault(r[b:b + KEY_CHARS], []).append((i, ti, ei, r, a, b))
                    anchors.add(r[a:b])
        self._cands = cands
        self._key_lens = sorted({len(k) for k in cands}, reverse=True)
        self._anchor = (re.compile("|".join(re.escape(a) for a in sorted(anchors, key=len, reverse=True)))
                        if anchors else None)

    # ------------------------------------------------------------------------------------------ parts
    def _lit(self, text: str) -> int:
        i = self._lits.get(text)
        if i is None:
            i = self._lits[text] = len(self.lits)
            self.lits.append(text)
        return i * 4

    def _unit(self, turn: int, template: int, esc: int) -> int:
        key = (turn, template, esc)
        i = self._units.get(key)
        if i is None:
            i = self._units[key] = len(self.units)
            self.units.append(list(key))
        return i * 4 + 1

    def _slice(self, unit_code: int, start: int, end: int) -> int:
        key = (unit_code // 4, start, end)
        i = self._slices.get(key)
        if i is None:
            i = self._slices[key] = len(self.slices)
            self.slices.append(list(key))
        return i * 4 + 2

    def _block(self, items: Sequence[int]) -> int:
        key = tuple(items)
        i = self._blocks.get(key)
        if i is None:
            i = self._blocks[key] = len(self.blocks)
            self.blocks.append(list(key))
        return i * 4 + 3

    def _literal(self, text: str, forms: Sequence[str], out: list[int]) -> None:
        """``text`` as literal parts, with each occurrence of one of ``forms`` (the question) a part of its own."""
        while text:
            hits = [(text.find(f), -len(f), f) for f in forms if f and f in text]
            if not hits:
                out.append(self._lit(text))
                return
            at, _, form = min(hits)
            if at:
                out.append(self._lit(text[:at]))
            out.append(self._lit(form))
            text = text[at + len(form):]

    def parts(self, text: str, question: str = "") -> list[int]:
        """``text`` as a flat list of parts (literals, units, slices; no blocks)."""
        forms = list(dict.fromkeys(f for f in (question, escape(question, "json")) if f))
        out: list[int] = []
        cursor = 0
        if self._anchor is not None:
            for m in self._anchor.finditer(text):
                if m.start() < cursor:
                    continue
                p, anchor = m.end(), m.group()
                best: tuple[int, int, tuple[int, int, int, str, int, int]] | None = None
                for klen in self._key_lens:
                    for cand in self._cands.get(text[p:p + klen], ()):
                        r, a, b = cand[3], cand[4], cand[5]
                        start = p - b
                        if start < cursor or r[a:b] != anchor or not text.startswith(r[:b], start):
                            continue
                        n = len(r) if text.startswith(r, start) else _common_prefix(text, start, r)
                        if best is None or n > best[0]:
                            best = (n, start, cand)
                if best is None:
                    continue
                n, start, (ti, tmpl, esc, r, _, _) = best
                if start > cursor:
                    self._literal(text[cursor:start], forms, out)
                code = self._unit(ti, tmpl, esc)
                out.append(code if n == len(r) else self._slice(code, 0, n))
                cursor = start + n
        if cursor < len(text):
            self._literal(text[cursor:], forms, out)
        return out

    def chunk(self, items: list[int]) -> list[int]:
        """Cut ``items`` into blocks by content, level by level, until at most ``FANOUT`` remain."""
        while len(items) > FANOUT:
            level: list[int] = []
            cur: list[int] = []
            prev = -1
            for x in items:
                cur.append(x)
                if len(cur) >= 2 and (_mix(prev, x) % FANOUT == 0 or len(cur) >= 4 * FANOUT):
                    level.append(self._block(cur))
                    cur = []
                prev = x
            if cur:
                level.append(self._block(cur) if len(cur) > 1 else cur[0])
            if len(level) >= len(items):
                break
            items = level
        return items

    # ------------------------------------------------------------------------------------------ rebuild
    def _unit_text(self, i: int) -> str:
        got = self._rendered.get(i)
        if got is None:
            ti, tmpl, esc = self.units[i]
            t = self.turns[ti]
            got = render(TEMPLATES[list(TEMPLATES)[tmpl]], turn_fields(t, self.sessions[t.session].date_time),
                         ESCAPES[esc])[0]
            self._rendered[i] = got
        return got

    def text_of(self, items: Iterable[int]) -> str:
        return rebuild(items, self.lits, self._unit_text, self.slices, self.blocks)

    # ------------------------------------------------------------------------------------------ adding
    def _probe(self, probe: Probe) -> int:
        key = probe_key(probe, self.conversation)[1]
        i = self._probes.get(key)
        if i is None:
            i = self._probes[key] = len(self.probes)
            self.probes.append({
                "key": key, "index": probe.index, "question": probe.question, "answer": probe.answer,
                "adversarial_answer": probe.adversarial_answer, "category": probe.category,
                "type": probe.type_name, "question_date": probe.question_date, "abstention": probe.abstention,
                "has_gold": probe.has_gold, "evidence": [self.pos[e] for e in probe.evidence if e in self.pos],
                "invalid_evidence": list(probe.invalid_evidence)})
        return i

    def add(self, probe: Probe, row: str, delivery: Delivery, *, stored: Iterable[str] | None = None) -> None:
        """Encode one delivered row (``ValueError`` for a (probe, row) given twice; ``RuntimeError`` if the
        rebuilt text differs from the delivered one, which would be a bug here)."""
        pi = self._probe(probe)
        if (pi, row) in self._seen:
            raise ValueError(f"{self.conversation.sample_id}: probe {self.probes[pi]['key']} row {row!r} added twice")
        self._seen.add((pi, row))
        text = delivery.text
        sha = hashlib.sha1(text.encode("utf-8")).hexdigest()
        top = self._by_sha.get(sha)
        if top is None:
            top = self.chunk(self.parts(text, probe.question))
            if self.text_of(top) != text:
                raise RuntimeError(f"{self.conversation.sample_id}: the store does not rebuild row {row!r} of probe "
                                   f"{self.probes[pi]['key']} exactly")
            self._by_sha[sha] = top
        evidence = self.probes[pi]["evidence"]
        credited = [e for e in evidence if self.turns[e].dia_id in delivery.dia_ids]
        from harness.workloads.metrics import delivered_ranking

        ranking = delivered_ranking(delivery.meta)
        ranks = None if ranking is None else [self.pos.get(x, -1) for x in ranking]
        self.deliveries.append([pi, row, top, credited, ranks, sha[:SHA_CHARS]])
        if stored is not None and row not in self.stored:
            self.stored[row] = sorted(self.pos[i] for i in stored if i in self.pos)

    def drop_rows(self, rows: Iterable[str]) -> None:
        """Forget every delivery of ``rows`` (an arm that failed after delivering some)."""
        gone = set(rows)
        self.deliveries = [d for d in self.deliveries if d[1] not in gone]
        self._seen = {k for k in self._seen if k[1] not in gone}
        for r in gone:
            self.stored.pop(r, None)

    def record(self) -> dict[str, Any]:
        """The conversation's JSON-serialisable record (what the file holds per conversation)."""
        c = self.conversation
        return {
            "id": c.sample_id, "workload": c.workload, "source": Path(c.source).name,
            "speakers": [c.speaker_a, c.speaker_b],
            "sessions": [[s.index, s.date_time, s.session_id] for s in c.sessions],
            "turns": [[t.dia_id, t.speaker, t.text, t.caption, t.session, t.role] for t in self.turns],
            "probes": self.probes, "lits": self.lits, "units": self.units, "slices": self.slices,
            "blocks": self.blocks, "deliveries": self.deliveries, "stored": self.stored,
            "template_mismatches": self.template_mismatches,
        }



class DeliveryWriter:
    """The hook a design run calls per delivered row; ``close()`` writes ``path`` atomically.

    ``data`` is the run's data label (the per-probe table's), ``synthetic`` whether the data is generated (the
    only store a repository may hold)."""

    def __init__(self, path: Path | str, *, data: str = "", synthetic: bool = False,
                 fault_hook: Callable[[str], None] | None = None) -> None:
        self.path = Path(path)
        self.data = data
        self.synthetic = synthetic
        self.fault_hook = fault_hook
        self._encoders: dict[str, ConversationEncoder] = {}
        self._records: dict[str, dict[str, Any]] = {}

    def encoder(self, conversation: Conversation) -> ConversationEncoder:
        enc = self._encoders.get(conversation.sample_id)
        if enc is None:
            if conversation.sample_id in self._records:
                raise ValueError(f"{conversation.sample_id}: conversation already added as a finished record")
            enc = self._encoders[conversation.sample_id] = ConversationEncoder(conversation)
        return enc

    def add(self, conversation: Conversation, probe: Probe, row: str, delivery: Delivery, *,
            stored: Iterable[str] | None = None) -> None:
        """One delivered row: ``delivery`` is what the arm returned for ``probe``; ``stored`` (optional) the ids
        of ``Arm.stored()`` for the arm that delivered ``row`` (kept once per conversation and row)."""
        self.encoder(conversation).add(probe, row, delivery, stored=stored)

    def add_record(self, record: Mapping[str, Any]) -> None:
        """A conversation encoded elsewhere (``ConversationEncoder.record()`` in a worker process)."""
        cid = str(record["id"])
        if cid in self._records or cid in self._encoders:
            raise ValueError(f"{cid}: conversation added twice")
        self._records[cid] = dict(record)

    def records(self) -> list[dict[str, Any]]:
        return [*(e.record() for e in self._encoders.values()), *self._records.values()]

    def payload(self) -> dict[str, Any]:
        from harness.runs import code_identity

        return {"format": FORMAT, "version": VERSION, "data": self.data, "synthetic": self.synthetic,
                "code": code_identity(), "templates": TEMPLATES, "escapes": list(ESCAPES),
                "conversations": self.records()}

    def close(self) -> Path:
        """Write the store (gzip-compressed JSON) atomically; the fault hook sees :data:`WRITE_STEP`."""
        from harness.atomic import write_atomic

        raw = json.dumps(self.payload(), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        write_atomic(self.path, gzip.compress(raw, compresslevel=6, mtime=0), self.fault_hook, WRITE_STEP)
        return self.path
