"""The screenshots of docs/explore.md, made from a generated LongMemEval run (no text from a data file).

``python -m benchmarks.explore_docs [--out docs/images]`` generates a few LongMemEval-format questions
(:mod:`benchmarks.worlds.longmemeval`, seed 5, 8 sessions each), runs every arm that applies through the runner into
a temporary design run folder (per-probe table and delivery store, :func:`harness.deliveries.run.write_design_run`),
writes its explorer page and takes three screenshots in headless Chromium: the question list (``explore-list.png``),
a question with two rows side by side (``explore-view.png``) and one row's text at 800 pixels
(``explore-800.png``). Not a test: run it after changing the page, then look at the images.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DOCS_IMAGES = Path(__file__).resolve().parents[1] / "docs" / "images"
QUESTIONS = 4
SEED = 5


def make_run(folder: Path) -> Path:
    """The generated run: ``<folder>/longmemeval.{probes.parquet,deliveries.json.gz}``."""
    from benchmarks.common import set_torch_threads
    from benchmarks.longmemeval import default_arms
    from benchmarks.worlds.longmemeval import generate
    from harness.deliveries.run import write_design_run
    from harness.workloads.lme_workload import to_conversation
    from harness.workloads.longmemeval import parse_question

    set_torch_threads(1)
    convs = [to_conversation(parse_question(q, source="generated.json", index=i))
             for i, q in enumerate(generate(QUESTIONS, seed=SEED, sessions=8))]
    train = tuple(to_conversation(parse_question(q, source="train.json", index=i))
                  for i, q in enumerate(generate(4, seed=SEED + 1, sessions=8)))
    write_design_run(folder, "longmemeval", convs, default_arms(), folder / "work", quick=True,
                     data=f"data: synthetic, benchmarks.worlds.longmemeval seed {SEED}", synthetic=True,
                     others=lambda c: train)
    return folder


def _settle(driver: Any) -> None:
    driver.execute_script("return document.body.offsetHeight")
    time.sleep(0.3)


def screenshots(page: Path, out: Path) -> list[Path]:
    from harness.explore.browser import chromium, missing

    why = missing()
    if why is not None:
        raise SystemExit(f"error: no browser for the screenshots: {why}")
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    with chromium(1280, 760) as driver:
        driver.get(page.resolve().as_uri())
        _settle(driver)
        ids = driver.execute_script("return window.memsimExplore.visibleIds()")
        qid = next((q for q in ids if "multi" in q or "temporal" in q), ids[0])
        paths.append(out / "explore-list.png")
        driver.save_screenshot(str(paths[-1]))
        driver.get(page.resolve().as_uri() + f"#q={qid}&rows=tortoise-eval,bm25@8")
        _settle(driver)
        driver.execute_script("document.getElementById('panels').scrollIntoView()")
        _settle(driver)
        paths.append(out / "explore-view.png")
        driver.save_screenshot(str(paths[-1]))
        driver.set_window_size(800, 900)
        driver.get("about:blank")
        driver.get(page.resolve().as_uri() + f"#q={qid}&rows=fractal")
        _settle(driver)
        driver.execute_script("document.getElementById('panels').scrollIntoView()")
        _settle(driver)
        paths.append(out / "explore-800.png")
        driver.save_screenshot(str(paths[-1]))
    return paths


def main(argv: list[str] | None = None) -> int:
    from harness.explore import write_explorer

    ap = argparse.ArgumentParser(prog="python -m benchmarks.explore_docs", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DOCS_IMAGES, help="folder of the PNGs (default docs/images)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="memsim-explore-docs-") as tmp:
        run = make_run(Path(tmp))
        page = write_explorer(run, "longmemeval")
        for p in screenshots(page, args.out):
            print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
