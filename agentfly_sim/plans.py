"""Plan text shared by the PM classifier and the trainer: ``parse_plan``, ``pretty_plan``, ``build_icl_text``
(spec §4.2, acceptance §10.1). Pure Python so bank readers need no torch.

The plan is included regardless of label, always in pretty style (AGF-24); ``[CASE]``/``[PLAN]`` are plain text.
"""

from __future__ import annotations

import json
from typing import Any

CASE_TOKEN = "[CASE]"
PLAN_TOKEN = "[PLAN]"


def parse_plan(p: Any) -> Any:
    """None -> None; dict/list unchanged; str -> stripped, empty -> None, else ``json.loads`` (any JSON value),
    and on a parse failure ``{"plan": [{"description": <stripped>}]}``; any other type -> None."""
    if p is None:
        return None
    if isinstance(p, (dict, list)):
        return p
    if isinstance(p, str):
        s = p.strip()
        if not s:
            return None
        try:
            return json.loads(s)
        except Exception:  # noqa: BLE001
            return {"plan": [{"description": s}]}
    return None


def _desc(item: dict[str, Any]) -> Any:
    return item.get("description") or item.get("desc") or item.get("step") or str(item)


def pretty_plan(obj: Any) -> str:
    """Numbered step lines (spec §4.2); anything unrecognised, no lines, or an exception -> ``json.dumps`` form."""
    try:
        lines: list[str] = []
        if isinstance(obj, dict) and isinstance(obj.get("plan"), list):
            for item in obj["plan"]:
                if isinstance(item, dict):
                    sid = item.get("id")
                    lines.append(f"{sid}. {_desc(item)}" if sid is not None else f"- {_desc(item)}")
                else:
                    lines.append(f"- {item}")
        elif isinstance(obj, list):
            for i, item in enumerate(obj, 1):
                lines.append(f"{i}. {_desc(item)}" if isinstance(item, dict) else f"{i}. {item}")
        else:
            return json.dumps(obj, ensure_ascii=False)
        if not lines:
            return json.dumps(obj, ensure_ascii=False)
        return "\n".join(lines)
    except Exception:  # noqa: BLE001
        return json.dumps(obj, ensure_ascii=False)


def plan_text(plan: Any, style: str = "pretty") -> str:
    """``P`` of the ICL text: pretty (``pretty_plan(parse_plan(plan))`` or ``str(plan)``) or raw (``str(plan)``)."""
    if style == "raw":
        return str(plan)
    parsed = parse_plan(plan)
    return pretty_plan(parsed) if parsed is not None else str(plan)


def build_icl_text(case: Any, plan: Any) -> str:
    """``"[CASE]\\n{case}[\\n[PLAN]\\n{pretty plan}]"`` stripped (spec §4.2, §10.1)."""
    parts = [CASE_TOKEN, str(case)]
    if plan is not None:
        parts.extend([PLAN_TOKEN, plan_text(plan)])
    return "\n".join(parts).strip()
