"""The README's generated blocks equal their render from the committed results JSON."""

from __future__ import annotations

import pytest

from benchmarks.readme_blocks import README, render


def test_readme_blocks_match_their_render() -> None:
    text = README.read_text(encoding="utf-8")
    assert render(text) == text, "README generated blocks are stale: run python -m benchmarks.readme_blocks"


def test_a_typed_number_inside_a_block_is_caught() -> None:
    text = README.read_text(encoding="utf-8")
    start = text.index("<!-- generated:locomo -->")
    tampered = text[:start] + text[start:].replace("| fractal |", "| fractal (edited) |", 1)
    assert tampered != text and render(tampered) == text


def test_missing_block_is_an_error() -> None:
    with pytest.raises(ValueError, match="no generated block 'locomo'"):
        render("# README without markers\n")
