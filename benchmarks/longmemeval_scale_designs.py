"""The design part of ``longmemeval-scale``: what a LongMemEval design run costs before and after the embedding
store, measured in one run on one machine and projected to S and M for one and two workers.

**Measured.** At each of three haystack sizes (sessions per question, ``design_sessions``) one generated file of
``n`` questions goes through :func:`benchmarks.longmemeval.run` (the default arms, or ``arms``) four times in this
process, one after the other:

- ``per-call``: ``--embed per-call``, the earlier encoders (each process's text caches, fresh per run);
- ``store-cold``: ``--embed store`` on a fresh store (a first run: every text is new to it);
- ``store-warm``: the same run again on that store (every text is in it: a second run on the same data);

and at the middle size the ``per-call`` and ``store-cold`` runs once more with two worker processes. Per question:
its wall seconds (the time between two finished questions in the run's question loop, serial runs), its turns,
its *new turns* (turns whose text, as the arms see it, no earlier question of that store's history held: every
turn of the first question, none on a warm store) and the texts its encoders encoded. The first question of each
run is left out of the fits (it pays the process's model loading).

**Fitted.** Per setting, one least-squares fit over every steady question of the three sizes, every coefficient
constrained non-negative (``scipy.optimize.nnls``: no cost falls as a question grows):

- the store (cold and warm runs together): ``wall = a + b*turns + c*turns^2 + e*new_turns``. The cold runs' new
  turns are nearly all their turns and the warm runs' are none, so the cost of a new turn (``e``: the encoding
  the store does once per text) is told apart from the cost every turn pays anyway (``b``: Kuzu writes, search
  indexes, prompt rendering, reading the store);
- per-call: ``wall = a + b*turns + c*turns^2``: its encoders share nothing between the arms' renderings and hold
  only a bounded per-process cache for some of them, so the fit charges every turn the cost the measured questions
  paid. Its files are too short for the process caches to meet recurring filler (the measured files repeat little filler),
  so its projection leaves out the hits those caches get at S: an upper bound for ``per-call``.

The squared term is why three sizes are measured: a question's cost grows faster than its turns where a design
rewrites or rescans what it holds per turn (Fractal saves its whole session file on every submit), which a line
through two points would miss and which dominates at M's 4,800 turns. Each fit's residuals per size are reported,
and a linear fit (``c = 0``) beside it.

**Projected.** S (500 questions x 48 sessions) and M (500 x 500), one worker: ``setup + sum over the questions of
the fitted wall``, where each projected question's turns and new turns are counted on the generator's own first
500 (``--quick``: fewer, scaled to 500) S- or M-shape questions in order (``reuse`` 0.6 from a pool of 2,000: the
projection rests on these settings, not on the real S or M). ``setup`` is the run's time before its first question
(reading the file, PM's training), scaled by questions (500 / n: an upper bound, as PM trains on a fifth of the
file's questions), plus its first question's time beyond the run's mean steady question (loading the models: once
per process, not scaled). Two workers: the per-question part divided by the measured speed-up at the middle size
(``2 * mean steady question wall alone / mean steady question wall with two workers``, both workers busy, at most
2). Level: all 500 S questions with every default arm within :data:`LEVEL_DESIGN_S` seconds, projected for the
store on a fresh store with two workers.

**Encode pass against its floor.** The store's encode rate in each cold run (texts it encoded / seconds in its
encoders, per encoder) beside the floor: up to :data:`FLOOR_SAMPLE` of the same distinct texts (the arms'
renderings of the largest size's turns and questions that its store holds, found by their keys) encoded alone,
one at a time, by the same encoder on one thread with nothing else running, after the runs.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.progress import StampedTracker, as_tracker


def _say(msg: str) -> None:
    """One status line on stdout, as the rest of ``longmemeval-scale`` prints them."""
    print(f"longmemeval-scale: {msg}", flush=True)

MODES = ("per-call", "store-cold", "store-warm")
S_QUESTIONS = 500
LEVEL_DESIGN_S = 4 * 3600
"""All 500 S questions with every default arm, projected on this machine with two workers."""
LEVEL_WORKERS = 2
FLOOR_SAMPLE = 256
FLOOR_ENCODERS = ("minilm-mean", "minilm-pooler")


# ---------------------------------------------------------------------------------------------- the data's reuse
def question_keys(q: dict[str, Any]) -> list[bytes]:
    """One key per turn of a question object in the released schema: the turn as every arm sees it (its ``dia_id``,
    role and text, the session's date line on its first turn), as ``harness.workloads.lme_workload.to_conversation``
    maps it (tested equal)."""
    from harness.workloads.lme_workload import DATE_HEADER, turn_id

    seen: Counter[str] = Counter()
    out = []
    for sid, date, turns in zip(q["haystack_session_ids"], q["haystack_dates"], q["haystack_sessions"], strict=True):
        seen[sid] += 1
        for i, t in enumerate(turns):
            text = f"{DATE_HEADER.format(date=date)}\n{t['content']}" if i == 0 else t["content"]
            key = f"{turn_id(sid, seen[sid], i)}\0{t['role']}\0{text}".encode("utf-8", "surrogatepass")
            out.append(hashlib.blake2b(key, digest_size=12).digest())
    return out


def reuse_profile(questions: Iterable[dict[str, Any]], seen: set[bytes] | None = None) -> list[tuple[int, int]]:
    """``(turns, new turns)`` per question in order: a new turn is one whose key (:func:`question_keys`) neither
    ``seen`` nor an earlier question held (``seen`` grows)."""
    seen = set() if seen is None else seen
    out = []
    for q in questions:
        keys = question_keys(q)
        new = 0
        for k in keys:
            if k not in seen:
                seen.add(k)
                new += 1
        out.append((len(keys), new))
    return out


def generated_profile(n: int, *, sessions: int, seed: int) -> list[tuple[int, int]]:
    """:func:`reuse_profile` of the generator's first ``n`` questions at ``sessions`` sessions per question."""
    from benchmarks.worlds import longmemeval as gen

    return reuse_profile(gen.generate(n, seed=seed, sessions=sessions))


# ------------------------------------------------------------------------------------------------ one bench run
class QuestionRecorder(StampedTracker):
    """A :class:`StampedTracker` that also keeps, for each item of the outermost loop that is a finished question
    (``benchmarks.longmemeval``'s outcome dicts), what the cost model needs, copied when the item passes."""

    def __init__(self, inner: Any, stamps: list[float], items: list[dict[str, Any]]) -> None:
        super().__init__(inner, stamps)
        self.items = items

    def __call__(self, it: Iterable[Any], description: str = "", total: int | None = None,
                 unit: str = "") -> Iterator[Any]:
        outer = self._depth == 0
        for x in super().__call__(it, description=description, total=total, unit=unit):
            if outer and isinstance(x, dict) and "question_id" in x:
                self.items.append({
                    "index": x.get("index"), "question_id": x["question_id"], "n_turns": x.get("n_turns"),
                    "question_wall_s": x.get("wall_s"), "pid": x.get("pid"),
                    "encoder_cache": json.loads(json.dumps(x.get("encoder_cache") or {})),
                    "arm_ingest_ms": {a: i.get("ingest_ms") for a, i in (x.get("arms") or {}).items()
                                      if isinstance(i, dict) and i.get("ingest_ms") is not None}})
            yield x


def _misses(stats: dict[str, Any]) -> int:
    return int(sum(v.get("misses", 0) for v in stats.values() if isinstance(v, dict)))


def run_once(tmp: Path, data: Path, *, label: str, n: int, seed: int, quick: bool, arms: str | None,
             embed: str, store: Path | None, workers: int, new_turns: list[int], track: Any = None
             ) -> dict[str, Any]:
    """One ``benchmarks.longmemeval.run`` of the first ``n`` questions of ``data``; per question its wall (the gap
    between two finished questions), turns, new turns (given, in file order) and texts encoded (its process's
    cumulative encoder counts, differenced)."""
    from benchmarks import longmemeval as B

    stamps: list[float] = []
    items: list[dict[str, Any]] = []
    out = tmp / f"run-{label}"
    t0 = time.perf_counter()
    B.run(out, data=data, arms=arms, limit=n, quick=quick, seed=seed, track=QuestionRecorder(track, stamps, items),
          embed=embed, embed_store=store, workers=workers)
    wall = time.perf_counter() - t0
    res = json.loads((out / "longmemeval.json").read_text(encoding="utf-8"))
    shutil.rmtree(out, ignore_errors=True)
    gaps = [y - x for x, y in zip(stamps, stamps[1:], strict=False)]
    last: dict[Any, int] = {}
    first_of: set[int] = set()
    questions = []
    for k, it in enumerate(items):
        pid = it["pid"]
        if pid not in last:
            first_of.add(k)
        total = _misses(it["encoder_cache"])
        questions.append({"index": it["index"], "turns": it["n_turns"], "new_turns": new_turns[it["index"]],
                          "wall_s": gaps[k] if k < len(gaps) else None, "question_wall_s": it["question_wall_s"],
                          "encoded": total - last.get(pid, 0), "first_of_process": k in first_of,
                          "arm_ingest_ms": it["arm_ingest_ms"]})
        last[pid] = total
    rest = [q["wall_s"] for q in questions if not q["first_of_process"] and q["wall_s"] is not None]
    first = questions[0]["wall_s"] if questions and len(stamps) > 1 else None
    loading = max(0.0, first - sum(rest) / len(rest)) if rest and first is not None and workers == 1 else None
    return {"label": label, "embed": embed, "workers": res.get("config", {}).get("workers", workers),
            "questions": questions, "run_wall_s": wall, "setup_s": (stamps[0] - t0) if stamps else None,
            "loading_s": loading,
            "question_loop_s": (stamps[-1] - stamps[0]) if len(stamps) > 1 else None,
            "encoder_cache": res.get("encoder_cache", {}), "n_questions": res.get("n_questions")}


# ----------------------------------------------------------------------------------------------------- fitting
TERMS = {"store": ("1", "turns", "turns^2", "new_turns"), "per-call": ("1", "turns", "turns^2")}


def _row(q: dict[str, Any] | tuple[int, int], terms: Sequence[str]) -> list[float]:
    t, n = (q["turns"], q["new_turns"]) if isinstance(q, dict) else q
    val = {"1": 1.0, "turns": float(t), "turns^2": float(t) ** 2, "new_turns": float(n)}
    return [val[x] for x in terms]


def fit(points: Sequence[dict[str, Any]], terms: Sequence[str]) -> dict[str, Any]:
    """Non-negative least squares of ``wall_s`` on ``terms`` over ``points`` (columns scaled to their largest
    value before the solve, coefficients unscaled after); the coefficients, R^2 and the points used."""
    from scipy.optimize import nnls

    x = np.array([_row(p, terms) for p in points], dtype=np.float64)
    y = np.array([p["wall_s"] for p in points], dtype=np.float64)
    scale = np.where(np.abs(x).max(axis=0) > 0, np.abs(x).max(axis=0), 1.0)
    coef, _ = nnls(x / scale, y)
    coef = coef / scale
    pred = x @ coef
    ss = float(((y - y.mean()) ** 2).sum())
    return {"terms": list(terms), "coef": dict(zip(terms, coef.tolist(), strict=True)), "n": len(points),
            "r2": 1 - float(((y - pred) ** 2).sum()) / ss if ss > 0 else None}


def predict(f: dict[str, Any], q: dict[str, Any] | tuple[int, int]) -> float:
    return float(np.dot(_row(q, f["terms"]), [f["coef"][t] for t in f["terms"]]))


def residuals_by_size(f: dict[str, Any], points: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per haystack size and setting: the mean measured and fitted wall and their relative gap."""
    groups: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for p in points:
        groups.setdefault((p["sessions"], p["mode"]), []).append(p)
    out = []
    for (s, mode), ps in sorted(groups.items()):
        m = sum(p["wall_s"] for p in ps) / len(ps)
        fitted = sum(predict(f, p) for p in ps) / len(ps)
        out.append({"sessions": s, "mode": mode, "measured_s": m, "fitted_s": fitted,
                    "gap": (fitted - m) / m if m else None})
    return out


def steady(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [q for q in run["questions"] if not q["first_of_process"] and q["wall_s"] is not None]


def speedup(alone: dict[str, Any], two: dict[str, Any]) -> float | None:
    """``2 * mean steady question wall alone / mean steady question wall with two workers`` (each question's own
    wall inside its process), at most 2."""
    a = [q["question_wall_s"] for q in alone["questions"] if not q["first_of_process"]]
    b = [q["question_wall_s"] for q in two["questions"] if not q["first_of_process"]]
    if not a or not b or sum(b) <= 0:
        return None
    return min(2.0, 2 * (sum(a) / len(a)) / (sum(b) / len(b)))


def project(f: dict[str, Any], profile: Sequence[tuple[int, int]], *, setup_s: float, n_run: int,
            speed_up: float | None, target: int = S_QUESTIONS, loading_s: float = 0.0) -> dict[str, Any]:
    """The fitted cost of ``target`` questions shaped as ``profile`` (scaled to ``target`` when it holds fewer),
    plus the setup scaled by questions and the model loading once; one worker, and two with ``speed_up``."""
    per = sum(predict(f, q) for q in profile) * target / len(profile)
    setup = setup_s * target / max(1, n_run) + loading_s
    out = {"questions_s": per, "setup_s": setup, "one_worker_s": setup + per,
           "per_question_s": per / target, "profiled_questions": len(profile),
           "turns_per_question": sum(t for t, _ in profile) / len(profile),
           "new_turns_share": sum(n for _, n in profile) / max(1, sum(t for t, _ in profile))}
    out["two_workers_s"] = setup + per / speed_up if speed_up else None
    return out


# ------------------------------------------------------------------------------------------------------- floor
def _candidate_texts(data: Path, n: int) -> dict[str, list[str]]:
    """The texts the arms hand each store encoder for the first ``n`` questions of ``data`` (their renderings of
    every turn and the question), built with the arms' own functions."""
    from harness.workloads.arm_text import turn_line
    from harness.workloads.lme_workload import to_conversation
    from harness.workloads.locomo import render_turn
    from harness.workloads.longmemeval import iter_questions
    from harness.workloads.tortoise_arm import turn_body
    from tortoise_sim.embed import cut_words

    mean: dict[str, None] = {}
    pooler: dict[str, None] = {}
    for q in iter_questions(data, limit=n):
        conv = to_conversation(q)
        for t in conv.turns():
            for text in (render_turn(t, None), turn_line(t), f"[{t.speaker}] {turn_body(t)}"):
                mean[text] = mean[cut_words(text)] = None
            pooler[turn_line(t)] = None
        for p in conv.probes:
            mean[p.question] = mean[cut_words(p.question)] = pooler[p.question] = None
    return {"minilm-mean": list(mean), "minilm-pooler": list(pooler)}


def encode_floor(data: Path, n: int, store_root: Path, cold: dict[str, Any], *, sample: int = FLOOR_SAMPLE
                 ) -> dict[str, Any]:
    """Per encoder: the cold run's encode rate (texts encoded / seconds in its encoders) and the floor, up to
    ``sample`` of the same distinct texts that the store holds encoded alone with nothing else running."""
    from harness.store_encoders import StoreSession

    session = StoreSession(store_root)
    texts = _candidate_texts(data, n)
    out: dict[str, Any] = {}
    for name in FLOOR_ENCODERS:
        enc = session.encoder(name)
        st = cold["encoder_cache"].get(name) or {}
        held = [t for t, v in zip(texts[name], enc.namespace.lookup(texts[name]), strict=True) if v is not None]
        chosen = held[:sample]
        if chosen:
            enc.encode_alone(chosen[0])  # warm-up, not timed
        t0 = time.perf_counter()
        for t in chosen:
            enc.encode_alone(t)
        floor_s = time.perf_counter() - t0
        out[name] = {"run_encoded": st.get("misses", 0), "run_encode_s": st.get("encode_s", 0.0),
                     "run_texts_per_s": (st["misses"] / st["encode_s"]) if st.get("encode_s") else None,
                     "stored": len(enc.namespace), "found": len(held), "floor_texts": len(chosen),
                     "floor_s": floor_s, "floor_texts_per_s": len(chosen) / floor_s if chosen and floor_s > 0 else None}
        r, f = out[name]["run_texts_per_s"], out[name]["floor_texts_per_s"]
        out[name]["run_over_floor"] = (r / f) if r and f else None
    return out


# ----------------------------------------------------------------------------------------------------- measure
def measure(tmp: Path, *, n_questions: int, sessions: Sequence[int], seed: int, quick: bool,
            arms: str | None = None, track: Any = None, profile_questions: int = S_QUESTIONS,
            shapes: dict[str, int] | None = None, two_workers: bool = True) -> dict[str, Any]:
    """The design part (see the module docstring): the runs, the fits, the projections and the encode floor."""
    say = _say
    from benchmarks.worlds import longmemeval as gen

    try:
        from benchmarks import longmemeval as _B  # noqa: F401
    except ImportError as e:
        return {"status": "absent", "reason": f"{type(e).__name__}: {e}"}
    track = as_tracker(track)
    shapes = shapes or {"S": gen.S_SESSIONS, "M": gen.M_SESSIONS}
    middle = sorted(sessions)[len(sessions) // 2]
    runs: list[dict[str, Any]] = []
    floor: dict[str, Any] = {}
    for s in sessions:
        data = tmp / f"designs-{s}.json"
        with track.phase(f"generating {s} sessions per question", total=n_questions, unit="questions") as ph:
            gen.write_file(data, n_questions, seed=seed, sessions=s, progress=lambda done, total, _b: ph.update(done, total=total))
        prof = reuse_profile(gen.generate(n_questions, seed=seed, sessions=s))
        cold_new = [n for _, n in prof]
        store = tmp / f"store-{s}"
        plan = [("per-call", "per-call", None, 1, cold_new), ("store-cold", "store", store, 1, cold_new),
                ("store-warm", "store", store, 1, [0] * len(prof))]
        if two_workers and s == middle:
            plan += [("per-call", "per-call", None, 2, cold_new),
                     ("store-cold", "store", tmp / f"store-{s}-two", 2, cold_new)]
        for mode, embed, root, workers, new in plan:
            label = f"{mode}-{s}-w{workers}"
            say(f"designs: {label}")
            got = run_once(tmp, data, label=label, n=n_questions, seed=seed, quick=quick, arms=arms, embed=embed,
                           store=root, workers=workers, new_turns=new, track=track)
            got.update(mode=mode, sessions=s, turns_per_question=sum(t for t, _ in prof) / len(prof))
            runs.append(got)
        if s == max(sessions):
            cold = next(r for r in runs if r["sessions"] == s and r["mode"] == "store-cold" and r["workers"] == 1)
            with track.phase("the store's encode floor"):
                floor = encode_floor(data, n_questions, store, cold)
        gen.remove_file(data)
        for root in (store, tmp / f"store-{s}-two"):
            shutil.rmtree(root, ignore_errors=True)
    return summarize(runs, floor, seed=seed, quick=quick, shapes=shapes, profile_questions=profile_questions,
                     middle=middle)


def summarize(runs: list[dict[str, Any]], floor: dict[str, Any], *, seed: int, quick: bool,
              shapes: dict[str, int], profile_questions: int, middle: int) -> dict[str, Any]:
    """Fits, projections and the level from the runs (a pure function of its arguments and the generator)."""
    serial = [r for r in runs if r["workers"] == 1]
    points = {"store": [], "per-call": []}
    for r in serial:
        for q in steady(r):
            points["per-call" if r["mode"] == "per-call" else "store"].append(
                {**q, "sessions": r["sessions"], "mode": r["mode"]})
    fits = {k: fit(v, TERMS[k]) for k, v in points.items() if v}
    linear = {k: fit(v, [t for t in TERMS[k] if t != "turns^2"]) for k, v in points.items() if v}
    speed: dict[str, float | None] = {}
    for key, mode in (("store", "store-cold"), ("per-call", "per-call")):
        alone = next((r for r in serial if r["mode"] == mode and r["sessions"] == middle), None)
        two = next((r for r in runs if r["workers"] > 1 and r["mode"] == mode), None)
        speed[key] = speedup(alone, two) if alone and two else None
    profiles = {k: generated_profile(profile_questions, sessions=v, seed=seed) for k, v in shapes.items()}
    largest = max(r["sessions"] for r in serial)
    setup = {key: next((r["setup_s"] for r in serial if r["sessions"] == largest and r["mode"] == mode), 0.0) or 0.0
             for key, mode in (("store", "store-cold"), ("per-call", "per-call"))}
    loading = {key: next((r.get("loading_s") for r in serial if r["sessions"] == largest and r["mode"] == mode),
                         0.0) or 0.0 for key, mode in (("store", "store-cold"), ("per-call", "per-call"))}
    n_run = max((r["n_questions"] or 0) for r in serial) if serial else 1

    def proj(key: str, f: dict[str, Any], shape: str) -> dict[str, Any]:
        return project(f, profiles[shape], setup_s=setup[key], n_run=n_run, speed_up=speed[key],
                       loading_s=loading[key])

    projection = {key: {shape: proj(key, f, shape) for shape in shapes} for key, f in fits.items()}
    projection_linear = {key: {shape: proj(key, f, shape)["one_worker_s"] for shape in shapes}
                         for key, f in linear.items()}
    s_two = (projection.get("store", {}).get("S") or {}).get("two_workers_s")
    return {
        "status": "ok", "quick": quick, "modes": list(MODES), "middle_sessions": middle,
        "runs": runs, "fits": fits, "fits_linear": linear,
        "residuals": {k: residuals_by_size(fits[k], points[k]) for k in fits},
        "speedup_two_workers": speed, "shapes": shapes, "shape_questions": S_QUESTIONS,
        "projection": projection, "projection_linear_one_worker_s": projection_linear,
        "encode_floor": floor,
        "level": {"s_two_workers_max_s": LEVEL_DESIGN_S, "workers": LEVEL_WORKERS, "measured_s": s_two,
                  "met": (s_two is not None and s_two <= LEVEL_DESIGN_S)},
    }


# --------------------------------------------------------------------------------------------------- rendering
def _h(s: float | None) -> str:
    return "n/a" if s is None else f"{s:,.0f} s ({s / 3600:.1f} h)"


def _f(v: float | None, fmt: str = ".2f") -> str:
    return "n/a" if v is None else format(v, fmt)


def render_section(d: dict[str, Any], generator: dict[str, Any]) -> list[str]:
    """The page's design section, from the part's JSON alone."""
    from benchmarks.common import md_table

    lines = ["## Design run cost: before and after the embedding store", ""]
    if d.get("status") != "ok":
        return lines + [f"absent: {d.get('reason')}", ""]
    if "runs" not in d:  # results of the earlier design part: one encoder setting at two sizes
        return lines + ["These results come from an earlier version of the design part (one encoder setting at two "
                        "haystack sizes, a line through them); run the command below again to measure before and "
                        "after the embedding store.", ""]
    rows = []
    for r in d["runs"]:
        st = steady(r)
        mean = sum(q["wall_s"] for q in st) / len(st) if st else None
        enc = sum(q["encoded"] for q in r["questions"]) / max(1, len(r["questions"]))
        new = sum(q["new_turns"] for q in r["questions"]) / max(1, len(r["questions"]))
        rows.append([r["sessions"], r["mode"], r["workers"], len(r["questions"]), len(st),
                     f"{r['turns_per_question']:.0f}", f"{new:.0f}", f"{enc:.0f}",
                     _f(mean), _f(sum(q["question_wall_s"] for q in st) / len(st) if st else None),
                     _f(r["setup_s"], ".1f"), _f(r.get("loading_s"), ".1f")])
    lines += [md_table(["sessions/question", "setting", "workers", "questions", "steady", "turns/question",
                        "new turns/question", "texts encoded/question", "wall s/question (steady)",
                        "question's own wall s", "setup s", "loading s"], rows), "",
              "*Steady* leaves out each process's first question (it loads the models). The wall per question is "
              "the time between two finished questions in the run's loop; *setup* is the time before the first "
              "question, *loading* the first question's time beyond the steady mean. With two workers only the "
              "question's own wall (inside its process) is meaningful, and it gives the speed-up below.", ""]
    fr = []
    for key, f in d["fits"].items():
        c = f["coef"]
        fr.append([key, f["n"], *(_f(c.get(t), ".4g") if t in c else "-" for t in TERMS["store"]), _f(f["r2"], ".3f")])
    lines += ["### Fit", "", md_table(["setting", "questions", "a (s)", "b (s/turn)", "c (s/turn^2)",
                                      "e (s/new turn)", "R^2"], fr), "",
              "Non-negative least squares over every steady question of the three sizes: wall = a + b·turns + "
              "c·turns² (+ e·new turns for the store, whose cold and warm runs tell the new turns' encoding apart). "
              "Per size, the fitted mean against the measured mean:", "",
              md_table(["setting", "sessions/question", "run", "measured s", "fitted s", "gap"],
                       [[k, r["sessions"], r["mode"], _f(r["measured_s"]), _f(r["fitted_s"]),
                         f"{r['gap']:+.1%}" if r["gap"] is not None else "n/a"]
                        for k, rs in d["residuals"].items() for r in rs]), ""]
    pr = []
    for key, by in d["projection"].items():
        for shape, p in by.items():
            pr.append([key, shape, f"{p['turns_per_question']:.0f}", f"{p['new_turns_share']:.0%}",
                       _f(p["per_question_s"], ".1f"), _h(p["one_worker_s"]), _h(p["two_workers_s"]),
                       _h(d["projection_linear_one_worker_s"].get(key, {}).get(shape))])
    sp = d["speedup_two_workers"]
    lines += ["### Projection", "", md_table(["setting", "shape", "turns/question", "new turns", "s/question",
                                             f"{d['shape_questions']} questions, 1 worker",
                                             "2 workers", "1 worker, linear fit"], pr), "",
              f"Projections, not measurements: {d['shape_questions']} generated questions of each shape, their "
              f"turns and new turns counted on the generator's first {_profiled(d)} questions (filler reuse "
              f"{generator['reuse']} from a pool of {generator['pool_size']}: the projection rests on these "
              "settings, not on the real S or M), the run's setup scaled by questions and its model loading once. "
              "Two workers: the per-question "
              f"part divided by the speed-up measured at {d['middle_sessions']} sessions per question (store "
              f"{_f(sp.get('store'))}, per-call {_f(sp.get('per-call'))}). The per-call projection leaves out the "
              "hits its per-process text caches get on recurring filler at S (an upper bound).", ""]
    lv = d["level"]
    lines += [f"Level: all {d['shape_questions']} S questions with every default arm in at most "
              f"{_h(lv['s_two_workers_max_s'])} with {lv['workers']} workers, projected for the store on a fresh "
              f"store: {_h(lv['measured_s'])}, **{'met' if lv['met'] else 'missed'}**.", ""]
    fl = d.get("encode_floor") or {}
    if fl:
        lines += ["### The store's encode pass against its floor", "",
                  md_table(["encoder", "texts encoded (cold run)", "texts/s in the run", "floor texts",
                            "texts/s alone (floor)", "run / floor"],
                           [[n, v["run_encoded"], _f(v["run_texts_per_s"], ".1f"), v["floor_texts"],
                             _f(v["floor_texts_per_s"], ".1f"), _f(v["run_over_floor"])] for n, v in fl.items()]),
                  "", "The floor: the same distinct texts (those of the largest size's turns and questions that its "
                  "cold run stored, found by their keys) encoded alone, one at a time, on one thread, with nothing "
                  "else running.", ""]
    return lines


def _profiled(d: dict[str, Any]) -> int:
    return next(iter(next(iter(d["projection"].values())).values()))["profiled_questions"]


def plot_level(ax: Any, d: dict[str, Any]) -> None:
    """The projected hours of all S questions per setting and worker count (hatched: projections), the level a
    line."""
    from benchmarks.plotting import PROJECTED, level_line

    if d.get("status") != "ok" or "runs" not in d:
        return
    names, vals, colors = [], [], []
    for key, color in (("per-call", "#c44e52"), ("store", "#4c72b0")):
        p = (d["projection"].get(key) or {}).get("S")
        if not p:
            continue
        for workers, v in ((1, p["one_worker_s"]), (2, p["two_workers_s"])):
            if v is not None:
                names.append(f"{key}\n{workers} worker{'s' if workers > 1 else ''}")
                vals.append(v / 3600)
                colors.append(color)
    ax.bar(names, vals, color=colors, **PROJECTED)
    for i, v in enumerate(vals):
        ax.annotate(f"{v:.1f} h", (i, v), xytext=(0, 3), textcoords="offset points", ha="center", fontsize=8)
    lv = d["level"]["s_two_workers_max_s"] / 3600
    level_line(ax, lv, f"level {lv:.0f} h (2 workers)")
    ax.set_ylim(0, max([*vals, lv]) * 1.18)
    ax.set_ylabel("hours (projected)")
    ax.legend(fontsize=8, loc="upper right")


def plot(ax: Any, d: dict[str, Any]) -> list[tuple[Any, list[float], list[float], list[str]]]:
    """The design panel: measured steady questions (wall against turns, per setting) and the projected S and M
    question of each serial setting (hollow, labelled); log-log."""
    labels: list[tuple[Any, list[float], list[float], list[str]]] = []
    if d.get("status") != "ok" or "runs" not in d:
        return labels
    colors = {"per-call": "#c44e52", "store-cold": "#4c72b0", "store-warm": "#55a868"}
    for mode in MODES:
        pts = [q for r in d["runs"] if r["mode"] == mode and r["workers"] == 1 for q in steady(r)]
        if pts:
            ax.plot([q["turns"] for q in pts], [q["wall_s"] for q in pts], ".", color=colors[mode], alpha=0.5,
                    label=f"{mode} (measured)")
    px, py, text = [], [], []
    for key, color in (("per-call", colors["per-call"]), ("store", colors["store-cold"])):
        for shape, p in (d["projection"].get(key) or {}).items():
            px.append(p["turns_per_question"])
            py.append(p["per_question_s"])
            text.append(f"{key} {shape}: {p['per_question_s']:,.0f} s")
            ax.plot([p["turns_per_question"]], [p["per_question_s"]], "o", mfc="white", mec=color)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("turns per question (log)")
    ax.set_ylabel("seconds per question (log)")
    ax.legend(fontsize=7, loc="upper left")
    labels.append((ax, px, py, text))
    return labels
