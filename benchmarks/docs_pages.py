"""Every published results page, rendered from the committed results JSON: one source for every number.

Each page under ``docs/results/`` (and the two LoCoMo pages ``docs/locomo.md`` and ``docs/locomo-paper.md``) is the
render of one or more ``benchmarks/results/*.json`` files by the benchmark's own renderer (its
``render_markdown`` or equivalent); figures are copied beside the page from ``benchmarks/results/*.png``. The
README's generated blocks (:mod:`benchmarks.readme_blocks`), the Results entries of the ``mkdocs.yml`` nav and
``benchmarks/RESULTS.md`` (:mod:`benchmarks.report`) are rendered in the same pass. Nothing on these pages
is typed by hand, so re-running a benchmark with ``--out benchmarks/results`` and then this module updates them.

    python -m benchmarks.docs_pages            # rewrite every page, figure and README block
    python -m benchmarks.docs_pages --figures  # first draw every results figure again from its JSON
    python -m benchmarks.docs_pages --check    # exit 1 when any of them differs from its render

A page whose JSON is absent is left out (and its nav entry says so only by its absence from the index page);
a JSON that cannot be rendered ends the run with one line naming the file.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import RESULTS_DIR

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES_DIR = DOCS / "results"


def _selectors(p: dict[str, Any]) -> str:
    from benchmarks import selectors

    return selectors.render_markdown(p)


def _cbr_loop(p: dict[str, Any]) -> str:
    from benchmarks import cbr_loop

    return cbr_loop.render_markdown(cbr_loop.from_json(p))


def _sweep(p: dict[str, Any]) -> str:
    from benchmarks import sweep

    return sweep.render_markdown(p)


def _cost(p: dict[str, Any]) -> str:
    from benchmarks import cost

    return cost.render_markdown(p)


def _ep_scaling(p: dict[str, Any]) -> str:
    from benchmarks import ep_scaling

    return ep_scaling.render_markdown(p)


def _engines(p: dict[str, Any]) -> str:
    from benchmarks import engines

    return engines.render_md(p)


def _ep_engine(p: dict[str, Any]) -> str:
    from benchmarks import ep_engine

    return ep_engine.render(p)


def _serve(p: dict[str, Any]) -> str:
    from benchmarks import serve

    return serve.render_markdown(p)


def _service_faults(p: dict[str, Any]) -> str:
    from benchmarks import service_faults

    return service_faults.render(p)


def _hosts(p: dict[str, Any]) -> str:
    from benchmarks import hosts

    return hosts.render_markdown(p)


def _capture_path(p: dict[str, Any]) -> str:
    from benchmarks import capture_path

    return capture_path.render_markdown(p)


def _redaction(p: dict[str, Any]) -> str:
    from benchmarks import redaction

    return redaction.render_markdown(p)


def _crash(p: dict[str, Any]) -> str:
    from harness.reliability import crash_report

    return crash_report.render_md(p)


def _fuzz(p: dict[str, Any]) -> str:
    from harness.reliability import fuzz

    return fuzz.render_md(p)


def _ann(p: dict[str, Any]) -> str:
    from benchmarks import ann

    return ann.render_md(p)


def _locomo_workers(p: dict[str, Any]) -> str:
    from benchmarks import locomo

    return locomo.workers_markdown(p)


def _locomo_page(p: dict[str, Any]) -> str:
    from benchmarks import locomo

    return locomo.docs_page(p)


def _locomo_paper_page(p: dict[str, Any]) -> str:
    from benchmarks import locomo_paper

    return locomo_paper.docs_page(p)


def _longmemeval_protocol(p: dict[str, Any]) -> str:
    from benchmarks import longmemeval_protocol

    return longmemeval_protocol.docs_page(p)


def _longmemeval_designs(p: dict[str, Any]) -> str:
    from benchmarks import longmemeval

    return longmemeval.docs_page(p)


def _longmemeval_scale(p: dict[str, Any]) -> str:
    from benchmarks import longmemeval_scale

    return longmemeval_scale.render_markdown(p)


def _stats_coverage(p: dict[str, Any]) -> str:
    from benchmarks import stats_coverage

    return stats_coverage.render_markdown(p)


def _stats_speed(p: dict[str, Any]) -> str:
    from benchmarks import stats_speed

    return stats_speed.render_markdown(p)


@dataclass(frozen=True)
class Page:
    """One results page: where it goes, its title, the JSON files it renders and how to re-measure them."""

    slug: str
    title: str
    sources: tuple[tuple[str, Callable[[dict[str, Any]], str]], ...]
    command: str
    about: str
    whole: bool = False  # the renderer returns the whole page (title included), written as it is

    @property
    def path(self) -> Path:
        return DOCS / f"{self.slug}.md" if self.whole else PAGES_DIR / f"{self.slug}.md"


PAGES: tuple[Page, ...] = (
    Page("selectors", "Selectors on the synthetic CBR world", (("selectors", _selectors),),
         "memsim bench selectors --out benchmarks/results",
         "AgentFly's NP and PM selectors against BM25, hybrid, recency and random on a synthetic case bank, plus "
         "the real AgentFly corpus checks."),
    Page("cbr-loop", "CBR loop: learning curves", (("cbr-loop", _cbr_loop),),
         "memsim bench cbr-loop --out benchmarks/results",
         "The AgentFly driver loop with a scripted planner, round by round, per memory arm."),
    Page("sweeps", "Sweeps: several seeds with confidence intervals",
         (("sweep-cbr-loop", _sweep), ("sweep-selectors", _sweep)),
         "memsim bench sweep benchmarks/sweeps/NAME.yaml --out benchmarks/results",
         "Seeds x configurations x sizes: each row's mean over seeds and probes with its two-level bootstrap 95% "
         "interval, and Holm-adjusted paired tests of fixed pairs."),
    Page("cost", "Cost growth", (("cost", _cost),),
         "memsim bench cost --out benchmarks/results",
         "Per-query cost of the NP and PM selectors against bank size, Tortoise volunteering against store size, "
         "and Fractal's growth per turn, with the expected levels."),
    Page("ep-scaling", "EP scaling (Tortoise dream)", (("ep_scaling", _ep_scaling),),
         "memsim bench ep-scaling --out benchmarks/results",
         "Time per dream pass and EP iterations to converge on generated factor graphs."),
    Page("engines", "Engines: speed-ups against the code they replace", (("engines", _engines),),
         "memsim bench engines --out benchmarks/results",
         "Each faster engine timed in the same run as the implementation it replaces (kept as a named option), "
         "with the check that both give the same output."),
    Page("ep-engine", "EP engine and dream pass", (("ep-engine", _ep_engine),),
         "memsim bench ep-engine --out benchmarks/results",
         "The EP engines and the dream's store I/O options side by side, checked bit for bit."),
    Page("ann", "Approximate nearest neighbours", (("ann", _ann),),
         "memsim bench ann --out benchmarks/results",
         "The HNSW index of the approximate-nearest-neighbour option against exact flat search timed in the same "
         "run: build time, per-query latency and recall at growing sizes."),
    Page("serve", "Tortoise hook service", (("serve", _serve),),
         "memsim bench serve --out benchmarks/results",
         "The Tortoise per-prompt hook from spawn to exit, cold (no service) and warm (the resident service), at "
         "growing store sizes and under load."),
    Page("service-faults", "Tortoise hook service under faults", (("service-faults", _service_faults),),
         "memsim bench service-faults --out benchmarks/results",
         "Well-behaved and hostile clients against one service, the service killed inside captures, and an "
         "in-memory store filled up."),
    Page("hosts", "Real agent hosts", (("hosts", _hosts),),
         "memsim bench hosts --out benchmarks/results",
         "memsim's Tortoise hooks inside the real pinned Claude Code and Codex against a loopback model server: what "
         "reached the model and where, prompt latency with and without hooks and service, session end to filed, "
         "the fault scenarios and memory's share of a request's tokens."),
    Page("capture-path", "Capture path through the hook service", (("capture_path", _capture_path),),
         "python -m benchmarks.capture_path STORE.kuzu --out benchmarks/results",
         "Where a capture through the resident Tortoise service spends its time, stage by stage, with the capture "
         "engines side by side, and the memory of reading the search cache's population."),
    Page("redaction", "Secret redaction in Tortoise", (("redaction", _redaction),),
         "memsim bench redaction --out benchmarks/results",
         "Generated secrets through capture, checkpoint and diary: how many survive into each channel, with the "
         "faithful and the hardened redactor."),
    Page("crash", "Crash points, real kills and concurrent writers", (("crash", _crash),),
         "memsim crash --kill --concurrency --out benchmarks/results",
         "Every durable write sequence of the three designs crashed at every step, restarted from disk and "
         "checked, for the faithful code and each hardened option."),
    Page("fuzz", "Fuzzed loaders", (("fuzz", _fuzz), ("fuzz-10k", _fuzz)),
         "memsim fuzz --examples N --name NAME --out benchmarks/results",
         "One hypothesis target per loader; every input ends accepted, skipped (a documented faithful skip) or "
         "rejected (a one-line error naming the file); crashes and partial writes are bugs."),
    Page("locomo-workers", "LoCoMo runner: worker processes", (("locomo-workers", _locomo_workers),),
         "python -m benchmarks.locomo_workers 1,2 --full --out benchmarks/results",
         "The same LoCoMo workload run with different numbers of worker processes: wall time, speed-up, peak "
         "memory, and whether every result is identical to the first run's."),
    Page("locomo", "LoCoMo results", (("locomo", _locomo_page),),
         "memsim bench locomo --out benchmarks/results",
         "The same real LoCoMo conversations through every design and a few baselines: delivered against stored "
         "evidence, tokens and time, per category.", whole=True),
    Page("locomo-paper", "LoCoMo paper protocol", (("locomo-paper", _locomo_paper_page),),
         "memsim bench locomo --protocol locomo-paper --out benchmarks/results",
         "The LoCoMo paper's retrieval-recall protocol run with memsim's retrievers, beside the published rows.",
         whole=True),
    Page("longmemeval-protocol", "LongMemEval: the official retrieval protocol",
         (("longmemeval-protocol", _longmemeval_protocol),),
         "memsim bench longmemeval --protocol longmemeval --data FILE --out benchmarks/results",
         "LongMemEval's official retrieval evaluation (BM25 and the flat-contriever MiniLM path, session and turn "
         "corpora, turn2session, both averaging rules) with the published numbers beside, marked with their data."),
    Page("longmemeval", "LongMemEval through the designs", (("longmemeval", _longmemeval_designs),),
         "memsim bench longmemeval --data FILE --out benchmarks/results",
         "Every LoCoMo arm on each LongMemEval question's own haystack: delivered against stored evidence (both "
         "roles and the official user-only view), tokens, per question type, Tortoise's expansion pair."),
    Page("longmemeval-scale", "LongMemEval at scale", (("longmemeval-scale", _longmemeval_scale),),
         "python -m benchmarks.longmemeval_scale --protocol-questions 40 --profile --out benchmarks/results",
         "The official protocol's wall time on an S-shaped generated file; the design run before and after the "
         "embedding store at three haystack sizes, fitted and projected to S and M for one and two workers against "
         "its level, with the store's encode rate against its floor and where one S-shape question's time goes; "
         "and the streaming loader's peak memory on a multi-GB file. The command below re-measures the committed "
         "sizes (the protocol on 40 questions, projected to 500)."),
    Page("stats-coverage", "Statistics checks: coverage and false positives", (("stats-coverage", _stats_coverage),),
         "python -m benchmarks.stats_coverage --out benchmarks/results",
         "How often each 95% interval covers the truth and how often the paired randomization test rejects a true "
         "null, on simulated per-probe results shaped like LoCoMo's and LongMemEval's; paired differences method by "
         "method."),
    Page("stats-speed", "Statistics speed", (("stats-speed", _stats_speed),),
         "python -m benchmarks.stats_speed --out benchmarks/results",
         "The time a full LoCoMo design run's headline intervals and paired comparisons take, against its level."),
)

_FENCE = re.compile(r"^(```|~~~)")
_HEADING = re.compile(r"^(#{1,6}) ")


def demote(md: str, top: int = 2) -> str:
    """Shift every heading (outside code fences) so the highest one sits at level ``top``."""
    lines = md.splitlines()
    levels, fenced = [], False
    for ln in lines:
        if _FENCE.match(ln):
            fenced = not fenced
        elif not fenced and (m := _HEADING.match(ln)):
            levels.append(len(m.group(1)))
    if not levels:
        return md
    shift = top - min(levels)
    out, fenced = [], False
    for ln in lines:
        if _FENCE.match(ln):
            fenced = not fenced
        elif not fenced and (m := _HEADING.match(ln)):
            ln = "#" * min(6, len(m.group(1)) + shift) + ln[len(m.group(1)):]
        out.append(ln)
    return "\n".join(out) + ("\n" if md.endswith("\n") else "")


def _drop_title(md: str) -> str:
    """The Markdown without its leading title line (the page carries its own title)."""
    first, _, rest = md.partition("\n")
    return rest.lstrip("\n") if _HEADING.match(first) else md


def _load(results: Path, name: str) -> dict[str, Any]:
    path = results / f"{name}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: {exc}") from exc


def _images(md: str) -> list[str]:
    return re.findall(r"!\[[^\]]*\]\(([^)/\s]+\.png)\)", md)


def available(results: Path = RESULTS_DIR) -> list[Page]:
    """The pages whose results JSON are all present."""
    return [p for p in PAGES if all((results / f"{n}.json").exists() for n, _ in p.sources)]


def render_page(page: Page, results: Path = RESULTS_DIR) -> tuple[str, dict[str, bytes]]:
    """The page's Markdown and the figures it shows (file name -> bytes, copied from ``results``)."""
    parts: list[str] = []
    for name, fn in page.sources:
        try:
            md = fn(_load(results, name))
        except ValueError:
            raise
        except (KeyError, TypeError, IndexError, AttributeError) as exc:
            raise ValueError(f"{results / (name + '.json')}: cannot render: {type(exc).__name__}: {exc}") from exc
        md = md.rstrip() + "\n"
        if not page.whole and (results / f"{name}.png").exists() and f"{name}.png" not in _images(md):
            md += f"\n![{name}]({name}.png)\n"
        parts.append(md)
    if page.whole:
        text = parts[0]
    else:
        srcs = ", ".join(f"`benchmarks/results/{n}.json`" for n, _ in page.sources)
        head = [f"# {page.title}", "", page.about, "",
                f"Rendered from {srcs} by `python -m benchmarks.docs_pages` (never edited by hand). Re-measure with "
                f"`{page.command}`, then re-render.", ""]
        top = 3 if len(page.sources) > 1 else 2
        body = [demote(_drop_title(p), top) for p in parts]
        if len(page.sources) > 1:
            body = [f"## `{n}`\n\n" + b for (n, _), b in zip(page.sources, body, strict=True)]
        text = "\n".join(head) + "\n" + "\n".join(body)
    figures = {}
    for img in _images(text):
        src = results / img
        if not src.exists():
            raise ValueError(f"{src}: figure named by the {page.slug} page is missing")
        figures[img] = src.read_bytes()
    return text, figures


def index_page(pages: list[Page]) -> str:
    """``docs/results/index.md``: one line per rendered page."""
    lines = ["# Results", "",
             "Every page in this section is rendered from the committed results JSON in `benchmarks/results/` by "
             "`python -m benchmarks.docs_pages`; each names the command that re-measures it. Each benchmark runs "
             "its arms side by side in one run on the machine named under its tables.", "",
             "| page | what it measures |", "|---|---|"]
    for p in pages:
        link = f"../{p.slug}.md" if p.whole else f"{p.slug}.md"
        lines.append(f"| [{p.title}]({link}) | {p.about} |")
    return "\n".join(lines) + "\n"


MKDOCS = ROOT / "mkdocs.yml"
NAV_BEGIN = "      # generated:results-nav (python -m benchmarks.docs_pages)"
NAV_END = "      # /generated:results-nav"


def nav_block(pages: list[Page]) -> str:
    """The Results entries of the mkdocs nav: the overview, then every rendered page."""
    lines = [NAV_BEGIN, "      - Overview: results/index.md"]
    for p in pages:
        target = p.path.relative_to(DOCS).as_posix()
        lines.append(f"      - {json.dumps(p.title)}: {target}")
    return "\n".join([*lines, NAV_END])


def render_mkdocs(text: str, pages: list[Page]) -> str:
    """``mkdocs.yml`` with its generated Results nav block replaced; a file without the markers is an error."""
    pat = re.compile(re.escape(NAV_BEGIN) + r"\n.*?" + re.escape(NAV_END), re.S)
    if not pat.search(text):
        raise ValueError(f"{MKDOCS}: no generated results nav block (line '{NAV_BEGIN.strip()}')")
    return pat.sub(lambda m: nav_block(pages), text)


def render_all(results: Path = RESULTS_DIR) -> dict[Path, bytes]:
    """Every generated file (pages, figures, the results index) as path -> bytes."""
    pages = available(results)
    out: dict[Path, bytes] = {}
    for page in pages:
        text, figures = render_page(page, results)
        out[page.path] = text.encode("utf-8")
        for name, data in figures.items():
            out[page.path.parent / name] = data
    out[PAGES_DIR / "index.md"] = index_page(pages).encode("utf-8")
    out[MKDOCS] = render_mkdocs(MKDOCS.read_text(encoding="utf-8"), pages).encode("utf-8")
    if results == RESULTS_DIR:
        from benchmarks import report

        out[report.OUT] = report.build().encode("utf-8")
    return out


FIGURES: dict[str, tuple[str, str, str | None]] = {
    "ann": ("benchmarks.ann", "make_figure", None),
    "cbr-loop": ("benchmarks.cbr_loop", "_figure", None),
    "cost": ("benchmarks.cost", "_figure", None),
    "engines": ("benchmarks.engines", "plot", None),
    "ep_scaling": ("benchmarks.ep_scaling", "plot", "rows"),
    "hosts": ("benchmarks.hosts", "figure", None),
    "locomo": ("benchmarks.locomo", "figure", None),
    "locomo-paper": ("benchmarks.locomo_paper", "figure", None),
    "longmemeval": ("benchmarks.longmemeval", "figure", None),
    "longmemeval-protocol": ("benchmarks.longmemeval_protocol", "_figure", None),
    "longmemeval-scale": ("benchmarks.longmemeval_scale", "figure", None),
    "selectors": ("benchmarks.selectors", "_figure", None),
    "serve": ("benchmarks.serve", "figure", None),
    "sweep-": ("benchmarks.sweep", "figure", None),
}
"""Results name (``sweep-`` covers every sweep) -> the module and function that draw its figure from the JSON
(``key``: the function takes that part of the payload; ``None``: the whole payload), as the benchmark's run does."""
FIGURE_DPI = 110


def figure_png(name: str, payload: dict[str, Any]) -> bytes | None:
    """The PNG of results ``name`` drawn from ``payload`` by the benchmark's own figure function (``None``: the
    benchmark has no figure)."""
    import importlib
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    entry = FIGURES.get(name) or next((v for k, v in FIGURES.items() if k.endswith("-") and name.startswith(k)),
                                      None)
    if entry is None:
        return None
    module, func, key = entry
    fig = getattr(importlib.import_module(module), func)(payload[key] if key else payload)
    if fig is None:
        return None
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=FIGURE_DPI, bbox_inches="tight")
    finally:
        plt.close(fig)
    return buf.getvalue()


def render_figures(results: Path = RESULTS_DIR) -> dict[Path, bytes]:
    """Every ``<name>.png`` of ``results`` that has a figure function, drawn again from its ``<name>.json``
    (nothing re-measured); the pages then copy them (``--figures`` writes them, then renders the pages)."""
    out: dict[Path, bytes] = {}
    for path in sorted(results.glob("*.json")):
        try:
            data = figure_png(path.stem, json.loads(path.read_text(encoding="utf-8")))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: cannot draw its figure ({type(exc).__name__}: {exc})") from None
        if data is not None:
            out[path.with_suffix(".png")] = data
    return out


def stale(files: dict[Path, bytes]) -> list[Path]:
    """The generated files whose content on disk differs from their render."""
    return [p for p, data in files.items() if not p.exists() or p.read_bytes() != data]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only compare; exit 1 when a page or README block is stale")
    ap.add_argument("--results", type=Path, default=RESULTS_DIR, help="results folder (default: benchmarks/results)")
    ap.add_argument("--figures", action="store_true",
                    help="first draw every results figure (<name>.png) again from its JSON, then render the pages")
    a = ap.parse_args(argv)
    from benchmarks import readme_blocks

    try:
        if a.figures and not a.check:
            for p, data in render_figures(a.results).items():
                if not p.exists() or p.read_bytes() != data:
                    p.write_bytes(data)
                    print(f"wrote {p.relative_to(ROOT) if p.is_relative_to(ROOT) else p}")
        files = render_all(a.results)
        readme_old = readme_blocks.README.read_text(encoding="utf-8")
        readme_new = readme_blocks.render(readme_old, a.results)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    bad = stale(files)
    if a.check:
        if readme_new != readme_old:
            bad.append(readme_blocks.README)
        for p in bad:
            print(f"{p.relative_to(ROOT)}: differs from its render; run python -m benchmarks.docs_pages",
                  file=sys.stderr)
        return 1 if bad else 0
    for p in bad:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(files[p])
        print(f"wrote {p.relative_to(ROOT)}")
    if readme_new != readme_old:
        readme_blocks.README.write_text(readme_new, encoding="utf-8")
        print(f"wrote {readme_blocks.README.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
