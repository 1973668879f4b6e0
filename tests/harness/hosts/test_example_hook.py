"""The documented example hook (docs/examples/hosts/note_hook.py) runs on hand-written hook JSON, and what it
prints is found by the wire observations in requests shaped like Claude Code's and Codex's."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.hosts.scenario import EXAMPLES_DIR, expand, hook_lines, load_scenario, scenario_files
from harness.hosts.wire import deliveries, memory_items

HOOK = EXAMPLES_DIR / "note_hook.py"


def _run(payload: dict) -> str:
    out = subprocess.run([sys.executable, str(HOOK)], input=json.dumps(payload).encode(), capture_output=True,
                         timeout=30, check=True)
    return out.stdout.decode("utf-8")


def _start() -> str:
    return _run({"session_id": "s1", "hook_event_name": "SessionStart", "source": "startup", "cwd": "/w"})


def _prompt(text: str) -> str:
    return _run({"session_id": "s1", "hook_event_name": "UserPromptSubmit", "prompt": text, "cwd": "/w"})


def test_example_hook_outputs() -> None:
    (note,) = memory_items("SessionStart", _start())
    assert note.kind == "hook_text" and note.text.strip()
    out = _prompt("Where does the Ledger keep its records?")
    assert json.loads(out)["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    (match,) = memory_items("UserPromptSubmit", out)
    assert "ledger" in match.text.lower() and "deploy" not in match.text.lower()
    assert _prompt("Please say hello.") == ""


def test_example_hook_output_found_at_the_wire() -> None:
    items = memory_items("SessionStart", _start()) + memory_items(
        "UserPromptSubmit", _prompt("Where does the ledger keep its records?"))
    note, match = (i.text for i in items)
    claude = {"api": "anthropic.messages", "body": {"system": "Test system text.", "tools": [{"name": "T"}], "messages": [
        {"role": "user", "content": "Where does the ledger keep its records?"},
        {"role": "system", "content": [{"type": "text", "text": "SessionStart:startup hook success: " + note.strip()},
                                       {"type": "text", "text": "UserPromptSubmit hook additional context: " + match}]}]}}
    codex = {"api": "openai.responses", "body": {"instructions": "Test.", "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": note}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "ledger?"}]},
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": match}]}]}}
    a, b = deliveries(claude, items)
    assert (a.message_index, a.block_index, a.prefix, a.exact) == (1, 0, "SessionStart:startup hook success: ", True)
    assert (b.message_index, b.block_index, b.prefix, b.exact) == (1, 1, "UserPromptSubmit hook additional context: ",
                                                                    True)
    assert [(d.message_index, d.role, d.prefix) for d in deliveries(codex, items)] == [(0, "developer", ""),
                                                                                       (2, "developer", "")]
    assert deliveries({"api": "openai.responses", "body": {"input": "ledger?"}}, items) == []


def test_the_example_scenario_points_at_the_example_hook() -> None:
    (f,) = [f for f in scenario_files() if f.stem == "own-hook-example"]
    lines = hook_lines(load_scenario(f).hooks)
    assert set(lines) == {"session_start", "user_prompt_submit"}
    cmd = expand(lines["user_prompt_submit"], {"python": sys.executable, "examples": str(EXAMPLES_DIR)})
    payload = json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": "when do we deploy?"}).encode()
    out = subprocess.run(["sh", "-c", cmd], input=payload, capture_output=True, timeout=30, check=True)
    (item,) = memory_items("UserPromptSubmit", out.stdout.decode())
    assert "deploy" in item.text.lower()
    assert Path(cmd.split()[1]) == HOOK


# ------------------------------------------------------------------------------------------------ the runner
def _fake_run_session(host: str, spec, run_dir: Path, *, isolation: str = "auto"):  # noqa: ANN001, ANN202
    """A stand-in host in Claude Code's request shape (our words): it runs each hook line with sh as a host does,
    and puts what the hooks printed after its own framing into one system message per prompt."""
    import time

    from harness.hosts.drivers import SessionRun

    def hook(line: str | None, payload: dict) -> str:
        if line is None:
            return ""
        out = subprocess.run(["sh", "-c", line], input=json.dumps(payload).encode(), capture_output=True,
                             timeout=60, env={**__import__("os").environ, **spec.env})
        return out.stdout.decode()

    t0 = time.time()
    start = hook(spec.hooks.session_start, {"hook_event_name": "SessionStart", "session_id": "fake-1"})
    messages, requests, times = [], [], []
    for i, prompt in enumerate(spec.prompts):
        times.append(t0 if i == 0 else time.time())
        extra = hook(spec.hooks.user_prompt_submit, {"hook_event_name": "UserPromptSubmit", "prompt": prompt})
        ctx = json.loads(extra)["hookSpecificOutput"]["additionalContext"] if extra.strip() else ""
        framing = ("Session start said: " + start.strip() + "\n" if i == 0 else "") + \
            ("Prompt hook said: " + ctx if ctx else "")
        messages += [{"role": "user", "content": prompt}, {"role": "system", "content": framing}]
        requests.append({"seq": i, "t": time.time(), "api": "anthropic.messages", "reply": i,
                         "body": {"tools": [{"name": "T"}], "messages": list(messages)}})
        messages.append({"role": "assistant", "content": "ok"})
    hook(spec.hooks.session_end, {"hook_event_name": "SessionEnd", "session_id": "fake-1"})
    return SessionRun(host=host, version="0", isolation="base-url", session_id="fake-1", transcript_path=None,
                      requests=requests, prompt_times=times, t_start=t0, t_end=time.time(), exit_code=0,
                      timed_out=False, stdout="", stderr="")


def test_runner_with_a_stand_in_host(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    import harness.hosts.drivers as drivers
    from harness.hosts.scenario import run_scenario

    monkeypatch.setattr(drivers, "run_session", _fake_run_session)
    f = tmp_path / "s.yaml"
    f.write_text(textwrap.dedent("""\
        name: stand-in
        description: the example hook through the runner, with a wait between the two prompts
        records: [MEM-RTE-per-prompt-hook]
        hooks:
          preset: none
          session_start: "{python} {examples}/note_hook.py"
          user_prompt_submit: "{python} {examples}/note_hook.py"
        sessions:
          - prompts:
              - text: "Where are the ledger records?"
                after: [{wait: {seconds: 0.3}}]
              - text: "When do we deploy?"
            expect: {memory_reaches_model: true}
        """), encoding="utf-8")
    res = run_scenario(load_scenario(f), "claude-code", tmp_path / "run", memsim_exe="memsim")
    (s,) = res["sessions"]
    assert [i["event"] for i in s["items"]] == ["SessionStart", "UserPromptSubmit", "UserPromptSubmit"]
    (gated,) = [o for o in s["ops"] if o["at"] == "sessions[0].prompts[0].after[0]"]
    second = [h for h in s["hooks"] if h["event"] == "UserPromptSubmit"][1]
    assert gated["ok"] and second["gate"] is not None and second["gate"][1] - second["gate"][0] >= 0.3
    assert second["start"] >= gated["t"] + gated["dt"]  # the operation ran before the next prompt's hook
    lat = s["latency"]
    assert lat[0]["gate_wait_s"] == 0 and lat[1]["gate_wait_s"] >= 0.3
    # the 0.3 s wait sits inside the second prompt's latency, and taking it out leaves the hook's own time
    assert lat[1]["latency_s"] >= 0.3 and 0 <= lat[1]["latency_s_without_gate"] <= lat[1]["latency_s"] - 0.3
    last = s["requests"][-1]
    assert {d["prefix"] for d in last["deliveries"]} == {"Session start said: ", "Prompt hook said: "}
    assert len(last["deliveries"]) == 3 and all(d["exact"] for d in last["deliveries"])
    assert s["checks"] == {"memory reaches model": True} and s["store_vs_transcript"] is None
    assert json.loads((tmp_path / "run" / "claude-code" / "s0" / "result.json").read_text())["session_id"] == "fake-1"


def test_example_scenario_on_a_real_host(tmp_path: Path) -> None:
    from harness.hosts.scenario import SCENARIO_DIR, run_scenario
    from tests.harness.hosts.conftest import require_host

    require_host("claude-code")
    res = run_scenario(load_scenario(SCENARIO_DIR / "own-hook-example.yaml"), "claude-code", tmp_path,
                       memsim_exe=str(Path(sys.executable).parent / "memsim"))
    (s,) = res["sessions"]
    assert s["exit_code"] == 0 and s["checks"] == {"memory reaches model": True}
    prefixes = {d["prefix"] for o in s["requests"] if o["conversation"] for d in o["deliveries"]}
    assert prefixes == {"SessionStart:startup hook success: ", "UserPromptSubmit hook additional context: "}


@pytest.mark.slow
def test_runner_memory_operations_through_the_cli(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """memsim's own hooks and CLI under the stand-in host: a point created live and high is volunteered, the
    service started and then killed between two prompts (the second prompt's hook falls back in process), and
    after a retraction the point leaves the pointer block but stays in the digest."""
    import harness.hosts.drivers as drivers
    from harness.hosts.scenario import pid_alive, run_scenario

    monkeypatch.setattr(drivers, "run_session", _fake_run_session)
    f = tmp_path / "s.yaml"
    f.write_text(textwrap.dedent("""\
        name: stand-in-ops
        description: operations through the memsim CLI
        records: [MEM-RTE-point-retraction]
        hooks: {preset: none, session_start: "{memsim} tortoise hook-session-start --db {db}",
                user_prompt_submit: "{memsim} tortoise hook-volunteer --harness {harness} --db {db}"}
        sessions:
          - before:
              - create_point: {ref: ledger, kind: decision, text: "The ledger service stores its records in Postgres",
                               credibility: high, live: true}
              - service: start
            prompts:
              - text: "What database does the ledger service use?"
                after: [{service: kill}]
              - text: "Which database does the ledger service use for its records?"
            expect: {volunteered: ["ref:ledger"]}
          - before: [{retract: {ref: ledger}}]
            prompts: [{text: "What database does the ledger service use?"}]
            expect: {not_volunteered: ["ref:ledger"], in_digest: ["ref:ledger"]}
        """), encoding="utf-8")
    memsim = str(Path(sys.executable).parent / "memsim")
    res = run_scenario(load_scenario(f), "claude-code", tmp_path / "run", memsim_exe=memsim)
    first, second = res["sessions"]
    assert [o["ok"] for o in first["ops"]] == [True, True, True] and second["ops"][0]["ok"]
    assert not pid_alive(first["ops"][1]["pid"])
    pointers = [i for i in first["items"] if i["kind"] == "pointer_block"]
    assert len(pointers) == 2 and pointers[0]["point_ids"] == [first["refs"]["ledger"]]
    assert all(first["checks"].values()) and first["checks"]
    assert all(second["checks"].values()) and len(second["checks"]) == 2
