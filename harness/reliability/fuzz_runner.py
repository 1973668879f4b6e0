"""The fuzz target registry and runner.

:func:`targets` lists every target by name, in report order (Fractal, AgentFly, Tortoise, then the harness's own
loaders where their modules import); :func:`run_one` runs one input through a target in a fresh temporary folder
and classifies it; :func:`run_target` runs the specials and a seeded number of generated inputs through one target
and counts the outcomes (with the first failing inputs), keeping hypothesis's files where it is told
(:func:`hypothesis_home`).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.reliability import fuzz_agentfly, fuzz_fractal, fuzz_harness, fuzz_tortoise
from harness.reliability.fuzz_core import (
    OUTCOMES,
    Crash,
    FuzzInput,
    PartialWrite,
    Target,
    fuzz_inputs,
    special_inputs,
)


def targets() -> dict[str, Target]:
    """Every fuzz target by name (the LoCoMo target only when ``harness.workloads.locomo.load_locomo`` exists)."""
    t = [*fuzz_fractal.targets(), *fuzz_agentfly.targets(), *fuzz_tortoise.targets(), *fuzz_harness.targets()]
    return {x.name: x for x in t}


def run_one(target: Target, inp: FuzzInput) -> tuple[str, str]:
    """``(outcome, detail)`` of one input (a fresh temporary folder, removed afterwards)."""
    tmp = Path(tempfile.mkdtemp(prefix="memsim-fuzz-"))
    try:
        return target.run(inp, tmp), ""
    except PartialWrite as exc:
        return "partial_write", str(exc)
    except Crash as exc:
        return "crash", str(exc)
    except Exception as exc:  # noqa: BLE001 - an uncaught exception is exactly what the fuzzer looks for
        return "crash", f"uncaught {type(exc).__name__}: {str(exc)[:200]}"
    except RecursionError as exc:  # pragma: no cover - RecursionError is an Exception; kept for clarity
        return "crash", f"uncaught RecursionError: {exc}"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def hypothesis_home(directory: Path | None) -> Iterator[None]:
    """Point hypothesis's storage (``.hypothesis``: its unicode tables, and the example database when one is used)
    at ``directory`` for the duration; ``None`` leaves hypothesis's own choice (the current directory)."""
    if directory is None:
        yield
        return
    from hypothesis import configuration

    previous = configuration.storage_directory(intent_to_write=False).home_directory
    configuration.set_hypothesis_home_dir(directory)
    try:
        yield
    finally:
        configuration.set_hypothesis_home_dir(previous)


def run_target(name: str, examples: int, seed: int = 0, *, specials: bool = True,
               skip_specials: tuple[str, ...] = (), storage_dir: Path | None = None) -> dict[str, Any]:
    """Run the specials (when asked; minus the families in ``skip_specials``) and ``examples`` generated inputs
    through one target. ``storage_dir`` is where hypothesis keeps its files (``memsim fuzz`` passes a temporary
    folder of the run); ``None`` leaves them where hypothesis puts them by default (``./.hypothesis``)."""
    from hypothesis import HealthCheck, Phase, given, settings

    target = targets()[name]
    counts: Counter = Counter()
    families: dict[str, Counter] = {}
    failures: list[dict[str, str]] = []
    t0 = time.perf_counter()

    def record(inp: FuzzInput) -> None:
        outcome, detail = run_one(target, inp)
        counts[outcome] += 1
        families.setdefault(inp.family, Counter())[outcome] += 1
        if outcome in ("crash", "partial_write") and len(failures) < 10:
            failures.append({"outcome": outcome, "input": repr(inp), "detail": detail})

    if specials:
        for inp in special_inputs(target.seed_doc, target.jsonl):
            if inp.family not in skip_specials:
                record(inp)

    if examples > 0:
        from hypothesis import seed as with_seed

        @with_seed(seed)
        @settings(max_examples=examples, database=None, deadline=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(fuzz_inputs(target.seed_doc, target.keys, jsonl=target.jsonl, words=target.words))
        def body(inp: FuzzInput) -> None:
            record(inp)

        with hypothesis_home(storage_dir):
            body()
    return {"target": name, "loader": target.loader, "documented": target.documented,
            "examples": sum(counts.values()), "outcomes": {o: counts.get(o, 0) for o in OUTCOMES},
            "families": {f: dict(c) for f, c in sorted(families.items())}, "failures": failures,
            "seconds": round(time.perf_counter() - t0, 2)}
