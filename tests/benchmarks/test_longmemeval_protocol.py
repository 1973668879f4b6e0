"""``benchmarks.longmemeval_protocol`` and ``memsim bench longmemeval --protocol longmemeval`` on small files in
the released schema (BM25 only: fast, no model load)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from benchmarks import longmemeval_protocol as P
from tests.harness import lme_fixture as fx
from tests.harness import lme_reference as ref


@pytest.fixture()
def quirky(tmp_path: Path) -> Path:
    return fx.write(tmp_path / "quirky.json", fx.quirky_questions())


def many(path: Path, n: int) -> Path:
    """``n`` questions with varied haystacks (each a user evidence session among fillers)."""
    qs = []
    words = ["dog", "violin", "library", "bike", "pasta", "garden", "paris", "chess"]
    for i in range(n):
        w = words[i % len(words)]
        sessions = [(f"filler_{j}", "2023/05/01 (Mon) 10:00",
                     [fx.user(f"tell me about {words[(i + j) % len(words)]} and more {j}"), fx.assistant("ok")])
                    for j in range(4)]
        sessions.insert(i % 5, (f"answer_{i}_1", "2023/05/02 (Tue) 10:00",
                                [fx.assistant("hello"), fx.user(f"my {w} is great", True),
                                 fx.user("thanks", False)]))
        qs.append(fx.question(f"q{i}" + ("_abs" if i % 7 == 6 else ""), fx_type(i), f"what about my {w} ?", "x",
                              "2023/06/01 (Thu) 10:00", sessions))
    return fx.write(path, qs)


def fx_type(i: int) -> str:
    from harness.workloads.longmemeval import QUESTION_TYPES

    return QUESTION_TYPES[i % len(QUESTION_TYPES)]


def test_run_writes_rows_matching_the_independent_reference(quirky: Path, tmp_path: Path) -> None:
    paths = P.run(tmp_path / "out", data=quirky, retrievers=("bm25",))
    assert sorted(p.name for p in paths) == sorted([*(f"{P.NAME}.{e}" for e in ("json", "md", "png", "probes.parquet")),
                                                   "qrels.session.trec", "qrels.turn.trec", "bm25.session.trec",
                                                   "bm25.turn.trec"])
    payload = json.loads((tmp_path / "out" / f"{P.NAME}.json").read_text())
    assert payload["n_questions"] == 5 and "not a published release" in payload["data"]
    rows = {(r["granularity"], r["scored_as"], r["averaging"]): r for r in payload["rows"]}
    assert len(rows) == 6 and {r["retriever"] for r in payload["rows"]} == {"bm25"}
    entries = fx.quirky_questions()
    for gran in ("session", "turn"):
        logs = [(e, ref.evaluate_entry(e, gran)) for e in entries]
        for avg in ("paper", "strict"):
            n, means = ref.average(logs, avg)
            for scored in means:
                row = rows[(gran, scored, avg)]
                assert row["questions"] == n
                for name, v in means[scored].items():
                    assert row["metrics"][name] == pytest.approx(v, abs=1e-12), (gran, scored, avg, name)
    md = (tmp_path / "out" / f"{P.NAME}.md").read_text()
    assert "Published numbers" in md and "LongMemEval M" in md


def test_workers_give_the_serial_numbers(tmp_path: Path) -> None:
    data = many(tmp_path / "many.json", 12)
    serial = P.run(tmp_path / "s", data=data, retrievers="bm25")[0]
    pooled = P.run(tmp_path / "p", data=data, retrievers="bm25", workers=2)[0]
    a, b = json.loads(serial.read_text()), json.loads(pooled.read_text())
    assert a["rows"] == b["rows"] and a["n_questions"] == b["n_questions"] == 12


def test_quick_limit_types_and_progress_total(tmp_path: Path) -> None:
    data = many(tmp_path / "many.json", 25)
    seen: list[tuple[str, int | None]] = []

    def track(it, description="", total=None):  # type: ignore[no-untyped-def]
        seen.append((description, total))
        yield from it

    payload = json.loads(P.run(tmp_path / "q", data=data, retrievers="bm25", quick=True, track=track)[0]
                         .read_text())
    assert payload["n_questions"] == P.QUICK_QUESTIONS and payload["config"]["quick"] is True
    assert seen == [("LongMemEval questions", P.QUICK_QUESTIONS)]
    payload = json.loads(P.run(tmp_path / "t", data=data, retrievers="bm25", types=["multi-session"],
                               limit=3)[0].read_text())
    assert payload["n_questions"] == 3
    assert all(t == "multi-session" for r in payload["rows"] for t in r["types"])


def test_an_interrupted_run_writes_nothing(quirky: Path, tmp_path: Path) -> None:
    def track(it, description="", total=None):  # type: ignore[no-untyped-def]
        for i, x in enumerate(it):
            if i == 2:
                raise KeyboardInterrupt
            yield x

    with pytest.raises(KeyboardInterrupt):
        P.run(tmp_path / "out", data=quirky, retrievers="bm25", track=track)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_pages_say_why_recall_all_is_above_recall_any(quirky: Path, tmp_path: Path) -> None:
    """q_asst_1 has its evidence in an assistant turn only: no gold in the official corpus, recall_all 1 and
    recall_any 0 under paper averaging. Where a paper row shows recall_all above recall_any, both pages say how
    many of its questions have no user evidence turn (paper n minus strict n, read from the JSON)."""
    payload = json.loads(P.run(tmp_path / "out", data=quirky, retrievers="bm25")[0].read_text())
    paper = {(r["granularity"], r["scored_as"]): r for r in payload["rows"] if r["averaging"] == "paper"}
    strict = {(r["granularity"], r["scored_as"]): r for r in payload["rows"] if r["averaging"] == "strict"}
    shown = [k for k, r in paper.items() if any(r["metrics"][f"recall_all@{k_}"] > r["metrics"][f"recall_any@{k_}"]
                                                for k_ in (1, 3, 5, 10, 30, 50))]
    assert shown  # the fixture shows it
    (n_without,) = {paper[k]["questions"] - strict[k]["questions"] for k in shown}
    assert n_without == 1
    note = f"{n_without} of the {paper[shown[0]]['questions']} questions those rows average have no user evidence"
    for page in ((tmp_path / "out" / f"{P.NAME}.md").read_text(encoding="utf-8"), P.docs_page(payload)):
        assert "**recall_all above recall_any**" in page and note in page
    payload["rows"] = [r for r in payload["rows"] if r["averaging"] == "strict" and r["granularity"] == "session"]
    for r in payload["rows"]:
        r["metrics"] = {m: 0.5 for m in r["metrics"]}
    assert P.no_gold_note(payload) == []  # nothing to explain: no note


def test_docs_page_puts_published_numbers_beside(quirky: Path, tmp_path: Path) -> None:
    payload = json.loads(P.run(tmp_path / "out", data=quirky, retrievers="bm25")[0].read_text())
    page = P.docs_page(payload)
    pub = [p for p in P.published() if p["retriever"] == "bm25" and p["granularity"] == "session"
           and p["averaging"] == "paper"]
    assert {p["data"] for p in pub} == {"LongMemEval M", "LongMemEval S (original release)"}
    assert "published (paper Table 9) | LongMemEval M | BM25 | session" in page
    assert "0.634" in page and "0.764" in page  # the paper's M row and the port's S row, from the data file
    assert "Contriever" in page  # the published table lists every published row


def _cli(args: list[str]):  # type: ignore[no-untyped-def]
    from harness.cli.main import app

    return CliRunner().invoke(app, ["bench", "longmemeval", *args])


@pytest.mark.parametrize("args, needle", [
    (["--limit", "0"], "--limit"),
    (["--types", "multi-session,nonsense"], "nonsense"),
    (["--retrievers", "bm25,tfidf"], "tfidf"),
    (["--encoder", "/nonexistent/model"], "--encoder"),
    (["--protocol", "paper"], "--protocol"),
    (["--lm", "openai/x"], "designs only"),
    (["--protocol", "designs", "--retrievers", "bm25"], "longmemeval only"),
])
def test_cli_option_errors_are_one_line_before_any_work(args: list[str], needle: str, quirky: Path,
                                                        tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = _cli(["--protocol", "longmemeval", "--data", str(quirky), "--out", str(out), "--no-progress", *args])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in res.output
    assert not out.exists()


def test_cli_runs_the_protocol(quirky: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = _cli(["--protocol", "longmemeval", "--data", str(quirky), "--retrievers", "bm25", "--out", str(out),
                "--no-progress"])
    assert res.exit_code == 0, res.output
    assert (out / f"{P.NAME}.json").exists() and "5 questions" in res.output
    res = _cli(["--protocol", "longmemeval", "--data", str(tmp_path / "missing.json"), "--out", str(out)])
    assert res.exit_code == 1 and len([ln for ln in res.output.splitlines() if ln.strip()]) == 1


@pytest.mark.slow
def test_ray_executor_gives_the_serial_numbers(quirky: Path, tmp_path: Path) -> None:
    import ray  # noqa: F401 - in the test extras: a broken install fails here, never skips

    a = json.loads(P.run(tmp_path / "r", data=quirky, retrievers="bm25", executor="ray", workers=2)[0].read_text())
    b = json.loads(P.run(tmp_path / "s", data=quirky, retrievers="bm25")[0].read_text())
    assert a["rows"] == b["rows"] and a["config"]["executor"] == "ray"


def test_a_fault_while_writing_leaves_no_results_json(quirky: Path, tmp_path: Path) -> None:
    def hook(step: str) -> None:
        if step == f"{P.NAME}.json.write":
            raise OSError("disk full")

    with pytest.raises(OSError):
        P.run(tmp_path / "out", data=quirky, retrievers="bm25", fault_hook=hook)
    left = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert f"{P.NAME}.json" not in left and not [n for n in left if n.endswith(".tmp")]


def test_a_generated_file_is_labelled_synthetic_with_its_generator_and_seed(tmp_path: Path) -> None:
    """A file made by the generator (its sidecar beside it) is labelled ``data: synthetic, <generator> seed <S>``
    in the JSON, the md and the docs page, and its question count drives the progress total; a plain file keeps
    the release line."""
    from benchmarks.worlds import longmemeval as W

    gen = W.write_file(tmp_path / "gen.json", 3, seed=7, sessions=8)
    assert gen  # the description the sidecar holds
    totals: list[int | None] = []

    def track(it, description="", total=None):
        totals.append(total)
        return it

    P.run(tmp_path / "out", data=tmp_path / "gen.json", retrievers=["bm25"], track=track)
    payload = json.loads((tmp_path / "out" / "longmemeval-protocol.json").read_text(encoding="utf-8"))
    want = "data: synthetic, benchmarks.worlds.longmemeval seed 7"
    assert payload["data"] == want
    assert want in (tmp_path / "out" / "longmemeval-protocol.md").read_text(encoding="utf-8")
    assert want in P.docs_page(payload)
    assert totals == [3]
    plain = fx.write(tmp_path / "plain.json", fx.quirky_questions())
    P.run(tmp_path / "out2", data=plain, retrievers=["bm25"], track=track)
    other = json.loads((tmp_path / "out2" / "longmemeval-protocol.json").read_text(encoding="utf-8"))
    assert "synthetic" not in other["data"] and "not a published release" in other["data"]
    assert totals[-1] == len(fx.quirky_questions())  # counted by a streaming pass: the bar still has an ETA
    P.run(tmp_path / "out3", data=plain, retrievers=["bm25"], track=track, types=["multi-session"])
    assert totals[-1] == sum(q["question_type"] == "multi-session" for q in fx.quirky_questions())


def test_a_file_saved_over_a_generated_one_is_not_labelled_by_the_stale_sidecar(tmp_path: Path) -> None:
    """A generated file (seed 9, 2 questions) overwritten with another (seed 3, 4 questions): its sidecar still
    says seed 9, but records another size and sha256, so the run says so in one warning line and labels the data
    by what it is."""
    import shutil

    from benchmarks.worlds import longmemeval as W

    lme, other = tmp_path / "lme.json", tmp_path / "other.json"
    assert W.write_file(lme, 2, seed=9, sessions=8)["label"].endswith("seed 9")
    W.write_file(other, 4, seed=3, sessions=8)
    shutil.copyfile(other, lme)
    res = _cli(["--protocol", "longmemeval", "--data", str(lme), "--retrievers", "bm25", "--out",
                str(tmp_path / "out"), "--no-progress"])
    assert res.exit_code == 0, res.output
    warnings = [ln for ln in res.output.splitlines() if ln.startswith("warning:")]
    assert warnings == [f"warning: lme.json.generator.json does not describe lme.json (it records "
                        f"{_recorded(lme):,} bytes, the file has {lme.stat().st_size:,}): not labelled synthetic"]
    assert "seed 9" not in res.output and "4 questions from data: lme.json: not a published release" in res.output
    payload = json.loads((tmp_path / "out" / f"{P.NAME}.json").read_text(encoding="utf-8"))
    assert "synthetic" not in payload["data"] and payload["n_questions"] == 4


def _recorded(path: Path) -> int:
    from harness.workloads.longmemeval import sidecar_path

    return json.loads(sidecar_path(path).read_text(encoding="utf-8"))["bytes"]


@pytest.mark.parametrize("protocol", ["longmemeval", "designs"])
def test_an_empty_selection_is_an_error_and_writes_nothing(protocol: str, quirky: Path, tmp_path: Path) -> None:
    """No question of the asked type: one error line naming the file and the option, exit 1, no output folder
    (both protocols)."""
    out = tmp_path / "out"
    extra = ["--retrievers", "bm25"] if protocol == "longmemeval" else ["--arms", "oracle"]
    res = _cli(["--protocol", protocol, "--data", str(quirky), "--types", "single-session-preference", *extra,
                "--out", str(out), "--no-progress"])
    assert res.exit_code == 1, res.output
    assert [ln for ln in res.output.splitlines() if ln.strip()] == [
        f"error: {quirky}: no question matches --types single-session-preference"]
    assert not out.exists()
