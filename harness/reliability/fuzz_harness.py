"""Fuzz targets of the harness's own loaders: a host scenario YAML (``harness.hosts.scenario.load_scenario``) and a
LoCoMo file (``harness.workloads.locomo.load_locomo``), each only where its module imports."""

from __future__ import annotations

import json
from pathlib import Path

from harness.reliability.fuzz_core import Crash, FuzzInput, Target, documented_rejection, read_only


def _scenario(inp: FuzzInput, tmp: Path) -> str:
    """``harness.hosts.scenario.load_scenario`` on a fuzzed YAML file: a scenario, or one ``ScenarioError`` line
    that starts with the file's path (never another exception, never a multi-line message)."""
    from harness.hosts.scenario import Scenario, ScenarioError, load_scenario

    with read_only(inp, tmp / "scenario.yaml", tmp) as path:
        try:
            scn = load_scenario(path)
        except ScenarioError as exc:
            text = str(exc)
            if not text.startswith(str(path)) or "\n" in text or "\r" in text:
                raise Crash(f"ScenarioError not one line naming the file: {text[:200]!r}") from None
            return "rejected"
    if not isinstance(scn, Scenario):
        raise Crash(f"load_scenario returned {type(scn).__name__}")
    return "accepted"


def _locomo(inp: FuzzInput, tmp: Path) -> str:
    from harness.workloads.locomo import LocomoDataError, load_locomo

    with read_only(inp, tmp / "conv-1.json", tmp) as path:
        try:
            load_locomo(path)
        except LocomoDataError as exc:
            return documented_rejection(exc, path, (LocomoDataError,))
    return "accepted"


def _scenario_seed() -> bytes:
    from harness.hosts.scenario import SCENARIO_DIR

    return (SCENARIO_DIR / "capture-from-transcript.yaml").read_bytes()


_SCENARIO_KEYS = ("name", "description", "records", "hosts", "hooks", "sessions", "gap_s", "prompts", "text",
                  "replies", "tool", "input", "shell", "per_host", "ops", "before", "after", "create_point",
                  "retract", "ref", "kind", "content", "credibility", "live", "service", "expect", "captured",
                  "lost", "in_digest", "not_in_digest", "volunteered", "not_volunteered", "session_start",
                  "user_prompt_submit", "session_end", "timeouts")

_LOCOMO_SEED = json.dumps({"sample_id": "conv-1", "conversation": {
    "speaker_a": "A", "speaker_b": "B", "session_1_date_time": "1:00 pm on 8 May, 2023",
    "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}, {"speaker": "B", "dia_id": "D1:2", "text": "yo"}]},
    "qa": [{"question": "who?", "answer": "A", "evidence": ["D1:1"], "category": 1}]}).encode()


def targets() -> list[Target]:
    """The harness targets whose modules import, in report order."""
    t: list[Target] = []
    try:
        from harness.hosts.scenario import SCENARIO_DIR  # noqa: F401 - pydantic and PyYAML present
    except ImportError:
        pass
    else:
        t.append(Target("hosts-scenario", "harness.hosts.scenario.load_scenario (host scenario YAML)", _scenario,
                        _scenario_seed(), _SCENARIO_KEYS, False,
                        "a valid scenario = accepted; one ScenarioError line starting with the file's path "
                        "(YAML error with line:column, or the key path and the problem) = rejected"))
    try:
        from harness.workloads.locomo import load_locomo  # noqa: F401
    except ImportError:
        pass
    else:
        t.append(Target("locomo", "harness.workloads.locomo.load_locomo", _locomo, _LOCOMO_SEED,
                        ("sample_id", "conversation", "qa", "speaker_a", "speaker_b", "session_1", "session_1_date_time",
                         "dia_id", "text", "speaker", "question", "answer", "evidence", "category"), False,
                        "LocomoDataError naming the file = rejected"))
    return t
