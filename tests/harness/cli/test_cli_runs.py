"""A results-writing command's run owns exactly its names (docs/cli.md, "Runs and results folders"): one real
command per family (a bench, claims, crash, fuzz) run twice into one folder, the second never inheriting the first,
another run's files surviving, the JSON naming the code it came from; long earlier work refused without
--overwrite; Ctrl-C and SIGTERM leave the earlier results and nothing else, with exit 130 and 143."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.main import app

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[3]


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


def _others(out: Path) -> dict[str, str]:
    """Files of other runs (and of the user) in the same folder, which a run must never touch."""
    out.mkdir(parents=True, exist_ok=True)
    others = {"notes.txt": "the user's", "locomo-paper.json": "another run", "fuzz-10k.json": "another run",
              "ledger-old.md": "another name", "crashes.json": "another name"}
    for name, text in others.items():
        (out / name).write_text(text)
    return others


def _kept(out: Path, others: dict[str, str]) -> None:
    for name, text in others.items():
        assert (out / name).read_text() == text, name
    assert not [p for p in out.iterdir() if p.name.startswith(".")], _files(out)  # no staging folder left


def _wrote(stdout: str) -> list[Path]:
    return [Path(line[len("wrote "):]) for line in stdout.splitlines() if line.startswith("wrote ")]


def _run_block(path: Path, *needles: str) -> dict:
    run = json.loads(path.read_text(encoding="utf-8"))["run"]
    assert run["memsim"] and "commit" in run and "diff_sha256" in run and run["wall_s"] >= 0, run
    for n in needles:
        assert n in run["command"], (n, run["command"])
    return run


def _two_conversations(tmp_path: Path) -> Path:
    convs = []
    for sid, words in (("conv-a", ["cat", "lake"]), ("conv-b", ["bicycle", "garden"])):
        turns = [{"speaker": "Ann" if i % 2 == 0 else "Bob", "dia_id": f"D1:{i + 1}",
                  "text": f"turn {i} about the {w} we saw"} for i, w in enumerate(words)]
        convs.append({"sample_id": sid, "conversation": {"speaker_a": "Ann", "speaker_b": "Bob",
                                                         "session_1_date_time": "1:00 pm on 1 May, 2023",
                                                         "session_1": turns},
                      "qa": [{"question": f"What about the {words[1]}?", "answer": words[1], "evidence": ["D1:2"],
                              "category": 4}]})
    path = tmp_path / "two.json"
    path.write_text(json.dumps(convs), encoding="utf-8")
    return path


def test_a_bench_run_twice_owns_its_names_and_never_inherits_the_first(tmp_path: Path) -> None:
    out = tmp_path / "out"
    others = _others(out)
    data = _two_conversations(tmp_path)
    for conv in ("conv-a", "conv-b"):
        r = runner.invoke(app, ["bench", "locomo", "--data", str(data), "--conversation", conv, "--arms", "full",
                                "--quick", "--no-progress", "--out", str(out)])
        assert r.exit_code == 0, r.output
    # the second run's per-conversation folder holds its own conversation only (it used to keep conv-a's beside),
    # and its TREC qrels name conv-b's questions only
    assert sorted(p.name for p in (out / "locomo").iterdir()) == ["conv-b.json", "qrels.session.trec",
                                                                 "qrels.turn.trec"]
    qrels = (out / "locomo" / "qrels.turn.trec").read_text().splitlines()
    assert qrels and all(line.startswith("conv-b") for line in qrels), qrels[:3]
    payload = json.loads((out / "locomo.json").read_text())
    assert payload["config"]["conversations"] == ["conv-b"]
    _run_block(out / "locomo.json", "conv-b")
    assert "Code: memsim " in (out / "locomo.md").read_text()
    wrote = set(_wrote(r.stdout))
    assert wrote >= {out / "locomo.json", out / "locomo.md", out / "locomo.png", out / "locomo.probes.parquet",
                     out / "locomo" / "conv-b.json"}
    assert all(p.parent == out / "locomo" or p.name.startswith("locomo.") for p in wrote), wrote
    _kept(out, others)


def test_claims_run_twice_owns_the_ledger_names_only(tmp_path: Path) -> None:
    out = tmp_path / "out"
    others = _others(out)
    (out / "ledger.csv").write_text("an earlier ledger's export")  # an earlier entry of the ledger's name
    for cid in ("TOR-43", "HAR-01"):
        r = runner.invoke(app, ["claims", "--id", cid, "--out", str(out), "--quick"])
        assert r.exit_code == 0, r.output
    assert [row["id"] for row in json.loads((out / "ledger.json").read_text())["rows"]] == ["HAR-01"]
    assert not (out / "ledger.csv").exists()
    _run_block(out / "ledger.json", "HAR-01")
    assert "Code: memsim " in (out / "ledger.md").read_text() and "Code: memsim " in (out / "ledger.html").read_text()
    assert _wrote(r.stdout) == [out / "ledger.json", out / "ledger.md", out / "ledger.html"]
    _kept(out, others)


def test_crash_run_twice_and_merge_the_documented_exception(tmp_path: Path) -> None:
    out = tmp_path / "out"
    others = _others(out)
    (out / "crash").mkdir()
    (out / "crash" / "work.db").write_text("an earlier run's work folder")
    for seq in ("fractal.listing", "fractal.submit"):
        r = runner.invoke(app, ["crash", "--sequence", seq, "--max-points", "2", "--out", str(out)])
        assert r.exit_code == 0, r.output
    report = json.loads((out / "crash.json").read_text())
    assert [s["sequence"] for s in report["sequences"]] == ["fractal.submit"]
    assert not (out / "crash").exists()
    first = _run_block(out / "crash.json", "fractal.submit")
    assert _wrote(r.stderr) == [out / "crash.json", out / "crash.md"]
    r = runner.invoke(app, ["crash", "--sequence", "fractal.listing", "--max-points", "2", "--merge", "--out",
                            str(out)])
    assert r.exit_code == 0, r.output
    report = json.loads((out / "crash.json").read_text())
    assert sorted(s["sequence"] for s in report["sequences"]) == ["fractal.listing", "fractal.submit"]
    assert report["merged_over"] == [first] and "--merge" in report["run"]["command"]
    assert "Merged over earlier runs" in (out / "crash.md").read_text()
    _kept(out, others)


def test_fuzz_run_twice_keeps_no_hypothesis_files_and_owns_its_name(tmp_path: Path) -> None:
    pytest.importorskip("hypothesis")
    out = tmp_path / "out"
    others = _others(out)
    for target in ("locomo", "fractal-session"):
        r = runner.invoke(app, ["fuzz", "--target", target, "--examples", "2", "--no-specials", "--out", str(out)])
        assert r.exit_code == 0, r.output
    payload = json.loads((out / "fuzz.json").read_text())
    assert [t["target"] for t in payload["targets"]] == ["fractal-session"]
    _run_block(out / "fuzz.json", "fractal-session")
    assert not (out / ".hypothesis").exists()  # it used to be there, read by every later run
    assert sorted(p.name for p in out.iterdir()) == sorted([*others, "fuzz.json", "fuzz.md"])
    assert _wrote(r.stdout) == [out / "fuzz.json", out / "fuzz.md"]
    _kept(out, others)


def test_replacing_long_earlier_work_needs_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    long_run = json.dumps({"sequences": [], "run": {"wall_s": 2 * 3600}})
    (out / "crash.json").write_text(long_run)
    args = ["crash", "--sequence", "fractal.listing", "--max-points", "1", "--out", str(out)]
    r = runner.invoke(app, args)
    assert r.exit_code == 1, r.output
    [line] = r.stderr.splitlines()
    assert line.startswith(f"error: {out / 'crash.json'}: an earlier run that took 2.0 h") and "--overwrite" in line
    assert (out / "crash.json").read_text() == long_run and _files(out) == ["crash.json"]
    r = runner.invoke(app, [*args, "--overwrite"])
    assert r.exit_code == 0, r.output
    assert json.loads((out / "crash.json").read_text())["sequences"][0]["sequence"] == "fractal.listing"
    r = runner.invoke(app, args)  # the run just now was short: replaced without a flag
    assert r.exit_code == 0, r.output


# ------------------------------------------------------------------------------------- Ctrl-C and SIGTERM
STOPPED = [
    ("bench", ["bench", "ep-scaling", "--no-progress"], "ep_scaling", signal.SIGTERM, 143),
    ("claims", ["claims", "--design", "tortoise"], "ledger", signal.SIGTERM, 143),
    ("crash", ["crash", "--design", "tortoise"], "crash", signal.SIGTERM, 143),
    ("fuzz", ["fuzz", "--examples", "100000"], "fuzz", signal.SIGTERM, 143),
    ("fuzz-ctrl-c", ["fuzz", "--examples", "100000"], "fuzz", signal.SIGINT, 130),
]


@pytest.mark.parametrize("family,argv,name,sig,status", STOPPED, ids=[s[0] for s in STOPPED])
def test_a_stopped_run_keeps_the_earlier_results_and_nothing_else(tmp_path: Path, family, argv, name, sig,
                                                                  status) -> None:
    if family.startswith("fuzz"):
        pytest.importorskip("hypothesis")
    out = tmp_path / "out"
    out.mkdir()
    earlier = {f"{name}.json": json.dumps({"earlier": True}), f"{name}.md": "earlier page", "other.json": "other"}
    for fn, text in earlier.items():
        (out / fn).write_text(text)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli.entry", *argv, "--out", str(out)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not any(p.name.startswith(".memsim-partial-") for p in out.iterdir()):
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        time.sleep(1.0)  # inside the run's work
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == status, (proc.returncode, stderr)
    assert "Traceback" not in stderr, stderr
    assert "nothing of this run was kept" in stderr, stderr
    assert {p.name: p.read_text() for p in out.iterdir()} == earlier
