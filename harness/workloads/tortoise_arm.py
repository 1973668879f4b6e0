"""Tortoise arm: each LoCoMo session captured into a Kuzu graph; a probe is a prompt through the volunteer hook
(row ``tortoise-volunteer``) and through upstream's evaluation retrieval path (row ``tortoise-eval``).

Mapping choices:

- **Store.** One ``Tortoise`` SDK instance over an in-memory Kuzu database (``path=None``; the arm owns it for
  one conversation and nothing outlives the run), default ``SimConfig`` (the analysed profile: analysed turn
  writer, capture promotes and runs the ingest dream, MiniLM embeddings, cached exact search), fixed seed and a
  step clock (so ids and timestamps are reproducible). The encoder is the store's own ``MiniLMEncoder`` behind
  ``PrecomputedEncoder``: the arm encodes every turn and point text it is about to capture in one batched call,
  and capture's many one-text calls then read that cache (same vectors up to batch float noise).
- **Capture.** One ``capture_session`` per LoCoMo session, in order, with ``session_id = "<sample_id>-s<index>"``.
  The conversation handed to capture is the session's turns as ``{"role": <speaker name>, "content": <text,
  plus " [shared a photo: <caption>]">}``: the speakers are two people, not a user and an assistant, so the role
  carries the name (capture accepts any role string, §3.2) and each stored turn Point reads
  ``"[<speaker>] <text>"``. On LongMemEval the speaker is the turn's real role (``"user"`` / ``"assistant"``,
  ``harness.workloads.lme_workload``), so capture sees the transcript a host would hand it: better fidelity than
  LoCoMo's names.
- **Extraction.** Offline by default: ``TurnPointExtractor`` proposes **one point per turn** (``pointKind
  "observation"``), content ``"[<session date-time>] <speaker>: <text>"`` (``arm_text.dated_line``; the date is
  what a host transcript's timestamp would give the extractor, handed over by the arm per session; a session
  without a date-time, as on LongMemEval where the date is the header line of the session's first turn, gives
  ``"<speaker>: <text>"`` with no ``"[] "``), with the turn
  as its source (``source_turn_id`` = the turn's window index, ``quote`` = the turn text), the first four
  significant tokens as search keys, and both speakers as ``core:person`` entities the points are about. Every
  proposal then goes through the real admission gates and writers (``execute_embed``: dedupe, consolidation with
  earlier sessions, promotion, ingest dream). With ``ctx.lm`` set the extractor is ``DspyExtractor(dspy.LM(lm))``
  instead (``lm_kwargs``, e.g. ``{"api_base": ...}``, go to ``dspy.LM``), so what is stored depends on the model.
  Capture is fail-open: a session whose extraction fails keeps its turns and gets no points; the count of such
  sessions and of extracted points is in every row's meta (``capture_errors``, ``extracted_points``).
- **Digest.** The session-start digest (``hook_session_start``: recent points, confidence snapshot) is computed
  once after ingest (volunteering and search write nothing, so it is the same for every probe) and **prepended** to
  the text of both rows: each probe is treated as opening a session whose first context is the digest.
- **tortoise-volunteer** = digest + the hook's ``additionalContext`` block + the question. The prompt goes in as
  the codex hook's stdin JSON (``{"prompt": question}``) through ``hook_volunteer_turn`` with the faithful
  defaults (3 pointers, ``min_confidence`` 0.7, the intent, confidence and suppression gates, the 8 KiB block
  cap); the arm reads the block back out of the hook's JSON line. The block carries **pointers and synopses**,
  not turns: ``meta["named_ids"]`` = the turns whose extracted points the block points at (``point/<id>`` parsed
  from the text, mapped to a turn through the point's ``session_id`` + ``source_turn_id`` read from the store),
  while ``dia_ids`` = the turns whose text is actually in the delivered text (a synopsis is cut to 160 characters,
  so a long turn can be named without being carried). ``meta["block_ids_carried"]`` is the part of ``dia_ids``
  that comes from the block rather than the digest.
- **Optional non-faithful row** ``tortoise-volunteer-min<x>`` (constructor ``volunteer_min_confidence=x``, off
  by default): the same hook path with the pipeline's ``min_confidence`` lowered to ``x``. Captured points carry no
  EP evidence unless an operator supports them, so their confidence is the prior mean 0.5 and the faithful 0.7
  gate keeps every one of them out of the block; this row shows what the block would carry past that gate.
- **tortoise-eval** = digest + the evaluation pool + the question. Pool: ``search_points(question,
  limit=pool_limit)`` (hybrid search over turn Points and extracted points; ``pool_limit`` 10 by default, the SDK
  search default), then ``expand_pool(enabled=True, is_temporal=Probe.is_temporal)`` (source-session expansion,
  MEM-RTE-source-expansion, spec §11: at most 5 seeded sessions, up to ``EXPANSION_PER_SESSION`` 3 retained turns
  per seeded session, so a fan-out of 15, and ``EXPANSION_TOTAL`` 10 in all: the defaults of the upstream
  LongMemEval driver, used on both workloads; upstream skips it for temporal questions: LoCoMo's category 2,
  LongMemEval's ``temporal-reasoning``). The pool is rendered one hit per line, ``"- <content>"``, in pool order. Search ranks
  stored turns and extracted points alike, so one turn can fill two pool slots (its turn Point and its point), and
  expansion takes a session's turns in string id order (``_t10`` before ``_t2``, TOR-45): both are the design's
  behaviour under this mapping and show in ``meta["ranked_ids"]``.
- **tortoise-eval-noexp** (LongMemEval conversations only, ``ctx.workload == "longmemeval"``; a LoCoMo run has
  no such row, so LoCoMo's results are unchanged): the same digest, the same search pool and the question, without
  the expansion, so a LongMemEval run shows what the expansion adds in delivered recall and tokens. It reuses the
  evaluation row's search (one ``search_points`` call per probe), so its ``row_ms`` is 0 (the shared search is
  the evaluation row's cost, which also reports ``search_ms`` and ``expansion_ms`` apart).
- **Recorded extraction** (arm ``tortoise-recorded``, ``TortoiseRecordedArm``, rows ``tortoise-recorded-volunteer``
  and ``tortoise-recorded-eval``): the same store, digest, hook path and evaluation path, but the extractor is
  ``tortoise_sim.extraction.ReplayExtractor`` replaying LoCoMo's recorded LM facts (``observation``) per session
  (``harness.workloads.tortoise_recorded``): each fact becomes a derived ``observation`` point sourced to its first
  tagged turn, beside the verbatim turn Points. A delivered fact credits its tagged turns. A conversation without
  recorded facts makes this arm unavailable for it, with the reason.
- **Provenance.** A turn is in a text when ``"[<speaker>] <text>"`` (a stored turn) or ``"<speaker>: <text>"``
  (an extracted point, a synopsis) occurs in it, whitespace squashed (``arm_text.ids_in_text``); a turn without
  content (a blank LongMemEval turn) is never counted. ``stored()``
  reads every Point's content back from Kuzu and applies the same test.
"""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from typing import Any

from harness.progress import report
from harness.workloads.arm_text import has_content, squash
from harness.workloads.base import ArmContext, Delivery
from harness.workloads.locomo import LOCOMO_TEMPORAL, Conversation, Probe, Session, Turn

TEMPORAL_CATEGORY = LOCOMO_TEMPORAL
EXPANSION_PER_SESSION = 3
EXPANSION_TOTAL = 10
"""Source-session expansion budget: the upstream LongMemEval driver's (5 seeded sessions x 3 = fan-out 15, 10 in
all), equal to ``tortoise_sim.expansion``'s defaults."""
_POINTER = re.compile(r"point/(\S+?)(?=[\s\]]|$)")


def turn_body(turn: Turn) -> str:
    """The content handed to capture for a turn: its text, plus the photo caption when there is one."""
    return turn.text + (f" [shared a photo: {turn.caption}]" if turn.caption else "")


def dated_point(date: str, role: str, content: str) -> str:
    """An extracted point's content: ``"[<date>] <role>: <content>"``, or without the ``"[<date>] "`` when the
    session has no date-time (LongMemEval: the date is inside the first turn)."""
    return f"[{date}] {role}: {content}" if date else f"{role}: {content}"


def capture_window(session: Session) -> list[dict[str, str]]:
    """A LoCoMo session as the ``{role, content}`` list capture takes (role = speaker name)."""
    return [{"role": t.speaker, "content": turn_body(t)} for t in session.turns]


class TurnPointExtractor:
    """Offline extractor: one ``observation`` point per turn, dated, about its speakers, sourced to its turn."""

    route = "scripted:turn-points"

    def __init__(self) -> None:
        self.dates: dict[str, str] = {}
        self.calls = 0

    def extract(self, turns: list[dict], session_id: str, search: Any = None) -> dict:
        from tortoise_sim.text import pt_id, significant_tokens

        self.calls += 1
        date = self.dates.get(session_id, "")
        speakers = list(dict.fromkeys(str(t.get("role")) for t in turns))
        points = []
        for i, t in enumerate(turns):
            content = str(t.get("content") or "")
            if not content.strip():
                continue
            text = dated_point(date, str(t.get("role")), content)
            points.append({"id": pt_id(text), "content": text, "pointKind": "observation", "reason": "NEW",
                           "confidence": 0.5, "c_cal": 0.5, "about_entities": [str(t.get("role"))],
                           "source_ref": f"turn:{i}", "quote": content[:200], "status": "draft",
                           "search_keys": significant_tokens(content)[:4], "source_turn_id": i})
        return {"session_id": session_id, "extractor": self.route, "summary": "",
                "entities": [{"name": s, "kind": "core:person", "passes_frequency_gate": True} for s in speakers],
                "events": [], "points": points, "operators": [], "supersessions": []}


class PrecomputedEncoder:
    """The store's MiniLM encoder behind a text-keyed cache that the arm fills in one batched call.

    Injected through ``Tortoise(encoder=...)``. Capture embeds each stored turn and each extracted point with a
    separate call per point; the arm knows those texts before capture, so it encodes them all at once
    (``warm``) and the store's calls then read the cache. A text not in the cache (a redacted turn, a point an LM
    wrote) is encoded on the spot. Vectors equal per-call encoding up to batch float noise."""

    def __init__(self, base: Any) -> None:
        self.base = base
        self.dim = getattr(base, "dim", 384)
        self.cache: dict[str, Any] = {}
        self.hits = 0
        self.misses = 0

    def warm(self, texts: list[str]) -> None:
        from tortoise_sim.embed import cut_words

        todo = list(dict.fromkeys(cut_words(t) for t in texts if cut_words(t) not in self.cache))
        if todo:
            for text, vec in zip(todo, self.base.encode(todo), strict=True):
                self.cache[text] = vec

    def encode(self, texts: Any) -> Any:
        import numpy as np

        items = list(texts)
        missing = [t for t in dict.fromkeys(items) if t not in self.cache]
        self.misses += len(missing)
        self.hits += len(items) - len(missing)
        if missing:
            for text, vec in zip(missing, self.base.encode(missing), strict=True):
                self.cache[text] = vec
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self.cache[t] for t in items]).astype(np.float32)


class TortoiseArm:
    """Rows ``tortoise-volunteer`` (the hook path) and ``tortoise-eval`` (search pool + source-session expansion)."""

    name = "tortoise"
    rows: tuple[str, ...] = ("tortoise-volunteer", "tortoise-eval")
    volunteer_row, eval_row = rows

    def __init__(self, ctx: ArmContext, pool_limit: int = 10, volunteer_min_confidence: float | None = None,
                 lm_kwargs: dict[str, Any] | None = None) -> None:
        from tortoise_sim import Tortoise
        from tortoise_sim.store import StepClock

        self.ctx = ctx
        self.pool_limit = pool_limit
        self.open_gate = volunteer_min_confidence
        self.noexp_row = f"{self.eval_row}-noexp" if ctx.workload == "longmemeval" else None
        if self.noexp_row is not None:
            self.rows = (*self.rows, self.noexp_row)
        self.open_row = (f"{self.volunteer_row}-min{volunteer_min_confidence:g}"
                         if volunteer_min_confidence is not None else None)
        if self.open_row is not None:
            self.rows = (*self.rows, self.open_row)
        self.extractor: Any = self._make_extractor(ctx, lm_kwargs)
        from tortoise_sim.embed import MiniLMEncoder

        self.encoder = PrecomputedEncoder(MiniLMEncoder())
        self.t = Tortoise(None, clock=StepClock(datetime(2026, 3, 1, 9, 0, tzinfo=UTC)), seed=ctx.seed,
                          extractor=self.extractor, encoder=self.encoder)
        self.conversation: Conversation | None = None
        self.forms: dict[str, tuple[str, str]] = {}
        self._squashed: dict[str, tuple[str, str]] = {}
        self.turn_of: dict[tuple[str, int], str] = {}
        self.digest = ""
        self.captures: list[dict[str, Any]] = []
        self.ingest_s = 0.0

    def _make_extractor(self, ctx: ArmContext, lm_kwargs: dict[str, Any] | None) -> Any:
        if ctx.lm:
            import dspy

            from tortoise_sim.extraction import DspyExtractor

            return DspyExtractor(dspy.LM(ctx.lm, **(lm_kwargs or {})))
        return TurnPointExtractor()

    def session_id(self, session: Session) -> str:
        assert self.conversation is not None
        return f"{self.conversation.sample_id}-s{session.index}"

    def _point_texts(self, conversation: Conversation) -> list[str]:
        """The point contents the extractor will propose (encoded in one batch before capture)."""
        if not isinstance(self.extractor, TurnPointExtractor):
            return []
        return [dated_point(s.date_time, t.speaker, turn_body(t)) for s in conversation.sessions for t in s.turns]

    def ingest(self, conversation: Conversation) -> None:
        started = time.perf_counter()
        self.conversation = conversation
        texts = [f"[{t.speaker}] {turn_body(t)}" for s in conversation.sessions for t in s.turns]
        texts += self._point_texts(conversation)
        report(0, status=f"encoding {len(texts)} texts")
        self.encoder.warm(texts)
        done = 0
        for n, s in enumerate(conversation.sessions, 1):
            report(done, status=f"capturing session {n}/{len(conversation.sessions)}")
            sid = self.session_id(s)
            for i, t in enumerate(s.turns):
                self.forms[t.dia_id] = (f"[{t.speaker}] {turn_body(t)}", f"{t.speaker}: {turn_body(t)}")
                if has_content(t):  # a blank turn's "[user] " would be found in every text
                    self._squashed[t.dia_id] = (squash(self.forms[t.dia_id][0]), squash(self.forms[t.dia_id][1]))
                self.turn_of[(sid, i)] = t.dia_id
            if isinstance(self.extractor, TurnPointExtractor):
                self.extractor.dates[sid] = s.date_time
            res = self.t.capture_session(capture_window(s), session_id=sid)
            self.captures.append({k: res.get(k) for k in ("session_id", "turns", "extracted", "extraction_mode",
                                                          "ok", "errors")})
            done += len(s.turns)
        report(done, status="session-start digest")
        self.digest, _ = self.t.hook_session_start()
        self.ingest_s = time.perf_counter() - started

    # ------------------------------------------------------------------------------------------ provenance
    def _ids(self, text: str) -> frozenset[str]:
        hay = squash(text)
        return frozenset(i for i, (a, b) in self._squashed.items() if a in hay or b in hay)

    def _turn_for_point(self, pid: str) -> str | None:
        row = self.t.get_point(pid) or {}
        sid, idx = row.get("session_id"), row.get("source_turn_id")
        if sid is None or idx is None:
            m = re.match(r"^(.*)_t(\d+)$", pid)  # a turn Point: <sid>_t<i>
            if not m:
                return None
            sid, idx = m.group(1), int(m.group(2))
        return self.turn_of.get((str(sid), int(idx)))

    # ------------------------------------------------------------------------------------------ rows
    def _volunteer(self, probe: Probe, min_confidence: float | None = None) -> Delivery:
        from tortoise_sim.hooks import hook_volunteer_turn
        from tortoise_sim.volunteer import run_volunteer_pipeline

        started = time.perf_counter()
        stdin = json.dumps({"prompt": probe.question})
        if min_confidence is None:
            stdout, _code = self.t.hook_volunteer_turn(stdin, "codex")
        else:
            store = self.t.store
            stdout, _code = hook_volunteer_turn(
                stdin, "codex", store=store,
                volunteer=lambda window: run_volunteer_pipeline(store, window, min_confidence=min_confidence))
        block = ""
        if stdout.strip():
            block = json.loads(stdout)["hookSpecificOutput"]["additionalContext"]
        ms = (time.perf_counter() - started) * 1000
        pointed = _POINTER.findall(block)
        named = [self._turn_for_point(p) for p in pointed]
        text = "\n".join(x for x in (self.digest, block, probe.question) if x)
        carried = self._ids(text)
        meta = {"min_confidence": 0.7 if min_confidence is None else min_confidence,
                "faithful": min_confidence is None, "pointers": pointed, "named_ids": sorted({n for n in named if n}),
                "block_ids_carried": sorted(self._ids(block)), "digest_ids": sorted(self._ids(self.digest)),
                "block_chars": len(block), "digest_chars": len(self.digest), "row_ms": round(ms, 3)}
        return Delivery(text=text, dia_ids=carried, meta=meta)

    def _pool_delivery(self, probe: Probe, hits: list[dict[str, Any]], meta: dict[str, Any],
                       timing: dict[str, float]) -> Delivery:
        """Digest + one ``"- <content>"`` line per hit + the question; ranked ids in hit order."""
        pool_text = "\n".join(f"- {h.get('content') or ''}" for h in hits)
        text = "\n".join(x for x in (self.digest, pool_text, probe.question) if x)
        ranked = [self._turn_for_point(str(h.get("id"))) for h in hits]
        meta = {**meta, "ranked_ids": [r or "?" for r in ranked], "digest_ids": sorted(self._ids(self.digest)),
                **timing}
        return Delivery(text=text, dia_ids=self._ids(text), meta=meta)

    def _eval(self, probe: Probe) -> dict[str, Delivery]:
        started = time.perf_counter()
        pool, _trace = self.t.search_points(probe.question, self.pool_limit)
        searched = time.perf_counter()
        temporal = probe.is_temporal
        expanded, report = self.t.expand_pool(pool, enabled=True, is_temporal=temporal,
                                              per_session_cap=EXPANSION_PER_SESSION, total_cap=EXPANSION_TOTAL)
        done = time.perf_counter()
        ms = (done - started) * 1000
        meta: dict[str, Any] = {
            "pool_size": len(pool), "expanded_size": len(expanded), "expansion_ran": bool(report.get("ran")),
            "expansion_added": int(report.get("total") or 0), "is_temporal": temporal}
        timing = ({"search_ms": round((searched - started) * 1000, 3),
                   "expansion_ms": round((done - searched) * 1000, 3)} if self.noexp_row is not None else {})
        out = {self.eval_row: self._pool_delivery(probe, expanded, meta, {**timing, "row_ms": round(ms, 3)})}
        if self.noexp_row is not None:
            out[self.noexp_row] = self._pool_delivery(
                probe, list(pool), {"pool_size": len(pool), "expansion": False, "is_temporal": temporal},
                {"row_ms": 0.0})
        return out

    def deliver(self, probe: Probe) -> dict[str, Delivery]:
        out = {self.volunteer_row: self._volunteer(probe), **self._eval(probe)}
        if self.open_row is not None:
            out[self.open_row] = self._volunteer(probe, self.open_gate)
        capture = {"extraction_mode": self.captures[0]["extraction_mode"] if self.captures else None,
                   "extracted_points": sum(int(c.get("extracted") or 0) for c in self.captures),
                   "capture_errors": sum(1 for c in self.captures if not c.get("ok"))}
        for d in out.values():
            d.meta.update(capture)
        return out

    def stored(self) -> frozenset[str]:
        rows = self.t.store.query("MATCH (p:Point) WHERE p.content IS NOT NULL RETURN p.content AS c")
        return self._ids("\n".join(str(r["c"]) for r in rows))

    def close(self) -> None:
        self.t.close()


class TortoiseRecordedArm(TortoiseArm):
    """Rows ``tortoise-recorded-volunteer`` and ``tortoise-recorded-eval``: the same store, hook path and
    evaluation path as ``TortoiseArm``, with LoCoMo's recorded LM facts as the extractor's output.

    Extraction is ``tortoise_sim.extraction.ReplayExtractor`` over ``tortoise_recorded.recorded_observations``
    (one recorded payload per session, keyed by this arm's session ids): capture still writes every turn as a turn
    Point, then admission writes each fact as a derived ``observation`` point sourced to its first tagged turn.
    ``ctx.lm`` is ignored: the recording stands in for the model. A conversation whose file has no (or an empty)
    ``observation`` field makes ``ingest`` raise ``ArmUnavailable`` with the loader's reason.

    Provenance: a turn is credited by its text, as in ``TortoiseArm``; a fact point is credited when its whole
    content is in the delivered text (a synopsis or digest line cut short does not carry it), and then credits
    every turn its fact was tagged with (facts are paraphrases: their text names no turn). Every delivery's meta
    says what is stored and delivered, facts and turns apart: ``stored_turn_points``, ``stored_fact_points``,
    ``stored_ids_via_turns``, ``stored_ids_via_facts`` (constant per conversation), ``facts_delivered``,
    ``ids_via_facts`` and ``ids_via_turns`` (per delivery), plus ``facts_recorded``, ``facts_unsourced`` and
    ``facts_merged`` from the recording."""

    name = "tortoise-recorded"
    rows: tuple[str, ...] = ("tortoise-recorded-volunteer", "tortoise-recorded-eval")
    volunteer_row, eval_row = rows

    def __init__(self, ctx: ArmContext, pool_limit: int = 10, volunteer_min_confidence: float | None = None) -> None:
        super().__init__(ctx, pool_limit, volunteer_min_confidence)
        self.facts: Any = None
        self._fact_hay: dict[str, str] = {}
        self.stored_counts: dict[str, int] = {}

    def _make_extractor(self, ctx: ArmContext, lm_kwargs: dict[str, Any] | None) -> Any:
        from tortoise_sim.extraction import RecordedExtractions, ReplayExtractor

        return ReplayExtractor(RecordedExtractions())  # replaced per conversation in ingest

    def _point_texts(self, conversation: Conversation) -> list[str]:
        return list(self.facts.content.values()) if self.facts is not None else []

    def ingest(self, conversation: Conversation) -> None:
        from harness.workloads.arms import ArmUnavailable
        from harness.workloads.tortoise_recorded import recorded_observations
        from tortoise_sim.extraction import ReplayExtractor

        reason = conversation.recorded_unavailable("observation")
        if reason is not None:
            raise ArmUnavailable(f"arm {self.name!r} unavailable for {conversation.sample_id}: {reason}")
        self.conversation = conversation
        self.facts = recorded_observations(conversation, self.session_id)
        self._fact_hay = {pid: squash(c) for pid, c in self.facts.content.items()}
        self.extractor = ReplayExtractor(self.facts.recorded)
        self.t.extractor = self.extractor
        super().ingest(conversation)

    def _facts_in(self, text: str) -> list[str]:
        hay = squash(text)
        return [pid for pid, c in self._fact_hay.items() if c and c in hay]

    def _fact_ids(self, pids: list[str]) -> frozenset[str]:
        assert self.facts is not None
        return frozenset(i for pid in pids for i in self.facts.provenance.get(pid, ()))

    def _ids(self, text: str) -> frozenset[str]:
        return super()._ids(text) | self._fact_ids(self._facts_in(text))

    def stored(self) -> frozenset[str]:
        rows = self.t.store.query("MATCH (p:Point) WHERE p.content IS NOT NULL RETURN p.id AS id, "
                                  "p.content AS c, p.pointKind AS k")
        turn_points = [r for r in rows if r["k"] == "event" and re.match(r"^.*_t\d+$", str(r["id"]))]
        via_turns = TortoiseArm._ids(self, "\n".join(str(r["c"]) for r in turn_points))
        assert self.facts is not None
        fact_points = [str(r["id"]) for r in rows if str(r["id"]) in self.facts.provenance]
        via_facts = self._fact_ids(fact_points)
        self.stored_counts = {"stored_turn_points": len(turn_points), "stored_fact_points": len(fact_points),
                              "stored_ids_via_turns": len(via_turns), "stored_ids_via_facts": len(via_facts)}
        return via_turns | via_facts

    def deliver(self, probe: Probe) -> dict[str, Delivery]:
        out = super().deliver(probe)
        if not self.stored_counts:
            self.stored()
        assert self.facts is not None
        recording = {"facts_recorded": self.facts.facts, "facts_unsourced": self.facts.facts_unsourced,
                     "facts_merged": self.facts.facts_merged}
        for d in out.values():
            pids = self._facts_in(d.text)
            d.meta.update(self.stored_counts)
            d.meta.update(recording)
            d.meta.update({"facts_delivered": len(pids), "ids_via_facts": sorted(self._fact_ids(pids)),
                           "ids_via_turns": sorted(TortoiseArm._ids(self, d.text))})
        return out
