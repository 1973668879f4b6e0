"""The README's generated blocks equal their render from the committed results JSON."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks.common import RESULTS_DIR
from benchmarks.readme_blocks import README, headline, render


def test_readme_blocks_match_their_render() -> None:
    text = README.read_text(encoding="utf-8")
    assert render(text) == text, "README generated blocks are stale: run python -m benchmarks.docs_pages"


def test_a_typed_number_inside_a_block_is_caught() -> None:
    text = README.read_text(encoding="utf-8")
    start = text.index("<!-- generated:headline -->")
    tampered = text[:start] + text[start:].replace("| `fractal` |", "| `fractal` (edited) |", 1)
    assert tampered != text and render(tampered) == text


def test_missing_block_is_an_error() -> None:
    with pytest.raises(ValueError, match="no generated block 'headline'"):
        render("# README without markers\n")


def test_headline_follows_the_json(tmp_path: Path) -> None:
    shutil.copy(RESULTS_DIR / "locomo.json", tmp_path / "locomo.json")
    payload = json.loads((tmp_path / "locomo.json").read_text(encoding="utf-8"))
    rows = payload["aggregate"]["rows"]
    rows["fractal"]["headline"]["evidence_recall"] = 0.123
    (tmp_path / "locomo.json").write_text(json.dumps(payload), encoding="utf-8")
    text = headline(tmp_path)
    assert "| `fractal` | design | 0.123 |" in text
    assert "locomo.png" not in text  # no figure in that folder, no link to one
    k = max(payload["config"]["k"])
    assert all(f"@{k}`" in line for line in text.splitlines() if "@" in line and line.startswith("| `"))
