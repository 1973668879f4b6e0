"""``memsim bench ...``: the benchmarks (results in the ``bench`` run folder unless ``--out`` names another)."""

from __future__ import annotations

import contextlib
import inspect
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from harness.cli.boundary import bad_option, check_output_dir, describe_error, fail, make_console

app = typer.Typer(help="Benchmarks measured side by side in one run. Each writes <name>.{json,md,png} to --out "
                       "(default ./memsim-results/bench, or $MEMSIM_RESULTS_DIR/bench); the committed results "
                       "change only when --out names benchmarks/results. Helpers run as scripts: python -m "
                       "benchmarks.cost_tortoise [DIR] re-measures the Tortoise rows of a cost.json, python -m "
                       "benchmarks.serve_breakdown STORE shows where the hook service's memory and time go, python "
                       "-m benchmarks.docs_pages re-renders every docs results page, the README's generated blocks "
                       "(benchmarks.readme_blocks) and benchmarks/RESULTS.md (benchmarks.report) from the committed "
                       "results (--check compares only); python -m benchmarks.explore_speed measures the explorer "
                       "page's size and speed, python -m benchmarks.explore_docs makes its docs screenshots.",
                  no_args_is_help=True)
console = make_console()  # markup and emoji off: paths and messages print as given

QuickOpt = Annotated[bool, typer.Option("--quick", help="Small sizes (about a minute); results go to --out like "
                                                        "a full run's.")]
OutOpt = Annotated[Path | None, typer.Option("--out", help="Output directory (default ./memsim-results/bench, or "
                                                          "$MEMSIM_RESULTS_DIR/bench).")]
SeedOpt = Annotated[int, typer.Option("--seed", help="World / sampling seed.")]
ProgressOpt = Annotated[bool, typer.Option("--progress/--no-progress", help="Show progress bars.")]


def _echo(text: str) -> None:
    """A benchmark's line, whole: never broken across lines at the console's width (a pipe, 80 columns)."""
    console.print(text, soft_wrap=True)


def _finish(paths: list[Path]) -> None:
    for p in paths:
        console.print(f"wrote {p}", soft_wrap=True)


def _out_dir(out: Path | None) -> Path:
    """``--out`` checked before any work, or the ``bench`` run folder (announced, so a user knows where to look)."""
    from benchmarks.common import default_out_dir

    out_dir = out or default_out_dir()
    if out is None:
        console.print(f"writing results to {out_dir} (the default run folder; --out to change)", soft_wrap=True)
    return check_output_dir(out_dir)


def _say(exc: BaseException) -> str:
    """One line for a benchmark's error, not led by the exception's class name (a file named when known)."""
    if isinstance(exc, OSError):
        return describe_error(exc) if exc.filename is not None else (exc.strerror or str(exc))
    return str(exc) or exc.__class__.__name__


# --arm-class errors about the command line itself; the others (a module that is not there or fails to import, a
# class that is missing or is no arm) are about what the option names, as an --arms arm that cannot be imported
_ARM_CLASS_USAGE = ("expected package.module:Class", "is already selected")


def _arm_option_error(exc: ValueError, arms: str | None, arm_class: list[str] | None) -> typer.Exit:
    """The arm selection's one-line ``ValueError`` as a usage error (exit status 2, naming the option and its value)
    when it is about the command line: an unknown or empty --arms, a malformed --arm-class, an arm selected twice.
    An --arm-class whose module or class cannot be loaded is exit status 1, as an --arms arm that cannot be
    imported."""
    msg = " ".join(str(exc).split())
    if not msg.startswith("--arm-class"):
        return bad_option("--arms", arms, msg)
    if not any(k in msg for k in _ARM_CLASS_USAGE):
        return fail(msg)
    spec = next((s for s in arm_class or [] if s.strip() and (s.strip() in msg or repr(s) in msg)), None)
    for prefix in (f"--arm-class {spec!r}: ", f"--arm-class {(spec or '').strip()}: "):
        if spec is not None and msg.startswith(prefix):
            return bad_option("--arm-class", spec, msg[len(prefix):])
    return bad_option("--arm-class", spec, msg)


def _main_argv(mod: Any) -> Callable[..., list[Path]]:
    """A bench runner for a benchmark whose entry point is ``main(argv)`` taking ``--out``, ``--seed``, ``--quick``."""
    def go(out_dir: Path, *, quick: bool, track: object, seed: int) -> list[Path]:
        shown = {"track": track} if "track" in inspect.signature(mod.main).parameters else {}  # the run's display
        return mod.main(["--out", str(out_dir), "--seed", str(seed), *(["--quick"] if quick else [])], **shown)

    return go


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """While a benchmark runs, SIGTERM (``kill``, a job scheduler's stop) ends it like Ctrl-C: as a
    ``KeyboardInterrupt`` in the main thread, so the benchmark's own clean-up runs and no temp or half-written
    results file stays behind (the default SIGTERM action ends the process without any clean-up)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run(fn, out: Path | None, quick: bool, progress: bool, **kw) -> None:  # type: ignore[no-untyped-def]
    from benchmarks.common import default_out_dir, progress_bar
    from harness.cli.run_output import removed_if_empty_on_failure

    with removed_if_empty_on_failure(out or default_out_dir()):  # a failed run leaves no empty folder behind
        out_dir = _out_dir(out)
        try:
            with _sigterm_as_interrupt(), progress_bar(progress) as track:
                paths = fn(out_dir, quick=quick, track=track, **kw)
        except (OSError, ValueError) as exc:
            raise fail(_say(exc)) from None
    _finish(paths)


@app.command()
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
) -> None:
    """Rank the synthetic case bank with NP (pooler, mean), PM classifier rows, BM25, hybrid RRF, recency, random
    and an oracle; Recall@1/4/8, nDCG@10, MRR, negative share of the top 8; plus the real-corpus section."""
    from benchmarks import selectors as mod
    from harness.datapaths import DataPathError, find_agentfly

    try:  # a mistyped --data-dir is an error before the run, not a silently skipped section
        find_agentfly(data_dir)
    except DataPathError as exc:
        raise fail(str(exc)) from None
    _run(mod.run, out, quick, progress, seed=seed, n_cases=cases, n_queries=queries, data_dir=data_dir)


@app.command("cbr-loop")
def cbr_loop(
    quick: QuickOpt = False,
    out: OutOpt = None,
    seed: SeedOpt = 0,
    rounds: Annotated[int | None, typer.Option(min=1, help="Rounds R (default 5; quick 2).")] = None,
    per_round: Annotated[int | None, typer.Option(min=1, help="Questions per round (default 80; quick 6).")] = None,
    progress: ProgressOpt = True,
) -> None:
    """Learning curves of the NP and PM drivers (offline scripted planner and judge) vs no memory and an oracle,
    plus a sweep of K in {1, 2, 4, 8, 16}. The planner is a scripted policy: curves show mechanism effects."""
    from benchmarks import cbr_loop as mod

    _run(mod.run, out, quick, progress, seed=seed, rounds=rounds, per_round=per_round)


@app.command()
def cost(
    quick: QuickOpt = False,
    out: OutOpt = None,
    seed: SeedOpt = 0,
    progress: ProgressOpt = True,
) -> None:
    """Per-query latency as the bank grows (NP faithful/cached, numpy bound, FAISS, PM upstream/cached), Tortoise
    volunteer latency on Kuzu, Fractal instruction and session-file growth; prints every measured ratio."""
    from benchmarks import cost as mod

    _run(mod.run, out, quick, progress, seed=seed, echo=_echo)


@app.command()
def locomo(
    data: Annotated[Path | None, typer.Option("--data", help="LoCoMo file or folder, either layout (default: "
                                                             "$MEMSIM_LOCOMO_DATA, else the locomo10.json `memsim "
                                                             "data fetch locomo` placed in the data folder).")] = None,
    conversation: Annotated[list[str] | None, typer.Option(
        "--conversation", help="Sample id to run (repeatable, e.g. conv-26); default all loaded. With --quick, "
                               "each named conversation runs cut short (none named: the first loaded).")] = None,
    arms: Annotated[str | None, typer.Option(
        "--arms", help="Comma-separated arms (full, last20, bm25, mean, hybrid, oracle, oracle-nodate, fractal, "
                       "np-pooler, np-mean, pm, tortoise, tortoise-recorded, or an installed memsim.arms entry "
                       "point) or all, baselines, designs, external; default all (with --protocol locomo-paper: default designs, 'none' for the "
                       "retriever rows alone).")] = None,
    arm_class: Annotated[list[str] | None, typer.Option(
        "--arm-class", help="Your own arm, package.module:Class (importable; repeatable), run beside --arms behind "
                            "the same arm protocol, under either --protocol, exactly as the same class installed "
                            "as a memsim.arms entry point and named in --arms (see the docs page 'Bring your own "
                            "arm'). When no selected arm can be imported the run stops with one line.")] = None,
    protocol: Annotated[str, typer.Option(
        "--protocol", help="'designs': every arm's delivered vs stored evidence, tokens and time; 'locomo-paper': "
                           "the LoCoMo paper's retrieval protocol (dialog, observation and summary units, its k "
                           "grid and recall rule) beside the published table, plus the design arms at their own "
                           "K.")] = "designs",
    retrievers: Annotated[str | None, typer.Option(
        "--retrievers", help="With --protocol locomo-paper: comma-separated bm25, minilm, hybrid, "
                             "two-tower:QUERY_MODEL,CONTEXT_MODEL (local model folders); default "
                             "bm25,minilm,hybrid.")] = None,
    k: Annotated[list[int] | None, typer.Option("--k", min=1, help="Top-K of ranked arms (repeatable; default 4 "
                                                                   "and 8).")] = None,
    quick: QuickOpt = False,
    lm: Annotated[str | None, typer.Option("--lm", help="dspy LM string: answer every probe from the delivered "
                                                        "text and score LoCoMo token F1 (no answer scores "
                                                        "without it).")] = None,
    lm_base: Annotated[str | None, typer.Option("--lm-base", help="api_base for --lm (an OpenAI-compatible "
                                                                  "server).")] = None,
    workers: Annotated[int | None, typer.Option(
        "--workers", min=1, help="Conversations run at once, each in its own process (one torch thread each); "
                                 "results are identical for any value, only times differ. Default 2 (the fastest "
                                 "measured on two cores); 1 runs them one after the other in this process.")] = None,
    out: OutOpt = None,
    seed: SeedOpt = 0,
    progress: ProgressOpt = True,
) -> None:
    """Real LoCoMo conversations through Fractal, AgentFly NP/PM, Tortoise and baselines: per arm what is stored,
    what is delivered for each question (evidence recall), at how many tokens and how much time."""
    if protocol not in ("designs", "locomo-paper"):
        raise bad_option("--protocol", protocol, ("designs", "locomo-paper"))
    if protocol == "locomo-paper":
        _locomo_paper(data, conversation, arms, arm_class, retrievers, k, quick, lm, out, seed, progress)
        return
    if retrievers is not None:
        raise bad_option("--retrievers", None, "applies to --protocol locomo-paper only")
    from harness.workloads.arms import require_runnable, select_arms
    from harness.workloads.locomo import LocomoDataError, resolve_locomo_path

    try:  # the options (a usage error), then the arms' imports and the data, before any work starts
        names = select_arms(arms, arm_class, quick=quick)
    except ValueError as exc:
        raise _arm_option_error(exc, arms, arm_class) from None
    try:
        require_runnable(names)
        resolve_locomo_path(data)
    except (LocomoDataError, ValueError) as exc:
        raise fail(str(exc)) from None
    from benchmarks import locomo as mod

    _run(mod.run, out, quick, progress, seed=seed, data=data, conversations=conversation, arms=arms,
         k_values=tuple(k or (4, 8)), lm=lm, lm_base=lm_base, echo=_echo, arm_classes=arm_class,
         **({"workers": workers} if workers is not None else {}))


def _locomo_paper(data: Path | None, conversation: list[str] | None, arms: str | None,
                  arm_class: list[str] | None, retrievers: str | None, k: list[int] | None, quick: bool,
                  lm: str | None, out: Path | None, seed: int, progress: bool) -> None:
    """``memsim bench locomo --protocol locomo-paper``: check the options, then run the paper protocol."""
    from benchmarks import locomo_paper as paper
    from harness.workloads.arms import require_runnable
    from harness.workloads.locomo import LocomoDataError, resolve_locomo_path
    from harness.workloads.paper_protocol import parse_retrievers

    if lm:
        raise bad_option("--lm", None, "applies to --protocol designs only (the paper protocol scores retrieval, "
                                       "not answers)")
    try:  # the options (a usage error), then the data and the arms' imports, before any work starts
        parse_retrievers(retrievers)
    except ValueError as exc:
        raise bad_option("--retrievers", retrievers, " ".join(str(exc).split())) from None
    try:
        names = paper.parse_arm_option(arms, arm_class)
    except ValueError as exc:
        raise _arm_option_error(exc, arms, arm_class) from None
    try:
        resolve_locomo_path(data)
        require_runnable(names)
    except (LocomoDataError, ValueError) as exc:
        raise fail(str(exc)) from None
    _run(paper.run, out, quick, progress, seed=seed, data=data, conversations=conversation, retrievers=retrievers,
         arms=arms, arm_classes=arm_class, k_values=tuple(k or (4, 8)), echo=_echo)


@app.command()
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
) -> None:
    """Run a grid of seeds x configurations x sizes (selectors, cbr-loop, locomo) and report the mean and a 95%
    confidence interval per row, plus paired differences; writes sweep-<name>.{json,md,png}."""
    from benchmarks import sweep as mod
    from benchmarks.common import progress_bar

    if executor not in ("local", "ray"):
        raise bad_option("--executor", executor, ("local", "ray"))
    if address and executor != "ray":
        raise bad_option("--address", None, "needs --executor ray")
    from benchmarks.common import default_out_dir
    from harness.cli.run_output import removed_if_empty_on_failure

    with removed_if_empty_on_failure(out or default_out_dir()):
        out_dir = _out_dir(out)
        try:
            with progress_bar(progress) as track:
                paths = mod.run(config, out_dir, executor=executor, address=address,  # type: ignore[arg-type]
                                workers=workers, track=track)
        except (OSError, ValueError, ImportError) as exc:
            raise fail(_say(exc)) from None
    for p in paths:
        console.print(f"wrote {p}", soft_wrap=True)


@app.command()
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
    _run(mod.run, out, quick, progress, seed=seed, echo=_echo, sizes=list(sizes) if sizes else None,
         cache_dir=cache_dir, load_seconds=load_seconds, decision_sizes=ds, hook_exe=hook_exe)


@app.command()
def engines(
    quick: QuickOpt = False,
    out: OutOpt = None,
    seed: SeedOpt = 0,
    progress: ProgressOpt = True,
) -> None:
    """Engine speed-ups measured against the previous code in one run: the batched EP engine (pure run_ep on the 2,000-factor
    ep_scaling graph, a 10,000-factor dream pass with bulk events), the incremental search / why-block caches at
    1e5 points, the NP one-text query encode at the shipped bank's 1,278 cases and the FAISS index backend at 1e6
    cases. Writes engines.{json,md,png} to --out."""
    from benchmarks import engines as mod

    _run(mod.run, out, quick, progress, seed=seed, echo=_echo)


@app.command()
def redaction(
    quick: QuickOpt = False,
    out: OutOpt = None,
    seed: SeedOpt = 0,
    per_kind: Annotated[int | None, typer.Option(min=1, help="Generated secrets per kind (default 10; quick 3).")
                        ] = None,
    progress: ProgressOpt = True,
) -> None:
    """Secret redaction in Tortoise: how many generated secrets survive into the store, the event feed, the
    journal, the spool, the digest and the volunteered blocks, with the faithful and the hardened redactor; plus a
    stored prompt injection and hook JSON validity. Writes redaction.{json,md}."""
    from benchmarks import redaction as mod

    _run(mod.run, out, quick, progress, seed=seed, per_kind=per_kind)


@app.command("ep-scaling")
def ep_scaling(
    quick: QuickOpt = False,
    out: OutOpt = None,
    seed: SeedOpt = 0,
    progress: ProgressOpt = True,
) -> None:
    """Time per Tortoise dream pass and EP iterations to converge on generated graphs of 100, 1,000 and 10,000
    factors (quick: 100 and 1,000) on an on-disk Kuzu store. Writes ep_scaling.{json,md,png}."""
    from benchmarks import ep_scaling as mod

    _run(_main_argv(mod), out, quick, progress, seed=seed)


@app.command("ep-engine")
def ep_engine(
    quick: QuickOpt = False,
    out: OutOpt = None,
    seed: SeedOpt = 0,
    progress: ProgressOpt = True,
) -> None:
    """The EP engines side by side in one run: run_ep on the 2,000-factor ep_scaling graph and a 10,000-factor dream
    pass (quick: 300 and 1,000), each engine and store-I/O option timed and checked bit for bit against the previous
    one, and two dreams in a row with a checkpoint between them (each in a child process: the previous in-place edge
    write fails there in Kuzu 0.11.3, the default rewrite completes; `python -m benchmarks.dream_abort` reproduces it at
    chosen store sizes). Writes ep-engine.{json,md}."""
    from benchmarks import ep_engine as mod

    _run(_main_argv(mod), out, quick, progress, seed=seed)


@app.command("capture-path")
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
) -> None:
    """Where a capture through the resident Tortoise service spends its time, stage by stage, with the indexed
    admission path and the previous full-scan path side by side in one run. Writes capture_path.{json,md}."""
    from benchmarks import capture_path as mod

    if not store.exists() and not build:
        raise fail(f"{store}: no such store (pass --build N to build one)")

    def go(out_dir: Path, *, quick: bool, track: object) -> list[Path]:
        return mod.run(out_dir, store, captures=2 if quick else captures, memory=memory and not quick, build=build,
                       echo=lambda _text: None)

    _run(go, out, quick, progress)


@app.command("service-faults")
def service_faults(
    quick: QuickOpt = False,
    out: OutOpt = None,
    seed: SeedOpt = 0,
    embedder: Annotated[str, typer.Option(help="The service's encoder: minilm (the default, as `memsim tortoise "
                                               "serve`) or hashing.")] = "minilm",
    progress: ProgressOpt = True,
) -> None:
    """The Tortoise hook service under faults: well-behaved and hostile clients interleaved on one service
    process (crashes, lost acknowledged captures, latency of the good clients), the service killed with SIGKILL
    in the middle of a capture, and 1,000 small sessions captured into an in-memory store (quick: 120 + 120
    requests, 300 sessions). Writes service-faults.{json,md}."""
    from benchmarks import service_faults as mod

    if embedder not in ("minilm", "hashing"):
        raise bad_option("--embedder", embedder, ("minilm", "hashing"))
    _run(mod.run, out, quick, progress, seed=seed, embedder=embedder)


@app.command("ann")
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
) -> None:
    """The HNSW index of the Tortoise ANN option (SimConfig.ann_index) alone at N points: build time, search
    p50/p95 per query and recall@8 against exact FAISS flat search (timed in the same run) on 300 held-out queries
    of MiniLM vectors of generated sentences, with an efSearch/M sweep chosen on a validation split. Vectors are
    cached under ~/.cache/memsim/ann/ (embedding a large N takes long). Writes ann.{json,md,png}."""
    from benchmarks import ann as mod

    def go(out_dir: Path, *, quick: bool, track: object, seed: int) -> list[Path]:
        if render:
            return mod.rerender(out_dir)
        return mod.run(out_dir, quick=quick, seed=seed, points=points, track=track, echo=_echo)

    _run(go, out, quick, progress, seed=seed)


def _names(values: list[str] | None) -> list[str] | None:
    """A repeatable option whose values may also be comma-separated lists."""
    out = [v.strip() for raw in values or [] for v in raw.split(",") if v.strip()]
    return out or None


@app.command("hosts")
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
    runs: Annotated[int | None, typer.Option("--runs", min=1, help="Runs per latency cell (default 10; quick "
                                                                   "2).")] = None,
    isolation: Annotated[str, typer.Option("--isolation", help="auto, netns or base-url (as memsim hosts "
                                                               "run).")] = "auto",
    work_dir: Annotated[Path | None, typer.Option(
        "--work-dir", help="Keep the host runs (requests, hook records, transcripts) in this folder (default: a "
                           "temporary folder, removed).")] = None,
    progress: ProgressOpt = True,
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
    chosen = _names(host_names)
    for h in chosen or []:
        if h not in HOSTS:
            raise bad_option("--hosts", h, list(HOSTS))

    def go(out_dir: Path, *, quick: bool, track: object, seed: int) -> list[Path]:
        from harness.hosts.install import find_host

        for h in chosen or []:
            if find_host(h) is None:
                _echo(f"skipped: {h} {HOSTS[h].version} is not installed (memsim hosts install {h})")
        return mod.run(out_dir, quick=quick, seed=seed, track=track, hosts=chosen, scenarios=_names(scenario_names),
                       runs=runs, isolation=isolation, work_dir=work_dir)

    _run(go, out, quick, progress, seed=seed)


@app.command("longmemeval")
def longmemeval(
    protocol: Annotated[str, typer.Option(
        "--protocol", help="'designs' (the default): every memory design's delivered evidence on LongMemEval "
                           "questions (and QA with --lm); 'longmemeval': the official retrieval protocol "
                           "(BM25 and dense retrievers, session and turn granularity, paper and strict "
                           "averaging) beside the published numbers.")] = "designs",
    data: Annotated[Path | None, typer.Option("--data", help="LongMemEval file (default: "
                                                             "$MEMSIM_LONGMEMEVAL_DATA, else the copy `memsim data "
                                                             "fetch longmemeval-s` placed in the data folder).")
                    ] = None,
    retrievers: Annotated[str | None, typer.Option(
        "--retrievers", help="With --protocol longmemeval: comma-separated bm25, minilm (default both).")] = None,
    encoder: Annotated[str | None, typer.Option(
        "--encoder", help="With --protocol longmemeval: the dense retriever's weights, 'minilm' (the default, "
                          "all-MiniLM-L6-v2) or a local Hugging Face model folder (e.g. Contriever).")] = None,
    dense_cache: Annotated[bool, typer.Option(
        "--dense-cache/--no-dense-cache", help="With --protocol longmemeval: keep each text's dense vector for the "
                                               "run (much faster where haystacks share sessions; identical texts "
                                               "then tie exactly where the official code orders them by float "
                                               "noise, so a number can move slightly). Off: the official "
                                               "encoding.")] = False,
    arms: Annotated[str | None, typer.Option("--arms", help="With --protocol designs: comma-separated arms (as "
                                                           "memsim bench locomo).")] = None,
    arm_class: Annotated[list[str] | None, typer.Option(
        "--arm-class", help="With --protocol designs: your own arm, package.module:Class (repeatable).")] = None,
    k: Annotated[list[int] | None, typer.Option("--k", min=1, help="With --protocol designs: top-K of ranked arms "
                                                                   "(repeatable).")] = None,
    lm: Annotated[str | None, typer.Option("--lm", help="With --protocol designs: the reader's dspy LM "
                                                        "string.")] = None,
    lm_base: Annotated[str | None, typer.Option("--lm-base", help="api_base for --lm.")] = None,
    judge_lm: Annotated[str | None, typer.Option("--judge-lm", help="With --protocol designs: the judge's LM "
                                                                    "(official: gpt-4o-2024-08-06).")] = None,
    judge_lm_base: Annotated[str | None, typer.Option("--judge-lm-base", help="api_base for --judge-lm.")] = None,
    reader_prompt: Annotated[str, typer.Option("--reader-prompt", help="With --protocol designs: con "
                                                                       "(chain-of-note, the default) or "
                                                                       "direct.")] = "con",
    workers: Annotated[int, typer.Option("--workers", help="Questions evaluated at once, each worker its own "
                                                           "process (one torch thread); results identical for "
                                                           "any value.")] = 1,
    executor: Annotated[str, typer.Option("--executor", help="'local' (processes) or 'ray'.")] = "local",
    address: Annotated[str | None, typer.Option("--address", help="Ray cluster to join (only with --executor "
                                                                  "ray).")] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="The first N questions (after --types).")] = None,
    types: Annotated[str | None, typer.Option("--types", help="Comma-separated question types to keep.")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="Small: --protocol longmemeval reads the first 20 questions "
                                                    "(after --types); --protocol designs the first 3, with quick "
                                                    "arm settings.")] = False,
    out: OutOpt = None,
    seed: SeedOpt = 0,
    progress: ProgressOpt = True,
) -> None:
    """LongMemEval: the memory designs on its questions (--protocol designs) or its official retrieval protocol
    (--protocol longmemeval). Writes longmemeval.{json,md,png} or longmemeval-protocol.{json,md,png}."""
    from harness.workloads.longmemeval import QUESTION_TYPES, LongMemEvalDataError, resolve_longmemeval_path

    if protocol not in ("designs", "longmemeval"):
        raise bad_option("--protocol", protocol, ("designs", "longmemeval"))
    if limit is not None and limit < 1:
        raise bad_option("--limit", limit, "at least 1")
    if workers < 1:
        raise bad_option("--workers", workers, "at least 1")
    if executor not in ("local", "ray"):
        raise bad_option("--executor", executor, ("local", "ray"))
    if address and executor != "ray":
        raise bad_option("--address", None, "needs --executor ray")
    type_list = _names([types] if types is not None else None)
    if types is not None and not type_list:
        raise bad_option("--types", types, QUESTION_TYPES)
    for t in type_list or []:
        if t not in QUESTION_TYPES:
            raise bad_option("--types", t, QUESTION_TYPES)
    if protocol == "longmemeval":
        from harness.workloads.lme_retrieval import parse_retrievers, resolve_encoder

        for name, given in (("--arms", arms), ("--arm-class", arm_class), ("--k", k), ("--lm", lm),
                            ("--lm-base", lm_base), ("--judge-lm", judge_lm), ("--judge-lm-base", judge_lm_base)):
            if given:
                raise bad_option(name, None, "applies to --protocol designs only")
        try:
            names = parse_retrievers(retrievers)
        except ValueError as exc:
            raise bad_option("--retrievers", retrievers, " ".join(str(exc).split())) from None
        if encoder is not None and "minilm" not in names:
            raise bad_option("--encoder", None, "applies to the dense retriever (minilm) only")
        try:
            if "minilm" in names:
                resolve_encoder(encoder)
        except ValueError as exc:
            raise bad_option("--encoder", encoder, " ".join(str(exc).split())) from None
        try:
            resolve_longmemeval_path(data)
        except LongMemEvalDataError as exc:
            raise fail(str(exc)) from None
        from benchmarks import longmemeval_protocol as proto

        _run(proto.run, out, quick, progress, seed=seed, data=data, retrievers=names, encoder=encoder,
             limit=limit, types=type_list, workers=workers, executor=executor, address=address, echo=_echo,
             dense_cache=dense_cache)
        return
    for name, given in (("--retrievers", retrievers), ("--encoder", encoder)):
        if given is not None:
            raise bad_option(name, None, "applies to --protocol longmemeval only")
    if dense_cache:
        raise bad_option("--dense-cache", None, "applies to --protocol longmemeval only")
    if reader_prompt not in ("con", "direct"):
        raise bad_option("--reader-prompt", reader_prompt, ("con", "direct"))
    try:
        resolve_longmemeval_path(data)
    except LongMemEvalDataError as exc:
        raise fail(str(exc)) from None
    from benchmarks import longmemeval as designs

    _run(designs.run, out, quick, progress, seed=seed, data=data, arms=arms, arm_classes=arm_class,
         **({"k_values": tuple(k)} if k else {}), lm=lm, lm_base=lm_base, judge_lm=judge_lm, judge_lm_base=judge_lm_base,
         reader_prompt=reader_prompt, workers=workers, executor=executor, address=address, limit=limit,
         types=type_list, echo=_echo)


@app.command("longmemeval-scale")
def longmemeval_scale(
    quick: QuickOpt = False,
    out: OutOpt = None,
    seed: SeedOpt = 0,
    progress: ProgressOpt = True,
) -> None:
    """LongMemEval at scale on generated LongMemEval-format files (benchmarks.longmemeval_scale; its own
    options: python -m benchmarks.longmemeval_scale --help). Writes its results to --out."""
    from benchmarks import longmemeval_scale as mod

    _run(_main_argv(mod), out, quick, progress, seed=seed)
