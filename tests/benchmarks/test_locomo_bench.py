"""``memsim bench locomo``: --quick end to end through the CLI, one-line data errors, and per-conversation files
that survive an interrupted run (fault injected at the write of the second conversation)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from harness.cli.main import app
from harness.faults import FaultInjected, FaultPlan
from harness.workloads.locomo import find_locomo_path

torch.set_num_threads(1)
runner = CliRunner()
SHIPPED = find_locomo_path()


def _tiny(sample: str) -> dict:
    return {
        "sample_id": sample,
        "conversation": {
            "speaker_a": "Ann", "speaker_b": "Bob",
            "session_1_date_time": "1:00 pm on 1 May, 2023",
            "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat called Tom."},
                          {"speaker": "Bob", "dia_id": "D1:2", "text": "I bought a bicycle."}],
        },
        "qa": [{"question": "What is the cat called?", "answer": "Tom", "evidence": ["D1:1"], "category": 4},
               {"question": "What did Bob buy?", "answer": "a bicycle", "evidence": ["D1:2"], "category": 4}],
    }


@pytest.mark.skipif(SHIPPED is None, reason="LoCoMo data not present")
def test_bench_locomo_quick_cli(tmp_path: Path) -> None:
    res = runner.invoke(app, ["bench", "locomo", "--quick", "--no-progress", "--out", str(tmp_path),
                              "--arms", "full,last20,bm25,oracle,fractal", "--k", "2", "--k", "4"])
    assert res.exit_code == 0, res.output
    for ext in ("json", "md", "png"):
        assert (tmp_path / f"locomo.{ext}").stat().st_size > 0 and f"locomo.{ext}" in res.output
    payload = json.loads((tmp_path / "locomo.json").read_text())
    [conv] = payload["conversations"]
    assert (tmp_path / "locomo" / f"{conv['conversation']}.json").exists()
    rows = payload["aggregate"]["rows"]
    assert {"full", "last20", "bm25@2", "bm25@4", "oracle"} <= set(rows)
    assert 0 < conv["n_probes"] <= 6 and conv["n_sessions"] == 3
    assert rows["oracle"]["headline"]["evidence_recall"] == 1.0 and rows["full"]["headline"]["evidence_recall"] == 1.0
    assert rows["bm25@2"]["headline"]["delivered_turns"] == 2.0
    assert rows["full"]["headline"]["tokens_mean"] > rows["bm25@4"]["headline"]["tokens_mean"]
    fr = payload["aggregate"]["arm_status"]["fractal"][conv["conversation"]]
    assert fr["status"] in ("ok", "unavailable", "error")
    if fr["status"] == "ok":
        assert rows["fractal"]["headline"]["stored_recall"] is not None
    else:  # never a silent drop: the reason is in the report
        assert fr["message"] and "fractal" in (tmp_path / "locomo.md").read_text()
    assert "f1" not in rows["full"]["headline"]  # no --lm, no answer score


def test_bench_locomo_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    res = runner.invoke(app, ["bench", "locomo", "--data", str(bad), "--no-progress", "--out", str(tmp_path / "o")])
    assert res.exit_code == 1 and "not JSON" in res.output and str(bad) in res.output.replace("\n", "")
    res = runner.invoke(app, ["bench", "locomo", "--data", str(tmp_path / "none"), "--no-progress"])
    assert res.exit_code == 1 and "no such file" in res.output
    good = tmp_path / "d.json"
    good.write_text(json.dumps([_tiny("a")]))
    res = runner.invoke(app, ["bench", "locomo", "--data", str(good), "--arms", "nope", "--no-progress"])
    assert res.exit_code == 2 and "unknown arm" in res.output  # a usage error
    res = runner.invoke(app, ["bench", "locomo", "--data", str(good), "--conversation", "zz", "--no-progress",
                              "--arms", "full", "--out", str(tmp_path / "o")])
    assert res.exit_code == 1 and "unknown conversation zz" in res.output
    assert not (tmp_path / "o" / "locomo.json").exists()


def test_interrupted_run_keeps_finished_conversations(tmp_path: Path) -> None:
    from benchmarks import locomo as mod

    data = tmp_path / "d.json"
    data.write_text(json.dumps([_tiny("conv-a"), _tiny("conv-b")]))
    out = tmp_path / "out"
    plan = FaultPlan({"locomo.conversation.write": 2})
    with pytest.raises(FaultInjected):
        mod.run(out, data=data, arms="full,oracle", fault_hook=plan, workers=1)
    files = sorted(p.name for p in (out / "locomo").iterdir())
    assert files == ["conv-a.json"]  # no table, store or run file either: those come when every conversation is done
    assert sorted(p.name for p in out.iterdir()) == ["locomo"]  # the finished one is kept, the interrupted one left no partial file
    first = json.loads((out / "locomo" / "conv-a.json").read_text())
    assert first["conversation"] == "conv-a" and {r["row"] for r in first["records"]} == {"full", "oracle"}
    assert first["summary"]["oracle"]["headline"]["evidence_recall"] == 1.0
    assert not (out / "locomo.json").exists()
    paths = mod.run(out, data=data, arms="full,oracle")
    assert sorted(p.name for p in (out / "locomo").glob("*.json")) == ["conv-a.json", "conv-b.json"]
    assert out / "locomo.md" in paths


def test_lm_answers_are_scored_per_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import locomo as mod
    from tests.harness.test_locomo_answer import _Server

    data = tmp_path / "d.json"
    data.write_text(json.dumps([_tiny("conv-a")]))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with _Server("Tom") as srv, pytest.raises(ValueError, match="--lm check call failed: .*API key"):
        mod.run(tmp_path / "out", data=data, arms="full", lm="openai/test",
                lm_base=f"http://127.0.0.1:{srv.port}/v1")
    assert not (tmp_path / "out").exists()
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    with _Server("Tom") as srv:
        mod.run(tmp_path / "out", data=data, arms="full,oracle", lm="openai/test",
                lm_base=f"http://127.0.0.1:{srv.port}/v1")
    payload = json.loads((tmp_path / "out" / "locomo.json").read_text())
    rows = payload["aggregate"]["rows"]
    # the server always answers "Tom": right for the cat question, wrong for the bicycle one
    assert rows["oracle"]["headline"]["f1"] == 0.5 and rows["oracle"]["headline"]["n_answered"] == 2
    assert len(srv.requests) == 5  # the check call, then 2 probes x 2 rows, each through HTTP
    assert "Answer F1 per category" in (tmp_path / "out" / "locomo.md").read_text()


def test_empty_arms_and_file_out_fail_before_the_work(tmp_path: Path) -> None:
    from benchmarks import locomo as mod

    good = tmp_path / "d.json"
    good.write_text(json.dumps([_tiny("a")]))
    res = runner.invoke(app, ["bench", "locomo", "--data", str(good), "--arms", "", "--no-progress", "--out",
                              str(tmp_path / "o")])
    assert res.exit_code == 2 and "--arms is empty" in res.output  # a usage error
    assert not (tmp_path / "o" / "locomo").exists()
    with pytest.raises(ValueError, match="--arms is empty"):
        mod.run(tmp_path / "o2", data=good, arms=" ")
    afile = tmp_path / "results.json"
    afile.write_text("keep me")
    res = runner.invoke(app, ["bench", "locomo", "--data", str(good), "--arms", "full", "--no-progress", "--out",
                              str(afile)])
    assert res.exit_code == 1 and "not a directory" in res.output and "Traceback" not in res.output
    assert afile.read_text() == "keep me"
    # through the Python API too: refused before the data is even read (a missing data path is not reached)
    for target in (afile, afile / "sub"):
        with pytest.raises(ValueError, match="output folder (is|lies under) a file"):
            mod.run(target, data=tmp_path / "missing.json", arms="full")


def test_quick_runs_every_named_conversation(tmp_path: Path) -> None:
    from benchmarks import locomo as mod

    data = tmp_path / "d.json"
    data.write_text(json.dumps([_tiny("conv-a"), _tiny("conv-b"), _tiny("conv-c")]))
    said: list[str] = []
    mod.run(tmp_path / "out", data=data, arms="full", quick=True, conversations=["conv-c", "conv-a"],
            echo=said.append)
    payload = json.loads((tmp_path / "out" / "locomo.json").read_text())
    assert [c["conversation"] for c in payload["conversations"]] == ["conv-c", "conv-a"]
    assert any("2 conversation(s)" in s and "conv-c, conv-a" in s for s in said)
    mod.run(tmp_path / "out2", data=data, arms="full", quick=True, echo=said.append)  # none named: the first
    payload = json.loads((tmp_path / "out2" / "locomo.json").read_text())
    assert [c["conversation"] for c in payload["conversations"]] == ["conv-a"]


def _row(recall: float, stored: float, tokens: float, *, ranked: bool, arm: str, cats: dict | None = None) -> dict:
    rk = None
    if ranked:
        lvl = {m: recall for m in ("recall_any@5", "recall_all@5", "ndcg_any@5", "recall_any@10", "recall_all@10",
                                   "ndcg_any@10")}
        rk = {"n": 10, "turn": dict(lvl), "session": dict(lvl)}
    head = {"evidence_recall": recall, "all_evidence_rate": recall / 2, "stored_recall": stored,
            "tokens_mean": tokens * 1.2, "tokens_cl100k_mean": tokens, "latency_ms_median": 5.0,
            "latency_ms_p95": 9.0, "design_ms_median": 3.0 if arm != "bm25" else None,
            "arm_design_ms_median": 3.0 if arm != "bm25" else None,
            "harness_ms_median": 2.0 if arm != "bm25" else None, "answer_present": 0.5, "delivered_turns": 4.0,
            "chars4_mean": tokens, "ranked": rk}
    by_cat = {str(c): {"evidence_recall": v, "answer_present": v, "n_scored": 3} for c, v in (cats or {}).items()}
    return {"arm": arm, "headline": head, "by_category": by_cat, "ingest_ms_per_turn": 1.0, "meta_means": {}}


def _payload(rows: dict) -> dict:
    return {"aggregate": {"rows": rows, "arm_status": {}, "quirks": {}},
            "conversations": [{"conversation": "c", "n_turns": 10, "n_probes": 4}],
            "config": {"k": [4, 8], "arms": ["bm25", "tortoise"], "quick": False},
            "peak_rss_mb": 1000.0, "levels": {"wall_s": {"measured": 60.0, "max": 900, "met": True},
                                               "peak_rss_gb": {"measured": 1.05, "max": 4.0, "met": True}},
            "meta": {"wall_s": 60.0, "machine": {"cpu": "test cpu", "affinity_cpus": 2}}}


def test_readme_sentences_are_computed_from_the_payload() -> None:
    """The old section printed 'stored 1.000' and 'the best recall of any ranked arm' as fixed text and took the
    delivered range over '@' rows only (dropping the Tortoise rows); each assertion below fails on that code."""
    from benchmarks.locomo import readme_section

    cats = {1: 0.1, 2: 0.9, 3: 0.2, 4: 0.7}
    rows = {"bm25@4": _row(0.40, 1.0, 100, ranked=True, arm="bm25", cats=cats),
            "bm25@8": _row(0.55, 0.9, 200, ranked=True, arm="bm25", cats=cats),
            "tortoise-eval": _row(0.05, 0.8, 900, ranked=True, arm="tortoise", cats=cats),
            "tortoise-volunteer": _row(0.0, 0.8, 400, ranked=False, arm="tortoise", cats=cats)}
    rows["tortoise-volunteer"]["meta_means"] = {"block_chars": 0.0, "digest_chars": 1234.0}
    text = readme_section(_payload(rows))
    assert "delivers 0.050-0.550 of the evidence" in text  # the Tortoise evaluation row is in the range
    assert "ranked rows store 0.800-1.000 of the evidence" in text and "stored 1.000" not in text
    assert "the best ranked row is bm25@8 (0.550)" in text and "best recall of any ranked" not in text
    assert "carries no evidence turn" in text and "(1234 characters)" in text
    assert "bm25" not in text.split("Where a probe's time goes")[1].split("\n")[0]  # bm25 does not separate time
    assert "tortoise 3.0 + 2.0" in text
    assert "../shared" not in text and "heavy-run lock" not in text
    # now the evaluation path is the best ranked row and every ranked row stores everything
    rows["tortoise-eval"] = _row(0.60, 1.0, 900, ranked=True, arm="tortoise", cats=cats)
    rows["bm25@8"]["headline"]["stored_recall"] = 1.0
    text = readme_section(_payload(rows))
    assert "the best recall of any ranked row" in text
    assert "every ranked row stores every evidence turn (stored 1.000)" in text
    assert "delivers 0.400-0.600 of the evidence" in text


def test_docs_page_is_rendered_from_the_committed_results() -> None:
    from benchmarks.common import RESULTS_DIR
    from benchmarks.locomo import DOCS_PAGE, docs_page

    payload = json.loads((RESULTS_DIR / "locomo.json").read_text(encoding="utf-8"))
    assert DOCS_PAGE.read_text(encoding="utf-8") == docs_page(payload), \
        "docs/locomo.md is stale: run python -m benchmarks.locomo --docs"


def test_shared_encoder_cache_changes_no_result(tmp_path: Path) -> None:
    """One encoder cache per run, shared by mean, hybrid and NP mean pooling: every delivered text, ranking and
    metric is identical with and without it; only the time differs, and the cache was really hit."""
    from benchmarks import locomo as mod
    from harness import embedding
    from harness.workloads.runner import SharedEncoder

    data = tmp_path / "d.json"
    data.write_text(json.dumps([_tiny("conv-a")]))
    for share in (False, True):
        mod.run(tmp_path / f"out-{share}", data=data, arms="mean,hybrid,np-mean", k_values=(1, 2),
                share_encoders=share, embed="per-call")  # the earlier per-call cache, by name
    assert not any(isinstance(e, SharedEncoder) for e in embedding._CACHE.values())  # plain encoders are back

    def strip(path: Path) -> list[dict]:
        recs = json.loads(path.read_text())["records"]
        timing = ("latency_ms", "design_ms", "arm_design_ms", "harness_ms")
        return [{k: (v if k != "meta" else {m: x for m, x in v.items() if "ms" not in m})
                 for k, v in r.items() if k not in timing} for r in recs]

    plain = strip(tmp_path / "out-False" / "locomo" / "conv-a.json")
    shared = strip(tmp_path / "out-True" / "locomo" / "conv-a.json")
    assert plain == shared and len(plain) == 2 * 2 * 3
    stats = json.loads((tmp_path / "out-True" / "locomo.json").read_text())["encoder_cache"]["minilm-mean"]
    # served from another arm: hybrid's index (mean's call) and both questions for hybrid and for NP; NP's own
    # repeat of its bank texts (the faithful-recompute timing) is not served, so that timing still pays
    assert stats["hits"] == 1 + 2 + 2 and stats["misses"] >= 4
    assert json.loads((tmp_path / "out-False" / "locomo.json").read_text())["encoder_cache"] == {}


def _tiny2(sample: str, pet: str) -> dict:
    """A second tiny conversation shape: two sessions, so the design arms have something to rank and train on."""
    conv = _tiny(sample)
    conv["conversation"]["session_2_date_time"] = "9:00 am on 3 June, 2023"
    conv["conversation"]["session_2"] = [
        {"speaker": "Bob", "dia_id": "D2:1", "text": f"My {pet} learned a new trick in the garden."},
        {"speaker": "Ann", "dia_id": "D2:2", "text": "Tom the cat ignores every trick."}]
    conv["qa"].append({"question": "What learned a new trick?", "answer": pet, "evidence": ["D2:1"],
                       "category": 1})
    return conv


def test_parallel_conversations_change_no_result(tmp_path: Path) -> None:
    """Conversations in two worker processes give the serial run's results: every record (recall, stored, tokens,
    rankings, the delivered text's digest), every aggregate metric and example, in the same order; only times,
    peaks, the worker count and the cache's hit counts differ. The workers' progress reaches the parent's bars and
    the per-conversation files are all written."""
    from benchmarks import locomo as mod

    data = tmp_path / "d.json"
    data.write_text(json.dumps([_tiny2("conv-a", "dog"), _tiny2("conv-b", "parrot"), _tiny2("conv-c", "hamster")]))
    arms = "full,last20,bm25,mean,hybrid,oracle,np-mean,pm,fractal,tortoise"
    bars: dict[str, list[int]] = {}

    def track(it, description: str = "", total: int | None = None):  # type: ignore[no-untyped-def]
        seen = bars.setdefault(description, [0, total or 0])
        for x in it:
            seen[0] += 1
            yield x

    serial = tmp_path / "serial"
    parallel = tmp_path / "parallel"
    mod.run(serial, data=data, arms=arms, k_values=(1, 2), workers=1)
    mod.run(parallel, data=data, arms=arms, k_values=(1, 2), workers=2, track=track)
    a = json.loads((serial / "locomo.json").read_text())
    b = json.loads((parallel / "locomo.json").read_text())
    assert a["config"]["workers"] == 1 and b["config"]["workers"] == 2 and len(b["worker_peak_rss_mb"]) >= 1
    # the sampled peak is the sum of what this process and each worker held at that moment
    parts = b["peak_parts_mb"]
    assert parts["parent"] > 0 and len(parts["workers"]) == 2
    assert b["peak_rss_mb"] >= parts["parent"] + sum(parts["workers"]) - 1e-6 and b["peak_pss_mb"] > 0
    assert a["peak_parts_mb"] is None  # one process: its own peak, nothing sampled
    assert mod.comparable(a) == mod.comparable(b)
    assert [c["conversation"] for c in b["conversations"]] == ["conv-a", "conv-b", "conv-c"]
    assert all(s["status"] == "ok" for per in b["aggregate"]["arm_status"].values() for s in per.values())
    for conv in ("conv-a", "conv-b", "conv-c"):
        ra = json.loads((serial / "locomo" / f"{conv}.json").read_text())
        rb = json.loads((parallel / "locomo" / f"{conv}.json").read_text())
        assert ra["records"] and all(len(r["text_sha1"]) == 40 for r in ra["records"])
        assert mod.comparable(ra) == mod.comparable(rb)
    # one bar over the conversations; a bar per conversation and arm, each run to its total (3 probes), driven
    # from the workers' events, and before it one for the arm's ingest (counting the conversation's turns)
    assert bars.pop("LoCoMo conversations") == [3, 3]
    probes = {d: v for d, v in bars.items() if not d.endswith(" ingest")}
    ingests = {d: v for d, v in bars.items() if d.endswith(" ingest")}
    assert set(probes) == {f"{c} {x}" for c in ("conv-a", "conv-b", "conv-c") for x in arms.split(",")}
    assert all(done == total == 3 for done, total in probes.values())
    assert {d.removesuffix(" ingest") for d in ingests} == set(probes)
    assert all(done == total > 0 for done, total in ingests.values())


def test_interrupted_parallel_run_keeps_what_finished(tmp_path: Path) -> None:
    """With two workers the second file written fails: the first finished conversation is on disk (whichever it
    was), no partial file and no locomo.json."""
    from benchmarks import locomo as mod

    data = tmp_path / "d.json"
    data.write_text(json.dumps([_tiny("conv-a"), _tiny("conv-b")]))
    out = tmp_path / "out"
    with pytest.raises(FaultInjected):
        mod.run(out, data=data, arms="full,oracle", fault_hook=FaultPlan({"locomo.conversation.write": 2}),
                workers=2)
    files = sorted(p.name for p in (out / "locomo").iterdir())
    assert len(files) == 1 and files[0] in ("conv-a.json", "conv-b.json")
    assert not (out / "locomo.json").exists()


def test_levels_name_the_arm_set() -> None:
    """The wall level is 5 minutes for the arms that existed before the paper rows, 15 for the full design run."""
    from benchmarks import locomo as mod

    pre = mod.levels(290.0, 1000.0, list(mod.PRE_PAPER_ARMS))
    full = mod.levels(290.0, 1000.0, list(mod.PRE_PAPER_ARMS) + ["tortoise-recorded"])
    assert pre["wall_s"]["max"] == 300 and pre["wall_s"]["met"] and pre["arm_set"] == "pre-paper arms"
    assert full["wall_s"]["max"] == 900 and full["arm_set"] == "full design run"
    assert not mod.levels(301.0, 1000.0, list(mod.PRE_PAPER_ARMS))["wall_s"]["met"]
    assert not mod.levels(10.0, 5000.0)["peak_rss_gb"]["met"]  # 5000 MiB is above 4e9 bytes


def test_compare_workers_writes_walls_and_identity(tmp_path: Path) -> None:
    """``compare_workers`` runs the workload once per count and says, per run, its wall, speed-up and whether its
    results equal the first run's (here two serial runs, so no process is spawned)."""
    from benchmarks import locomo_workers as mod

    data = tmp_path / "d.json"
    data.write_text(json.dumps([_tiny("conv-a"), _tiny("conv-b")]))
    paths = mod.compare_workers(tmp_path / "out", workers=(1, 1), quick=False, data=data, arms="full,oracle,bm25")
    result = json.loads(paths[0].read_text())
    assert [r["workers"] for r in result["runs"]] == [1, 1]
    assert all(r["identical_to_first"] and r["wall_s"] > 0 for r in result["runs"])
    assert result["runs"][0]["speedup_vs_first"] == 1.0
    assert paths[1].read_text() == mod.workers_markdown(result) + "\n"


def test_quick_worker_comparison_never_writes_the_committed_results() -> None:
    """A quick comparison into benchmarks/results is refused before any work (committed results are full runs)."""
    from benchmarks import locomo_workers as mod
    from benchmarks.common import RESULTS_DIR

    with pytest.raises(ValueError, match="full runs"):
        mod.compare_workers(RESULTS_DIR, workers=(1,), quick=True)
    assert not (RESULTS_DIR / f"{mod.WORKERS_NAME}.json").exists()
