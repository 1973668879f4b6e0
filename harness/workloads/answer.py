"""Optional answering: a dspy module answers each probe from the delivered text; LoCoMo-style token F1 scores it.

Only with ``--lm MODEL`` (any dspy LM string, e.g. ``openai/gpt-4o-mini`` or a local server's
``openai/<name>`` with ``api_base``). Without it, no answer field exists anywhere: memsim never reports an
accuracy it did not measure.

- Module: ``dspy.Predict(AnswerFromMemory)``: inputs ``memory`` (the delivered text, verbatim) and ``question``;
  output ``answer``, a short phrase, or "Not mentioned in the conversation" when the memory does not hold it.
- Scoring follows LoCoMo's evaluation script: ``metrics.normalize_answer`` (lowercase, drop commas and
  punctuation, remove a/an/the/and, collapse spaces), Porter-stemmed tokens, token F1.
  Category 1 (multi-hop, several answers): the gold and the prediction are split on commas and the score is the
  mean over gold parts of the best F1 against any predicted part. Category 3: the gold is cut at its first ``;``
  (LoCoMo keeps only the first alternative). Categories 2 and 4: plain token F1. Category 5 (adversarial): 1 when
  the prediction says "not mentioned" or "no information available", else 0.
- ``Answerer.check`` makes one call before a run, so a misconfigured LM (no API key: set ``OPENAI_API_KEY``, any
  value for a local server; no server) stops the run with one line instead of failing every probe. Every LM
  failure is said by :func:`lm_error_line`: a missing or refused key names the environment variable to set.
- A failed LM call is recorded as ``answer_error`` with the message and left out of the F1 average (counted
  beside it), never scored as 0 or 1.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402

from harness.workloads.locomo import Probe  # noqa: E402
from harness.workloads.metrics import answer_tokens  # noqa: E402

NOT_MENTIONED = "Not mentioned in the conversation"


class AnswerFromMemory(dspy.Signature):
    """Answer the question about a long conversation using only the memory given. Reply with a short phrase
    (a name, a date, a few words). When a date is asked, work it out from the session dates in the memory. If the
    memory does not contain the answer, reply exactly: Not mentioned in the conversation."""

    memory: str = dspy.InputField(desc="what the memory system delivered for this question")
    question: str = dspy.InputField()
    answer: str = dspy.OutputField(desc="a short phrase")


_KEY_VAR = re.compile(r"\b([A-Z][A-Z0-9_]*_API_KEY)\b")
_CREDENTIAL_WORDS = ("auth", "credential", "notconfigured", "apikey")


def _causes(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and e not in out:
        out.append(e)
        e = e.__cause__ or e.__context__
    return out


def lm_error_line(exc: BaseException, limit: int = 300) -> str:
    """One whole line for a failed LM call (the reader, the judge, the LoCoMo answerer).

    Missing or refused credentials name the environment variable to set, from the provider's own ``env_keys``
    (dspy's configuration errors carry them) or an ``*_API_KEY`` its message names: ``no API key: set
    OPENAI_API_KEY in the environment ...`` when the variable is unset, ``the provider refused the key in
    OPENAI_API_KEY ...`` when it is set. Anything else: the exception's type and the first paragraph of its message
    (a provider's multi-line guidance dropped), cut between words within ``limit`` characters."""
    chain = _causes(exc)
    message = str(exc)
    keys = [k for e in chain for k in (getattr(e, "env_keys", None) or ())]
    keys = list(dict.fromkeys(keys or _KEY_VAR.findall(message)))
    about_keys = any(getattr(e, "code", None) in ("not_configured", "auth")
                     or any(w in type(e).__name__.lower() for w in _CREDENTIAL_WORDS) for e in chain)
    if keys and about_keys:
        names = " or ".join(keys)
        if not any(os.environ.get(k) for k in keys):
            return (f"no API key: set {names} in the environment (for a local server that checks no key, any "
                    f"value)")
        return f"the provider refused the key in {names}: check its value"
    text = f"{type(exc).__name__}: {' '.join(message.split(chr(10) * 2)[0].split())}"
    if len(text) > limit:
        text = text[:limit - 3].rsplit(" ", 1)[0] + "..."
    return text


def token_f1(prediction: str, gold: str) -> float:
    """LoCoMo token F1 over normalised, stemmed tokens."""
    p, g = answer_tokens(prediction), answer_tokens(gold)
    common = Counter(p) & Counter(g)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def multi_answer_f1(prediction: str, gold: str) -> float:
    """Category 1: mean over comma-separated gold parts of the best F1 against any predicted part."""
    preds = [x.strip() for x in prediction.split(",")]
    golds = [x.strip() for x in gold.split(",")]
    return sum(max(token_f1(p, g) for p in preds) for g in golds) / len(golds)


def says_not_mentioned(prediction: str) -> bool:
    """Category 5 success: the answer declines (LoCoMo checks these two phrases)."""
    low = prediction.lower()
    return "not mentioned" in low or "no information available" in low


def score_answer(prediction: str, probe: Probe) -> float | None:
    """The LoCoMo score of ``prediction`` for ``probe`` (None when a non-adversarial probe has no gold answer)."""
    if probe.category == 5:
        return 1.0 if says_not_mentioned(prediction) else 0.0
    if probe.answer is None:
        return None
    gold = probe.answer
    if probe.category == 1:
        return multi_answer_f1(prediction, gold)
    if probe.category == 3:
        gold = gold.split(";")[0]
    return token_f1(prediction, gold)


class Answerer:
    """Callable ``(probe, delivered text) -> {"prediction", "f1"}`` (or ``{"answer_error"}``) over one dspy LM."""

    def __init__(self, lm: str | dspy.LM, **lm_kwargs: Any) -> None:
        lm_kwargs.setdefault("cache", False)  # every answer is a real call, never a cached one from another run
        self.lm = lm if isinstance(lm, dspy.LM) else dspy.LM(lm, **lm_kwargs)
        self.module = dspy.Predict(AnswerFromMemory)

    def check(self) -> None:
        """One answer call on a tiny memory before a run: a misconfigured LM (no key, no server) becomes one
        ``ValueError`` instead of an error recorded on every probe."""
        got = self(Probe(index=-1, question="What is the name of the cat?", answer="Tom", category=4),
                   "[D1:1] Ann: My cat is called Tom.")
        if "answer_error" in got:
            raise ValueError(f"--lm check call failed: {got['answer_error']}")

    def __call__(self, probe: Probe, text: str) -> dict[str, Any]:
        try:
            with dspy.context(lm=self.lm):
                pred = self.module(memory=text, question=probe.question)
            answer = str(pred.answer).strip()
        except Exception as exc:
            return {"answer_error": lm_error_line(exc), "f1": None}
        return {"prediction": answer, "f1": score_answer(answer, probe)}
