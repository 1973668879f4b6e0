"""RESULTS.md assembly: headings demoted under ``## Results``, image links made relative to ``benchmarks/`` (where RESULTS.md lives)."""

from __future__ import annotations

from benchmarks.report import _demote, headline


def test_demote_and_links() -> None:
    md = "## Cost growth\n\n### NP\n\n![cost](cost.png)\n"
    out = _demote(md)
    assert out.startswith("### Cost growth") and "#### NP" in out
    assert "![cost](results/cost.png)" in out


def test_headline_reports_levels_from_json() -> None:
    cost = {"levels": [{"level": "NP cached >= 500x", "measured": "812x", "met": True},
                       {"level": "p50 <= 50 ms", "measured": "900 ms", "met": False}]}
    lines = headline(None, None, cost)
    assert lines == ['- **Expected level** "NP cached >= 500x": measured 812x (met).',
                     '- **Expected level** "p50 <= 50 ms": measured 900 ms (not met).']
