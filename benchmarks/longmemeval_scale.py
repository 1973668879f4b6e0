"""LongMemEval at scale: the official protocol's wall time on 500 S-shape questions, the design run's cost with a
projection for S and M, and the streaming loader's peak memory on a multi-GB file.

All three parts run on files made by :mod:`benchmarks.worlds.longmemeval` (the real files cannot be downloaded
here), labelled ``data: synthetic, benchmarks.worlds.longmemeval seed <S>`` in the JSON and on the page.

- **protocol**: :func:`benchmarks.longmemeval_protocol.run` (bm25 + minilm, session and turn granularity, both
  averagings) on a generated S-shape file of 500 questions, against the level "within 20 minutes on this 2-core
  machine". ``--quick`` runs 20 questions and states the 500-question figure as a projection (wall x 500 / n,
  model loading included in the measured wall, so the projection is an upper bound on that account).
- **designs**: the design run before (``--embed per-call``) and after (``--embed store``: a fresh store, then the
  same run again on it) at three haystack sizes (8, 16 and 32 sessions per question), 7 questions each (6 steady: what
  fits the whole bench in about an hour on this machine; ``--design-questions`` takes more), with two workers at the
  middle size;
  a non-negative least-squares fit per setting (quadratic in turns, plus the new turns' encoding for the store) and
  the projection to S and M for one and two workers, against the level "all 500 S questions with every default arm
  within 4 hours on this machine with two workers"; the store's encode rate against its floor
  (:mod:`benchmarks.longmemeval_scale_designs` holds the model, its reasons and its page section).
- **loader**: a generated M-shape file of ~2.5 GB (``--quick``: ~200 MB) is stream-written into a temp folder and
  read by :func:`harness.workloads.longmemeval.iter_questions` in a child process that reports its own peak RSS
  (``VmHWM`` of its address space: Linux keeps ``ru_maxrss`` across fork and exec, so a child of a large parent
  would report the parent's size); a child that only imports the loader gives the interpreter's baseline. Level: peak < 2 GiB. The
  file is deleted afterwards.

A part whose module is missing is recorded as absent with the reason. Results (``longmemeval-scale.{json,md,png}``)
are written once every part is done, each through a temp file and a rename.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import (
    _jsonable,
    default_out_dir,
    machine_description,
    md_table,
    stamp_run,
    write_atomic,
)
from benchmarks.longmemeval_scale_designs import _say
from benchmarks.progress import Phase, as_tracker, given_or_own
from harness.runs import code_text

NAME = "longmemeval-scale"
PARTS = ("protocol", "designs", "loader")
LEVEL_PROTOCOL_S = 20 * 60
LEVEL_LOADER_BYTES = 2 * 1024**3
LEVEL_DESIGN_S = 4 * 3600
S_QUESTIONS = 500
FULL = {"protocol_questions": 500, "design_questions": 7, "design_sessions": (8, 16, 32),
        "loader_bytes": 2_500_000_000, "profile_questions": 500}
QUICK = {"protocol_questions": 20, "design_questions": 3, "design_sessions": (8, 10, 12),
         "loader_bytes": 200_000_000, "profile_questions": 10}

_LOADER_CHILD = r"""
import json, resource, sys, time
from harness.workloads.longmemeval import LoadStats, iter_questions
t0 = time.perf_counter()
st = LoadStats()
n = turns = 0
if len(sys.argv) > 1:
    for q in iter_questions(sys.argv[1], stats=st):
        n += 1
        turns += q.n_turns
hwm = None
try:  # this address space's own high-water mark (ru_maxrss keeps the spawning parent's across fork and exec)
    with open("/proc/self/status") as fh:
        hwm = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
except (OSError, StopIteration):
    pass
print(json.dumps({"questions": n, "turns": turns, "wall_s": time.perf_counter() - t0, "vm_hwm_kb": hwm,
                  "ru_maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def _gen_progress(phase: Phase) -> Callable[[int, int, int], None]:
    """The generator's ``progress(done, total, bytes)`` into a phase of the run's tracker."""

    def cb(done: int, total: int, nbytes: int) -> None:
        phase.update(done, total=total, status=f"{nbytes / 1e6:.0f} MB written")

    return cb


def _absent(exc: BaseException) -> dict[str, Any]:
    return {"status": "absent", "reason": f"{type(exc).__name__}: {exc}"}


# ------------------------------------------------------------------------------------------------------- protocol
def measure_protocol(tmp: Path, *, n_questions: int, seed: int, retrievers: Sequence[str] = ("bm25", "minilm"),
                     target: int = S_QUESTIONS, workers: int = 2, dense_cache: bool = True,
                     track: Any = None) -> dict[str, Any]:
    """The official protocol on a generated S-shape file of ``n_questions``; its wall time and, when
    ``n_questions < target``, the projection to ``target`` questions (linear in questions). Measured in its
    fastest configuration on this machine: ``workers`` processes (one per core) and the dense text cache
    (``--dense-cache``; each process keeps its own), both recorded in the result."""
    try:
        from benchmarks import longmemeval_protocol as P
    except ImportError as e:
        return _absent(e)
    from benchmarks.worlds import longmemeval as gen

    track = as_tracker(track)
    data = tmp / "protocol-s.json"
    with track.phase("generating the protocol's data", total=n_questions, unit="questions") as ph:
        desc = gen.write_file(data, n_questions, seed=seed, progress=_gen_progress(ph))
    out = tmp / "protocol-out"
    t0 = time.perf_counter()
    P.run(out, data=data, retrievers=list(retrievers), seed=seed, workers=workers, dense_cache=dense_cache,
          track=track)
    wall = time.perf_counter() - t0
    res = json.loads((out / "longmemeval-protocol.json").read_text(encoding="utf-8"))
    projected = wall * target / res["n_questions"]
    # the dense encoder's cache is keyed by text, and filler sessions recur more often the more questions there are:
    # a second projection scales the wall by the distinct corpus texts (session and turn documents) instead
    d_n, d_target = _distinct_corpus_texts(n_questions, seed), _distinct_corpus_texts(target, seed)
    summary = [{k: r[k] for k in ("retriever", "granularity", "scored_as", "averaging", "questions")}
               | {m: r["metrics"][m] for m in ("recall_any@5", "recall_all@5", "ndcg_any@10")}
               for r in res["rows"] if r["averaging"] == "paper"]
    gen.remove_file(data)
    return {"status": "ok", "questions": res["n_questions"], "retrievers": list(retrievers), "wall_s": wall,
            "workers": workers, "dense_cache": dense_cache,
            "protocol_wall_s": res.get("wall_s"), "target_questions": target,
            "wall_s_for_target": projected, "projected": res["n_questions"] != target,
            "distinct_texts": d_n, "distinct_texts_target": d_target,
            "wall_s_for_target_by_distinct_texts": wall * d_target / d_n,
            "level_s": LEVEL_PROTOCOL_S, "within_level": projected <= LEVEL_PROTOCOL_S,
            "data": {k: desc[k] for k in ("seed", "questions", "sessions_per_question", "reuse", "pool_size",
                                          "turns", "bytes", "label")},
            "rows_paper_averaging": summary}


def _distinct_corpus_texts(n_questions: int, seed: int) -> int:
    """Distinct texts of the official corpora (a session's user turns joined by a space; each user turn) over the
    first ``n_questions`` generated questions: what a run-wide text cache encodes."""
    from benchmarks.worlds import longmemeval as gen

    seen: set[bytes] = set()
    for q in gen.generate(n_questions, seed=seed):
        for sess in q["haystack_sessions"]:
            users = [t["content"] for t in sess if t["role"] == "user"]
            for text in (" ".join(users), *users):
                seen.add(hashlib.blake2b(text.encode(), digest_size=12).digest())
    return len(seen)


# -------------------------------------------------------------------------------------------------------- designs
def measure_designs(tmp: Path, *, n_questions: int, sessions: Sequence[int], seed: int, quick: bool,
                    arms: str | None = None, track: Any = None, profile_questions: int = S_QUESTIONS,
                    two_workers: bool = True) -> dict[str, Any]:
    """The design part: :func:`benchmarks.longmemeval_scale_designs.measure` (before and after the store at three
    haystack sizes, the fits and the projections)."""
    from benchmarks import longmemeval_scale_designs as D

    return D.measure(tmp, n_questions=n_questions, sessions=sessions, seed=seed, quick=quick, arms=arms,
                     track=track, profile_questions=profile_questions, two_workers=two_workers)


# --------------------------------------------------------------------------------------------------------- loader
def _child(args: list[str]) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", _LOADER_CHILD, *args], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"loader child failed ({out.returncode}): {last}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure_loader(tmp: Path, *, target_bytes: int, seed: int, sessions: int | None = None,
                   track: Any = None) -> dict[str, Any]:
    """Stream-write an M-shape file of about ``target_bytes``, iterate it with the loader in a child process and
    read the child's peak RSS; the file is deleted before returning."""
    from benchmarks.worlds import longmemeval as gen

    try:
        from harness.workloads.longmemeval import iter_questions  # noqa: F401
    except ImportError as e:
        return _absent(e)
    sessions = sessions or gen.M_SESSIONS
    # the question count from the mean size of the first three questions: the file is about target_bytes
    sizes = [len(json.dumps(q, ensure_ascii=False).encode()) for q in gen.generate(3, seed=seed, sessions=sessions)]
    n = max(1, math.ceil(target_bytes / (sum(sizes) / len(sizes))))
    track = as_tracker(track)
    data = tmp / "loader-m.json"
    try:
        t0 = time.perf_counter()
        with track.phase("generating the loader's M-shape file", total=n, unit="questions") as ph:
            desc = gen.write_file(data, n, seed=seed, sessions=sessions, progress=_gen_progress(ph))
        gen_s = time.perf_counter() - t0
        with track.phase(f"reading {desc['bytes'] / 1e9:.1f} GB with the loader (a child process)"):
            base = _child([])
            before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            got = _child([str(data)])
        children_max = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    finally:
        gen.remove_file(data)
    # Linux keeps ru_maxrss across fork and exec, so a child spawned by this (large) process reports at least this
    # process's RSS at the fork; the child's VmHWM (its own address space) is the loader's peak. ru_maxrss is kept
    # beside it, and used only where /proc is missing.
    source = "VmHWM" if got["vm_hwm_kb"] is not None else "ru_maxrss"
    peak = (got["vm_hwm_kb"] if source == "VmHWM" else got["ru_maxrss_kb"]) * 1024
    base_peak = (base["vm_hwm_kb"] if source == "VmHWM" else base["ru_maxrss_kb"]) * 1024
    return {"status": "ok", "target_bytes": target_bytes, "file_bytes": desc["bytes"], "questions": got["questions"], "turns": got["turns"],
            "expected_questions": n, "expected_turns": desc["turns"], "sessions_per_question": sessions,
            "generate_s": gen_s, "read_s": got["wall_s"], "read_mb_per_s": desc["bytes"] / 1e6 / got["wall_s"],
            "peak_rss_bytes": peak, "baseline_rss_bytes": base_peak, "peak_source": source,
            "child_ru_maxrss_bytes": got["ru_maxrss_kb"] * 1024,
            "children_max_rss_bytes_before": before * 1024, "children_max_rss_bytes_after": children_max * 1024,
            "peak_over_file": peak / desc["bytes"], "level_bytes": LEVEL_LOADER_BYTES,
            "within_level": peak < LEVEL_LOADER_BYTES, "data": {k: desc[k] for k in ("seed", "label", "reuse")}}


# ------------------------------------------------------------------------------------------------------------ run
def check_config(parts: Sequence[str], quick: bool, **given: Any) -> dict[str, Any]:
    """The run's sizes (``QUICK`` or ``FULL``, overridden by ``given`` values that are not None), checked before
    any work: a selection that selects nothing (no part, no question, no byte) is a one-line ``ValueError``, as
    are fewer than two design questions and haystack sizes that are not three different ones of at least the
    generator's 8 sessions."""
    if not parts:
        raise ValueError(f"--parts selects nothing: choose from {', '.join(PARTS)}")
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        raise ValueError(f"unknown part(s) {', '.join(unknown)}: choose from {', '.join(PARTS)}")
    cfg = dict(QUICK if quick else FULL)
    cfg.update({k: v for k, v in given.items() if v is not None})
    for k in ("protocol_questions", "design_questions", "loader_bytes", "profile_questions"):
        if cfg[k] < 1:
            raise ValueError(f"--{k.replace('_', '-')} must be at least 1, got {cfg[k]}")
    if cfg["design_questions"] < 2:
        raise ValueError(f"--design-questions must be at least 2 (the first question of a run is not steady), "
                         f"got {cfg['design_questions']}")
    sizes = list(cfg["design_sessions"])
    if len(set(sizes)) != 3 or min(sizes) < 8:
        raise ValueError(f"--design-sessions takes three different haystack sizes of at least 8 sessions per "
                         f"question, got {sizes}")
    return cfg


def parse_sessions(text: str | None) -> tuple[int, ...] | None:
    """``--design-sessions``: comma-separated whole numbers (None when not given); anything else is a one-line
    ``ValueError``."""
    if text is None:
        return None
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValueError(f"--design-sessions takes comma-separated whole numbers, got {text!r}") from None


def run(out_dir: Path, *, quick: bool = False, track: Any = None, seed: int = 0,
        parts: Sequence[str] = PARTS, protocol_questions: int | None = None, design_questions: int | None = None,
        design_sessions: Sequence[int] | None = None, loader_bytes: int | None = None,
        retrievers: Sequence[str] = ("bm25", "minilm"), arms: str | None = None, tmp_dir: Path | None = None,
        protocol_target: int = S_QUESTIONS, profile_questions: int | None = None, two_workers: bool = True,
        fault_hook: Callable[[str], None] | None = None, embed: str = "store", profile: bool = False) -> list[Path]:
    """Run the selected parts and write ``longmemeval-scale.{json,md,png}`` into ``out_dir`` once all are done.
    The design part measures both encoder settings itself; ``embed`` is the profile's (``store`` or
    ``per-call``): ``profile`` adds where one generated S-shape question's time goes, per arm and phase
    (``benchmarks.design_profile``)."""
    from benchmarks.common import set_torch_threads
    from benchmarks.worlds import longmemeval as gen

    cfg = check_config(parts, quick, protocol_questions=protocol_questions, design_questions=design_questions,
                       design_sessions=design_sessions, loader_bytes=loader_bytes,
                       profile_questions=profile_questions)
    set_torch_threads(1)
    t_start = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="memsim-lme-scale-", dir=tmp_dir))
    results: dict[str, Any] = {}
    try:
        if "protocol" in parts:
            _say(f"protocol on {cfg['protocol_questions']} generated questions ({', '.join(retrievers)})")
            results["protocol"] = measure_protocol(tmp, n_questions=cfg["protocol_questions"], seed=seed,
                                                   retrievers=retrievers, target=protocol_target, track=track)
        if "designs" in parts:
            _say(f"designs on {cfg['design_questions']} questions at {cfg['design_sessions']} sessions/question")
            results["designs"] = measure_designs(tmp, n_questions=cfg["design_questions"],
                                                 sessions=cfg["design_sessions"], seed=seed, quick=quick, arms=arms,
                                                 track=track, profile_questions=cfg["profile_questions"],
                                                 two_workers=two_workers)
        if profile:
            from benchmarks.design_profile import profile_s_question

            _say("profile of one generated S-shape question")
            results["profile"] = profile_s_question(tmp, seed=seed, arms=arms, embed=embed)
        if "loader" in parts:
            _say(f"loader peak memory on a generated ~{cfg['loader_bytes'] / 1e9:.1f} GB file")
            results["loader"] = measure_loader(tmp, target_bytes=cfg["loader_bytes"], seed=seed, track=track)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    payload = {
        "benchmark": NAME, "data": gen.label({"generator": gen.GENERATOR, "seed": seed}),
        "generator": {"name": gen.GENERATOR, "version": gen.VERSION, "seed": seed, "reuse": 0.6,
                      "pool_size": 2000},
        "config": {**{k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items()}, "parts": list(parts),
                   "retrievers": list(retrievers), "arms": arms, "quick": quick},
        "levels": {"protocol_s": LEVEL_PROTOCOL_S, "loader_bytes": LEVEL_LOADER_BYTES,
                   "design_s_two_workers": LEVEL_DESIGN_S},
        **results,
        "meta": {"machine": machine_description(), "seeds": {"seed": seed}, "quick": quick,
                 "wall_s": time.perf_counter() - t_start},
    }
    return write_outputs(out_dir, stamp_run(payload), fault_hook)


def write_outputs(out_dir: Path, payload: dict[str, Any], fault_hook: Callable[[str], None] | None = None
                  ) -> list[Path]:
    """The png, md and json, each atomically (steps ``longmemeval_scale.{png,md,json}``), the json last."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = [(f"{NAME}.png", _png(payload)), (f"{NAME}.md", (render_markdown(payload).rstrip() + "\n").encode()),
             (f"{NAME}.json", (json.dumps(_jsonable(payload), indent=2, ensure_ascii=False) + "\n").encode())]
    paths = []
    for name, data in files:
        if data is None:
            continue
        write_atomic(out_dir / name, data, fault_hook, step=f"longmemeval_scale.{name.rsplit('.', 1)[1]}")
        paths.append(out_dir / name)
    return paths


# ------------------------------------------------------------------------------------------------------ rendering
def _gib(b: float) -> str:
    return f"{b / 1024**3:.2f} GiB"


def render_markdown(payload: dict[str, Any]) -> str:
    """The page, from the payload alone."""
    lines = [f"# LongMemEval at scale{' (quick)' if payload['meta']['quick'] else ''}", "",
             f"{payload['data']} (generated files in LongMemEval's released schema; filler reuse "
             f"{payload['generator']['reuse']} from a pool of {payload['generator']['pool_size']}).", ""]
    p = payload.get("protocol")
    if p:
        lines += ["## Official protocol", ""]
        if p["status"] != "ok":
            lines += [f"absent: {p['reason']}", ""]
        else:
            how = (f"projected from {p['questions']} questions (wall x {p['target_questions']} / {p['questions']})"
                   if p["projected"] else "measured")
            lines += [md_table(["questions", "retrievers", "wall s", f"wall s for {p['target_questions']}",
                                "level s", "within level"],
                               [[p["questions"], ",".join(p["retrievers"]), p["wall_s"], p["wall_s_for_target"],
                                 p["level_s"], "yes" if p["within_level"] else "no"]], ".1f"), "",
                      f"Run with {p.get('workers', 1)} worker process(es)"
                      + (" and the dense text cache (`--dense-cache`, one per process)" if p.get("dense_cache")
                         else "") + f". The {p['target_questions']}-question figure is {how}."
                      + (f" Scaled by distinct corpus texts instead ({p['distinct_texts']} in {p['questions']} "
                         f"questions, {p['distinct_texts_target']} in {p['target_questions']}: the text cache "
                         f"encodes each once) it is {p['wall_s_for_target_by_distinct_texts']:.0f} s."
                         if p["projected"] else ""), "",
                      md_table(["retriever", "granularity", "scored as", "n", "recall_any@5", "recall_all@5",
                                "ndcg_any@10"],
                               [[r["retriever"], r["granularity"], r["scored_as"], r["questions"], r["recall_any@5"],
                                 r["recall_all@5"], r["ndcg_any@10"]] for r in p["rows_paper_averaging"]]), "",
                      "(paper averaging; synthetic data: these numbers show the rankings are not trivial, they "
                      "are not LongMemEval results)", ""]
    d = payload.get("designs")
    if d:
        from benchmarks.longmemeval_scale_designs import render_section as designs_section

        lines += designs_section(d, payload["generator"])
    ld = payload.get("loader")
    if ld:
        lines += ["## Loader peak memory", ""]
        if ld["status"] != "ok":
            lines += [f"absent: {ld['reason']}", ""]
        else:
            lines += [md_table(["file", "questions", "turns", "read s", "MB/s", "peak RSS", "baseline RSS",
                                "peak / file", "level", "within level"],
                               [[_gib(ld["file_bytes"]), ld["questions"], ld["turns"], ld["read_s"],
                                 ld["read_mb_per_s"], _gib(ld["peak_rss_bytes"]), _gib(ld["baseline_rss_bytes"]),
                                 f"{ld['peak_over_file']:.3f}", _gib(ld["level_bytes"]),
                                 "yes" if ld["within_level"] else "no"]], ".1f"), "",
                      f"M shape ({ld['sessions_per_question']} sessions per question), read by "
                      f"`iter_questions` in a child process (peak = its {ld['peak_source']}); the file was deleted after.", ""]
    if payload.get("profile"):
        from benchmarks.design_profile import render_section

        lines += render_section(payload["profile"])
    m = payload["meta"]
    lines += [f"Machine: {m['machine'].get('cpu', '')} ({m['machine'].get('cpu_count', '')} CPUs); "
              f"wall {m['wall_s']:.0f} s; this run's own seed {m['seeds']['seed']}. Code: "
              f"{code_text(payload.get('run'))}."]
    return "\n".join(lines)


def figure(payload: dict[str, Any]) -> Any:
    """Four panels: the official protocol's wall (measured bar solid, projections hatched, the level a line), the
    design run's projected hours for all S questions before and after the store with one and two workers (hatched:
    projections; the level a line), the design run's measured wall per question against turns per question with
    the projected S and M questions hollow, and the loader's memory (the file and the peak, the level a line)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.plotting import PROJECTED, level_line, place_labels

    fig, axes = plt.subplots(1, 4, figsize=(19, 4.2))
    p, d, ld = payload.get("protocol") or {}, payload.get("designs") or {}, payload.get("loader") or {}
    labels: list[tuple[Any, list[float], list[float], list[str]]] = []
    ax = axes[0]
    if p.get("status") == "ok":
        names = [f"measured\n{p['questions']} q"]
        ax.bar(names, [p["wall_s"]], color="#4c72b0", label="measured")
        vals = [p["wall_s"]]
        if p.get("projected"):
            proj = [(f"projected\n{p['target_questions']} q", p["wall_s_for_target"])]
            if p.get("wall_s_for_target_by_distinct_texts") is not None:
                proj.append((f"projected\n{p['target_questions']} q\n(by distinct texts)",
                             p["wall_s_for_target_by_distinct_texts"]))
            ax.bar([n for n, _ in proj], [v for _, v in proj], color="#4c72b0", label="projected", **PROJECTED)
            names += [n for n, _ in proj]
            vals += [v for _, v in proj]
        for i, v in enumerate(vals):
            ax.annotate(f"{v:,.0f} s", (i, v), xytext=(0, 3), textcoords="offset points", ha="center", fontsize=8)
        level_line(ax, p["level_s"], f"level {p['level_s']:,.0f} s")
        ax.set_ylim(0, max([*vals, p["level_s"]]) * 1.18)
        ax.legend(fontsize=8, loc="upper left")
    ax.set_ylabel("seconds")
    ax.set_title("official protocol wall (s)")
    from benchmarks.longmemeval_scale_designs import plot as designs_plot
    from benchmarks.longmemeval_scale_designs import plot_level

    plot_level(axes[1], d)
    axes[1].set_title("design run, all S questions (h)")
    labels += designs_plot(axes[2], d)
    axes[2].set_title("design run cost per question")
    ax = axes[3]
    if ld.get("status") == "ok":
        vals = [ld["file_bytes"] / 1024**3, ld["peak_rss_bytes"] / 1024**3]
        ax.bar(["file", "peak RSS"], vals, color=["#999999", "#4c72b0"])
        for i, v in enumerate(vals):
            ax.annotate(f"{v:.2f}", (i, v), xytext=(0, 3), textcoords="offset points", ha="center", fontsize=8)
        level_line(ax, ld["level_bytes"] / 1024**3, f"peak RSS level {ld['level_bytes'] / 1024**3:.1f} GiB")
        ax.set_ylim(0, max([*vals, ld["level_bytes"] / 1024**3]) * 1.18)
        ax.legend(fontsize=8, loc="upper right")
    ax.set_ylabel("GiB")
    ax.set_title("loader memory (GiB)")
    fig.tight_layout()
    for ax, lx, ly, text in labels:
        place_labels(ax, lx, ly, text, fontsize=8)
    return fig


def _png(payload: dict[str, Any]) -> bytes | None:
    try:
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover
        return None
    fig = figure(payload)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def main(argv: list[str] | None = None, track: Any = None) -> list[Path]:
    """The command line (``track``: the caller's progress display; without one the run opens its own)."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks.longmemeval_scale",
                                 description=" ".join(__doc__.split("\n\n", 1)[0].split()))
    ap.add_argument("--quick", action="store_true", help="20 protocol questions (projected), 3 design questions at "
                                                          "8, 10 and 12 sessions, a ~200 MB loader file")
    ap.add_argument("--seed", type=int, default=0, help="seed of the generated files (default 0)")
    ap.add_argument("--out", type=Path, default=None, help="output folder (default: the bench run folder)")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated subset of {','.join(PARTS)}")
    ap.add_argument("--protocol-questions", type=int, default=None,
                    help=f"questions of the protocol part (default {FULL['protocol_questions']}; quick "
                         f"{QUICK['protocol_questions']})")
    ap.add_argument("--design-questions", type=int, default=None,
                    help=f"questions per haystack size and setting of the designs part (default "
                         f"{FULL['design_questions']}; quick {QUICK['design_questions']})")
    ap.add_argument("--design-sessions", default=None,
                    help="the designs part's three haystack sizes, sessions per question (default "
                         f"{','.join(map(str, FULL['design_sessions']))}; quick "
                         f"{','.join(map(str, QUICK['design_sessions']))})")
    ap.add_argument("--loader-bytes", type=int, default=None,
                    help=f"size of the loader part's generated file in bytes (default {FULL['loader_bytes']:,}; "
                         f"quick {QUICK['loader_bytes']:,})")
    ap.add_argument("--profile", action="store_true",
                    help="also profile one generated S-shape question (where its time goes, per arm and phase)")
    ap.add_argument("--embed", default="store", choices=("store", "per-call"),
                    help="the profile's encoder setting (the designs part measures both)")
    a = ap.parse_args(argv)
    parts = [p.strip() for p in a.parts.split(",") if p.strip()]
    try:  # a selection of nothing is a usage error, before any work
        sessions = parse_sessions(a.design_sessions)
        check_config(parts, a.quick, protocol_questions=a.protocol_questions, design_questions=a.design_questions,
                     design_sessions=sessions, loader_bytes=a.loader_bytes)
    except ValueError as exc:
        ap.error(str(exc))
    with given_or_own(track) as shown:
        paths = run(a.out or default_out_dir(a.quick), quick=a.quick, seed=a.seed, parts=parts,
                    protocol_questions=a.protocol_questions, design_questions=a.design_questions,
                    design_sessions=sessions, loader_bytes=a.loader_bytes, track=shown, profile=a.profile,
                    embed=a.embed)
    for p in paths:
        print(f"wrote {p}")
    return paths


if __name__ == "__main__":  # pragma: no cover
    main()
