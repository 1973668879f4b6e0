from __future__ import annotations

import dspy
import pytest

from harness.offline_lm import ScriptedLM, ScriptExhausted, format_fields, parse_fields


class Triage(dspy.Signature):
    """Decide which file the user should open first."""

    user_message: str = dspy.InputField()
    files: list[str] = dspy.InputField()
    choice: str = dspy.OutputField()
    confidence: float = dspy.OutputField()


def test_predict_runs_offline_and_records_messages() -> None:
    lm = ScriptedLM(policy=lambda r: {"choice": r.inputs["user_message"].split()[-1], "confidence": 0.5})
    with dspy.context(lm=lm):
        pred = dspy.Predict(Triage)(user_message="please open main.py", files=["main.py", "util.py"])
    assert pred.choice == "main.py" and pred.confidence == 0.5
    (req,) = lm.requests
    assert [m["role"] for m in req.messages] == ["system", "user"]
    assert "Decide which file the user should open first." in req.system
    assert "please open main.py" in req.user and "util.py" in req.user
    assert req.inputs["user_message"] == "please open main.py"
    assert req.output_fields == ["choice", "confidence"]
    assert req.messages == dspy.ChatAdapter().format(
        Triage, demos=[], inputs={"user_message": "please open main.py", "files": ["main.py", "util.py"]})


def test_queue_is_consumed_in_order_and_exhaustion_is_an_error() -> None:
    lm = ScriptedLM(outputs=[{"choice": "a", "confidence": 1}, {"choice": "b", "confidence": 0}])
    with dspy.context(lm=lm):
        got = [dspy.Predict(Triage)(user_message="x", files=[]).choice for _ in range(2)]
        assert got == ["a", "b"]
        with pytest.raises(Exception) as info:  # dspy wraps engine errors; the cause is ours
            dspy.Predict(Triage)(user_message="x", files=[])
    assert isinstance(info.value, ScriptExhausted) or isinstance(info.value.__cause__, ScriptExhausted)


def test_identical_prompts_are_not_cached_and_rng_is_seeded() -> None:
    def judge(r):
        return {"choice": "yes" if r.rng.random() < 0.5 else "no", "confidence": 1.0}

    def run(seed: int) -> list[str]:
        lm = ScriptedLM(policy=judge, seed=seed)
        with dspy.context(lm=lm):
            out = [dspy.Predict(Triage)(user_message="same", files=[]).choice for _ in range(12)]
        assert len(lm.requests) == 12
        return out

    assert run(3) == run(3)
    assert run(3) != run(4)


def test_raw_string_answers_and_field_round_trip() -> None:
    text = format_fields({"a": "one\ntwo", "b": [1, 2]})
    assert parse_fields(text) == {"a": "one\ntwo", "b": "[1, 2]", "completed": ""}
    lm = ScriptedLM(outputs=["[[ ## choice ## ]]\nz\n\n[[ ## confidence ## ]]\n0.25\n\n[[ ## completed ## ]]"])
    with dspy.context(lm=lm):
        assert dspy.Predict(Triage)(user_message="q", files=[]).confidence == 0.25


def test_needs_a_policy_or_outputs() -> None:
    with pytest.raises(ValueError):
        ScriptedLM()
