"""``memsim bench ...``: the benchmarks (results in the ``bench`` run folder unless ``--out`` names another).

This module is the mounted app; the commands live in :mod:`harness.cli.bench_measures` (selectors, CBR loop, cost,
sweeps, the hook service, engines, redaction, hosts) and :mod:`harness.cli.bench_workloads` (LoCoMo, LongMemEval),
over the shared plumbing of :mod:`harness.cli.bench_run` (common options, the run that owns its names, the
``wrote`` lines)."""

from __future__ import annotations

import typer

from harness.cli import bench_measures as m
from harness.cli import bench_workloads as w

app = typer.Typer(help="Benchmarks, each measuring its arms side by side in one run: AgentFly's selectors and CBR "
                       "loop, cost growth, LoCoMo and LongMemEval through every design (and their published "
                       "protocols, LongMemEval at scale), sweeps over seeds, the Tortoise hook service, engines, "
                       "redaction and the real agent hosts.\n\n"
                       "Each writes <name>.{json,md,png} to --out (default ./memsim-results/bench, or "
                       "$MEMSIM_RESULTS_DIR/bench) when it finishes, replacing only that benchmark's earlier "
                       "files; the committed results change only when --out names benchmarks/results. Helpers run "
                       "as scripts: python -m benchmarks.cost_tortoise [DIR] re-measures the Tortoise rows of a "
                       "cost.json, python -m benchmarks.serve_breakdown STORE shows where the hook service's "
                       "memory and time go, python -m benchmarks.docs_pages re-renders every docs results page, "
                       "the README's generated blocks (benchmarks.readme_blocks) and benchmarks/RESULTS.md "
                       "(benchmarks.report) from the committed results (--check compares only); python -m "
                       "benchmarks.explore_speed measures the explorer page's size and speed, python -m "
                       "benchmarks.explore_docs makes its docs screenshots, python -m benchmarks.design_profile shows where "
                       "one LongMemEval design question's time goes (also longmemeval-scale --profile), python -m "
                       "benchmarks.locomo_workers compares LoCoMo runs with different worker counts.",
                  no_args_is_help=True)

for _name, _fn in (("selectors", m.selectors), ("cbr-loop", m.cbr_loop), ("cost", m.cost), ("locomo", w.locomo),
                   ("sweep", m.sweep), ("serve", m.serve), ("engines", m.engines), ("redaction", m.redaction),
                   ("ep-scaling", m.ep_scaling), ("ep-engine", m.ep_engine), ("capture-path", m.capture_path),
                   ("service-faults", m.service_faults), ("ann", m.ann), ("hosts", m.hosts),
                   ("longmemeval", w.longmemeval), ("longmemeval-scale", w.longmemeval_scale),
                   ("stats-coverage", m.stats_coverage), ("stats-speed", m.stats_speed)):
    app.command(_name)(_fn)
