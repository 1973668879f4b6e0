"""Where a LoCoMo design worker's memory goes: resident memory per arm and stage, re-runnable.

``python -m benchmarks.arm_memory --conversation conv-41 --out DIR`` runs one LoCoMo conversation (or several,
``conv-42,conv-26``: one after the other, as a worker that is handed two) through the selected arms in this
process exactly as one worker of ``memsim bench locomo`` does (the bench's own
``_one_conversation``: its encoder setting, ``--embed store`` by default on a fresh store unless ``--embed-store``
names one, the others of the file as PM's training
conversations), and reads this process's memory from Linux's ``/proc/self`` at every stage boundary of every arm
(``build``, ``ingest``, ``stored``, ``deliver``, ``close``) and, between boundaries, every ``--every`` seconds from a
sampling thread (the stage's peak). It writes ``arm-memory.{json,md}``.

What each number counts (``/proc/self/status`` and ``/proc/self/smaps_rollup``):

- ``rss``: ``VmRSS``, every resident page mapped by the process. It is what ``memsim bench locomo`` sums over the
  parent and its workers for its peak (``benchmarks.locomo._RssSampler``), so a page shared by two processes is
  counted twice there.
- ``anon``: ``RssAnon``, private memory (the Python heap, torch tensors, Kuzu's buffer pool, numpy arrays).
- ``file``: ``RssFile``, pages of mapped files: shared libraries (torch's are the bulk) and the embedding store's
  segments, which every process maps read-only from the same files. These pages are shared between processes by
  the kernel but counted in full in each process's ``VmRSS``.
- ``pss``: ``Pss`` of ``smaps_rollup``, each page divided by the number of processes mapping it: the sum of the
  processes' PSS is the memory they take together.
- ``hwm``: ``VmHWM``, the process's peak ``VmRSS`` so far.

Models loaded by the process are counted by :func:`models_loaded` (the torch modules reachable from the encoders
harness, AgentFly and Tortoise keep, with their parameter bytes), so a table row says how many MiniLM copies were
resident at that boundary.
"""

from __future__ import annotations

import argparse
import gc
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.common import machine_description, md_table, write_results
from harness.workloads.arms import ArmSpec, build_arm

NAME = "arm-memory"
STAGES = ("build", "ingest", "stored", "deliver", "close")
_STATUS = {"VmRSS": "rss", "RssAnon": "anon", "RssFile": "file", "RssShmem": "shmem", "VmHWM": "hwm"}


def read_memory() -> dict[str, int]:
    """This process's memory in bytes: ``rss``, ``anon``, ``file``, ``shmem``, ``hwm`` (``/proc/self/status``) and
    ``pss`` (``/proc/self/smaps_rollup``); keys missing where ``/proc`` lacks them."""
    out: dict[str, int] = {}
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                key = line.split(":", 1)[0]
                if key in _STATUS:
                    out[_STATUS[key]] = int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        with open("/proc/self/smaps_rollup", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    out["pss"] = int(line.split()[1]) * 1024
    except OSError:
        pass
    return out


def models_loaded() -> list[dict[str, Any]]:
    """Every live ``torch.nn.Module`` that is no submodule of another live one (the models a process holds), with
    its class and parameter bytes, found by the garbage collector; empty when torch was never imported."""
    if "torch" not in sys.modules:
        return []
    import warnings

    import torch

    with warnings.catch_warnings():  # isinstance() on torch's deprecated module aliases warns
        warnings.simplefilter("ignore")
        mods = [o for o in gc.get_objects() if isinstance(o, torch.nn.Module)]
    inner = {id(m) for o in mods for m in o.modules() if m is not o}
    out = []
    for m in mods:
        if id(m) in inner:
            continue
        n = sum(p.numel() * p.element_size() for p in m.parameters())
        if n:
            out.append({"class": type(m).__name__, "param_bytes": n})
    return out


class Sampler:
    """Peak ``VmRSS`` between two :meth:`mark` calls, sampled every ``every_s`` seconds by a daemon thread."""

    def __init__(self, every_s: float = 0.05) -> None:
        self.every_s = every_s
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.peak = max(self.peak, read_memory().get("rss", 0))

    def mark(self) -> int:
        """The peak since the last mark (the current value included), and start a new interval."""
        now = read_memory().get("rss", 0)
        peak, self.peak = max(self.peak, now), now
        return peak

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


_SAMPLER: list[Sampler] = []
_ROWS: list[dict[str, Any]] = []
_CONV: list[str] = [""]


@contextmanager
def _stage(arm: str, stage: str, *, since_last: bool = False) -> Iterator[None]:
    """Record the memory after the body; the stage's peak covers the body (``since_last``: everything since the
    previous record, for the probes, which run between two calls of the arm)."""
    if _SAMPLER and not since_last:
        _SAMPLER[0].mark()
    try:
        yield
    finally:
        peak = _SAMPLER[0].mark() if _SAMPLER else 0
        _ROWS.append({"conversation": _CONV[0], "arm": arm, "stage": stage, "peak_rss": peak, **read_memory(),
                      "models": len(models_loaded()) if stage in ("ingest", "close") else None})


class MeasuredArm:
    """An arm behind the same protocol that records the process's memory after each of its stages."""

    def __init__(self, ctx: Any, inner: str | ArmSpec = "") -> None:
        self.label = inner.name if isinstance(inner, ArmSpec) else inner
        self.name = self.label
        with _stage(self.label, "build"):
            self.arm = build_arm(inner, ctx)
        self.rows = tuple(self.arm.rows)
        self._delivered = False

    def ingest(self, conversation: Any) -> None:
        with _stage(self.label, "ingest"):
            self.arm.ingest(conversation)

    def stored(self) -> frozenset[str]:
        with _stage(self.label, "stored"):
            return self.arm.stored()

    def deliver(self, probe: Any) -> Any:
        return self.arm.deliver(probe)

    def close(self) -> None:
        with _stage(self.label, "deliver", since_last=True):  # every probe delivered: what the probes left
            pass
        with _stage(self.label, "close"):
            self.arm.close()
            gc.collect()


def measured_spec(entry: str | ArmSpec) -> ArmSpec:
    name = entry.name if isinstance(entry, ArmSpec) else entry
    return ArmSpec(name, "design", f"{name} (memory measured)", __name__, "MeasuredArm", {"inner": entry})


def measure(conversation: str, *, data: Path | None = None, arms: str | None = None, embed: str = "store",
            embed_store: Path | None = None, quick: bool = False, seed: int = 0, every_s: float = 0.05,
            work_root: Path | None = None) -> dict[str, Any]:
    """The LoCoMo conversation(s) named in ``conversation`` (comma-separated) through the selected arms in this
    process, one after the other, as one bench worker runs them; the memory table (one row per conversation, arm
    and stage) and the process's peak."""
    import shutil
    import tempfile

    from benchmarks import locomo as L
    from benchmarks.common import set_torch_threads
    from harness.store_encoders import StoreSession
    from harness.workloads.locomo import load_locomo, resolve_locomo_path, select_conversations

    set_torch_threads(1)
    base = read_memory()
    src = resolve_locomo_path(data)
    loaded = load_locomo(src)
    convs = select_conversations(loaded, [c.strip() for c in conversation.split(",") if c.strip()])
    if quick:
        convs = [L.quick_slice(c) for c in convs]
    names = L.select_arms(arms, None, quick=quick)
    root = Path(tempfile.mkdtemp(prefix="memsim-arm-memory-", dir=work_root))
    # without a folder, a fresh store in the work folder (removed after): the measurement does not depend on, or
    # write into, the user's shared store
    store = StoreSession(embed_store or root / "embed-store").config() if embed == "store" else None
    _ROWS.clear()
    sampler = Sampler(every_s)
    _SAMPLER[:] = [sampler]
    t0 = time.perf_counter()
    status: dict[str, Any] = {}
    try:
        for conv in convs:
            _CONV[:] = [conv.sample_id]
            job = {"conv": conv, "names": [measured_spec(n) for n in names], "work_root": str(root),
                   "k_values": (4, 8), "others": tuple(c for c in loaded if c.sample_id != conv.sample_id),
                   "lm": None, "lm_base": None, "quick": quick, "seed": seed, "share": True, "in_worker": False,
                   "embed": embed, "store": store}
            got = L._one_conversation(job)
            status[conv.sample_id] = {a: i["status"] for a, i in got["result"]["arms"].items()}
            del got
            gc.collect()
    finally:
        sampler.stop()
        _SAMPLER.clear()
        shutil.rmtree(root, ignore_errors=True)
    end = read_memory()
    return {"name": NAME, "conversation": ",".join(c.sample_id for c in convs),
            "n_turns": sum(len(c.turns()) for c in convs), "embed": embed,
            "arms": [n if isinstance(n, str) else n.name for n in names], "arm_status": status,
            "baseline": base, "end": end, "rows": list(_ROWS), "models_at_end": models_loaded(),
            "peak_rss": max([r["peak_rss"] for r in _ROWS] + [end.get("hwm", 0)]),
            "wall_s": time.perf_counter() - t0,
            "meta": {"machine": machine_description(), "seeds": {"seed": seed}, "quick": quick,
                     "wall_s": time.perf_counter() - t0}}


def _mib(b: int | None) -> str:
    return "" if b is None else f"{b / 2**20:.0f}"


def render_markdown(payload: dict[str, Any]) -> str:
    """``arm-memory.md``: the memory after each arm's stage (MiB) and the stage's sampled peak."""
    rows = [[r.get("conversation", ""), r["arm"], r["stage"], *(_mib(r.get(k)) for k in ("peak_rss", "rss", "anon",
                                                                                      "file", "pss")),
             "" if r.get("models") is None else r["models"]] for r in payload["rows"]]
    b, e = payload["baseline"], payload["end"]
    models = ", ".join(f"{m['class']} {m['param_bytes'] / 2**20:.0f} MiB" for m in payload["models_at_end"])
    return "\n".join([
        f"# Memory of one LoCoMo worker ({payload['conversation']}, {payload['n_turns']} turns, embed "
        f"`{payload['embed']}`)", "",
        f"Before loading anything: VmRSS {_mib(b.get('rss'))} MiB; at the end {_mib(e.get('rss'))} MiB "
        f"(anonymous {_mib(e.get('anon'))}, file-backed {_mib(e.get('file'))}, PSS {_mib(e.get('pss'))}); the "
        f"process's peak VmRSS {_mib(payload['peak_rss'])} MiB. Models resident at the end: {models or 'none'}.", "",
        md_table(["conversation", "arm", "after stage", "stage peak VmRSS", "VmRSS", "anonymous", "file-backed",
                  "PSS", "models"], rows), "",
        "MiB. VmRSS counts shared pages (libraries, the embedding store's mapped segments) in full in every "
        "process; PSS divides them among the processes that map them.", ""])


def main(argv: list[str] | None = None) -> list[Path]:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.arm_memory",
                                 description="Where a LoCoMo design worker's memory goes, per arm and stage.")
    ap.add_argument("--conversation", default="conv-41", help="the LoCoMo conversation (default conv-41)")
    ap.add_argument("--data", type=Path, default=None, help="LoCoMo file or folder (default: the fetched one)")
    ap.add_argument("--arms", default=None, help="arms as for `memsim bench locomo --arms` (default: all)")
    ap.add_argument("--embed", default="store", choices=("store", "per-call"), help="the bench's encoder setting")
    ap.add_argument("--embed-store", type=Path, default=None,
                    help="the embedding store's folder (default: a fresh one, removed after the run)")
    ap.add_argument("--quick", action="store_true", help="the conversation cut as --quick cuts it")
    ap.add_argument("--every", type=float, default=0.05, help="sampling interval in seconds (0.05)")
    ap.add_argument("--out", type=Path, required=True, help="folder for arm-memory.{json,md}")
    a = ap.parse_args(argv)
    payload = measure(a.conversation, data=a.data, arms=a.arms, embed=a.embed, embed_store=a.embed_store,
                      quick=a.quick, every_s=a.every)
    paths = write_results(a.out, NAME, payload, render_markdown, None)
    print(render_markdown(payload))
    for p in paths:
        print(f"wrote {p}")
    return paths


if __name__ == "__main__":
    main()
