from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.claims import Claim, ClaimContext, Observation, Tested, all_claims, values_match
from harness.ledger import run_claims, write_all


def _holds(ctx: ClaimContext) -> Observation:
    (ctx.tmp_path / "probe.txt").write_text("x")
    return Observation.compare({"files": ["probe.txt"]}, {"files": sorted(p.name for p in ctx.tmp_path.iterdir())})


def _refuted(ctx: ClaimContext) -> Observation:
    return Observation.compare({"length": 20}, {"length": 25}, evidence="tail of 25")


def _raises(ctx: ClaimContext) -> Observation:
    raise RuntimeError("scenario broke")


def _claims() -> list[Claim]:
    return [Claim("T-1", "harness", "rec-a", "holds", "mechanism", _holds),
            Claim("T-2", "harness", "rec-a", "refuted", "consequence", _refuted),
            Claim("T-3", "harness", "rec-b", "raises", "mechanism", _raises)]


def test_runner_isolates_and_catches(tmp_path: Path) -> None:
    ledger = run_claims(_claims(), progress=False)
    verdicts = {r.id: r.verdict for r in ledger.rows}
    assert verdicts == {"T-1": "holds", "T-2": "refuted", "T-3": "error"}
    rows = {r.id: r for r in ledger.rows}
    assert "RuntimeError: scenario broke" in rows["T-3"].evidence and "Traceback" in rows["T-3"].evidence
    assert rows["T-2"].measured["mismatches"] == {"length": {"expected": 20, "observed": 25}}
    assert ledger.counts()["harness"] == {"holds": 1, "refuted": 1, "inconclusive": 0, "error": 1, "skipped": 0}

    paths = write_all(ledger, tmp_path / "out")
    assert [p.name for p in paths] == ["ledger.json", "ledger.md", "ledger.html"]
    data = json.loads(paths[0].read_text())
    assert [r["verdict"] for r in data["rows"]] == ["holds", "refuted", "error"]
    md = paths[1].read_text()
    assert "## harness: rec-a" in md and "### T-3 [error]" in md
    page = paths[2].read_text()
    assert page.count("<details>") >= 3 and "class='sortable'" in page and "<script>" in page
    assert not re.search(r"<(script|link|img)[^>]+src=", page)  # self-contained


def test_compare_and_checks() -> None:
    assert values_match(0.1 + 0.2, 0.3) and not values_match(1.0, 1.1)
    assert values_match({"a": [1.0, 2]}, {"a": (1.0, 2)}) and not values_match(True, 1.0)
    assert Observation.compare({"x": 1.0}, {"x": 1.05}, tol=0.1).verdict == "holds"
    obs = Observation.from_checks({"a": True, "b": False})
    assert obs.verdict == "refuted" and obs.measured["failed_checks"] == ["b"]
    assert Observation.skipped("no corpus").verdict == "skipped"


def test_registry_discovers_harness_claims_and_filters() -> None:
    ids = [c.id for c in all_claims(design="harness")]
    assert ids[:3] == ["HAR-01", "HAR-02", "HAR-03"]
    assert [c.id for c in all_claims(ids=["har-02"])] == ["HAR-02"]
    assert all(c.kind == "consequence" for c in all_claims(kind="consequence"))
    with pytest.raises(KeyError):
        all_claims(ids=["NOPE-1"])


def test_cli_claims_writes_ledger_and_exit_codes(tmp_path: Path) -> None:
    from harness.cli.main import app

    runner = CliRunner()
    res = runner.invoke(app, ["claims", "--design", "harness", "--id", "HAR-02", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "HAR-02" in res.output and (tmp_path / "ledger.html").exists()
    res = runner.invoke(app, ["claims", "--design", "nonsense"])
    assert res.exit_code == 2 and "invalid value for '--design': 'nonsense'" in res.output  # a usage error
    res = runner.invoke(app, ["claims", "--id", "ZZZ-9"])
    assert res.exit_code == 2 and "unknown claim" in res.output


def test_cli_exits_nonzero_when_a_claim_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.claims as claims_mod
    from harness.cli.main import app

    claims_mod.discover()
    monkeypatch.setitem(claims_mod._REGISTRY, "HAR-99",
                        Claim("HAR-99", "harness", "test", "raises", "mechanism", _raises))
    res = CliRunner().invoke(app, ["claims", "--id", "HAR-99", "--out", str(tmp_path)])
    assert res.exit_code == 1 and "errored" in res.output
    assert json.loads((tmp_path / "ledger.json").read_text())["rows"][0]["verdict"] == "error"


def test_every_command_has_help() -> None:
    from harness.cli.main import app

    runner = CliRunner()
    for args in (["--help"], ["claims", "--help"], ["version"], ["fractal", "--help"], ["agentfly", "--help"],
                 ["tortoise", "--help"], ["bench", "--help"]):
        res = runner.invoke(app, args)
        assert res.exit_code == 0, (args, res.output)


def _noisy(ctx: ClaimContext) -> Observation:
    import logging
    import sys
    import warnings

    logging.getLogger("memsim.test.noisy").warning("graph feed write failed for %s: %s", "PointAdded", "boom")
    warnings.warn("expected deprecation in a demonstration", UserWarning, stacklevel=1)
    print("journal write failed for PointAdded: injected", file=sys.stderr)
    return Observation.holds({"n": 1}, evidence="own evidence")


def test_runner_routes_demonstration_messages_into_evidence(capsys) -> None:
    from harness.ledger import CAPTURED_HEADER

    ledger = run_claims([Claim("T-9", "harness", "rec", "noisy", "mechanism", _noisy)], progress=False)
    row = ledger.rows[0]
    out, err = capsys.readouterr()
    assert err == "" and out == ""
    assert row.verdict == "holds" and row.evidence.startswith("own evidence\n\n" + CAPTURED_HEADER)
    assert "log WARNING memsim.test.noisy: graph feed write failed for PointAdded: boom" in row.evidence
    assert "warning UserWarning: expected deprecation in a demonstration" in row.evidence
    assert "stderr: journal write failed for PointAdded: injected" in row.evidence
    quiet = run_claims(_claims()[:1], progress=False).rows[0]
    assert CAPTURED_HEADER not in quiet.evidence  # nothing said, nothing appended


def test_fault_injection_claim_keeps_the_terminal_clean(capfd) -> None:
    """TOR-41 injects a journal failure; its warning lands in the evidence, not on the terminal."""
    (tor41,) = all_claims(ids=["TOR-41"])
    row = run_claims([tor41], progress=False).rows[0]
    _out, err = capfd.readouterr()
    assert "journal write failed" not in err
    assert row.verdict == "holds" and "journal write failed for PointAdded" in row.evidence


def _checks(ctx: ClaimContext) -> Observation:
    return Observation.from_checks({"file_written": True, "not_leaked": False})


def test_compare_records_expected_for_side_by_side() -> None:
    obs = Observation.compare({"a": 1, "b": [1, 2]}, {"a": 1, "b": [2, 1], "extra": 3})
    assert obs.measured["expected"] == {"a": 1, "b": [1, 2]} and obs.measured["extra"] == 3
    with pytest.raises(ValueError, match="reserved"):
        Observation.compare({"x": 1}, {"x": 1, "expected": 2})


def test_html_filters_sort_direction_expected_observed_and_links(tmp_path: Path) -> None:
    from harness.ledger import REPO_ROOT, expected_observed

    claims = [*_claims(), Claim("T-4", "fractal", "rec-c", "checks", "consequence", _checks)]
    ledger = run_claims(claims, progress=False)
    rows = {r.id: r for r in ledger.rows}
    assert expected_observed(rows["T-2"].measured) == [("length", 20, 25, False)]
    assert expected_observed(rows["T-1"].measured) == [("files", ["probe.txt"], ["probe.txt"], True)]
    assert expected_observed(rows["T-4"].measured) == [("file_written", True, True, True),
                                                      ("not_leaked", True, False, False)]
    out = tmp_path / "site" / "ledger"
    page = write_all(ledger, out)[2].read_text()
    # filters: design, verdict, kind, free text, and a live count
    for control in ("id='f-design'", "id='f-verdict'", "id='f-kind'", "id='f-text'", "id='f-count'"):
        assert control in page
    assert "<option value='fractal'>fractal</option>" in page and "<option value='refuted'>refuted</option>" in page
    assert "data-design='harness' data-verdict='refuted' data-kind='consequence'" in page
    # sort direction shown on the header (aria-sort + arrow), script present
    assert page.count("<span class='dir'></span>") == 6 and "aria-sort" in page and "descending" in page
    # expected versus observed, a mismatch marked
    assert "<th>expected</th><th>observed</th>" in page and "class='bad'><code>25</code>" in page
    # links: the demonstration's source (path:line, relative to the page) and the docs anchor
    src = rows["T-1"].source_path
    path, _, line = src.rpartition(":")
    assert path == "tests/harness/test_ledger.py" and int(line) > 0
    assert (REPO_ROOT / path).read_text().splitlines()[int(line) - 1].startswith("def _holds(")
    href = re.search(r"source <a href='([^']+)'>" + re.escape(src), page).group(1)
    assert href.endswith(f"{path}#L{line}") and not href.startswith("/")
    assert (out / href.split("#")[0]).resolve() == (REPO_ROOT / path).resolve()
    # the docs link names the built site's page (where the anchor works), never the raw docs/*.md file
    doc = re.search(r"docs <a href='([^']+)'>harness page, #t-1</a>", page).group(1)
    assert doc.endswith("#t-1") and ".md" not in doc and not doc.startswith("/")
    assert (out / doc.split("#")[0]).resolve() == REPO_ROOT / "site" / "harness" / "index.html"


def test_docs_link_follows_the_mkdocs_site_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.ledger as ledger_mod

    (tmp_path / "mkdocs.yml").write_text("site_name: x\nsite_dir: built\n")
    monkeypatch.setattr(ledger_mod, "REPO_ROOT", tmp_path)
    out = tmp_path / "runs" / "ledger"
    assert ledger_mod.docs_site_link("fractal", "fra-01", out) == "../../built/fractal/index.html#fra-01"
    (tmp_path / "mkdocs.yml").write_text("site_name: x\nuse_directory_urls: false\n")
    assert ledger_mod.docs_site_link("tortoise", "tor-02", out) == "../../site/tortoise.html#tor-02"
    (tmp_path / "mkdocs.yml").write_text("site_name: x\nsite_url: 'https://example.org/memsim/'\n")
    assert ledger_mod.docs_site_link("agentfly", "agf-05", out) == "https://example.org/memsim/agentfly/#agf-05"


def test_real_claim_rows_link_to_their_decorated_function() -> None:
    from harness.ledger import REPO_ROOT, source_location

    (tor,) = all_claims(ids=["TOR-42"])
    path, _, line = source_location(tor.demonstrate).rpartition(":")
    assert path.startswith("harness/claims/tortoise_") and path.endswith(".py")
    assert '@claim("TOR-42"' in (REPO_ROOT / path).read_text().splitlines()[int(line) - 1]


def _inconclusive(ctx: ClaimContext) -> Observation:
    # five probes all in the stated direction: the paired test cannot reach p < 0.05 with five (2 / 2^5)
    return Observation.from_test(Tested.paired("a > b", [1, 1, 1, 1, 1], [0, 0, 0, 0, 0], ">"))


def test_inconclusive_is_counted_and_shown_everywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The third outcome of a tested claim: counted in ledger.json, a column of ledger.md's and ledger.html's
    counts, a filter option and row class of the page, a column of the CLI summary, and exit status 0."""
    import typing

    import harness.claims as claims_mod
    from harness.cli.main import app
    from harness.ledger import VERDICTS, expected_observed

    ledger = run_claims([*_claims()[:1], Claim("T-5", "cross", "rec", "tested", "consequence", _inconclusive)],
                        progress=False)
    row = ledger.rows[1]
    assert row.verdict == "inconclusive" and row.measured["inconclusive_tests"] == ["a > b"]
    assert ledger.counts()["cross"]["inconclusive"] == 1 and ledger.counts()["all"]["inconclusive"] == 1
    [(name, want, got, ok)] = expected_observed(row.measured)
    assert name.startswith("a > b (paired randomization") and want == "> 0, Holm p < 0.05"
    assert got.endswith(": inconclusive") and ok is False
    paths = write_all(ledger, tmp_path / "out")
    data = json.loads(paths[0].read_text())
    assert data["counts"]["all"]["inconclusive"] == 1 and data["rows"][1]["verdict"] == "inconclusive"
    md = paths[1].read_text()
    assert "| scope | holds | refuted | inconclusive | error | skipped |" in md
    assert "| all | 1 | 0 | 1 | 0 | 0 |" in md and "### T-5 [inconclusive]" in md
    page = paths[2].read_text()
    assert "<th>inconclusive</th>" in page and "<option value='inconclusive'>inconclusive</option>" in page
    assert "class='inconclusive' id='t-5'" in page and ".inconclusive{" in page
    assert set(typing.get_args(claims_mod.Verdict)) == set(VERDICTS)  # the ledger shows every verdict

    claims_mod.discover()
    monkeypatch.setitem(claims_mod._REGISTRY, "HAR-98",
                        Claim("HAR-98", "harness", "test", "tested", "consequence", _inconclusive))
    res = CliRunner().invoke(app, ["claims", "--id", "HAR-98", "--out", str(tmp_path / "cli")], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output  # as for holds: only an error fails the command
    assert "inconclusive" in res.output
    header = next(line for line in res.output.splitlines() if "scope" in line)
    assert [w for w in re.split(r"[\s┃│|]+", header) if w] == ["scope", "holds", "refuted", "inconclusive", "error",
                                                                "skipped"]
