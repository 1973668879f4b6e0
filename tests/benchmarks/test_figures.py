"""The committed figures, drawn again from their committed JSON by each benchmark's own figure function: no text
overprints another (rendered outlines compared, rotated tick labels as rotated boxes), a measured zero is marked
and a missing value is not, projections are hatched, levels are lines, coinciding series stay visible."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from benchmarks import docs_pages  # noqa: E402
from benchmarks.common import RESULTS_DIR  # noqa: E402
from benchmarks.plotting import ZERO_GID, grouped_bars, overlapping_texts, place_labels  # noqa: E402

WITH_FIGURES = sorted(p.stem for p in RESULTS_DIR.glob("*.png"))


def _draw(name: str) -> Any:
    import importlib

    payload = json.loads((RESULTS_DIR / f"{name}.json").read_text(encoding="utf-8"))
    entry = docs_pages.FIGURES.get(name) or docs_pages.FIGURES["sweep-"]
    module, func, key = entry
    return getattr(importlib.import_module(module), func)(payload[key] if key else payload), payload


def test_every_committed_figure_has_a_figure_function() -> None:
    assert WITH_FIGURES
    for name in WITH_FIGURES:
        assert (RESULTS_DIR / f"{name}.json").exists(), name
        assert name in docs_pages.FIGURES or name.startswith("sweep-"), name


@pytest.mark.parametrize("name", WITH_FIGURES)
def test_no_text_overprints_another(name: str) -> None:
    fig, _ = _draw(name)
    try:
        assert overlapping_texts(fig) == []
    finally:
        plt.close(fig)


def test_overlap_check_sees_an_overprint_and_turned_labels_side_by_side_are_apart() -> None:
    fig, ax = plt.subplots()
    ax.text(0.5, 0.5, "np-mean@8")
    ax.text(0.52, 0.5, "tortoise-eval-noexp")
    assert overlapping_texts(fig) == [("np-mean@8", "tortoise-eval-noexp")]
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.set_xticks(range(12), [f"tortoise-recorded-volunteer-{i}" for i in range(12)], rotation=60, ha="right")
    assert overlapping_texts(fig) == []  # their axis-aligned boxes overlap; their outlines do not
    plt.close(fig)


def test_labels_of_a_crowded_cluster_never_overlap_and_stay_inside() -> None:
    fig, ax = plt.subplots(figsize=(5, 4))
    xs = [1.0, 1.01, 1.02, 1.0, 1.01, 2.0, 2.0, 2.01, 3.0, 3.0]
    ys = [1.0, 1.0, 1.01, 0.99, 0.98, 0.5, 0.5, 0.51, 0.0, 0.0]
    labels = ["oracle", "oracle-nodate", "full", "fractal", "hybrid@8", "np-mean@8", "tortoise-eval-noexp",
              "tortoise-eval", "pm@4", "bm25@4"]
    ax.scatter(xs, ys)
    ax.set_xlim(0.5, 3.5)
    ax.set_ylim(-0.3, 1.3)
    fig.tight_layout()
    anns = place_labels(ax, xs, ys, labels)
    assert overlapping_texts(fig) == []
    frame = ax.get_window_extent()
    for a in anns:
        box = a.get_window_extent()
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
    plt.close(fig)


def test_a_zero_is_marked_and_a_missing_value_is_not() -> None:
    fig, ax = plt.subplots()
    zeros = grouped_bars(ax, ["a", "b", "c"], [("s1", [0.5, 0.0, None], "tab:blue"), ("s2", [None, 0.2, 0.0],
                                                                                         "tab:orange")])
    strokes = [ln for ln in ax.lines if ln.get_gid() == ZERO_GID]
    bars = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_height() > 0]
    assert zeros and len(strokes) == 2 and len(bars) == 2
    assert sorted(round(float(sum(ln.get_xdata()) / 2)) for ln in strokes) == [1, 2]  # groups b and c
    plt.close(fig)


@pytest.mark.parametrize("name,key", [("longmemeval", "by_type"), ("locomo", "by_category")])
def test_design_figures_mark_each_measured_zero(name: str, key: str) -> None:
    """Before, a row's zero recall for a type and a type the row never met were both drawn as nothing."""
    fig, payload = _draw(name)
    rows = payload["aggregate"]["rows"]
    head = "overall" if name == "longmemeval" else "headline"
    shown = [r for r in rows if rows[r][head]["evidence_recall"] is not None]
    zeros = sum(1 for r in shown for g in rows[r][key].values() if g.get("evidence_recall") == 0)
    strokes = [ln for ax in fig.axes for ln in ax.lines if ln.get_gid() == ZERO_GID]
    assert zeros > 0 and len(strokes) == zeros
    assert any("measured 0" in t.get_text() for ax in fig.axes if ax.get_legend()
               for t in ax.get_legend().get_texts())
    plt.close(fig)


def test_scale_figure_hatches_projections_and_draws_levels_as_lines() -> None:
    fig, payload = _draw("longmemeval-scale")
    ax_proto, _, _, ax_mem = fig.axes
    bars = [p for p in ax_proto.patches if isinstance(p, Rectangle) and p.get_height() > 0]
    proto = payload["protocol"]
    measured = [b for b in bars if abs(b.get_height() - proto["wall_s"]) < 1e-6]
    projected = [b for b in bars if abs(b.get_height() - proto["wall_s_for_target"]) < 1e-6]
    assert measured and projected and not measured[0].get_hatch() and projected[0].get_hatch()
    for ax, level in ((ax_proto, proto["level_s"]), (ax_mem, payload["loader"]["level_bytes"] / 1024**3)):
        assert not any(isinstance(p, Rectangle) and abs(p.get_height() - level) < 1e-9 for p in ax.patches)
        assert any(isinstance(ln, Line2D) and list(ln.get_ydata()) == [level, level] for ln in ax.lines)
    plt.close(fig)


def test_protocol_figure_keeps_every_series_visible() -> None:
    """Before, bm25 turn->turn lay exactly under bm25 turn->session: the legend listed a series the plot hid."""
    fig, payload = _draw("longmemeval-protocol")
    for ax in fig.axes:
        drawn = [ln for ln in ax.lines if len(ln.get_xdata()) > 1]
        assert len(drawn) == len(payload["rows"])
        points = [set(zip(ln.get_xdata(), ln.get_ydata(), strict=True)) for ln in drawn]
        xs = [set(ln.get_xdata()) for ln in drawn]
        for i in range(len(drawn)):
            for j in range(i + 1, len(drawn)):
                if xs[i] == xs[j]:  # the same series under both averagings: a small dot inside a larger ring
                    a, b = drawn[i], drawn[j]
                    assert {a.get_markerfacecolor() == "none", b.get_markerfacecolor() == "none"} == {True, False}
                    assert a.get_markersize() != b.get_markersize()
                else:  # different series never share a drawn point
                    assert not points[i] & points[j]
    plt.close(fig)


def test_figures_regenerate_from_their_json(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    for name in ("ep_scaling", "longmemeval-scale"):
        (results / f"{name}.json").write_bytes((RESULTS_DIR / f"{name}.json").read_bytes())
    (results / "crash.json").write_bytes((RESULTS_DIR / "crash.json").read_bytes())  # no figure: none drawn
    got = docs_pages.render_figures(results)
    assert sorted(p.name for p in got) == ["ep_scaling.png", "longmemeval-scale.png"]
    assert all(data.startswith(b"\x89PNG") for data in got.values())
