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

from benchmarks.common import RESULTS_DIR

README = Path(__file__).resolve().parents[1] / "README.md"


def _locomo(results: Path) -> str:
    from benchmarks import locomo, locomo_paper

    design = json.loads((results / "locomo.json").read_text(encoding="utf-8"))
    paper = json.loads((results / "locomo-paper.json").read_text(encoding="utf-8"))
    return locomo.readme_section(design).rstrip() + "\n\n" + locomo_paper.readme_section(paper).rstrip()


RENDERERS: dict[str, Callable[[Path], str]] = {"locomo": _locomo}


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
