"""The CLI error boundary (issue 11 item 7): one ``error: ...`` line naming the file, exit 1, never a traceback;
hooks exit 0 with empty stdout; read commands write nothing; replay actions stay inside the workspace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from harness.cli.boundary import BoundaryTyper, guarded
from harness.cli.main import app

AGENTFLY_DATA = Path(os.environ.get("MEMSIM_AGENTFLY_DATA", Path(__file__).resolve().parents[4] / "shared" / "data"
                                    / "agentfly"))


def run(*args: str, input: str | bytes | None = None, cwd: Path | None = None):  # noqa: A002
    old = Path.cwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        return CliRunner().invoke(app, list(args), input=input)
    finally:
        os.chdir(old)


def one_line_error(r, *needles: str, code: int = 1) -> None:
    assert r.exit_code == code, (r.exit_code, r.output)
    assert "Traceback" not in r.output, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    lines = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, r.output
    for n in needles:
        assert n in lines[0], (n, lines[0])


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, str]:
    """A small on-disk Tortoise store (hashing embedder, so no model load) with one live point."""
    from tortoise_sim import SimConfig, Tortoise

    path = tmp_path / "t.kuzu"
    sim = Tortoise(path, config=SimConfig(embedder="hashing"), seed=1)
    pid = sim.create_point("decision", "use kuzu for the graph store")["id"]
    sim.close()
    return path, pid


@pytest.fixture
def bad_paths(tmp_path: Path) -> dict[str, Path]:
    d = tmp_path / "adir"
    d.mkdir()
    notkuzu = tmp_path / "not.kuzu"
    notkuzu.write_text("hello\n")
    empty = tmp_path / "empty.kuzu"
    empty.write_bytes(b"")
    badutf = tmp_path / "bad.json"
    badutf.write_bytes(b"\xff\xfe[]")
    return {"dir": d, "notkuzu": notkuzu, "empty": empty, "badutf": badutf, "missing": tmp_path / "missing.json"}


# ------------------------------------------------------------------------------------------- the boundary
def test_boundary_turns_any_exception_into_one_line_and_hooks_into_exit_0():
    sub = BoundaryTyper()

    @sub.command()
    def boom() -> None:
        raise EOFError("Ran out of input")

    @sub.command("hook-boom")
    def hook_boom() -> None:
        sys.stdout.write("")
        raise RuntimeError("kuzu says no")

    @sub.command()
    def other() -> None:
        raise IsADirectoryError(21, "Is a directory", "some/dir")

    r = CliRunner().invoke(sub, ["boom"])
    one_line_error(r, "unexpected end of file")
    assert "Aborted" not in r.output
    r = CliRunner().invoke(sub, ["hook-boom"])
    assert r.exit_code == 0 and r.stdout == ""
    r = CliRunner().invoke(sub, ["other"])
    one_line_error(r, "some/dir: Is a directory")


def test_guarded_is_idempotent_and_keeps_typer_exits():
    def f() -> None:
        raise typer.Exit(3)

    g = guarded(f)
    assert guarded(g) is g
    with pytest.raises(typer.Exit):
        g()


def test_every_registered_command_is_guarded():
    def walk(t: typer.Typer):
        yield from t.registered_commands
        for grp in t.registered_groups:
            yield from walk(grp.typer_instance)

    infos = list(walk(app))
    assert len(infos) > 20
    assert all(getattr(i.callback, "__memsim_boundary__", False) for i in infos), \
        [i.name or i.callback.__name__ for i in infos if not getattr(i.callback, "__memsim_boundary__", False)]


# ------------------------------------------------------------------------------------------- tortoise --db
READ_CMDS = [["show", "abc"], ["feed"], ["diary-read", "bob"], ["context"], ["confidence", "abc"],
             ["retract", "abc"], ["supersede", "a", "b"]]
WRITE_CMDS = [["create-point", "decision", "x"], ["diary-write", "a", "b"], ["dream"], ["spool-flush"]]


@pytest.mark.parametrize("kind,needle", [("dir", "is a directory"), ("notkuzu", "not a valid Kuzu"),
                                         ("empty", "empty file")])
def test_tortoise_commands_on_a_db_that_is_not_a_store(bad_paths, kind, needle):
    db = bad_paths[kind]
    for cmd in READ_CMDS + WRITE_CMDS:
        r = run("tortoise", *cmd, "--db", str(db))
        one_line_error(r, str(db), needle)
    if kind == "empty":
        assert db.stat().st_size == 0  # never turned into a Kuzu store


def test_tortoise_db_locked_by_another_process(store):
    path, _ = store
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import kuzu, sys, time
        db = kuzu.Database({str(path)!r}); c = kuzu.Connection(db)
        print("held", flush=True); time.sleep(60)""")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        r = run("tortoise", "show", "abc", "--db", str(path))
        one_line_error(r, str(path), "lock")
        r = run("tortoise", "hook-volunteer", "--db", str(path), input='{"prompt": "what did we decide?"}')
        assert r.exit_code == 0 and r.stdout == ""
        r = run("tortoise", "hook-session-start", "--db", str(path))
        assert r.exit_code == 0 and r.stdout == ""
    finally:
        holder.kill()
        holder.wait()


def test_read_commands_create_no_store_and_no_memsim_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("MEMSIM_TORTOISE_DB", raising=False)
    for cmd in READ_CMDS:
        r = run("tortoise", *cmd, cwd=tmp_path)
        if cmd == ["context"]:  # the digest of no memory is its one no-memory line (spec tortoise 7.4)
            assert r.exit_code == 0 and "No prior memory" in r.stdout
        else:
            one_line_error(r, "no Tortoise store")
    r = run("tortoise", "volunteer", cwd=tmp_path, input="what did we decide about kuzu?")
    one_line_error(r, "no Tortoise store")
    for hook, expected in ((["hook-volunteer"], ""),
                           (["hook-session-start"], "No prior memory is stored for this workspace yet.\n")):
        r = run("tortoise", *hook, cwd=tmp_path, input='{"prompt": "what did we decide about kuzu?"}')
        assert r.exit_code == 0 and r.stdout == expected
    assert list(tmp_path.iterdir()) == []


def test_hooks_on_bad_db_exit_0_silently(bad_paths):
    for kind in ("dir", "notkuzu", "empty"):
        for hook in ("hook-volunteer", "hook-session-start"):
            r = run("tortoise", hook, "--db", str(bad_paths[kind]), input="{not json")
            assert r.exit_code == 0 and r.stdout == "", (kind, hook, r.output)
    assert bad_paths["empty"].stat().st_size == 0


@pytest.mark.parametrize("cmd", [["capture"], ["checkpoint"]])
@pytest.mark.parametrize("kind,needle", [("missing", "not found"), ("dir", "is a directory"),
                                         ("badutf", "not valid UTF-8")])
def test_json_inputs_missing_dir_or_invalid_utf8(tmp_path, bad_paths, cmd, kind, needle):
    r = run("tortoise", *cmd, str(bad_paths[kind]), "--db", str(tmp_path / "new.kuzu"))
    one_line_error(r, str(bad_paths[kind]), needle)


@pytest.mark.parametrize("kind,needle", [("missing", "not found"), ("dir", "is a directory"),
                                         ("badutf", "not valid UTF-8")])
def test_volunteer_prior_context_file(store, bad_paths, kind, needle):
    path, _ = store
    r = run("tortoise", "volunteer", "--db", str(path), "--prior-context", str(bad_paths[kind]), input="why kuzu?")
    one_line_error(r, str(bad_paths[kind]), needle)


@pytest.mark.parametrize("args,needle", [
    (["dream", "--preset", "bogus"], "invalid value for '--preset': 'bogus'"),
    (["diary-read", "bob", "--last-n", "99999999999999999999"], "--last-n"),
    (["diary-read", "bob", "--last-n", "-1"], "--last-n"),
    (["checkpoint", "--threshold", "-5"], "--threshold"),
    (["checkpoint", "--threshold", "nan"], "finite"),
    (["checkpoint", "--threshold", "2"], "--threshold"),
    (["feed", "--last", "-5"], "--last"),
    (["create-point", "decision", "x", "--credibility", "hihg"], "invalid value for '--credibility': 'hihg'"),
    (["create-point", "no-such-kind", "x"], "invalid value for 'KIND': 'no-such-kind'"),
    (["retract", "PID", "--valid-to", "not a date"], "'--valid-to': 'not a date'; an ISO-8601"),
    (["volunteer", "--max-pointers", "0"], "--max-pointers"),
    (["volunteer", "--min-confidence", "1.5"], "--min-confidence"),
])
def test_tortoise_option_values_are_checked(store, args, needle):
    path, pid = store
    args = [pid if a == "PID" else a for a in args]
    r = run("tortoise", *args, "--db", str(path), input='[{"content": "hello"}]')
    one_line_error(r, needle, code=2)  # a bad option value is a usage error


def test_feed_last_zero_prints_nothing_and_last_one_prints_one(store):
    path, _ = store
    assert run("tortoise", "feed", "--last", "0", "--db", str(path)).stdout == ""
    r = run("tortoise", "feed", "--last", "1", "--db", str(path))
    assert r.exit_code == 0 and len(r.stdout.splitlines()) == 1


def test_capture_of_invalid_turns_fails(store):
    path, _ = store
    r = run("tortoise", "capture", "--db", str(path), "--no-extractor", input='[{"foo": 1}]')
    one_line_error(r, "<stdin>", "nothing captured")


def test_cli_encoder_applies_the_sdk_word_cut():
    """The CLI's dedup encoder sees what the SDK encoder sees: the first 512 whitespace words (spec 2.6), then at
    most EMBED_CHAR_CAP characters; a 20 MB item no longer costs a full tokenisation on every checkpoint."""
    from harness.cli import tortoise_store as cmd

    seen: list[list[str]] = []

    class Spy:
        def encode(self, texts):
            seen.append(list(texts))
            return [[0.0]] * len(texts)

    import harness.embedding as emb

    orig = emb.get_encoder
    emb.get_encoder = lambda name: Spy()  # type: ignore[assignment]
    try:
        cmd._LazyEncoder().encode(["w " * 10_000_000, "x" * 20_000_000, "short text"])
    finally:
        emb.get_encoder = orig
    a, b, c = seen[0]
    assert len(a.split()) == 512 and len(b) == cmd.EMBED_CHAR_CAP and c == "short text"


# ------------------------------------------------------------------------------------------- agentfly
@pytest.fixture
def pool(tmp_path: Path) -> Path:
    p = tmp_path / "pool.jsonl"
    p.write_text('{"case": "a", "plan": "b", "case_label": "positive"}\n')
    return p


@pytest.mark.parametrize("content,needle", [(b"", "empty file"), (b"junk\n", "not a classifier checkpoint")])
def test_retrieve_with_a_checkpoint_that_is_not_one(tmp_path, pool, content, needle):
    ck = tmp_path / "bad.pt"
    ck.write_bytes(content)
    r = run("agentfly", "retrieve", "--model_path", str(ck), "--pool_jsonl", str(pool), "--query", "q")
    one_line_error(r, str(ck), needle)
    assert "Aborted" not in r.output


@pytest.mark.parametrize("flag,value", [("--warmup_ratio", "5"), ("--grad_clip", "-1"), ("--class_weight_pos", "-1"),
                                        ("--max_rows", "-5"), ("--lr", "nan"), ("--weight_decay", "-1")])
def test_train_refuses_out_of_range_options_before_writing(tmp_path, flag, value):
    train = tmp_path / "pairs.jsonl"
    train.write_text('{"query": "q", "case": "c", "plan": "p", "truth_label": 1}\n')
    out = tmp_path / "out"
    r = run("agentfly", "train", "--train", str(train), "--output_dir", str(out), flag, value)
    one_line_error(r, f"'{flag}'", code=2)  # a bad option value is a usage error
    assert not out.exists()


def test_train_and_run_with_unwritable_out(tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    train = tmp_path / "pairs.jsonl"
    train.write_text('{"query": "q", "case": "c", "plan": "p", "truth_label": 1}\n')
    r = run("agentfly", "train", "--train", str(train), "--output_dir", str(blocker))
    one_line_error(r, str(blocker), "not a directory")
    ds = tmp_path / "ds.jsonl"
    ds.write_text('{"question": "q1", "answer": "a1"}\n')
    r = run("agentfly", "run", "--driver", "np", "--dataset", str(ds), "--out", str(blocker / "sub"))
    one_line_error(r, str(blocker / "sub"))


def test_claims_checks_out_before_running(tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    r = run("claims", "--id", "FRA-01", "--out", str(blocker))
    one_line_error(r, str(blocker), "not a directory")
    assert "claims ledger" not in r.output  # nothing ran


@pytest.mark.skipif(not (AGENTFLY_DATA / "deepresearcher.jsonl").is_file(), reason="AgentFly corpora absent")
def test_pm_run_with_a_bad_checkpoint_says_it_runs_without_retrieval(tmp_path):
    ck = tmp_path / "bad.pt"
    ck.write_bytes(b"junk\n")
    r = run("agentfly", "run", "--driver", "pm", "--checkpoint", str(ck), "--limit", "1", "--data_dir",
            str(AGENTFLY_DATA), "--out", str(tmp_path / "out"))
    assert r.exit_code == 0, r.output
    assert "WITHOUT retrieval" in r.output


# ------------------------------------------------------------------------------------------- fractal
def _replay(tmp_path: Path, script: str, name: str = "s.yaml"):
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    p = tmp_path / name
    p.write_text(textwrap.dedent(script))
    return ws, run("fractal", "replay", str(p), "-w", str(ws), "--state-dir", str(tmp_path / "state"))


@pytest.mark.parametrize("action", ["{delete: ../victim.txt}", "{write: {path: ../victim.txt, text: x}}",
                                    "{write: {path: ABS, text: x}}", "{safe_replace: {path: ../victim.txt, text: x}}", "{open: ../victim.txt}",
                                    "{read: ../victim.txt}"])
def test_replay_actions_are_confined_to_the_workspace(tmp_path, action):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    action = action.replace("ABS", str(victim))
    ws, r = _replay(tmp_path, f"""
        files: {{a.txt: "a"}}
        turns:
          - message: hi
            actions: [{action}]
        """)
    one_line_error(r, "outside the workspace")
    assert victim.read_text() == "keep me"
    assert not (ws / "a.txt").exists() and not (tmp_path / "state").exists()  # nothing half-written


def test_scripted_agent_confines_actions_itself(tmp_path):
    """Beyond the CLI check: the simulator's action executor refuses escaping paths (error event, no effect)."""
    from fractal_sim.agent import Delete, Write, perform_action

    ws = tmp_path / "ws"
    ws.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    events: list[tuple[str, str]] = []

    def emit(target, phase, args, **kw):
        events.append((target, phase))

    emit.raw = lambda e: None  # type: ignore[attr-defined]
    perform_action(ws, Delete("../victim.txt"), emit)
    perform_action(ws, Write(str(tmp_path / "abs.txt"), "x"), emit)
    assert victim.read_text() == "keep me" and not (tmp_path / "abs.txt").exists()
    assert ("os.unlink", "error") in events and ("pathlib.Path.write_text", "error") in events


def test_show_and_usage_on_a_corrupt_session_write_no_backup(tmp_path):
    ws, r = _replay(tmp_path, '["hello"]', "ok.json")
    assert r.exit_code == 0, r.output
    files = list((tmp_path / "state").rglob("*.json"))
    assert len(files) == 1
    files[0].write_text("{broken")
    sid = files[0].stem
    for _ in range(2):
        r = run("fractal", "show", sid, "-w", str(ws), "--state-dir", str(tmp_path / "state"), "--counter", "chars4",
                "--no-instructions")
        assert r.exit_code == 0 and "Read-only inspection" in r.output, r.output
        r = run("fractal", "usage", sid, "-w", str(ws), "--state-dir", str(tmp_path / "state"))
        assert r.exit_code == 0, r.output
    assert sorted(p.name for p in files[0].parent.iterdir()) == [files[0].name]
    files[0].write_bytes(b"\xff\xfe")
    r = run("fractal", "usage", sid, "-w", str(ws), "--state-dir", str(tmp_path / "state"))
    assert r.exit_code == 0 and "Traceback" not in r.output
    assert sorted(p.name for p in files[0].parent.iterdir()) == [files[0].name]


def test_hook_session_end_bad_stdin_exits_0(tmp_path):
    r = run("tortoise", "hook-session-end", "--db", str(tmp_path / "x" / "t.kuzu"), input=b"\xff{not json")
    assert r.exit_code == 0 and r.stdout == ""
    r = run("tortoise", "hook-session-end", "--db", str(tmp_path / "x" / "t.kuzu"),
            input=json.dumps({"session_id": 5, "turns": "nope"}))
    assert r.exit_code == 0 and r.stdout == ""


def test_more_option_ranges(store):
    path, _ = store
    one_line_error(run("tortoise", "dream", "--max-hops", "-1", "--db", str(path)), "'--max-hops'", code=2)
    one_line_error(run("agentfly", "retrieve", "--model_path", "x", "--pool_jsonl", "y", "--query", "q", "--device",
                       "tpu"), "'--device': 'tpu'", code=2)


@pytest.mark.parametrize("args", [["agentfly", "run", "--seed", "-1"], ["agentfly", "train", "--train", "x",
                                                                        "--output_dir", "y", "--seed", "-1"],
                                  ["claims", "--id", "FRA-01", "--seed", "99999999999"]])
def test_seeds_outside_the_numpy_range(args):
    one_line_error(run(*args), "'--seed'", code=2)  # a bad option value is a usage error


def test_click_errors_a_command_raises_pass_the_boundary_as_click_reports_them() -> None:
    """typer vendors click: ``typer.BadParameter``/``typer.Abort`` are not the click package's classes, and the
    boundary used to turn them into its generic exit-1 error line (a usage error must stay click's, exit 2)."""
    import pytest
    import typer

    from harness.cli.boundary import guarded

    def bad() -> None:
        raise typer.BadParameter("must be even", param_hint="'--n'")

    def abort() -> None:
        raise typer.Abort()

    with pytest.raises(typer.BadParameter):
        guarded(bad)()
    with pytest.raises(typer.Abort):
        guarded(abort)()
    with pytest.raises(typer.Exit) as hook_exit:  # a hook never fails its host
        guarded(bad, hook=True)()
    assert hook_exit.value.exit_code == 0
