"""``memsim agentfly ...``: AgentFly/Memento case-based reasoning memory (spec: shared/spec/agentfly.md).

- ``retrieve``: the scoring CLI of ``memory/parametric_memory.py`` (spec §4.5), exact print format and top-k rule.
- ``train``: ``memory/train_memory_retriever.py`` with every flag of spec §5.4 (plus simulator-only options).
- ``run``: a whole NP or PM benchmark loop offline on a scratch layout (spec §6), with a progress bar.
Bad input becomes one ``error: <file>:<line>: <what>`` line (no traceback).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Annotated

import typer

from harness.cli.boundary import (
    BoundaryTyper,
    bad_option,
    check_output_dir,
    check_range,
    describe_error,
    fail,
    make_console,
    warn,
)

app = BoundaryTyper(help="AgentFly/Memento CBR memory: retrieve with the trained classifier, train it, run the "
                       "NP/PM driver loops offline.", no_args_is_help=True)


def _bad_input(exc: BaseException, default_path: str | os.PathLike[str] | None = None) -> typer.Exit:
    """One line with the file (and line number when known) for a bad-input exception."""
    from agentfly_sim.bank import JsonlLineError

    if isinstance(exc, JsonlLineError):
        return fail(f"{exc.path}:{exc.lineno}: {exc.message}")
    if isinstance(exc, OSError) and getattr(exc, "filename", None):
        return fail(f"{exc.filename}: {exc.strerror or exc}")
    where = f"{default_path}: " if default_path else ""
    return fail(f"{where}{describe_error(exc)}")


def _torch_threads() -> None:
    import torch

    if os.environ.get("MEMSIM_TORCH_THREADS"):
        torch.set_num_threads(int(os.environ["MEMSIM_TORCH_THREADS"]))


@app.command()
def retrieve(
    model_path: Annotated[Path, typer.Option("--model_path", help="Classifier checkpoint (state dict).")],
    pool_jsonl: Annotated[Path, typer.Option("--pool_jsonl", help="PM case bank (case/plan/case_label JSONL).")],
    query: Annotated[str, typer.Option("--query", help="The query to score every case against.")],
    topk: Annotated[int, typer.Option("--topk", help="Print the top k; every item unless 0 < k < N.")] = 5,
    model_name: Annotated[str | None, typer.Option("--model_name", help="Backbone (default: local MiniLM).")] = None,
    device: Annotated[str | None, typer.Option("--device", help="cpu or cuda (default: cuda if available).")] = None,
    cache_case_vectors: Annotated[bool, typer.Option(
        "--cache_case_vectors", help="Simulator option: cached case CLS vectors (same scores within 1e-5).")] = False,
) -> None:
    """Score every case of the pool for a query and print the ranked blocks, in upstream's print format (AGF-17)."""
    _torch_threads()
    from agentfly_sim.classifier import CaseRetriever, format_ranked, load_pool

    if device is not None and device.split(":")[0] not in ("cpu", "cuda"):
        raise bad_option("--device", device, "cpu or cuda (cuda:N)")

    try:
        pool, meta = load_pool(pool_jsonl)
    except (OSError, ValueError) as exc:
        raise _bad_input(exc, pool_jsonl) from None
    if not model_path.is_file():
        raise fail(f"{model_path}: " + ("is a directory, not a checkpoint" if model_path.is_dir()
                                        else "checkpoint not found"))
    if model_path.stat().st_size == 0:
        raise fail(f"{model_path}: empty file, not a classifier checkpoint")
    try:
        retriever = CaseRetriever(model_path, model_name, device, cache_case_vectors=cache_case_vectors)
    except (OSError, RuntimeError, ValueError) as exc:
        raise _bad_input(exc, model_path) from None
    except Exception as exc:  # noqa: BLE001 - torch.load of a non-checkpoint raises EOFError, KeyError, pickle errors
        raise fail(f"{model_path}: not a classifier checkpoint ({type(exc).__name__}: {exc})") from None
    results = retriever.retrieve(query, pool, meta)
    text = format_ranked(results, topk)
    if text:
        sys.stdout.write(text + "\n")


@app.command()
def train(
    train: Annotated[Path, typer.Option("--train", help="Training pairs JSONL (query/case/plan/truth_label).")],
    output_dir: Annotated[Path, typer.Option("--output_dir", help="Where best.pt / last.pt / metrics.json go.")],
    valid: Annotated[Path | None, typer.Option("--valid", help="Validation pairs (no split when given).")] = None,
    pretrained_name: Annotated[str | None, typer.Option(
        "--pretrained_name", help="Backbone name (upstream: princeton-nlp/sup-simcse-roberta-base; "
                                  "simulator default: local MiniLM).")] = None,
    pretrained_local: Annotated[str | None, typer.Option("--pretrained_local", help="Local backbone dir.")] = None,
    seed: Annotated[int, typer.Option("--seed")] = 42,
    val_ratio: Annotated[float, typer.Option("--val_ratio")] = 0.1,
    no_stratify: Annotated[bool, typer.Option("--no_stratify", help="Plain shuffled row split.")] = False,
    fp16: Annotated[bool, typer.Option("--fp16", help="Autocast + grad scaler (CUDA only).")] = False,
    save_best: Annotated[bool, typer.Option("--save_best", help="Write best.pt on strict improvement.")] = False,
    use_plan: Annotated[bool, typer.Option("--use_plan", help="Add [PLAN] to the training texts.")] = False,
    batch_size: Annotated[int, typer.Option("--batch_size")] = 32,
    epochs: Annotated[int, typer.Option("--epochs")] = 3,
    lr: Annotated[float, typer.Option("--lr")] = 2e-5,
    weight_decay: Annotated[float, typer.Option("--weight_decay")] = 0.01,
    warmup_ratio: Annotated[float, typer.Option("--warmup_ratio")] = 0.06,
    max_len: Annotated[int, typer.Option("--max_len")] = 256,
    grad_clip: Annotated[float, typer.Option("--grad_clip")] = 1.0,
    eval_every: Annotated[int, typer.Option("--eval_every")] = 500,
    class_weight_pos: Annotated[float | None, typer.Option("--class_weight_pos")] = None,
    plan_style: Annotated[str, typer.Option("--plan_style", help="pretty or raw.")] = "pretty",
    section_tokens: Annotated[str, typer.Option("--section_tokens")] = "[CASE] [PLAN]",
    group_by_query: Annotated[bool, typer.Option(
        "--group_by_query", help="Simulator option: split by query (no query in both partitions).")] = False,
    freeze_backbone: Annotated[bool, typer.Option(
        "--freeze_backbone", help="Simulator speed option (not the reference): cache backbone CLS vectors once "
                                  "and train only the head.")] = False,
    num_workers: Annotated[int, typer.Option("--num_workers", help="DataLoader workers (upstream: 2).")] = 0,
    max_rows: Annotated[int | None, typer.Option(
        "--max_rows", help="Simulator convenience: train on the first N non-blank rows only.")] = None,
    metrics_json: Annotated[Path | None, typer.Option("--metrics_json", help="Default: OUTPUT_DIR/metrics.json")] = None,
) -> None:
    """Train the PM retriever classifier as upstream does: prints the upstream lines, writes last.pt (+ best.pt)."""
    _torch_threads()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from agentfly_sim.training import TrainConfig
    from agentfly_sim.training import train as run_train

    if plan_style not in ("pretty", "raw"):
        raise bad_option("--plan_style", plan_style, ("pretty", "raw"))
    # The reference trainer has no guard here (``step % eval_every`` divides by zero, a zero batch size or
    # epoch count fails deep in torch); the CLI refuses such values up front, in one line.
    for flag, value in (("--eval_every", eval_every), ("--batch_size", batch_size), ("--epochs", epochs),
                        ("--max_len", max_len)):
        if value < 1:
            raise bad_option(flag, value, "a positive integer")
    if not 0.0 < val_ratio < 1.0 and valid is None:
        raise bad_option("--val_ratio", val_ratio, "between 0 and 1 (exclusive)")
    check_range("--seed", seed, lo=0, hi=2**32 - 1)  # numpy/torch seeding range
    check_range("--warmup_ratio", warmup_ratio, lo=0.0, hi=1.0)
    check_range("--grad_clip", grad_clip, lo=0.0)  # 0 disables clipping, as upstream's ``if grad_clip > 0``
    check_range("--class_weight_pos", class_weight_pos, lo=0.0, lo_open=True)
    check_range("--lr", lr, lo=0.0, lo_open=True)
    check_range("--weight_decay", weight_decay, lo=0.0)
    check_range("--num_workers", num_workers, lo=0)
    check_range("--max_rows", max_rows, lo=1)
    for flag, path in (("--train", train), ("--valid", valid)):
        if path is not None and not path.is_file():
            raise fail(f"{path}: {flag} " + ("is a directory, not a JSONL file" if path.is_dir() else "not found"))
    check_output_dir(output_dir, "--output_dir")
    if metrics_json is not None:
        check_output_dir(metrics_json.parent, "--metrics_json folder")
    train_path = train
    if max_rows is not None:
        subset = output_dir / f"train_first_{max_rows}.jsonl"
        try:
            with open(train, encoding="utf-8") as src, open(subset, "w", encoding="utf-8") as dst:
                n = 0
                for line in src:
                    if n >= max_rows:
                        break
                    dst.write(line)
                    n += line.strip() != ""
        except OSError as exc:
            raise _bad_input(exc, train) from None
        train_path = subset
    cfg = TrainConfig(train=str(train_path), output_dir=str(output_dir), valid=str(valid) if valid else None,
                      pretrained_name=pretrained_name, pretrained_local=pretrained_local, seed=seed,
                      val_ratio=val_ratio, no_stratify=no_stratify, fp16=fp16, save_best=save_best,
                      use_plan=use_plan, batch_size=batch_size, epochs=epochs, lr=lr, weight_decay=weight_decay,
                      warmup_ratio=warmup_ratio, max_len=max_len, grad_clip=grad_clip, eval_every=eval_every,
                      class_weight_pos=class_weight_pos, plan_style=plan_style, section_tokens=section_tokens,
                      group_by_query=group_by_query, freeze_backbone=freeze_backbone, num_workers=num_workers,
                      metrics_json=str(metrics_json) if metrics_json else None)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  transient=False, console=make_console()) as progress:
        tasks: dict[str, int] = {}

        def on_progress(kind: str, done: int, total: int) -> None:
            if kind not in tasks:
                tasks[kind] = progress.add_task({"epoch": "epochs", "step": "steps", "encode": "encode"}[kind],
                                                total=total)
            progress.update(tasks[kind], completed=done, total=total)

        try:
            result = run_train(cfg, log=lambda line: progress.console.print(line, markup=False, highlight=False),
                               progress=on_progress)
        except (OSError, ValueError) as exc:
            raise _bad_input(exc, train_path) from None
    typer.echo(f"train rows {result.n_train}, validation rows {result.n_val}, validation rows sharing a query with "
               f"train {result.leakage[0]}/{result.leakage[1]}")
    typer.echo(f"wrote {result.last_path}")
    if result.best_path:
        typer.echo(f"wrote {result.best_path}")
    typer.echo(f"wrote {result.metrics_path}")


@app.command()
def run(
    driver: Annotated[str, typer.Option("--driver", help="np or pm.")] = "pm",
    dataset: Annotated[Path | None, typer.Option(
        "--dataset", help="Benchmark JSONL (default: deepresearcher.jsonl of the corpora dir).")] = None,
    bank: Annotated[Path | None, typer.Option(
        "--bank", help="Case bank to start from; copied, never modified (default: the shipped dummy_memo.jsonl "
                       "for np, memory.jsonl for pm).")] = None,
    out: Annotated[Path, typer.Option("--out", help="Scratch layout: client/, memory/, data/, result/.")] = Path(
        "out/agentfly"),
    limit: Annotated[int | None, typer.Option("--limit", help="Only the first N dataset questions.")] = None,
    checkpoint: Annotated[Path | None, typer.Option(
        "--checkpoint", help="PM: classifier checkpoint copied to memory/ckpts/retriever/best.pt. Without it (and "
                             "without --untrained_checkpoint) PM runs with retrieval off, as upstream does.")] = None,
    untrained_checkpoint: Annotated[bool, typer.Option(
        "--untrained_checkpoint", help="PM: write a seeded untrained MiniLM checkpoint at the default path.")] = False,
    judge: Annotated[str, typer.Option("--judge", help="Scripted judge mode: match, correct, incorrect, seeded, "
                                                       "raise, malformed, verbose.")] = "match",
    p_correct: Annotated[float, typer.Option("--p_correct", help="Scripted planner answer accuracy.")] = 0.5,
    judge_p: Annotated[float, typer.Option("--judge_p", help="p of the seeded judge.")] = 0.5,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    top_k: Annotated[int, typer.Option("--top_k", help="MEMORY_TOP_K.")] = 8,
    cached: Annotated[bool, typer.Option(
        "--cached", help="Simulator option: NP cached-index mode / PM cached case vectors.")] = False,
    data_dir: Annotated[Path | None, typer.Option(
        "--data_dir", help="AgentFly corpora folder (default: $MEMSIM_AGENTFLY_DATA, else the copy `memsim data "
                           "fetch agentfly` placed in the data folder).")] = None,
    executor: Annotated[str, typer.Option(
        "--executor", help="Scripted executor: default ('Result of task N') or empty (always an empty reply: "
                           "shows the bounded executor loop, exit 3).")] = "default",
) -> None:
    """Run the NP or PM benchmark loop offline with scripted dspy agents; prints the paths it wrote."""
    if limit is not None and limit < 0:  # the driver slices questions[:limit]; -1 would mean "all but the last"
        raise bad_option("--limit", limit, "0 or more")
    if top_k < 0:
        raise bad_option("--top_k", top_k, "0 or more")
    check_range("--seed", seed, lo=0, hi=2**32 - 1)  # numpy/torch seeding range
    check_range("--p_correct", p_correct, lo=0.0, hi=1.0)
    check_range("--judge_p", judge_p, lo=0.0, hi=1.0)
    if checkpoint is not None and not checkpoint.is_file():
        raise fail(f"{checkpoint}: --checkpoint " + ("is a directory" if checkpoint.is_dir() else "not found"))
    _torch_threads()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from agentfly_sim.agents import ScriptedExecutor, ScriptedJudge, ScriptedPlanner
    from agentfly_sim.bank import load_dataset
    from agentfly_sim.driver import DriverConfig, NPDriver, PMDriver
    from agentfly_sim.errors import DriverStartupError, ExecutorStalled
    from harness.claims.agentfly_common import offline_agents
    from harness.datapaths import DataPathError, find_agentfly

    if driver not in ("np", "pm"):
        raise bad_option("--driver", driver, ("np", "pm"))
    if executor not in ("default", "empty"):
        raise bad_option("--executor", executor, ("default", "empty"))
    if judge not in ScriptedJudge.MODES:
        raise bad_option("--judge", judge, ScriptedJudge.MODES)
    try:  # a mistyped --data_dir is an error, never a silent fall-through to the fetched copy
        corpora = find_agentfly(data_dir, option="--data_dir")
    except DataPathError as exc:
        raise fail(str(exc)) from None
    bank_name = "dummy_memo.jsonl" if driver == "np" else "memory.jsonl"
    dataset = dataset or (corpora / "deepresearcher.jsonl" if corpora else None)
    bank = bank or (corpora / bank_name if corpora else None)
    if dataset is None or not dataset.is_file():
        raise fail(f"{dataset or 'deepresearcher.jsonl'}: dataset not found (pass --dataset or --data_dir, or run "
                   "`memsim data fetch agentfly`)")
    if bank is not None and not bank.is_file():
        raise fail(f"{bank}: --bank " + ("is a directory, not a JSONL case bank" if bank.is_dir() else "not found"))
    try:
        ds = load_dataset(dataset)
    except (OSError, ValueError) as exc:
        raise _bad_input(exc, dataset) from None

    check_output_dir(out)
    client = out / "client"
    for d in (client, out / "memory", out / "data", out / "result"):
        d.mkdir(parents=True, exist_ok=True)
    memory_path = out / "memory" / bank_name
    if bank is not None:
        shutil.copyfile(bank, memory_path)
    shutil.copyfile(dataset, out / "data" / "deepresearcher.jsonl")
    ckpt_path = out / "memory" / "ckpts" / "retriever" / "best.pt"
    if driver == "pm":
        if checkpoint is not None:
            ckpt_path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(checkpoint, ckpt_path)
        elif untrained_checkpoint:
            from agentfly_sim.classifier import make_untrained_checkpoint

            make_untrained_checkpoint(ckpt_path, seed=seed)
    cfg = DriverConfig(memory_jsonl_path=f"../memory/{bank_name}", memory_top_k=top_k, limit=limit,
                       np_cached_index=cached, pm_cache_case_vectors=cached)
    agents = offline_agents(planner=ScriptedPlanner(ground_truths=ds.gt_map, p_correct=p_correct, seed=seed),
                            judge=ScriptedJudge(judge, p=judge_p, seed=seed), seed=seed,
                            executor=ScriptedExecutor(default=(lambda q, sid: {"content": "", "tool_calls": None})
                                                      if executor == "empty" else None))
    log_path = out / f"driver_{driver}.log"
    n = len(ds.questions) if limit is None else min(limit, len(ds.questions))
    with open(log_path, "a", encoding="utf-8") as log, Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=make_console()) as progress:
        bar = progress.add_task(f"{driver} questions", total=n)

        def on_question(i: int, total: int, q: str) -> None:
            progress.update(bar, completed=i)

        import logging

        handler = logging.StreamHandler(log)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logger = logging.getLogger("agentfly_sim")
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
        try:
            cls = NPDriver if driver == "np" else PMDriver
            drv = cls(client, agents.planner, agents.executor, agents.judge, config=cfg, out=log,
                      on_question=on_question)
            if driver == "pm" and getattr(drv, "retriever", None) is None:
                why = next((m for m in reversed(drv.log) if "retriever not available" in m), "no checkpoint")
                warn(f"PM runs WITHOUT retrieval ({why.removeprefix('WARNING ')}; checkpoint path {ckpt_path})",
                     to=progress.console)
            summary = drv.run()
            progress.update(bar, completed=n)
        except DriverStartupError as exc:
            raise fail(f"driver startup: {exc}") from None
        except ExecutorStalled as exc:
            typer.echo(json.dumps(exc.event, ensure_ascii=False))
            raise typer.Exit(3) from None
        finally:
            logger.removeHandler(handler)
    typer.echo(f"processed {summary.processed}, skipped {summary.skipped}, errors {summary.errors}")
    typer.echo(f"results: {summary.result_path}")
    typer.echo(f"bank:    {summary.memory_path}")
    if summary.training_data_path:
        exists = os.path.exists(summary.training_data_path)
        typer.echo(f"pairs:   {summary.training_data_path}" + ("" if exists else " (none written: no retrieval)"))
    typer.echo(f"log:     {log_path}")
