"""Every LoCoMo result is unchanged by the LongMemEval generalisation of the workload protocol (issue 25).

The snapshot ``tests/harness/data/locomo_snapshot.json`` is ``benchmarks.locomo.comparable`` of a ``--quick`` run of
the LoCoMo benchmark (``benchmarks.locomo.run``, the path ``memsim bench locomo --quick`` takes) over a small
LoCoMo file built from the committed arm fixture (``tests/harness/locomo_arms_fixture.py``: two conversations, so
the PM arm has another conversation to train on), with one arm of every design and every fast baseline. It was
produced by the code of commit e0d9ed5, before the workload types gained roles, question types and session ids,
with ``python -m tests.harness.test_locomo_unchanged --write``. The test re-runs the same path and compares the
whole comparable payload (metrics, rankings, delivered ids, text digests, per-probe records), so any change in
what a LoCoMo arm delivers or how a LoCoMo record is summarised fails it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.harness.locomo_arms_fixture import tiny_conversation

torch.set_num_threads(1)

SNAPSHOT = Path(__file__).parent / "data" / "locomo_snapshot.json"
ARMS = "full,last20,bm25,mean,hybrid,oracle,oracle-nodate,fractal,np-pooler,np-mean,pm,tortoise"


def locomo_file(path: Path) -> Path:
    """The fixture's conversation twice (``tiny-1``, ``tiny-2``) in the canonical ``locomo10.json`` layout, with a
    temporal (category 2) and an adversarial (category 5) question added so those code paths run too."""
    entries = []
    for sid in ("tiny-1", "tiny-2"):
        conv = tiny_conversation(sid)
        body: dict[str, Any] = {"speaker_a": conv.speaker_a, "speaker_b": conv.speaker_b}
        for s in conv.sessions:
            body[f"session_{s.index}_date_time"] = s.date_time
            body[f"session_{s.index}"] = [
                {"speaker": t.speaker, "dia_id": t.dia_id, "text": t.text,
                 **({"blip_caption": t.caption} if t.caption else {})} for t in s.turns]
        qa = [{"question": p.question, "answer": p.answer, "evidence": p.evidence, "category": p.category}
              for p in conv.probes]
        qa.append({"question": "When did Alice adopt the puppy Biscuit?", "answer": "the week before 8 May 2023",
                   "evidence": ["D1:1"], "category": 2})
        qa.append({"question": "What did Alice's sister teach in Lisbon?", "adversarial_answer": "chemistry",
                   "evidence": ["D2:2"], "category": 5})
        entries.append({"sample_id": sid, "conversation": body, "qa": qa})
    path.write_text(json.dumps(entries), encoding="utf-8")
    return path


def comparable_run(tmp: Path, embed: str = "per-call") -> dict[str, Any]:
    """The quick LoCoMo bench on the fixture file, reduced to what must not change (``comparable``)."""
    from benchmarks import locomo as mod

    out = tmp / "out"
    mod.run(out, quick=True, data=locomo_file(tmp / "tiny.json"), arms=ARMS, k_values=(2, 4), workers=1,
            embed=embed, embed_store=tmp / "store")
    def read(path: Path) -> Any:  # the run folder's own path is not a result
        return json.loads(path.read_text(encoding="utf-8").replace(str(tmp), "<tmp>"))

    return mod.comparable({"payload": read(out / "locomo.json"), "conversation": read(out / "locomo" / "tiny-1.json")})


@pytest.mark.parametrize("embed", ["per-call", "store"])
def test_locomo_quick_results_equal_the_pre_change_snapshot(tmp_path: Path, embed: str) -> None:
    """Both encoder settings: the earlier per-call cache and the embedding store deliver the same texts, rankings
    and metrics as the code before either existed."""
    expected = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    got = json.loads(json.dumps(comparable_run(tmp_path, embed)))
    assert got["payload"]["config"].pop("embed") == embed
    assert got["payload"]["config"] == expected["payload"]["config"]
    assert got["payload"]["aggregate"] == expected["payload"]["aggregate"]
    # NP's records name how the faithful recompute was timed (a label added since; every number is unchanged)
    for rec in got["conversation"]["records"]:
        assert rec["meta"].pop("recompute_timing", "per-shape") == "per-shape"
    assert got["conversation"]["records"] == expected["conversation"]["records"]
    assert got["conversation"] == expected["conversation"]
    # every key the snapshot has is unchanged; what the run adds since (its statistics, the per-probe table's
    # name, the comparator pairs) is not part of the earlier results
    assert {k: got["payload"][k] for k in expected["payload"]} == expected["payload"]


if __name__ == "__main__" and "--write" in sys.argv:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        snap = comparable_run(Path(d))
    SNAPSHOT.parent.mkdir(parents=True, exist_ok=True)
    SNAPSHOT.write_text(json.dumps(snap, sort_keys=True, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {SNAPSHOT}")
