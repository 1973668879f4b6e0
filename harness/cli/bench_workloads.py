"""The workload benches of ``memsim bench``: ``locomo`` (both protocols) and ``longmemeval`` (designs and the official
protocol), ``longmemeval-scale``. Each checks its options before any work (a bad value is a usage error, exit 2),
then runs through :func:`harness.cli.bench_run.run_bench`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.bench_run import (
    EmbedOpt,
    EmbedStoreOpt,
    ExploreOpt,
    OutOpt,
    OverwriteOpt,
    ProgressOpt,
    QuickOpt,
    SeedOpt,
    check_embed,
    checked_arms,
    echo,
    names_option,
    run_bench,
)
from harness.cli.boundary import bad_option, fail


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
    embed: EmbedOpt = "store",
    embed_store: EmbedStoreOpt = None,
    explore: ExploreOpt = True,
    out: OutOpt = None,
    seed: SeedOpt = 0,
    progress: ProgressOpt = True,
    overwrite: OverwriteOpt = False,
) -> None:
    """Real LoCoMo conversations through Fractal, AgentFly NP/PM, Tortoise and baselines: per arm what is stored,
    what is delivered for each question (evidence recall), at how many tokens and how much time. Where one
    worker's memory goes, per arm and stage: python -m benchmarks.arm_memory."""
    if protocol not in ("designs", "locomo-paper"):
        raise bad_option("--protocol", protocol, ("designs", "locomo-paper"))
    check_embed(embed, embed_store)
    if protocol == "locomo-paper":
        if embed != "store" or embed_store is not None:
            raise bad_option("--embed" if embed != "store" else "--embed-store", None,
                             "applies to --protocol designs only (the paper protocol encodes as the paper did)")
        if not explore:
            raise bad_option("--no-explore", None, "applies to --protocol designs only (the paper protocol writes "
                                                   "no delivery store)")
        _locomo_paper(data, conversation, arms, arm_class, retrievers, k, quick, lm, out, seed, progress, overwrite)
        return
    if retrievers is not None:
        raise bad_option("--retrievers", None, "applies to --protocol locomo-paper only")
    from harness.workloads.arms import select_arms
    from harness.workloads.locomo import LocomoDataError, resolve_locomo_path

    checked_arms(lambda: select_arms(arms, arm_class, quick=quick), arms, arm_class,
                 lambda: resolve_locomo_path(data), (LocomoDataError,))
    from benchmarks import locomo as mod

    run_bench(mod.run, [mod.NAME], out, quick=quick, progress=progress, overwrite=overwrite, seed=seed, data=data,
              conversations=conversation, arms=arms, k_values=tuple(k or (4, 8)), lm=lm, lm_base=lm_base, echo=echo,
              arm_classes=arm_class, embed=embed, embed_store=embed_store, explore=explore,
              **({"workers": workers} if workers is not None else {}))


def _locomo_paper(data: Path | None, conversation: list[str] | None, arms: str | None,
                  arm_class: list[str] | None, retrievers: str | None, k: list[int] | None, quick: bool,
                  lm: str | None, out: Path | None, seed: int, progress: bool, overwrite: bool) -> None:
    """``memsim bench locomo --protocol locomo-paper``: check the options, then run the paper protocol."""
    from benchmarks import locomo_paper as paper
    from harness.workloads.locomo import LocomoDataError, resolve_locomo_path
    from harness.workloads.paper_protocol import parse_retrievers

    if lm:
        raise bad_option("--lm", None, "applies to --protocol designs only (the paper protocol scores retrieval, "
                                       "not answers)")
    try:  # the options (a usage error), then the data and the arms' imports, before any work starts
        parse_retrievers(retrievers)
    except ValueError as exc:
        raise bad_option("--retrievers", retrievers, " ".join(str(exc).split())) from None
    checked_arms(lambda: paper.parse_arm_option(arms, arm_class), arms, arm_class, lambda: resolve_locomo_path(data),
                 (LocomoDataError,))
    run_bench(paper.run, [paper.NAME], out, quick=quick, progress=progress, overwrite=overwrite, seed=seed, data=data,
              conversations=conversation, retrievers=retrievers, arms=arms, arm_classes=arm_class,
              k_values=tuple(k or (4, 8)), echo=echo)


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
    embed: EmbedOpt = "store",
    embed_store: EmbedStoreOpt = None,
    resume: Annotated[bool, typer.Option(
        "--resume", help="--protocol designs: continue a run of the same data and settings that was stopped or "
                         "killed, from the questions it had finished (kept per question in a hidden "
                         ".memsim-resume-longmemeval-* folder in --out until the run publishes); the results equal "
                         "an uninterrupted run's. Without it a run starts afresh.")] = False,
    explore: ExploreOpt = True,
    out: OutOpt = None,
    seed: SeedOpt = 0,
    progress: ProgressOpt = True,
    overwrite: OverwriteOpt = False,
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
    type_list = names_option([types] if types is not None else None)
    if types is not None and not type_list:
        raise bad_option("--types", types, QUESTION_TYPES)
    for t in type_list or []:
        if t not in QUESTION_TYPES:
            raise bad_option("--types", t, QUESTION_TYPES)
    check_embed(embed, embed_store)
    if protocol == "longmemeval":
        from harness.workloads.lme_retrieval import parse_retrievers, resolve_encoder

        for name, used in (("--embed", embed != "store"), ("--embed-store", embed_store is not None),
                           ("--resume", resume)):
            if used:
                raise bad_option(name, None, "applies to --protocol designs only (the official protocol encodes "
                                             "every corpus as the official code does)")

        if not explore:
            raise bad_option("--no-explore", None, "applies to --protocol designs only (the official protocol "
                                                   "writes no delivery store)")
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

        run_bench(proto.run, [proto.NAME], out, quick=quick, progress=progress, overwrite=overwrite, seed=seed,
                  data=data, retrievers=names, encoder=encoder, limit=limit, types=type_list, workers=workers,
                  executor=executor, address=address, echo=echo, dense_cache=dense_cache)
        return
    for name, given in (("--retrievers", retrievers), ("--encoder", encoder)):
        if given is not None:
            raise bad_option(name, None, "applies to --protocol longmemeval only")
    if dense_cache:
        raise bad_option("--dense-cache", None, "applies to --protocol longmemeval only")
    if reader_prompt not in ("con", "direct"):
        raise bad_option("--reader-prompt", reader_prompt, ("con", "direct"))
    if judge_lm and not lm:
        raise bad_option("--judge-lm", None, "needs --lm (the reader whose hypotheses it judges)")
    from benchmarks import longmemeval as designs
    from harness.workloads.arms import select_arms

    checked_arms(lambda: select_arms(arms, arm_class, quick=quick, default=",".join(designs.default_arms())), arms,
                 arm_class, lambda: resolve_longmemeval_path(data), (LongMemEvalDataError,))

    run_bench(designs.run, [designs.NAME], out, quick=quick, progress=progress, overwrite=overwrite, seed=seed,
              data=data, arms=arms, arm_classes=arm_class, **({"k_values": tuple(k)} if k else {}), lm=lm,
              lm_base=lm_base, judge_lm=judge_lm, judge_lm_base=judge_lm_base, reader_prompt=reader_prompt,
              workers=workers, executor=executor, address=address, limit=limit, types=type_list, echo=echo,
              embed=embed, embed_store=embed_store, resume=resume, journal_root=_real_out(out), explore=explore)


def _real_out(out: Path | None) -> Path:
    """The folder the run publishes into (not its staging folder): where a resume journal must live, so that a
    killed run's finished questions outlive it."""
    from benchmarks.common import default_out_dir

    return out if out is not None else default_out_dir()


def longmemeval_scale(
    quick: Annotated[bool, typer.Option(
        "--quick", help="Small sizes: 20 protocol questions, 3 design questions at 8, 10 and 12 sessions, a ~200 MB "
                        "loader file (about 15 minutes on 2 cores: the designs part runs eleven design runs); "
                        "results go to --out like a full run's.")] = False,
    out: OutOpt = None,
    seed: SeedOpt = 0,
    parts: Annotated[str | None, typer.Option(
        "--parts", help="Comma-separated subset of protocol, designs, loader (default all).")] = None,
    protocol_questions: Annotated[int | None, typer.Option(
        "--protocol-questions", min=1, help="Questions of the protocol part (default 500; quick 20).")] = None,
    design_questions: Annotated[int | None, typer.Option(
        "--design-questions", min=1, help="Designs part: questions per size and setting (default 7; quick "
                                          "3).")] = None,
    design_sessions: Annotated[str | None, typer.Option(
        "--design-sessions", metavar="A,B,C", help="Designs part: three sessions-per-question sizes (default "
                                                   "8,16,32; quick 8,10,12).")] = None,
    loader_bytes: Annotated[int | None, typer.Option(
        "--loader-bytes", min=1, help="Size of the loader part's generated file in bytes (default about 2.5 GB; "
                                      "quick about 200 MB).")] = None,
    embed: EmbedOpt = "store",
    profile: Annotated[bool, typer.Option(
        "--profile", help="Also profile one generated S-shape question: where its time goes, per arm and phase "
                          "(encoder calls and texts, Kuzu writes and reads, search, rendering, the rest; alone: "
                          "python -m benchmarks.design_profile).")] = False,
    progress: ProgressOpt = True,
    overwrite: OverwriteOpt = False,
) -> None:
    """LongMemEval at scale on generated LongMemEval-format files: the official protocol's wall time on S-shape
    questions, the design run before (--embed per-call) and after (the embedding store, cold and warm) at three
    haystack sizes with projections for S and M, and the streaming loader's peak memory on a multi-GB file
    (--embed sets the profile's encoders only). Writes longmemeval-scale.{json,md,png}."""
    from benchmarks import longmemeval_scale as mod

    chosen = list(mod.PARTS) if parts is None else names_option([parts])
    if not chosen:
        raise bad_option("--parts", parts, mod.PARTS)
    for part in chosen:
        if part not in mod.PARTS:
            raise bad_option("--parts", part, mod.PARTS)

    check_embed(embed, None)
    try:
        sessions = mod.parse_sessions(design_sessions)
        mod.check_config(chosen, quick, design_sessions=sessions, design_questions=design_questions)
    except ValueError as exc:
        flag = "--design-questions" if "--design-questions" in str(exc) else "--design-sessions"
        raise bad_option(flag, None, str(exc)) from exc

    def go(out_dir: Path, *, quick: bool, track: object, seed: int) -> list[Path]:
        return mod.run(out_dir, quick=quick, seed=seed, track=track, parts=chosen,
                       protocol_questions=protocol_questions, design_questions=design_questions,
                       design_sessions=sessions, loader_bytes=loader_bytes, embed=embed, profile=profile)

    run_bench(go, [mod.NAME], out, quick=quick, progress=progress, overwrite=overwrite, seed=seed)
