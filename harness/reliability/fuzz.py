"""Fuzzed loaders: one hypothesis target per loader, each ending in a documented outcome.

Where the parts are: this module is the fuzzer's public face (every name below is importable from here) and its
report (:func:`summarize`, :func:`code_version`, :func:`write_report`, :func:`render_md`); the inputs, outcome
checks and :class:`Target` are in ``fuzz_core``, the targets per design in ``fuzz_fractal``, ``fuzz_agentfly``,
``fuzz_tortoise`` and ``fuzz_harness``, the registry and runner (:func:`targets`, :func:`run_one`,
:func:`run_target`) in ``fuzz_runner``. A new loader gets its target in its design's module.

Every target takes a :class:`FuzzInput` (file bytes, or a directory standing where the file should be), puts it where
the loader reads it (a fresh temporary folder per example), runs the loader the way memsim's CLI does and returns one
outcome class:

- ``accepted``: the input loaded (possibly to an empty result);
- ``skipped``: a documented faithful skip happened and was counted: the NP bank loader's ``[WARN] ... skipped``
  lines (AGF-05), Fractal's rejected session file shown as an empty session with a warning (spec 6.5, FRA-22), a
  corrupt spool entry discarded (spec 10.1 item 9), a hook that prints nothing (spec 7.1);
- ``rejected``: a documented failure: an exception of the target's listed types whose message names the file (and
  line where the format has lines), i.e. what the CLI prints as one ``error:`` line;
- ``crash``: anything else (an uncaught exception type, or a rejection that does not name the file): a bug;
- ``partial_write``: the loader left a file that is not a complete, consistent copy (a truncated backup, a spool
  meta that no longer parses, a new file where a read-only loader must write nothing): a bug.

Inputs (``fuzz_inputs``): arbitrary JSON values built around each loader's own keys (wrong types, missing fields,
NaN/Infinity, huge integers), truncations and byte insertions of a valid seed document (invalid UTF-8, control and
bidi characters), deep nesting, empty and whitespace-only files; :data:`SPECIALS` (a 20 MB line, a directory in place
of the file, 5,000-digit numbers, 100,000-deep nesting, ...) run first for every target.

``run_target(name, examples, seed)`` runs one target and returns counts per outcome plus the first failing inputs;
``memsim fuzz`` runs them all and writes ``<name>.{json,md}`` (default ``fuzz``) to its output folder, and keeps
hypothesis's own files (its unicode tables; no example database: ``database=None``) in a temporary folder of the run
rather than in the current directory (``run_target(..., storage_dir=...)``).

A CLI loader's error line is classified on its text with terminal escape codes removed (:func:`plain_text`): in a
terminal, rich colours the ``error:`` prefix (``NO_COLOR`` still leaves it bold), so the captured line starts with an
escape sequence rather than with ``error:``.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

from harness.reliability.fuzz_core import (
    BIG_LINE_BYTES,
    OUTCOMES,
    Crash,
    FuzzInput,
    PartialWrite,
    Target,
    fuzz_inputs,
    plain_text,
)
from harness.reliability.fuzz_core import special_inputs as _specials
from harness.reliability.fuzz_runner import hypothesis_home, run_one, run_target, targets

__all__ = ["OUTCOMES", "BIG_LINE_BYTES", "FuzzInput", "Crash", "PartialWrite", "Target", "fuzz_inputs", "plain_text",
           "targets", "run_one", "run_target", "hypothesis_home", "summarize", "code_version", "write_report",
           "render_md"]


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    total = Counter()
    for r in results:
        total.update(r["outcomes"])
    return {"targets": len(results), "examples": sum(r["examples"] for r in results),
            "outcomes": {o: total.get(o, 0) for o in OUTCOMES},
            "failing_targets": [r["target"] for r in results if r["outcomes"]["crash"] or r["outcomes"]["partial_write"]],
            "seconds": round(math.fsum(r["seconds"] for r in results), 1)}


def code_version() -> dict[str, Any]:
    """The git commit the run's code came from, and whether the working tree differed (``None`` outside git)."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "modified": None}
    if head.returncode != 0:
        return {"commit": None, "modified": None}
    return {"commit": head.stdout.strip(), "modified": bool(dirty.stdout.strip()) if dirty.returncode == 0 else None}


def write_report(results: list[dict[str, Any]], out_dir: Path, *, examples: int, seed: int, name: str = "fuzz",
                 planned: list[str] | None = None, command: str | None = None,
                 code: dict[str, Any] | None = None) -> list[Path]:
    """``<name>.json`` (every count, the first failing inputs) and ``<name>.md`` (one row per target), rendered
    from the same payload, each atomically (the JSON last). ``planned``: every target the run was asked for;
    ``command``: the command line that wrote the files; the payload's ``run`` block is
    :func:`harness.runs.run_record` (memsim version, commit, diff hash of the package code, wall time of the
    running ``owned_run``) with the date, Python and platform; ``code`` (the older :func:`code_version` block) is
    kept there when given."""
    import platform
    from datetime import UTC, datetime

    from harness.atomic import write_atomic
    from harness.runs import run_record

    out_dir.mkdir(parents=True, exist_ok=True)
    summary = summarize(results)
    planned = planned if planned is not None else [r["target"] for r in results]
    run = {**run_record(), "date_utc": datetime.now(UTC).isoformat(timespec="seconds"),
           "python": platform.python_version(), "platform": platform.platform()}
    if command is not None:
        run["command"] = command
    if code is not None:
        run["code"] = code
    payload = {"examples_per_target": examples, "seed": seed, "specials_per_target": len(_specials(b"{}", False)),
               "summary": summary, "targets": results, "targets_planned": planned, "run": run}
    jp = out_dir / f"{name}.json"
    mp = out_dir / f"{name}.md"
    write_atomic(mp, render_md(payload).encode("utf-8"), None, f"{name}.md.write")
    write_atomic(jp, (json.dumps(payload, indent=2, ensure_ascii=False) + "\n").encode("utf-8"), None,
                 f"{name}.json.write")
    return [jp, mp]


def render_md(payload: dict[str, Any]) -> str:
    """The md report of one fuzz payload (as :func:`write_report` writes it), every number read from it."""
    from harness.runs import code_text

    results, summary = payload["targets"], payload["summary"]
    examples, seed = payload["examples_per_target"], payload["seed"]
    run = payload.get("run", {})
    planned = payload.get("targets_planned", [r["target"] for r in results])
    head = "| target | loader | examples | " + " | ".join(OUTCOMES) + " | s |"
    rows = [head, "|" + "---|" * (len(OUTCOMES) + 4)]
    for r in results:
        rows.append(f"| {r['target']} | {r['loader']} | {r['examples']} | "
                    + " | ".join(str(r["outcomes"][o]) for o in OUTCOMES) + f" | {r['seconds']:.0f} |")
    documented = "\n".join(f"- `{r['target']}`: {r['documented']}" for r in results)
    failures = "\n".join(f"- `{r['target']}` {f['outcome']}: {f['input']} -> {f['detail']}"
                         for r in results for f in r["failures"]) or "none"
    provenance = ["One run"]
    if run.get("command"):
        provenance.append(f"of `{run['command']}`")
    provenance.append(f"(code: {code_text(run)})")
    if run.get("date_utc"):
        provenance.append(f"(last written {run['date_utc']})")
    finished = len(results)
    status = (f"All {finished} planned targets finished." if finished == len(planned) else
              f"{finished} of {len(planned)} planned targets finished; not run: "
              + ", ".join(f"`{t}`" for t in planned if t not in {r['target'] for r in results}) + ".")
    return "\n\n".join([
        "# Fuzzed loaders (`memsim fuzz`)",
        " ".join(provenance) + ". " + status,
        f"{examples} generated inputs per target (hypothesis, seed {seed}) after {payload['specials_per_target']} fixed "
        "specials (empty file, whitespace, a directory in place of the file, a 20 MB line, 100,000-deep nesting, "
        "5,000-digit integers, NaN/Infinity, invalid UTF-8, bidi/control characters, a BOM, truncation). Outcome "
        "classes are defined in `harness/reliability/fuzz.py`; `crash` and `partial_write` are bugs.",
        "\n".join(rows),
        f"Total: {summary['examples']} inputs over {summary['targets']} targets; crash "
        f"{summary['outcomes']['crash']}, partial_write {summary['outcomes']['partial_write']}; "
        f"{summary['seconds']:.0f} s.",
        "Documented outcome per target (faithful skips counted in `skipped`):\n\n" + documented,
        "Failing inputs (first ten per target):\n\n" + failures,
    ]) + "\n"
