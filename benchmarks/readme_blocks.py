"""Generated blocks of the README, rendered from the committed results JSON.

A block sits between ``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->`` lines in ``README.md``; its text
is whatever ``RENDERERS[NAME]`` returns for the committed results, never typed by hand.
``python -m benchmarks.readme_blocks`` rewrites every block in place; ``--check`` exits 1 when a block differs from
its render (the test suite runs the same comparison).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import RESULTS_DIR

README = Path(__file__).resolve().parents[1] / "README.md"


def _f(v: Any, fmt: str = ".3f") -> str:
    return "n/a" if v is None else format(v, fmt)


def _span(vals: list[Any]) -> str:
    vs = [v for v in vals if v is not None]
    if not vs:
        return "n/a"
    lo, hi = _f(min(vs)), _f(max(vs))
    return lo if lo == hi else f"{lo} to {hi}"


def headline(results: Path) -> str:
    """The README's one headline table: the cross-design LoCoMo run (``locomo.json``), every design row and every
    baseline at the run's largest K, delivered beside stored evidence; the sentence under it and the figure link
    are computed from the same JSON."""
    from benchmarks import locomo

    path = results / "locomo.json"
    payload = json.loads(path.read_text(encoding="utf-8"))
    rows = payload["aggregate"]["rows"]
    cfg = payload["config"]
    big = max(cfg.get("k") or [8])
    convs = payload["conversations"]

    def keep(name: str) -> bool:
        return "@" not in name or name.rsplit("@", 1)[1] == str(big)

    def kind(name: str) -> str:
        spec = locomo.SPECS.get(rows[name].get("arm") or "")
        return spec.kind if spec else "external"

    order = [r for r in locomo._order(rows) if keep(r)]
    order = [r for r in order if kind(r) == "design"] + [r for r in order if kind(r) != "design"]
    table = [[f"`{r}`", kind(r), _f(rows[r]["headline"].get("evidence_recall")),
              _f(rows[r]["headline"].get("all_evidence_rate")), _f(rows[r]["headline"].get("stored_recall")),
              _f(rows[r]["headline"].get("tokens_cl100k_mean"), ".0f")] for r in order]
    head = ["row", "kind", "delivered recall", "all evidence delivered", "stored recall", "tokens per question"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in table]
    designs = [r for r in order if kind(r) == "design"]
    best = max(designs, key=lambda r: rows[r]["headline"].get("evidence_recall") or 0.0) if designs else None
    n_turns = sum(c["n_turns"] for c in convs)
    n_probes = sum(c["n_probes"] for c in convs)
    intro = (f"{len(convs)} public LoCoMo conversation(s) ({n_turns} turns, {n_probes} questions with annotated "
             "evidence turns) through every design and a few baselines (`memsim bench locomo`, no LM called; "
             f"ranked rows at K = {big}). *Delivered recall* is the share of a question's evidence turns present in "
             "the text the row would put in front of the model; *stored recall* is the share the row keeps "
             "anywhere; tokens are tiktoken cl100k_base per question.")
    out = [intro, "", *lines, ""]
    if designs:
        stored = _span([rows[r]["headline"].get("stored_recall") for r in designs])
        stored = f"is {stored} in every one" if " to " not in stored else f"spans {stored}"
        bh = rows[best]["headline"]
        out.append(f"Stored is not delivered: across the design rows, delivered recall spans "
                   f"{_span([rows[r]['headline'].get('evidence_recall') for r in designs])} while stored recall "
                   f"{stored}. The highest delivered recall among them is `{best}`'s "
                   f"({_f(bh.get('evidence_recall'))}, at {_f(bh.get('tokens_cl100k_mean'), '.0f')} tokens per "
                   "question).")
        out.append("")
    if (results / "locomo.png").exists():
        out.append("![LoCoMo: delivered evidence recall against tokens per question, every row]"
                   "(benchmarks/results/locomo.png)")
    return "\n".join(out) + "\n"


RENDERERS: dict[str, Callable[[Path], str]] = {"headline": headline}


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- generated:{re.escape(name)} -->\n)(.*?)(<!-- /generated:{re.escape(name)} -->)", re.S)


def render(text: str, results: Path = RESULTS_DIR) -> str:
    """``text`` with every generated block replaced by its render; a block missing from the text is an error."""
    for name, fn in RENDERERS.items():
        pat = _pattern(name)
        if not pat.search(text):
            raise ValueError(f"README has no generated block '{name}' (markers <!-- generated:{name} -->)")
        body = fn(results).rstrip() + "\n"
        text = pat.sub(lambda m, body=body: m.group(1) + body + m.group(3), text)
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--readme", type=Path, default=README, help="the README to update (default: the project's)")
    ap.add_argument("--check", action="store_true", help="only compare; exit 1 when a block is stale")
    a = ap.parse_args(argv)
    old = a.readme.read_text(encoding="utf-8")
    try:
        new = render(old)
    except (ValueError, OSError) as exc:
        print(f"error: {a.readme}: {exc}", file=sys.stderr)
        return 1
    if a.check:
        if new != old:
            print(f"{a.readme}: generated blocks are stale; run python -m benchmarks.readme_blocks", file=sys.stderr)
            return 1
        return 0
    a.readme.write_text(new, encoding="utf-8")
    print(f"wrote {a.readme}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
