"""The per-question explorer: ``<name>.explore.html``, one self-contained page that shows, question by question, the
exact text each row of a design run put in front of the model, with the evidence marked.

:func:`write_explorer` reads the run's per-probe table (``<name>.probes.parquet``, :mod:`harness.probes`) and its
delivery store (``<name>.deliveries.json.gz``, :mod:`harness.deliveries`), checks them against each other
(:mod:`harness.explore.data`) and writes the page into the run folder, one of the run's own names. The page holds
its data, script and styles inline (no network, no library, no build step; it works from ``file://``): a question
list with filters and per-row marks, and a question view with each selected row's delivered text rebuilt in the
browser from the store's parts.

**Size level.** A page over :data:`LEVEL_BYTES` (25 MB) is refused with one line naming the run and saying to
choose fewer questions with ``--limit`` / ``--types`` (the refusal is the documented choice: one page that opens
in a browser, rather than pages that split one run's comparisons apart). The full 500-question LongMemEval S
(about 123,000 distinct turns) is over it; ``benchmarks.explore_speed`` measures LoCoMo's four conversations with
every row against it.

Bad input (a run folder without a table or a store, an older memsim's run, a row that does not exist, a damaged
table or store) ends in :class:`ExploreError`: one line naming the folder or file and what is missing; nothing is
written.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path

from harness.explore.data import ExploreError, claim_ids, display_id, page_data

LEVEL_BYTES = 25 * 1000 * 1000
"""The largest page written (bytes)."""
SUFFIX = ".explore.html"
WRITE_STEP = "explore.write"
"""Fault-hook step name of the page's one durable write."""

__all__ = ["LEVEL_BYTES", "SUFFIX", "WRITE_STEP", "ExploreError", "claim_ids", "display_id", "explorer_path",
           "find_run", "page_html", "write_explorer"]


def explorer_path(run_dir: Path | str, name: str) -> Path:
    return Path(run_dir) / f"{name}{SUFFIX}"


def find_run(arg: Path | str) -> tuple[Path, str]:
    """(run folder, run name) from what a user names: ``<folder>/<name>.json``, ``<folder>/<name>.probes.parquet``,
    ``<folder>/<name>`` or a folder holding exactly one per-probe table. :class:`ExploreError` otherwise."""
    from harness.deliveries import SUFFIX as STORE

    p = Path(arg)
    table = ".probes.parquet"
    for suffix in (table, STORE, SUFFIX, ".json"):
        if p.name.endswith(suffix) and len(p.name) > len(suffix):
            return p.parent, p.name[: -len(suffix)]
    if p.is_dir():
        names = sorted(f.name[: -len(table)] for f in p.glob(f"*{table}") if f.is_file())
        if not names and (p.parent / f"{p.name}{table}").is_file():  # <folder>/<name>, whose own folder exists
            return p.parent, p.name
        if len(names) == 1:
            return p, names[0]
        if names:
            raise ExploreError(f"{p}: holds several runs ({', '.join(names)}); name one as {p}/<name>")
        raise ExploreError(f"{p}: no per-probe table (*{table}) in this folder: not a design run's folder, or a run "
                           f"from a memsim that wrote none")
    if (p.parent / f"{p.name}{table}").exists() or (p.parent / f"{p.name}.json").exists():
        return p.parent, p.name
    raise ExploreError(f"{p}: no such run (expected a run folder, <folder>/<name>, or its .json)")


def page_html(data: dict) -> str:
    """The whole page for a page-data document (:func:`harness.explore.data.page_data`)."""
    pkg = resources.files("harness.explore")
    css = pkg.joinpath("explore.css").read_text(encoding="utf-8")
    js = pkg.joinpath("explore.js").read_text(encoding="utf-8")
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    meta = data["meta"]
    e = html.escape
    code = meta.get("code") or {}
    code_text = " ".join(str(x) for x in (code.get("version") and f"memsim {code.get('version')}",
                                           code.get("commit") and f"commit {str(code['commit'])[:12]}") if x)
    synthetic = "<span class='synthetic'>synthetic data</span> " if meta.get("synthetic") else ""
    sub = (f"{synthetic}{e(meta.get('data') or 'data: not recorded')} &middot; {len(data['questions'])} of "
           f"{meta['questions_in_run']} questions &middot; {len(data['rows'])} rows"
           + (f" &middot; {e(code_text)}" if code_text else ""))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{e(meta['name'])} &middot; memsim explorer</title><link rel="icon" href="data:,">
<style>{css}</style></head><body>
<header><h1>memsim explorer: {e(meta['name'])}</h1><p class="sub">{sub}</p></header>
<details class="rows"><summary>rows shown (<span id="rowcount"></span>): the list's marks and the question view's
panels</summary><div id="rowpick"></div></details>
<div id="list">
<div class="filters">
<label>category / type <select id="f-cat" aria-label="filter by category or type"><option value="">all</option></select></label>
<label>text <input type="search" id="f-text" placeholder="question or gold answer" aria-label="filter by text"></label>
<span><select id="f-a" aria-label="row A"><option value="">row A</option></select> delivers all evidence and
<select id="f-b" aria-label="row B"><option value="">row B</option></select> does not</span>
<label id="f-claim-wrap">claim <select id="f-claim" aria-label="the probes a claim quoted"><option value="">all</option></select></label>
<span id="f-count"></span>
</div>
<p class="legend"><span class="m-all">&#9679;</span> all evidence delivered &middot; <span class="m-some">&#9680;</span> some
&middot; <span class="m-none">&#9675;</span> none &middot; &ndash; no evidence annotated &middot; keys: j / k next / previous question</p>
<table id="qlist"><thead id="qhead"></thead><tbody id="qbody"></tbody></table>
</div>
<div id="view" hidden>
<nav><a href="#" id="back">&larr; list</a><a href="#" id="prev">previous (k)</a><a href="#" id="next">next (j)</a></nav>
<h2 id="v-id"></h2><p id="v-meta"></p>
<dl><dt>question</dt><dd id="v-q"></dd><dt>date</dt><dd id="v-date"></dd><dt id="v-answer-label"></dt><dd id="v-answer"></dd></dl>
<table class="ev"><thead><tr><th>evidence turn</th><th>speaker</th><th>session date</th><th>text</th></tr></thead>
<tbody id="v-ev"></tbody></table>
<div id="panels" class="panels"></div>
</div>
<script type="application/json" id="explore-data">{payload}</script>
<script>{js}</script>
</body></html>
"""


def write_explorer(run_dir: Path | str, name: str, *, rows: Sequence[str] | None = None,
                   types: Sequence[str] | None = None, limit: int | None = None, ledger: Path | None = None,
                   max_bytes: int = LEVEL_BYTES, fault_hook: Callable[[str], None] | None = None) -> Path:
    """Write ``<run_dir>/<name>.explore.html`` from the run's per-probe table and delivery store; the page's path.

    ``rows``: the rows a question view shows first (default: the design rows and the comparator rows the run's
    configuration names, :func:`harness.explore.data.default_rows`); ``types``: only questions of these LoCoMo
    categories (number or name) or LongMemEval types; ``limit``: only the first N questions; ``ledger``: a
    ``ledger.json`` whose XD claims' quoted probes become a filter. :class:`ExploreError` (one line, nothing
    written) for a run it cannot show or a page over ``max_bytes``."""
    from harness.atomic import write_atomic
    from harness.deliveries import deliveries_path

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ExploreError(f"{run_dir}: no such run folder")
    table = run_dir / f"{name}.probes.parquet"
    store = deliveries_path(run_dir, name)
    if not table.is_file():
        raise ExploreError(f"{run_dir}: no per-probe table {table.name} (a run from a memsim that wrote none, or not a "
                           f"LoCoMo or LongMemEval design run)")
    if not store.is_file():
        raise ExploreError(f"{run_dir}: no delivery store {store.name} (a run from a memsim that kept no delivered "
                           f"texts, or one that did not finish)")
    if limit is not None and limit < 1:
        raise ExploreError(f"--limit must be at least 1, got {limit}")
    data = page_data(table, store, name=name, rows=rows, types=types, limit=limit, ledger=ledger)
    page = page_html(data).encode("utf-8")
    if len(page) > max_bytes:
        raise ExploreError(f"{run_dir}/{name}: the page would be {len(page) / 1e6:.1f} MB, over the "
                           f"{max_bytes / 1e6:g} MB level; choose fewer questions with --limit N or --types T")
    out = explorer_path(run_dir, name)
    write_atomic(out, page, fault_hook, WRITE_STEP)
    return out
