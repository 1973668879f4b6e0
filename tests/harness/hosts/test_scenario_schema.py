"""Host scenario YAMLs: strict loading, one line per problem naming the file and key path, and the shipped set."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from harness.hosts.scenario import (
    RUN_HOSTS,
    TORTOISE_HOOKS,
    ScenarioError,
    expand,
    hook_lines,
    load_scenario,
    scenario_files,
    tee_command,
    validate,
)

BASE = """\
name: t
description: d
records: [MEM-RTE-hook-volunteer]
sessions:
  - prompts:
      - text: hi
        replies: [{text: ok}]
"""


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "x.yaml"
    p.write_text(textwrap.dedent(text), encoding="utf-8")
    return p


def _errors(tmp_path: Path, text: str) -> list[str]:
    p = _write(tmp_path, text)
    errs = validate(p)
    assert errs, "expected the scenario to be refused"
    for e in errs:
        assert "\n" not in e and e.startswith(f"{p}:")
    return [e[len(str(p)) + 1:].strip() for e in errs]


def test_minimal_scenario_loads_with_defaults(tmp_path: Path) -> None:
    scn = load_scenario(_write(tmp_path, BASE))
    assert scn.run_hosts == RUN_HOSTS and scn.hooks.preset == "tortoise"
    assert hook_lines(scn.hooks) == TORTOISE_HOOKS
    assert scn.sessions[0].gap_s == 0 and scn.sessions[0].prompts[0].replies[0].text == "ok"


CASES = {
    "unknown-key-deep": (
        BASE + "      - text: again\n        replies: [{text: a}, {text: b}, {tool: X, inptu: {}}]\n",
        "sessions[0].prompts[1].replies[2].inptu: unknown key; did you mean 'input'? (allowed: text, shell, tool, "
        "input, delay_s, per_host)"),
    "unknown-top-key": (BASE + "extra: 1\n", "extra: unknown key (allowed: name, description, records"),
    "bad-service": (BASE.replace("  - prompts:", "  - before: [{service: restart}]\n    prompts:"),
                    "sessions[0].before[0].service: Input should be 'start', 'stop', 'hang', 'resume' or 'kill' "
                    "(got 'restart')"),
    "missing-prompts": ("name: t\ndescription: d\nrecords: [A-B]\nsessions:\n  - gap_s: 1\n",
                        "sessions[0].prompts: missing"),
    "bad-number": (BASE.replace("  - prompts:", "  - gap_s: soon\n    prompts:"),
                   "sessions[0].gap_s: Input should be a valid number"),
    "negative-gap": (BASE.replace("  - prompts:", "  - gap_s: -1\n    prompts:"),
                     "sessions[0].gap_s: Input should be greater than or equal to 0 (got -1)"),
    "two-reply-kinds": (BASE.replace("{text: ok}", "{text: ok, shell: ls}"),
                        "sessions[0].prompts[0].replies[0]: a reply has exactly one of text, shell, tool or "
                        "per_host (got text, shell)"),
    "input-without-tool": (BASE.replace("{text: ok}", "{shell: ls, input: {a: 1}}"),
                           "sessions[0].prompts[0].replies[0]: input goes with tool only"),
    "float-timeout": (BASE + "hooks: {timeouts: {SessionEnd: 1.5}}\n", "hooks.timeouts.SessionEnd: Input should be "
                      "a valid integer"),
    "unknown-event": (BASE + "hooks: {timeouts: {Stop: 3}}\n", "hooks.timeouts.Stop: Input should be"),
    "unknown-host": (BASE + "hosts: [claude-code, vim]\n", "hosts[1]: Input should be 'claude-code'"),
    "unknown-per-host": (BASE.replace("{text: ok}", "{per_host: {emacs: {text: a}}}"),
                         "sessions[0].prompts[0].replies[0].per_host.emacs: Input should be 'claude-code'"),
    "bad-kind": (BASE.replace("  - prompts:", "  - before: [{create_point: {ref: a, kind: memo, text: x}}]\n"
                              "    prompts:"), "sessions[0].before[0].create_point: kind 'memo' is not a point kind"),
    "bad-tier": (BASE.replace("  - prompts:", "  - before: [{create_point: {ref: a, kind: decision, text: x, "
                              "credibility: great}}]\n    prompts:"),
                 "sessions[0].before[0].create_point.credibility: Input should be 'gold'"),
    "two-ops-in-one": (BASE.replace("  - prompts:", "  - before: [{wait: {seconds: 1}, service: start}]\n"
                                    "    prompts:"),
                       "sessions[0].before[0]: an operation has exactly one of create_point, retract, service, "
                       "lock_store, wait (got service, wait)"),
    "bad-record-id": (BASE.replace("[MEM-RTE-hook-volunteer]", "[hook volunteer]"), "records[0]: String should "
                      "match pattern"),
    "retract-undefined": (BASE.replace("  - prompts:", "  - before: [{retract: {ref: nope}}]\n    prompts:"),
                          "sessions[0].before[0].retract.ref: no create_point before it defines ref 'nope'"),
    "ref-twice": (BASE.replace("  - prompts:", "  - before: [{create_point: {ref: a, kind: decision, text: x}},"
                               " {create_point: {ref: a, kind: decision, text: y}}]\n    prompts:"),
                  "sessions[0].before[1].create_point.ref: ref 'a' is defined twice"),
    "expect-ref-later": (BASE + "    expect: {volunteered: ['ref:b']}\n  - before: [{create_point: {ref: b, kind: "
                         "decision, text: x}}]\n    prompts: [{text: hi}]\n",
                         "sessions[0].expect.volunteered[0]: ref 'b' is defined later"),
    "host-tool-two-hosts": (BASE.replace("{text: ok}", "{tool: Read, input: {file_path: a}}"),
                            "sessions[0].prompts[0].replies[0].tool: a host's own tool needs hosts to name that one "
                            "host (runs on claude-code, codex)"),
    "per-host-missing": (BASE.replace("{text: ok}", "{per_host: {claude-code: {text: a}}}"),
                         "sessions[0].prompts[0].replies[0].per_host: no reply for host codex"),
    "shell-unknown-host": (BASE.replace("{text: ok}", "{shell: ls}") + "hosts: [gemini]\n",
                           "sessions[0].prompts[0].replies[0].shell: no shell tool is known for host 'gemini'"),
    "unknown-placeholder": (BASE + "hooks: {session_start: '{memsimm} run --db {db}'}\n",
                            "hooks.session_start: unknown placeholder {memsimm}"),
    "empty-prompt": (BASE.replace("text: hi", "text: ''"), "sessions[0].prompts[0].text: String should have at "
                     "least 1 character"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_error_class_is_one_line_with_its_key_path(tmp_path: Path, case: str) -> None:
    text, expected = CASES[case]
    errs = _errors(tmp_path, text)
    assert any(e.startswith(expected) for e in errs), errs


@pytest.mark.parametrize("key", ["\\n", "a\\rb", "I\\u00a1\\\"\\ni"])
def test_a_key_with_a_line_break_is_shown_escaped_on_one_line(tmp_path: Path, key: str) -> None:
    """A key holding a line break (found by ``memsim fuzz --target hosts-scenario``): the error names it escaped,
    so it stays one line."""
    p = _write(tmp_path, '{"' + key + '": [], "sessions": [null]}\n')
    with pytest.raises(ScenarioError) as exc:
        load_scenario(p)
    msg = str(exc.value)
    assert msg.startswith(f"{p}: ") and "\n" not in msg and "\r" not in msg, msg
    assert "unknown key" in msg


def test_yaml_syntax_error_names_line(tmp_path: Path) -> None:
    (err,) = _errors(tmp_path, BASE + "  - prompts: [\n")
    assert err.split(":")[0].isdigit() and "YAML error" in err


def test_duplicate_key_is_refused(tmp_path: Path) -> None:
    (err,) = _errors(tmp_path, BASE + "name: again\n")
    assert "duplicate key 'name'" in err


@pytest.mark.parametrize("text", ["- a\n- b\n", "just text\n", ""])
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str) -> None:
    (err,) = _errors(tmp_path, text)
    assert err.startswith("(top level): a scenario is a mapping")


def test_load_raises_the_first_line_and_counts_the_rest(tmp_path: Path) -> None:
    p = _write(tmp_path, BASE + "extra: 1\nmore: 2\n")
    with pytest.raises(ScenarioError) as exc:
        load_scenario(p)
    msg = str(exc.value)
    assert msg.startswith(f"{p}: ") and "\n" not in msg
    assert msg.endswith(f"(and 1 more: python -m harness.hosts.scenario {p} lists every one)")


def test_records_are_optional_for_a_users_scenario(tmp_path: Path) -> None:
    scn = load_scenario(_write(tmp_path, BASE.replace("records: [MEM-RTE-hook-volunteer]\n", "")))
    assert scn.records == []


def test_every_problem_is_listed_unknown_keys_first(tmp_path: Path) -> None:
    """A misspelt ``replys:`` explains the other lines, so it comes first, whatever the key order."""
    text = ("name: t\nsessions:\n  - gap_s: -1\n    prompts:\n      - text: hi\n        replys: [{text: ok}]\n")
    errs = _errors(tmp_path, text)
    assert errs[0] == "sessions[0].prompts[0].replys: unknown key; did you mean 'replies'? (allowed: text, replies, " \
                      "after)"
    assert sorted(errs[1:]) == ["description: missing", "sessions[0].gap_s: Input should be greater than or equal "
                                "to 0 (got -1)"]
    with pytest.raises(ScenarioError) as exc:
        load_scenario(tmp_path / "x.yaml")
    assert str(exc.value).startswith(f"{tmp_path / 'x.yaml'}: sessions[0].prompts[0].replys: unknown key")
    assert "(and 2 more: python -m harness.hosts.scenario" in str(exc.value)


def test_module_command_prints_ok_or_every_problem(tmp_path: Path) -> None:
    import subprocess
    import sys

    good = _write(tmp_path, BASE)
    bad = tmp_path / "bad.yaml"
    bad.write_text(BASE + "extra: 1\nhosts: [vim]\n", encoding="utf-8")
    ok = subprocess.run([sys.executable, "-m", "harness.hosts.scenario", str(good)], capture_output=True, text=True,
                        timeout=60)
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, f"{good}: ok\n", "")
    both = subprocess.run([sys.executable, "-m", "harness.hosts.scenario", str(good), str(bad)], capture_output=True,
                          text=True, timeout=60)
    lines = both.stdout.splitlines()
    assert both.returncode == 1 and lines[0] == f"{good}: ok" and len(lines) == 3
    assert lines[1].startswith(f"{bad}: extra: unknown key") and lines[2].startswith(f"{bad}: hosts[0]: ")


def test_replies_map_per_host(tmp_path: Path) -> None:
    scn = load_scenario(_write(tmp_path, BASE.replace(
        "[{text: ok}]", "[{shell: ls, delay_s: 0.5}, {per_host: {claude-code: {tool: Read, input: {file_path: a}}, "
        "codex: {shell: cat a}}}]")))
    shell, per = scn.sessions[0].prompts[0].replies
    c, x = shell.for_host("claude-code"), shell.for_host("codex")
    assert (c.tool, c.input, c.delay_s) == ("Bash", {"command": "ls"}, 0.5)
    assert (x.tool, x.input) == ("exec_command", {"cmd": "ls"})
    assert per.for_host("claude-code").tool == "Read" and per.for_host("codex").input == {"cmd": "cat a"}
    with pytest.raises(ScenarioError):
        per.for_host("gemini")


def test_hook_set_override_and_expand(tmp_path: Path) -> None:
    scn = load_scenario(_write(tmp_path, BASE + "hooks: {preset: none, session_start: \"awk '{print $1}' {db}\"}\n"))
    lines = hook_lines(scn.hooks)
    assert list(lines) == ["session_start"]
    assert expand(lines["session_start"], {"db": "/s"}) == "awk '{print $1}' /s"
    with pytest.raises(ScenarioError):
        expand(TORTOISE_HOOKS["session_start"], {"db": "/s"})


def test_tee_command_runs_the_line(tmp_path: Path) -> None:
    import subprocess

    cmd = tee_command("echo \"it's $((1 + 2))\"", "SessionStart", tmp_path / "hooks")
    out = subprocess.run(["sh", "-c", cmd], input=b"{}", capture_output=True, timeout=20)
    assert out.stdout == b"it's 3\n" and out.returncode == 0
    assert len(list((tmp_path / "hooks").glob("SessionStart-*.stdout"))) == 1


def test_shipped_scenarios_are_valid_and_cover_the_issue_list() -> None:
    files = scenario_files()
    for f in files:
        assert validate(f) == [], f
        assert load_scenario(f).name == f.stem
        assert load_scenario(f).records, f"{f}: a shipped scenario names the records it demonstrates"
    assert {f.stem for f in files} >= {
        "pointer-delivery", "session-start-digest", "capture-from-transcript", "confidence-gate",
        "retraction-vs-digest", "several-prompts", "tool-using-session", "hung-service", "service-killed",
        "store-locked", "own-hook-example"}
