"""Every results JSON records the code it came from (a top-level ``run`` block, ``harness.runs.run_record``) and
every results page shows it; results written before the block existed say ``not recorded``. The footer names the
run's own seeds as such, so they do not read as the data's."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from benchmarks import common, docs_pages
from benchmarks.common import RESULTS_DIR
from harness.runs import code_text, describe_code

SAMPLE = {"memsim": "9.9.9", "commit": "0123456789abcdef0123", "diff_sha256": "fedcba9876543210fedc",
          "command": "memsim bench sample --out somewhere", "finished_utc": "2026-01-01T00:00:00+00:00",
          "wall_s": 12.0}
# every page source whose results JSON is committed (a page of results not committed, e.g. locomo-workers, has
# nothing to check here)
SOURCES = [(page.slug, name, fn) for page in docs_pages.PAGES for name, fn in page.sources
           if (RESULTS_DIR / f"{name}.json").exists()]


@pytest.mark.parametrize("slug,name,fn", SOURCES, ids=[f"{s}:{n}" for s, n, _ in SOURCES])
def test_every_results_page_names_the_code_of_its_json(slug, name, fn) -> None:
    path = RESULTS_DIR / f"{name}.json"
    payload = json.loads(path.read_text(encoding="utf-8"))
    assert code_text(payload.get("run")) in fn(copy.deepcopy(payload))  # a committed result: what it recorded
    payload["run"] = SAMPLE
    assert describe_code(SAMPLE) in fn(payload), f"the {slug} page does not show the run's code"


def test_code_text_of_each_record_shape() -> None:
    assert code_text(None) == code_text({}) == code_text({"wall_s": 3}) == "not recorded"
    assert code_text(SAMPLE) == "memsim 9.9.9, commit 0123456 + uncommitted changes (diff sha256 fedcba98)"
    assert code_text({"memsim": "1", "commit": "abcdef0123", "diff_sha256": None}) == "memsim 1, commit abcdef0"
    assert code_text({"code": {"commit": "abcdef0123", "modified": True}}) == \
        "commit abcdef0 with uncommitted changes (no diff hash recorded)"


def test_write_results_stamps_a_measured_payload_and_keeps_a_stored_one(tmp_path: Path) -> None:
    meta = {"machine": common.machine_description(), "seeds": {"seed": 3}, "quick": True, "wall_s": 2.5}

    def render(p: dict) -> str:
        return "# x\n\n" + common.meta_block(p["meta"], p.get("run"))

    paths = common.write_results(tmp_path, "x", {"meta": dict(meta)}, render, None)
    assert [p.name for p in paths] == ["x.json", "x.md"]
    run = json.loads((tmp_path / "x.json").read_text())["run"]
    assert run["memsim"] and run["wall_s"] == 2.5 and "commit" in run  # outside a CLI run: the payload's wall
    md = (tmp_path / "x.md").read_text()
    assert f"Code: {describe_code(run)}." in md
    assert "This run's own seeds (not the data's): seed 3." in md and "Seeds: {" not in md
    stored = {"meta": dict(meta)}  # re-rendering stored results: no run block is made up for them
    common.write_results(tmp_path, "y", stored, render(stored), None)
    assert "run" not in json.loads((tmp_path / "y.json").read_text())
    assert "Code: not recorded." in (tmp_path / "y.md").read_text()


def test_inside_a_run_the_record_takes_the_whole_runs_wall_time(tmp_path: Path) -> None:
    from harness.runs import owned_run

    with owned_run(tmp_path, ["z"]) as stage:
        paths = common.write_results(stage, "z", {"meta": {"wall_s": 10_000.0}}, lambda p: "z", None)
        assert paths[0].parent == stage
    run = json.loads((tmp_path / "z.json").read_text())["run"]
    assert run["wall_s"] < 10_000.0  # the owned run's own clock, not a number the payload carried
