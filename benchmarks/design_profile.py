"""Where one LongMemEval design question's time goes: per arm and phase, re-runnable.

``python -m benchmarks.design_profile --data FILE --questions 1 --out DIR`` runs the first question(s) of a
LongMemEval file through every selected arm exactly as ``memsim bench longmemeval`` does (the bench's own
``one_question``, its PM training once per run, its encoder setting: ``--embed per-call`` or ``store``), with
explicit timers at the seams where the time goes, and writes ``design-profile.{json,md}`` through
``benchmarks.common.write_results``.

Attribution is by **exclusive phase timers**, not by a sampling or tracing profiler: each seam (an encoder's
``encode``, a model load, a Kuzu statement, a search call, a prompt renderer, the harness's provenance matching)
is wrapped while the profile runs, and the time between two timer events is charged to the innermost open phase.
So the query encoding inside a search counts as *encode*, not twice, and whatever no seam covers stays *rest*
(the arm's own Python, the adapter, the runner). Why not cProfile: it slows the many small Python calls of the
Kuzu wrapper and the tokenizer far more than the torch kernels, so it would misstate the very shares it should
measure, and its per-module self time charges a torch matmul inside a search to torch. The timers cost one
``perf_counter`` pair per seam call. Phases:

- ``load``: loading a model (the sentence-transformers and transformers MiniLM encoders, Tortoise's MiniLM,
  AgentFly's NP encoder, the PM classifier checkpoint);
- ``encode``: an encoder's forward passes (calls and texts counted per encoder), the embedding store's reads
  beside them as ``store`` (with ``--embed store``);
- ``kuzu-write`` / ``kuzu-read``: Kuzu statements, split by the store's own mutating-statement rule;
- ``search``: Tortoise's hybrid search, volunteer hook and source-session expansion, NP's index search, PM's
  scoring, the baselines' scoring;
- ``render``: prompt and block rendering (AgentFly's example prompts, Fractal's summary and model-visible text,
  Tortoise's pool block, a baseline's block);
- ``provenance``: the harness matching delivered text back to turn ids (not the design's cost);
- ``train``: PM's one training of the run (charged to arm ``pm``, stage ``train``);
- ``rest``: everything else inside the arm's stage.

Stages per arm: ``build`` (constructor), ``ingest``, ``deliver``, ``stored``, ``close``.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import machine_description, md_table, write_results
from harness.workloads.arms import ArmSpec, build_arm

NAME = "design-profile"
PHASES = ("load", "encode", "store", "kuzu-write", "kuzu-read", "search", "render", "provenance", "train", "rest")
STAGES = ("build", "ingest", "deliver", "stored", "close", "train")


@dataclass
class PhaseTimer:
    """Exclusive time per (arm, stage, phase): the time between two events goes to the innermost open phase."""

    arm: str = "(run)"
    stage: str = "rest"
    stack: list[str] = field(default_factory=list)
    mark: float = 0.0
    seconds: dict[tuple[str, str, str], float] = field(default_factory=dict)
    calls: dict[tuple[str, str, str], int] = field(default_factory=dict)
    texts: dict[tuple[str, str, str], int] = field(default_factory=dict)

    def _charge(self) -> float:
        now = time.perf_counter()
        if self.stack:
            key = (self.arm, self.stage, self.stack[-1])
            self.seconds[key] = self.seconds.get(key, 0.0) + (now - self.mark)
        self.mark = now
        return now

    def push(self, phase: str) -> None:
        self._charge()
        self.stack.append(phase)

    def pop(self) -> None:
        self._charge()
        self.stack.pop()

    def count(self, label: str, n_texts: int) -> None:
        key = (self.arm, self.stage, label)
        self.calls[key] = self.calls.get(key, 0) + 1
        self.texts[key] = self.texts.get(key, 0) + n_texts

    @contextlib.contextmanager
    def stage_of(self, arm: str, stage: str) -> Iterator[None]:
        saved = (self.arm, self.stage, self.stack)
        self._charge()
        self.arm, self.stage, self.stack = arm, stage, ["rest"]
        try:
            yield
        finally:
            self._charge()
            self.arm, self.stage, self.stack = saved


TIMER = PhaseTimer()


def _n_texts(args: tuple[Any, ...], index: int = 0) -> int:
    if len(args) <= index:
        return 0
    x = args[index]
    if isinstance(x, str):
        return 1
    shape = getattr(x, "shape", None)
    if shape is not None and len(shape) >= 1:
        return int(shape[0])
    try:
        return len(x)
    except TypeError:
        return 1


def _wrapper(fn: Callable[..., Any], phase: str | Callable[[tuple[Any, ...]], str], label: str | None,
             count_at: int | None) -> Callable[..., Any]:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        ph = phase(args) if callable(phase) else phase
        if label is not None:
            TIMER.count(label, _n_texts(args, count_at) if count_at is not None else 1)
        TIMER.push(ph)
        try:
            return fn(*args, **kwargs)
        finally:
            TIMER.pop()

    wrapped.__wrapped__ = fn  # type: ignore[attr-defined]
    return wrapped


class _Patches:
    """Replace functions and methods for the length of a profile, everywhere they are bound (a function imported by
    name into another module is patched there too), and put every one back afterwards."""

    def __init__(self) -> None:
        self.undo: list[tuple[Any, str, Any]] = []

    def method(self, owner: Any, attr: str, phase: Any, label: str | None = None, count_at: int | None = None
               ) -> None:
        fn = owner.__dict__.get(attr)
        if fn is None:
            return
        self.undo.append((owner, attr, fn))
        if isinstance(fn, classmethod | staticmethod):  # wrap the function inside, keep the binding kind
            setattr(owner, attr, type(fn)(_wrapper(fn.__func__, phase, label, count_at)))
        else:
            setattr(owner, attr, _wrapper(fn, phase, label, count_at))

    def function(self, module: Any, attr: str, phase: Any, label: str | None = None, count_at: int | None = None
                 ) -> None:
        fn = getattr(module, attr, None)
        if fn is None:
            return
        new = _wrapper(fn, phase, label, count_at)
        for mod in list(sys.modules.values()):
            d = getattr(mod, "__dict__", None)
            if isinstance(d, dict):
                for k, v in list(d.items()):
                    if v is fn:
                        self.undo.append((mod, k, fn))
                        setattr(mod, k, new)

    def restore(self) -> None:
        for owner, attr, fn in reversed(self.undo):
            setattr(owner, attr, fn)
        self.undo.clear()


def _kuzu_phase(mutating: re.Pattern[str]) -> Callable[[tuple[Any, ...]], str]:
    def phase(args: tuple[Any, ...]) -> str:
        q = args[1] if len(args) > 1 else ""
        return "kuzu-write" if isinstance(q, str) and mutating.search(q) else "kuzu-read"

    return phase


@contextlib.contextmanager
def seams() -> Iterator[PhaseTimer]:
    """Wrap every seam the profile times (imports the modules it patches) and yield the timer."""
    import agentfly_sim.classifier as af_cls
    import agentfly_sim.embedding as af_emb
    import agentfly_sim.prompts as af_prompts
    import agentfly_sim.training as af_train
    import fractal_sim.agent as fr_agent
    import fractal_sim.session as fr_session
    import harness.embedding as h_emb
    import harness.store_encoders as h_senc
    import harness.workloads.agentfly_arm as a_af
    import harness.workloads.arm_text as a_text
    import harness.workloads.baselines as a_base
    import harness.workloads.tortoise_arm as a_tor
    import tortoise_sim.connection as t_conn
    import tortoise_sim.embed as t_emb
    import tortoise_sim.sdk as t_sdk

    p = _Patches()
    try:
        p.method(h_emb.MeanPoolingEncoder, "__init__", "load")
        p.method(h_emb.PoolerEncoder, "__init__", "load")
        p.method(h_emb.MeanPoolingEncoder, "encode", "encode", "encode minilm-mean", 1)
        p.method(h_emb.PoolerEncoder, "encode", "encode", "encode minilm-pooler", 1)
        p.method(t_emb.MiniLMEncoder, "_load", "load")
        p.method(t_emb.MiniLMEncoder, "encode", "encode", "encode tortoise-minilm", 1)
        p.function(af_emb, "load_np_encoder", "load")
        p.function(af_emb, "embed_texts", "encode", "encode np-pooler (batch)", 0)
        p.function(af_emb, "embed_one", "encode", "encode np-pooler (one)", 0)
        p.method(af_cls.CaseRetriever, "__init__", "load")
        p.method(af_cls.MemoryRetrieverClassifier, "encode", "encode", "encode pm-cls", 1)
        p.function(af_train, "train", "train")
        p.method(t_conn._CountingConnection, "execute", _kuzu_phase(t_conn._MUTATING), "kuzu statements", None)
        for m in ("search_points", "hook_volunteer_turn", "expand_pool", "hook_session_start"):
            p.method(t_sdk.Tortoise, m, "search")
        p.method(af_emb.CachedKeyIndex, "search", "search")
        p.method(af_cls.CaseRetriever, "retrieve", "search")
        p.method(a_af.MeanPoolSelector, "retrieve", "search")
        for cls in (a_base.BM25Arm, a_base.MeanPoolArm, a_base.HybridArm):
            p.method(cls, "_scores", "search")
        p.method(a_base._TurnArm, "_block", "render")
        p.function(af_prompts, "build_np_prompt_from_cases", "render")
        p.function(af_prompts, "build_pm_prompt_from_cases", "render")
        p.function(fr_session, "render_session_summary", "render")
        p.method(fr_agent.AgentCall, "model_visible_text", "render")
        p.method(a_tor.TortoiseArm, "_pool_delivery", "render")
        p.function(a_text, "ids_in_text", "provenance")
        p.method(a_tor.TortoiseArm, "_ids", "provenance")
        p.method(h_senc.StoreEncoder, "encode", "store", "store reads", 1)
        yield TIMER
    finally:
        p.restore()


class ProfiledArm:
    """An arm behind the same protocol that charges each of its calls to a stage of the named arm."""

    def __init__(self, ctx: Any, inner: str | ArmSpec = "") -> None:
        self.label = inner.name if isinstance(inner, ArmSpec) else inner
        self.name = self.label
        with TIMER.stage_of(self.label, "build"):
            self.arm = build_arm(inner, ctx)
        self.rows = tuple(self.arm.rows)

    def ingest(self, conversation: Any) -> None:
        with TIMER.stage_of(self.label, "ingest"):
            self.arm.ingest(conversation)

    def deliver(self, probe: Any) -> Any:
        with TIMER.stage_of(self.label, "deliver"):
            return self.arm.deliver(probe)

    def stored(self) -> frozenset[str]:
        with TIMER.stage_of(self.label, "stored"):
            return self.arm.stored()

    def close(self) -> None:
        with TIMER.stage_of(self.label, "close"):
            self.arm.close()


def profiled_spec(entry: str | ArmSpec) -> ArmSpec:
    name = entry.name if isinstance(entry, ArmSpec) else entry
    return ArmSpec(name, "design", f"{name} (profiled)", __name__, "ProfiledArm", {"inner": entry})


# ------------------------------------------------------------------------------------------------------------ run
def profile(data: Path, *, questions: int = 1, start: int = 0, arms: str | None = None, embed: str = "per-call",
            seed: int = 0, quick: bool = False, echo: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Profile ``questions`` question(s) of ``data`` from the ``start``-th through the selected arms (``None``: the
    bench's default arms), one process, with the bench's encoder setting ``embed``; returns the JSON payload."""
    import benchmarks.longmemeval as lme
    from benchmarks.common import set_torch_threads
    from harness.workloads.arms import select_arms
    from harness.workloads.longmemeval import iter_questions, resolve_longmemeval_path

    set_torch_threads(1)
    src = resolve_longmemeval_path(data)
    names = select_arms(arms, None, default=",".join(lme.default_arms()))
    arm_names = [n if isinstance(n, str) else n.name for n in names]
    TIMER.seconds.clear()
    TIMER.calls.clear()
    TIMER.texts.clear()
    t0 = time.perf_counter()
    walls: list[dict[str, Any]] = []
    from harness.store_encoders import StoreSession

    store = StoreSession().config() if embed == "store" else None
    with tempfile.TemporaryDirectory(prefix="memsim-profile-") as tmp, seams(), \
            lme.embedding_mode(embed, True, store):
        pm_model = None
        if "pm" in arm_names:
            _n, train = lme.first_pass(src, start + questions, None, quick, True)
            with TIMER.stage_of("pm", "train"):
                pm_model, pm = lme._train_pm(train, Path(tmp), seed, quick, None)
            if pm_model is None and echo:
                echo(f"PM not trained: {pm.get('unavailable')}")
        run_names = [n for n in names if not (pm_model is None and (n if isinstance(n, str) else n.name) == "pm")]
        base = {"names": [profiled_spec(n) for n in run_names], "work_root": tmp, "k_values": (4, 8),
                "quick": quick, "seed": seed, "pm_model": pm_model, "share": True, "embed": embed, "store": store,
                "lm": None,
                "lm_base": None, "reader_prompt": "con", "judge_lm": None, "judge_lm_base": None,
                "in_worker": False}
        for q in iter_questions(src, limit=start + questions):
            if q.index < start:
                continue
            if echo:
                echo(f"question {q.question_id}: {len(q.sessions)} sessions, {q.n_turns} turns")
            got = lme.one_question({**base, "question": q})
            walls.append({"question_id": q.question_id, "wall_s": got["wall_s"], "n_turns": q.n_turns,
                          "n_sessions": len(q.sessions),
                          "arms": {a: {k: v for k, v in i.items() if k in ("status", "ingest_ms", "message")}
                                   for a, i in got["arms"].items()}})
    total = time.perf_counter() - t0
    payload = _payload(src, walls, total, arm_names, embed, seed, quick)
    payload["embed_store"] = store
    return payload


def _payload(src: Path, walls: list[dict[str, Any]], total: float, arm_names: list[str], embed: str, seed: int,
             quick: bool) -> dict[str, Any]:
    from harness.runs import run_record

    by_arm: dict[str, Any] = {}
    for (arm, stage, phase), s in TIMER.seconds.items():
        a = by_arm.setdefault(arm, {"total_s": 0.0, "stages": {}, "phases": {}, "counts": {}})
        a["total_s"] += s
        a["stages"][stage] = a["stages"].get(stage, 0.0) + s
        a["phases"][phase] = a["phases"].get(phase, 0.0) + s
        st = a.setdefault("by_stage", {}).setdefault(stage, {})
        st[phase] = st.get(phase, 0.0) + s
    for (arm, _stage, label), n in TIMER.calls.items():
        c = by_arm.setdefault(arm, {"total_s": 0.0, "stages": {}, "phases": {}, "counts": {}})["counts"]
        got = c.setdefault(label, {"calls": 0, "texts": 0})
        got["calls"] += n
        got["texts"] += TIMER.texts.get((arm, _stage, label), 0)
    phases = {ph: sum(a["phases"].get(ph, 0.0) for a in by_arm.values()) for ph in PHASES}
    return {"name": NAME, "data": {"file": src.name}, "embed": embed, "arms_selected": arm_names,
            "questions": walls, "total_s": total, "accounted_s": sum(a["total_s"] for a in by_arm.values()),
            "phases": phases, "arms": dict(sorted(by_arm.items(), key=lambda kv: -kv[1]["total_s"])),
            "meta": {"machine": machine_description(), "seeds": {"seed": seed}, "quick": quick, "wall_s": total},
            "run": run_record(total, sys.argv)}


def _pct(x: float, whole: float) -> str:
    return f"{100 * x / whole:.0f}%" if whole else "n/a"


def _tables(payload: dict[str, Any], level: str = "##") -> list[str]:
    """The profile's tables: per phase (all arms), per arm (stages and phases), counted calls."""
    total = payload["total_s"]
    qs = payload["questions"]
    out = [f"Data `{payload['data']['file']}`; " + "; ".join(
               f"{q['question_id']}: {q['n_sessions']} sessions, {q['n_turns']} turns, {q['wall_s']:.1f} s"
               for q in qs) + f". Profile wall {total:.1f} s (PM training and model loads included).", "",
           f"{level} Per phase, all arms", "",
           md_table(["phase", "seconds", "share"], [[ph, f"{s:.2f}", _pct(s, total)]
                                                   for ph, s in payload["phases"].items() if s > 0]), "",
           f"{level} Per arm", ""]
    head = ["arm", "total s", *STAGES, *PHASES]
    table = []
    for arm, a in payload["arms"].items():
        table.append([arm, f"{a['total_s']:.2f}"] + [f"{a['stages'].get(s, 0.0):.2f}" for s in STAGES]
                     + [f"{a['phases'].get(ph, 0.0):.2f}" for ph in PHASES])
    out += [md_table(head, table), "",
            f"{level} Counted calls (encoder calls with the texts they encoded, store reads, Kuzu statements)", ""]
    rows = [[arm, label, c["calls"], c["texts"]] for arm, a in payload["arms"].items()
            for label, c in sorted(a["counts"].items())]
    out += [md_table(["arm", "what", "calls", "texts"], rows), ""]
    m = payload["meta"]["machine"]
    out.append(f"_Run {m['date_utc']} on {m['cpu']} ({m['affinity_cpus']} usable cores), torch threads "
               f"{m['torch_threads']}._")
    return out


def render_markdown(payload: dict[str, Any]) -> str:
    """``design-profile.md`` from the payload: per arm its stages and phases, encode calls and texts."""
    qs = payload["questions"]
    title = f"# Where a design question's time goes ({len(qs)} question(s), embed `{payload['embed']}`)"
    return "\n".join([title, "", *_tables(payload)]) + "\n"


def profile_s_question(tmp: Path, *, seed: int = 0, arms: str | None = None, embed: str = "store",
                       n_file: int = 30) -> dict[str, Any]:
    """One generated S-shape question (the first of an ``n_file``-question file outside PM's training split, so
    PM, trained on the file's split, runs on it) profiled with ``embed``; with the store, twice on a fresh store
    (``cold``: a first run, ``warm``: a second run on the same data)."""
    import os

    import benchmarks.longmemeval as lme
    from benchmarks.worlds import longmemeval as gen

    data = Path(tmp) / "profile-s.json"
    desc = gen.write_file(data, n_file, seed=seed)
    start = next((i for i, q in enumerate(gen.generate(n_file, seed=seed))
                  if not lme.pm_training_split(q["question_id"])), 0)
    runs = ("cold", "warm") if embed == "store" else ("per-call",)
    saved = os.environ.get("MEMSIM_EMBED_STORE")
    os.environ["MEMSIM_EMBED_STORE"] = str(Path(tmp) / "profile-store")
    try:
        got = {r: profile(data, questions=1, start=start, arms=arms, embed=embed, seed=seed) for r in runs}
    finally:
        if saved is None:
            os.environ.pop("MEMSIM_EMBED_STORE", None)
        else:
            os.environ["MEMSIM_EMBED_STORE"] = saved
    return {"data": desc["label"], "embed": embed, "runs": got}


def render_section(prof: dict[str, Any]) -> list[str]:
    """The scale page's section for :func:`profile_s_question`'s result."""
    out = [f"## Where one S-shape design question's time goes (embed `{prof['embed']}`)", "",
           f"{prof['data']}; `python -m benchmarks.design_profile` (explicit timers per arm and phase)."
           + (" Twice on a fresh embedding store: *cold* is a first run, *warm* a second run on the same data."
              if len(prof["runs"]) > 1 else ""), ""]
    for name, payload in prof["runs"].items():
        out += [f"### {name}", "", *_tables(payload, "####"), ""]
    return out


def main(argv: list[str] | None = None) -> list[Path]:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.design_profile",
                                 description="Where one LongMemEval design question's time goes, per arm and phase.")
    ap.add_argument("--data", type=Path, required=True, help="a LongMemEval JSON file (real or generated)")
    ap.add_argument("--questions", type=int, default=1, help="how many questions (1)")
    ap.add_argument("--start", type=int, default=0, help="the first question's position in the file (0)")
    ap.add_argument("--arms", default=None, help="arms as for `memsim bench longmemeval --arms` (default: all)")
    ap.add_argument("--embed", default="per-call", choices=("per-call", "store"),
                    help="the bench's encoder setting: per-call (the earlier caches) or store (the embedding store)")
    ap.add_argument("--out", type=Path, required=True, help="folder for design-profile.{json,md}")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.questions < 1:
        ap.error("--questions must be at least 1")
    payload = profile(args.data, questions=args.questions, start=args.start, arms=args.arms, embed=args.embed, seed=args.seed,
                      echo=lambda s: print(s, file=sys.stderr, flush=True))
    paths = write_results(args.out, NAME, payload, render_markdown, None)
    print(render_markdown(payload))
    for p in paths:
        print(f"wrote {p}")
    return paths


if __name__ == "__main__":
    main()
