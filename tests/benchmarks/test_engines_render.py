"""``benchmarks.engines`` levels and report, rendered from results JSON (the timed run is `memsim bench engines`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from benchmarks import cost, engines, serve
from benchmarks.common import RESULTS_DIR


def _copy(tmp_path: Path, *names: str) -> Path:
    for name in names:
        shutil.copy(RESULTS_DIR / name, tmp_path / name)
    return tmp_path


def test_first_volunteer_level_is_judged_through_the_service_and_the_in_process_figure_is_qualified(tmp_path):
    out = _copy(tmp_path, "engines.json", "serve.json", "cost.json")
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
    # a re-render changes nothing in the committed results: neither the measured sections nor the levels (a level
    # left stale by a later serve.json or cost.json fails here), nor the page rendered from them
    committed = json.loads((RESULTS_DIR / "engines.json").read_text())
    assert payload["levels"] == committed["levels"]
    assert payload == committed
    assert md == (RESULTS_DIR / "engines.md").read_text()


def test_without_serve_results_the_user_path_level_is_not_judged(tmp_path):
    out = _copy(tmp_path, "engines.json")
    engines.rerender(out)
    payload = json.loads((out / "engines.json").read_text())
    (user,) = [x for x in payload["levels"] if "through the service" in x["level"]]
    assert user["met"] is None and "| n/a |" in (out / "engines.md").read_text()


def _np_level(levels: list[dict]) -> dict:
    (lv,) = [x for x in levels if x["level"].startswith("NP cached >= 500x faster than NP faithful at 1,278 cases")]
    return lv


def test_the_np_500x_level_is_judged_on_each_bank_and_each_page_quotes_the_other(tmp_path):
    out = _copy(tmp_path, "engines.json", "serve.json", "cost.json")
    engines.rerender(out)
    cost.rerender(out, figure=False)
    e, c = (json.loads((out / f"{n}.json").read_text()) for n in ("engines", "cost"))
    shipped, synthetic = engines.np_shipped_ratio(e), cost.np_synthetic_ratio(c)
    assert shipped is not None and synthetic is not None
    lv_e, lv_c = _np_level(e["levels"]), _np_level(c["levels"])
    assert lv_e["met"] == (shipped[0] >= 500 and shipped[1]) and lv_c["met"] == (synthetic[0] >= 500 and synthetic[1])
    for lv, (ratio, ident), where in ((lv_e, synthetic, "cost.json"), (lv_c, shipped, "engines.json")):
        verdict = "met" if ratio >= 500 and ident else "missed"
        assert f"({where}): {ratio:,.0f}x, {verdict} there" in lv["measured"]
    assert "judged here on the shipped bank" in lv_e["level"] and "judged here on the synthetic CBR bank" in lv_c["level"]
    # both pages show both figures, and the committed results say the same
    assert lv_e["measured"] in (out / "engines.md").read_text() and lv_c["measured"] in (out / "cost.md").read_text()
    assert c["levels"] == json.loads((RESULTS_DIR / "cost.json").read_text())["levels"]
    assert (out / "cost.md").read_text() == (RESULTS_DIR / "cost.md").read_text()


def test_without_the_other_bank_the_np_level_says_where_it_is_measured(tmp_path):
    out = _copy(tmp_path, "engines.json", "cost.json")
    (out / "cost.json").rename(out / "cost.json.away")
    engines.rerender(out)
    assert "synthetic bank: not in this results folder (cost.json" in _np_level(
        json.loads((out / "engines.json").read_text())["levels"])["measured"]
    (out / "cost.json.away").rename(out / "cost.json")
    (out / "engines.json").unlink()
    cost.rerender(out, figure=False)
    assert "shipped bank: not in this results folder (engines.json" in _np_level(
        json.loads((out / "cost.json").read_text())["levels"])["measured"]
