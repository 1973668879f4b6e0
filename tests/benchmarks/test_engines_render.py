"""``benchmarks.engines`` levels and report, rendered from results JSON (the timed run is `memsim bench engines`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from benchmarks import engines, serve
from benchmarks.common import RESULTS_DIR


def _copy(tmp_path: Path, *names: str) -> Path:
    for name in names:
        shutil.copy(RESULTS_DIR / name, tmp_path / name)
    return tmp_path


def test_first_volunteer_level_is_judged_through_the_service_and_the_in_process_figure_is_qualified(tmp_path):
    out = _copy(tmp_path, "engines.json", "serve.json")
    engines.rerender(out)
    payload = json.loads((out / "engines.json").read_text())
    fv = serve.first_volunteer_after_capture(json.loads((out / "serve.json").read_text())["rows"])
    by = {x["level"]: x for x in payload["levels"]}
    (user,) = [x for k, x in by.items() if k.startswith("first volunteer after a capture") and "through the service" in k]
    assert user["measured"] == f"hook p50 {fv['hook_p50_ms']:.0f} ms" and user["met"] == fv["met"]
    (local,) = [x for k, x in by.items() if k.startswith("in-process cache refresh only")]
    assert local["measured"].startswith(f"{payload['cache']['incremental_median_ms']:.0f} ms")
    md = (out / "engines.md").read_text()
    assert md == engines.render_md(payload)
    assert "in-process cache refresh only (no service)" in md and "issue" not in md.lower()
    # the measured sections are untouched by a re-render
    committed = json.loads((RESULTS_DIR / "engines.json").read_text())
    assert {k: v for k, v in payload.items() if k != "levels"} == {k: v for k, v in committed.items() if k != "levels"}


def test_without_serve_results_the_user_path_level_is_not_judged(tmp_path):
    out = _copy(tmp_path, "engines.json")
    engines.rerender(out)
    payload = json.loads((out / "engines.json").read_text())
    (user,) = [x for x in payload["levels"] if "through the service" in x["level"]]
    assert user["met"] is None and "| n/a |" in (out / "engines.md").read_text()
