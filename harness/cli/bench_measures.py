"""The measuring benches of ``memsim bench``: selectors, the CBR loop, cost, sweeps, the hook service (``serve``,
``service-faults``, ``capture-path``), the engines (``engines``, ``ep-engine``, ``ep-scaling``, ``ann``), redaction
and the real agent hosts. Each checks its options before any work, then runs through
:func:`harness.cli.bench_run.run_bench`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.bench_run import (
    OutOpt,
    OverwriteOpt,
    ProgressOpt,
    QuickOpt,
    SeedOpt,
    echo,
    names_option,
    run_bench,
    say,
)
from harness.cli.boundary import bad_option, fail


def selectors(
    quick: QuickOpt = False,
    out: OutOpt = None,
    seed: SeedOpt = 0,
    cases: Annotated[int | None, typer.Option(min=20, help="Bank size (default 2000; quick 150).")] = None,
    queries: Annotated[int | None, typer.Option(min=1, help="Number of queries (default 300; quick 15).")] = None,
    data_dir: Annotated[Path | None, typer.Option(
        help="AgentFly corpora folder for the corpus section (default: $MEMSIM_AGENTFLY_DATA, else the copy "
             "`memsim data fetch agentfly` placed in the data folder; the section is skipped without it).")] = None,
    progress: ProgressOpt = True,
    overwrite: OverwriteOpt = False,
) -> None:
    """Rank the synthetic case bank with NP (pooler, mean), PM classifier rows, BM25, hybrid RRF, recency, random
    and an oracle; Recall@1/4/8, nDCG@10, MRR, negative share of the top 8; plus the real-corpus section."""
    from benchmarks import selectors as mod
    from harness.datapaths import DataPathError, find_agentfly

    try:  # a mistyped --data-dir is an error before the run, not a silently skipped section
        find_agentfly(data_dir)
    except DataPathError as exc:
        raise fail(str(exc)) from None
    run_bench(mod.run, ["selectors"], out, quick=quick, progress=progress, overwrite=overwrite, seed=seed,
              n_cases=cases, n_queries=queries, data_dir=data_dir)


def cbr_loop(
    quick: QuickOpt = False,
    out: OutOpt = None,
    seed: SeedOpt = 0,
    rounds: Annotated[int | None, typer.Option(min=1, help="Rounds R (default 5; quick 2).")] = None,
    per_round: Annotated[int | None, typer.Option(min=1, help="Questions per round (default 80; quick 6).")] = None,
    progress: ProgressOpt = True,
    overwrite: OverwriteOpt = False,
) -> None:
    """Learning curves of the NP and PM drivers (offline scripted planner and judge) vs no memory and an oracle,
    plus a sweep of K in {1, 2, 4, 8, 16}. The planner is a scripted policy: curves show mechanism effects."""
    from benchmarks import cbr_loop as mod

    run_bench(mod.run, ["cbr-loop"], out, quick=quick, progress=progress, overwrite=overwrite, seed=seed,
              rounds=rounds, per_round=per_round)


def cost(
    quick: QuickOpt = False,
    out: OutOpt = None,
    seed: SeedOpt = 0,
    progress: ProgressOpt = True,
    overwrite: OverwriteOpt = False,
) -> None:
    """Per-query latency as the bank grows (NP faithful/cached, numpy bound, FAISS, PM upstream/cached), Tortoise
    volunteer latency on Kuzu, Fractal instruction and session-file growth; prints every measured ratio."""
    from benchmarks import cost as mod

    run_bench(mod.run, ["cost"], out, quick=quick, progress=progress, overwrite=overwrite, seed=seed, echo=echo)


def sweep(
    config: Annotated[Path, typer.Argument(help="Sweep file (YAML): benchmark, seeds, configs, sizes, metric; see "
                                                "benchmarks/sweeps/*.yaml and the module docs of benchmarks.sweep.")],
    executor: Annotated[str, typer.Option(help="'local' (a process pool) or 'ray' (a local Ray cluster, or the "
                                               "cluster at --address).")] = "local",
    address: Annotated[str | None, typer.Option(help="Ray cluster to join, e.g. 'auto' or 'ray://head:10001' "
                                                     "(only with --executor ray).")] = None,
    workers: Annotated[int | None, typer.Option(min=1, help="Parallel cells (default: the file's 'workers', "
                                                            "else 1).")] = None,
    out: OutOpt = None,
    progress: ProgressOpt = True,
    overwrite: OverwriteOpt = False,
) -> None:
    """Run a grid of seeds x configurations x sizes (selectors, cbr-loop, locomo) and report the mean and a 95%
    confidence interval per row, plus paired differences; writes sweep-<name>.{json,md,png}."""
    from benchmarks import sweep as mod

    if executor not in ("local", "ray"):
        raise bad_option("--executor", executor, ("local", "ray"))
    if address and executor != "ray":
        raise bad_option("--address", None, "needs --executor ray")
    try:  # the file names the run (sweep-<name>): read it before any work
        cfg = mod.load_config(config)
    except (OSError, ValueError) as exc:
        raise fail(say(exc)) from None

    def go(out_dir: Path, *, quick: bool, track: object) -> list[Path]:
        return mod.run(config, out_dir, executor=executor, address=address,  # type: ignore[arg-type]
                       workers=workers, track=track)  # type: ignore[arg-type]

    run_bench(go, [f"sweep-{cfg.name}"], out, quick=False, progress=progress, overwrite=overwrite,
              errors=(ImportError,))


def serve(
    quick: QuickOpt = False,
    out: OutOpt = None,
    seed: SeedOpt = 0,
    sizes: Annotated[list[int] | None, typer.Option("--size", min=10, help="Store sizes in points (repeatable; "
                                                                         "default 1000, 10000, 100000; quick 300, "
                                                                         "1000).")] = None,
    cache_dir: Annotated[Path | None, typer.Option(help="Where built stores are kept between runs (default "
                                                        "$MEMSIM_BENCH_CACHE or ~/.cache/memsim/bench-serve).")] = None,
    load_seconds: Annotated[float | None, typer.Option(min=1.0, help="Length of the 8-client load test (default "
                                                                     "60; quick 15).")] = None,
    decision_sizes: Annotated[list[int] | None, typer.Option(
        "--decision-size", min=0, help="Sizes of the near-duplicate decision store (repeatable; default 2000, "
                                       "20000, 100000; quick 1000; 0 = none).")] = None,
    hook_exe: Annotated[str | None, typer.Option(help="A second memsim executable (e.g. a non-editable install's "
                                                      "bin/memsim) timed beside the default in every warm "
                                                      "section.")] = None,
    progress: ProgressOpt = True,
    overwrite: OverwriteOpt = False,
) -> None:
    """Tortoise hook end to end (spawn to JSON on stdout): cold (no service) vs warm (resident service) for courtesy
    and retrieval prompts per store size, the legacy typer path at the smallest size, the first hook after a
    capture, 8 concurrent hook clients with a capture every 5 s, and the service's memory; then the warm hook on a
    near-duplicate store of template decisions."""
    from benchmarks import serve as mod

    ds = None if decision_sizes is None else [n for n in decision_sizes if n]
    for n in ds or []:  # checked here, before any work: a usage error
        if n < 10:
            raise bad_option("--decision-size", n, "0 (no decision store) or at least 10 points")
    run_bench(mod.run, ["serve"], out, quick=quick, progress=progress, overwrite=overwrite, seed=seed, echo=echo,
              sizes=list(sizes) if sizes else None, cache_dir=cache_dir, load_seconds=load_seconds,
              decision_sizes=ds, hook_exe=hook_exe)


def engines(
    quick: QuickOpt = False,
    out: OutOpt = None,
    seed: SeedOpt = 0,
    progress: ProgressOpt = True,
    overwrite: OverwriteOpt = False,
) -> None:
    """Engine speed-ups measured against the previous code in one run: the batched EP engine (pure run_ep on the 2,000-factor
    ep_scaling graph, a 10,000-factor dream pass with bulk events), the incremental search / why-block caches at
    1e5 points, the NP one-text query encode at the shipped bank's 1,278 cases and the FAISS index backend at 1e6
    cases. Writes engines.{json,md,png} to --out."""
    from benchmarks import engines as mod

    run_bench(mod.run, [mod.NAME], out, quick=quick, progress=progress, overwrite=overwrite, seed=seed, echo=echo)


def redaction(
    quick: QuickOpt = False,
    out: OutOpt = None,
    seed: SeedOpt = 0,
    per_kind: Annotated[int | None, typer.Option(min=1, help="Generated secrets per kind (default 10; quick 3).")
                        ] = None,
    progress: ProgressOpt = True,
    overwrite: OverwriteOpt = False,
) -> None:
    """Secret redaction in Tortoise: how many generated secrets survive into the store, the event feed, the
    journal, the spool, the digest and the volunteered blocks, with the faithful and the hardened redactor; plus a
    stored prompt injection and hook JSON validity. Writes redaction.{json,md}."""
    from benchmarks import redaction as mod

    run_bench(mod.run, ["redaction"], out, quick=quick, progress=progress, overwrite=overwrite, seed=seed,
              per_kind=per_kind)


def ep_scaling(
    quick: QuickOpt = False,
    out: OutOpt = None,
    seed: SeedOpt = 0,
    progress: ProgressOpt = True,
    overwrite: OverwriteOpt = False,
) -> None:
    """Time per Tortoise dream pass and EP iterations to converge on generated graphs of 100, 1,000 and 10,000
    factors (quick: 100 and 1,000) on an on-disk Kuzu store. Writes ep_scaling.{json,md,png}."""
    from benchmarks import ep_scaling as mod

    def go(out_dir: Path, *, quick: bool, track: object, seed: int) -> list[Path]:
        return mod.run(out_dir, quick=quick, seed=seed, echo=echo)

    run_bench(go, [mod.NAME], out, quick=quick, progress=progress, overwrite=overwrite, seed=seed)


def ep_engine(
    quick: QuickOpt = False,
    out: OutOpt = None,
    seed: SeedOpt = 0,
    progress: ProgressOpt = True,
    overwrite: OverwriteOpt = False,
) -> None:
    """The EP engines side by side in one run: run_ep on the 2,000-factor ep_scaling graph and a 10,000-factor dream
    pass (quick: 300 and 1,000), each engine and store-I/O option timed and checked bit for bit against the previous
    one, and two dreams in a row with a checkpoint between them (each in a child process: the previous in-place edge
    write fails there in Kuzu 0.11.3, the default rewrite completes; `python -m benchmarks.dream_abort` reproduces it at
    chosen store sizes). Writes ep-engine.{json,md}."""
    from benchmarks import ep_engine as mod

    run_bench(mod.run, [mod.NAME], out, quick=quick, progress=progress, overwrite=overwrite, seed=seed)


def capture_path(
    store: Annotated[Path, typer.Argument(help="The Kuzu store to capture into (copied first; never written).")],
    quick: Annotated[bool, typer.Option("--quick", help="Two captures per engine and no memory section.")] = False,
    out: OutOpt = None,
    captures: Annotated[int, typer.Option(min=1, help="Captures per engine.")] = 7,
    build: Annotated[int | None, typer.Option("--build", min=10, help="Build STORE with N points first when it "
                                                                      "does not exist.")] = None,
    memory: Annotated[bool, typer.Option("--memory/--no-memory", help="Also measure the one-statement vs "
                                                                      "id-range read of the search cache.")] = True,
    progress: ProgressOpt = True,
    overwrite: OverwriteOpt = False,
) -> None:
    """Where a capture through the resident Tortoise service spends its time, stage by stage, with the indexed
    admission path and the previous full-scan path side by side in one run. Writes capture_path.{json,md}."""
    from benchmarks import capture_path as mod

    if not store.exists() and not build:
        raise fail(f"{store}: no such store (pass --build N to build one)")

    def go(out_dir: Path, *, quick: bool, track: object) -> list[Path]:
        return mod.run(out_dir, store, captures=2 if quick else captures, memory=memory and not quick, build=build,
                       echo=lambda _text: None)

    run_bench(go, ["capture_path"], out, quick=quick, progress=progress, overwrite=overwrite)


def service_faults(
    quick: QuickOpt = False,
    out: OutOpt = None,
    seed: SeedOpt = 0,
    embedder: Annotated[str, typer.Option(help="The service's encoder: minilm (the default, as `memsim tortoise "
                                               "serve`) or hashing.")] = "minilm",
    progress: ProgressOpt = True,
    overwrite: OverwriteOpt = False,
) -> None:
    """The Tortoise hook service under faults: well-behaved and hostile clients interleaved on one service
    process (crashes, lost acknowledged captures, latency of the good clients), the service killed with SIGKILL
    in the middle of a capture, and 1,000 small sessions captured into an in-memory store (quick: 120 + 120
    requests, 300 sessions). Writes service-faults.{json,md}."""
    from benchmarks import service_faults as mod

    if embedder not in ("minilm", "hashing"):
        raise bad_option("--embedder", embedder, ("minilm", "hashing"))
    run_bench(mod.run, [mod.NAME], out, quick=quick, progress=progress, overwrite=overwrite, seed=seed,
              embedder=embedder)


def ann(
    quick: QuickOpt = False,
    out: OutOpt = None,
    seed: SeedOpt = 0,
    points: Annotated[list[int] | None, typer.Option(
        "--points", min=9, help="Index size N, repeatable (default 10,000, 100,000 and 1,000,000; quick 2,000).")
    ] = None,
    render: Annotated[bool, typer.Option("--render", help="Re-render ann.{md,png} in --out from its ann.json; "
                                                          "nothing is measured.")] = False,
    progress: ProgressOpt = True,
    overwrite: OverwriteOpt = False,
) -> None:
    """The HNSW index of the Tortoise ANN option (SimConfig.ann_index) alone at N points: build time, search
    p50/p95 per query and recall@8 against exact FAISS flat search (timed in the same run) on 300 held-out queries
    of MiniLM vectors of generated sentences, with an efSearch/M sweep chosen on a validation split. Vectors are
    cached under ~/.cache/memsim/ann/ (embedding a large N takes long). Writes ann.{json,md,png}."""
    from benchmarks import ann as mod

    def go(out_dir: Path, *, quick: bool, track: object, seed: int) -> list[Path]:
        if render:  # reads the published ann.json (the documented exception): the measurement is kept
            import shutil

            from harness.runs import published_folder

            shutil.copy2(published_folder(out_dir) / f"{mod.NAME}.json", out_dir / f"{mod.NAME}.json")
            return mod.rerender(out_dir)
        return mod.run(out_dir, quick=quick, seed=seed, points=points, track=track, echo=echo)

    run_bench(go, [mod.NAME], out, quick=quick, progress=progress, overwrite=overwrite or render, seed=seed)


def hosts(
    quick: QuickOpt = False,
    out: OutOpt = None,
    seed: SeedOpt = 0,
    host_names: Annotated[list[str] | None, typer.Option(
        "--hosts", help="Hosts to measure, repeatable or comma-separated (default: every installed host with a "
                        "driver; one not installed is skipped with one line).", show_default=False)] = None,
    scenario_names: Annotated[list[str] | None, typer.Option(
        "--scenarios", help="Shipped scenarios by name, repeatable or comma-separated (default: all; quick: "
                            "pointer-delivery and hung-service).", show_default=False)] = None,
    runs: Annotated[int | None, typer.Option("--runs", min=1, help="Runs per latency cell (default 30; quick "
                                                                   "4, the fewest with a 95% interval).")] = None,
    isolation: Annotated[str, typer.Option("--isolation", help="auto, netns or base-url (as memsim hosts "
                                                               "run).")] = "auto",
    work_dir: Annotated[Path | None, typer.Option(
        "--work-dir", help="Keep the host runs (requests, hook records, transcripts) in this folder (default: a "
                           "temporary folder, removed).")] = None,
    progress: ProgressOpt = True,
    overwrite: OverwriteOpt = False,
) -> None:
    """memsim's Tortoise hooks in the real pinned hosts (memsim hosts install): every shipped scenario on every
    installed host; the prompt latency with no hooks, hooks cold (no service), served (service running, warmed)
    and with a hung service, interleaved run by run (p50/p95, overhead against no hooks, hook wall times); session
    end to filed with and without the service; sessions lost and prompts delayed past their hooks' budgets in the
    fault scenarios; memory's share of a real request's tokens; one excerpt per host of the messages that carry
    memory. Writes hosts.{json,md,png}."""
    from benchmarks import hosts as mod
    from harness.hosts.install import HOSTS

    if isolation not in ("auto", "netns", "base-url"):
        raise bad_option("--isolation", isolation, ("auto", "netns", "base-url"))
    chosen = names_option(host_names)
    for h in chosen or []:
        if h not in HOSTS:
            raise bad_option("--hosts", h, list(HOSTS))

    def go(out_dir: Path, *, quick: bool, track: object, seed: int) -> list[Path]:
        from harness.hosts.install import find_host

        for h in chosen or []:
            if find_host(h) is None:
                echo(f"skipped: {h} {HOSTS[h].version} is not installed (memsim hosts install {h})")
        return mod.run(out_dir, quick=quick, seed=seed, track=track, hosts=chosen, scenarios=names_option(scenario_names),
                       runs=runs, isolation=isolation, work_dir=work_dir)

    run_bench(go, [mod.NAME], out, quick=quick, progress=progress, overwrite=overwrite, seed=seed)


def stats_coverage(
    quick: QuickOpt = False,
    out: OutOpt = None,
    seed: SeedOpt = 0,
    progress: ProgressOpt = True,
    overwrite: OverwriteOpt = False,
) -> None:
    """Coverage of memsim's 95% intervals and the randomization test's false-positive rate on synthetic per-probe
    data shaped like the real results (0/1-heavy with ties; 582 and 30 probes), 2,000 simulated runs per scenario
    (quick: fewer). Writes stats-coverage.{json,md}."""
    from benchmarks import stats_coverage as mod

    run_bench(mod.run, [mod.NAME], out, quick=quick, progress=progress, overwrite=overwrite, seed=seed)


def stats_speed(
    quick: QuickOpt = False,
    out: OutOpt = None,
    seed: SeedOpt = 0,
    progress: ProgressOpt = True,
    overwrite: OverwriteOpt = False,
) -> None:
    """The time of every headline interval and every headline pair of a LoCoMo-sized per-probe table (584 probes x
    21 rows, synthetic) against its 10 s level. Writes stats-speed.{json,md}."""
    from benchmarks import stats_speed as mod

    run_bench(mod.run, [mod.NAME], out, quick=quick, progress=progress, overwrite=overwrite, seed=seed)
