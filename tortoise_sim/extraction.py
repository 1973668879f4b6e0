"""Extraction model seam (spec §1.5): ``ScriptedExtractor`` (default), ``MarkerExtractor`` [SIM], ``DspyExtractor``.

An extractor turns the windowed, redacted turns into a draft v2 payload (§3.6). The deterministic admission
stage (``execute_embed``) is simulator code in ``capture.py`` shared by all extractors.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from typing import Any, Protocol

from .text import pt_id, significant_tokens

__all__ = ["Extractor", "ScriptedExtractor", "MarkerExtractor", "DspyExtractor", "SearchFn"]

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
