"""Size and speed of the explorer page on the four-conversation LoCoMo run with every default row.

``python -m benchmarks.explore_speed [--run FOLDER/NAME] [--out DIR] [--repeats N]`` writes the page of a design
run (``--run``: a folder holding ``<name>.probes.parquet`` and ``<name>.deliveries.json.gz``; without it the run
is made first: every LoCoMo conversation found (``$MEMSIM_LOCOMO_DATA`` or the fetched copy) through every default
arm, PM trained on the other conversations, about as long as ``memsim bench locomo``), then measures in headless
Chromium (:mod:`harness.explore.browser`):

- **page bytes** against the 25 MB level (:data:`harness.explore.LEVEL_BYTES`), beside the store's size and the
  delivered texts inline (:func:`harness.deliveries.measure`);
- **list shown**: milliseconds from the navigation's start (``performance.now()``, whose origin is the page's
  navigation) to the end of the script that builds the question list, per load (level: 2 s);
- **filters**: for each filter (every category, a text, row A delivers all evidence and row B does not, a claim's
  ids when the run has a ledger), milliseconds from setting its value to the list re-laid out (the script forces a
  layout before it stops the clock), the median of ``repeats`` (level: 0.5 s);
- **question view**: milliseconds from changing the URL fragment to the view built with the default rows.

Results go to ``<out>/explore-speed.json`` (default ``./memsim-results/explore-speed``) and one line each on
stdout. Nothing here is a test: durations are measured, printed and compared with their levels, never asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

LEVEL_LIST_MS = 2000.0
LEVEL_FILTER_MS = 500.0
NAME = "locomo"

_FILTER = """
var t = performance.now(), s = document.getElementById(arguments[0]);
s.value = arguments[1]; s.dispatchEvent(new Event(arguments[0] === 'f-text' ? 'input' : 'change'));
void document.body.offsetHeight;
return [performance.now() - t, window.memsimExplore.visibleIds().length];"""
_VIEW = """
var done = arguments[arguments.length - 1], t = performance.now();
window.addEventListener('hashchange', function () { void document.body.offsetHeight; done(performance.now() - t); },
                        {once: true});
location.hash = arguments[0];"""


def build_run(out: Path, data: Path | None = None) -> Path:
    """The four-conversation LoCoMo design run (every default arm) as ``<out>/locomo.{probes.parquet,
    deliveries.json.gz}``; returns ``out``."""
    import tempfile

    from benchmarks.common import set_torch_threads
    from harness.deliveries.run import write_design_run
    from harness.workloads.arms import DEFAULT_ARMS
    from harness.workloads.locomo import load_locomo, resolve_locomo_path
    from harness.workloads.runner import shared_encoders

    set_torch_threads(1)
    src = resolve_locomo_path(data)
    convs = load_locomo(src)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="memsim-explore-speed-") as work, shared_encoders():
        write_design_run(out, NAME, convs, list(DEFAULT_ARMS), Path(work), data=f"data: locomo {src.name}",
                         others=lambda c: tuple(x for x in convs if x.sample_id != c.sample_id),
                         config={"arms": list(DEFAULT_ARMS), "conversations": [c.sample_id for c in convs]})
    return out


def _filters(driver: Any, data: dict[str, Any], repeats: int) -> dict[str, dict[str, Any]]:
    cases: list[tuple[str, str, str]] = [("category " + c, "f-cat", c)
                                         for c in sorted({q["cat"] for q in data["questions"]})]
    cases.append(("text 'when'", "f-text", "when"))
    shown = data["defaults"]
    if len(shown) >= 2:
        cases.append((f"{shown[0]} all, {shown[1]} not", "f-a", shown[0]))
    if data["claims"]:
        cases.append((f"claim {data['claims'][0]['id']}", "f-claim", data["claims"][0]["id"]))
    out = {}
    for label, sel, value in cases:
        times, count = [], None
        for _ in range(repeats):
            if sel == "f-a":
                driver.execute_script(_FILTER, "f-b", shown[1])
            ms, count = driver.execute_script(_FILTER, sel, value)
            times.append(ms)
            driver.execute_script(_FILTER, sel, "")
            if sel == "f-a":
                driver.execute_script(_FILTER, "f-b", "")
        out[label] = {"median_ms": statistics.median(times), "max_ms": max(times), "questions_shown": count}
    return out


def measure_page(page: Path, repeats: int = 3) -> dict[str, Any]:
    """Load ``page`` ``repeats`` times in headless Chromium and time the list, every filter and one question view."""
    from harness.explore.browser import chromium, console_errors, missing

    why = missing()
    if why is not None:
        raise SystemExit(f"error: no browser to measure with: {why}")
    text = page.read_text(encoding="utf-8")
    start = text.index('id="explore-data">') + len('id="explore-data">')
    data = json.loads(text[start:text.index("</script>", start)])
    lists, views, errors = [], [], []
    with chromium(1280, 900) as driver:
        for _ in range(repeats):
            driver.get("about:blank")
            driver.get(page.resolve().as_uri())
            lists.append(driver.execute_script("return window.memsimExplore.listShownMs"))
            errors += console_errors(driver)
        filters = _filters(driver, data, repeats)
        rows = ",".join(data["defaults"])
        for q in data["questions"][:repeats]:
            views.append(driver.execute_async_script(_VIEW, f"#q={q['id']}&rows={rows}"))
    return {"list_shown_ms": lists, "list_shown_ms_max": max(lists), "filters": filters,
            "filter_ms_max": max(f["max_ms"] for f in filters.values()), "question_view_ms": views,
            "console_errors": errors, "questions": len(data["questions"]), "rows": len(data["rows"]),
            "default_rows": data["defaults"]}


def run(out: Path, run_dir: Path | None = None, name: str = NAME, repeats: int = 3) -> dict[str, Any]:
    from benchmarks.common import machine_description, write_atomic
    from harness.deliveries import deliveries_path, measure, read_deliveries
    from harness.explore import LEVEL_BYTES, write_explorer

    t0 = time.perf_counter()
    if run_dir is None:
        run_dir = build_run(out / "run")
    built_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    page = write_explorer(run_dir, name)
    write_s = time.perf_counter() - t1
    store = measure(read_deliveries(deliveries_path(run_dir, name)))
    speed = measure_page(page, repeats)
    size = page.stat().st_size
    result = {
        "name": "explore-speed", "run": str(run_dir / name), "page_bytes": size, "store": store,
        "page_write_s": write_s, "run_build_s": built_s if built_s > 1 else None, **speed,
        "levels": {"page_bytes": {"measured": size, "max": LEVEL_BYTES, "met": size <= LEVEL_BYTES},
                   "list_shown_ms": {"measured": speed["list_shown_ms_max"], "max": LEVEL_LIST_MS,
                                     "met": speed["list_shown_ms_max"] <= LEVEL_LIST_MS},
                   "filter_ms": {"measured": speed["filter_ms_max"], "max": LEVEL_FILTER_MS,
                                 "met": speed["filter_ms_max"] <= LEVEL_FILTER_MS}},
        "machine": machine_description(),
    }
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "explore-speed.json", (json.dumps(result, indent=2) + "\n").encode("utf-8"))
    return result


def main(argv: list[str] | None = None) -> int:
    from harness.explore import ExploreError, find_run
    from harness.results_dir import default_out

    ap = argparse.ArgumentParser(prog="python -m benchmarks.explore_speed", description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, help="an existing design run (<folder>/<name> or its folder); default: "
                                             "make the four-conversation LoCoMo run first (long)")
    ap.add_argument("--out", type=Path, default=None, help="where explore-speed.json goes")
    ap.add_argument("--repeats", type=int, default=3, help="loads and filter repeats (default 3)")
    args = ap.parse_args(argv)
    out = args.out or default_out("explore-speed")
    try:
        run_dir, name = find_run(args.run) if args.run else (None, NAME)
        r = run(out, run_dir, name, max(1, args.repeats))
    except (ExploreError, OSError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    lv = r["levels"]
    print(f"page {r['page_bytes'] / 1e6:.2f} MB (level {lv['page_bytes']['max'] / 1e6:g} MB: "
          f"{'met' if lv['page_bytes']['met'] else 'missed'}); store {r['store']['file_bytes'] / 1e6:.2f} MB, "
          f"texts inline {r['store']['inline_bytes'] / 1e6:.1f} MB over {r['store']['deliveries']} deliveries")
    print(f"list shown after {', '.join(f'{x:.0f}' for x in r['list_shown_ms'])} ms (level {LEVEL_LIST_MS:.0f} ms: "
          f"{'met' if lv['list_shown_ms']['met'] else 'missed'}); {r['questions']} questions, {r['rows']} rows")
    for label, f in r["filters"].items():
        print(f"filter {label}: {f['median_ms']:.1f} ms median, {f['max_ms']:.1f} ms max, {f['questions_shown']} shown")
    print(f"filters: slowest {r['filter_ms_max']:.1f} ms (level {LEVEL_FILTER_MS:.0f} ms: "
          f"{'met' if lv['filter_ms']['met'] else 'missed'}); question view "
          f"{', '.join(f'{x:.0f}' for x in r['question_view_ms'])} ms; console errors {len(r['console_errors'])}")
    print(f"wrote {out / 'explore-speed.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
