"""Figure pieces every benchmark plot shares, so that no mark misleads and no text covers another.

- :func:`place_labels`: a text label beside each point of a scatter, placed so that no two labels overlap, no
  label covers a point, the legend or leaves the axes (greedy: for each label in turn, the first free spot on rings
  of growing radius around its point; a label set away from its point gets a thin leader line).
- :func:`grouped_bars`: grouped bars where a measured zero is drawn (a short bold stroke on the axis in the
  series' colour) and a missing value is not, so a zero never looks like a missing bar; a legend entry says so.
- :func:`level_line`: a level (a target, a limit) as a horizontal line with its label, never as a bar.
- :data:`PROJECTED`: the style of a projected (not measured) bar: hatched, outlined, pale.
- :func:`overlapping_texts` / :func:`drawn_texts`: the rendered bounding boxes of every text a figure draws
  (titles, tick labels, legend entries, annotations) and the pairs that overlap, for the tests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

ZERO_GID = "measured-zero"
"""``gid`` of the stroke that marks a measured zero in :func:`grouped_bars`."""
PROJECTED = {"hatch": "///", "edgecolor": "black", "linewidth": 0.8, "alpha": 0.45}
"""Bar style of a projected value (``ax.bar(..., **PROJECTED)``), beside a solid measured bar."""
LEVEL_STYLE = {"color": "crimson", "linestyle": "--", "linewidth": 1.2}
_RADII = (5, 10, 16, 24, 34, 46, 60, 76, 95, 120)
_ANGLES = (30, -30, 150, -150, 0, 180, 60, -60, 120, -120, 90, -90, 15, -15, 165, -165, 45, -45, 135, -135,
           75, -75, 105, -105)


def _renderer(fig: Any) -> Any:
    return fig.canvas.get_renderer()


def _free(box: Any, placed: Sequence[Any], pad: float) -> bool:
    return not any(box.x0 < b.x1 + pad and b.x0 < box.x1 + pad and box.y0 < b.y1 + pad and b.y0 < box.y1 + pad
                   for b in placed)


def place_labels(ax: Any, xs: Sequence[float], ys: Sequence[float], labels: Sequence[str], *, fontsize: float = 7,
                 marker_pt: float = 4.5, avoid: Sequence[tuple[float, float]] = (), obstacles: Sequence[Any] = (),
                 **text_kw: Any) -> list[Any]:
    """Annotate point ``i`` at data ``(xs[i], ys[i])`` with ``labels[i]``, no label overlapping another, a point
    (a square of ``marker_pt`` points around each labelled point and each unlabelled one in ``avoid``), the
    legend, ``obstacles`` (display-space ``Bbox``es) or the axes' edge. Call it last, after the limits, scales,
    legend and layout (``fig.tight_layout()``) are final: placement is computed in display space. Returns the
    annotations."""
    from matplotlib.transforms import Bbox

    fig = ax.figure
    renderer = _renderer(fig)
    px_per_pt = fig.dpi / 72.0
    frame = ax.get_window_extent(renderer)
    centres = ax.transData.transform(list(zip(xs, ys, strict=True)))
    r_mark = marker_pt * px_per_pt
    marks = [*centres, *(ax.transData.transform(list(avoid)) if len(avoid) else [])]
    blocked = [Bbox.from_extents(cx - r_mark, cy - r_mark, cx + r_mark, cy + r_mark) for cx, cy in marks]
    legend = ax.get_legend()
    if legend is not None:
        blocked.append(legend.get_window_extent(renderer))
    blocked += list(obstacles)
    placed: list[Any] = []
    out = []
    for (x, y), (cx, cy), text in zip(zip(xs, ys, strict=True), centres, labels, strict=True):
        probe = ax.text(0, 0, text, fontsize=fontsize, **text_kw)
        ext = probe.get_window_extent(renderer)
        probe.remove()
        w, h = ext.width, ext.height
        choice = None
        for r in _RADII:
            for ang in _ANGLES:
                dx, dy = r * math.cos(math.radians(ang)), r * math.sin(math.radians(ang))
                ha = "left" if dx > 0.5 else "right" if dx < -0.5 else "center"
                va = "bottom" if dy > 0.5 else "top" if dy < -0.5 else "center"
                ax0 = cx + dx * px_per_pt - (0 if ha == "left" else w if ha == "right" else w / 2)
                ay0 = cy + dy * px_per_pt - (0 if va == "bottom" else h if va == "top" else h / 2)
                box = Bbox.from_bounds(ax0, ay0, w, h)
                inside = (box.x0 >= frame.x0 + 2 and box.x1 <= frame.x1 - 2 and box.y0 >= frame.y0 + 2
                          and box.y1 <= frame.y1 - 2)
                if inside and _free(box, placed, 1.5) and _free(box, blocked, 0.5):
                    choice = (dx, dy, ha, va, box, r)
                    break
            if choice:
                break
        if choice is None:  # nowhere free (a very crowded panel): the far ring, and the tests will say so
            dx, dy, ha, va, box, r = 0.0, _RADII[-1], "center", "bottom", Bbox.from_bounds(cx, cy, w, h), _RADII[-1]
        else:
            dx, dy, ha, va, box, r = choice
        arrow = {"arrowstyle": "-", "color": "0.45", "lw": 0.5, "shrinkA": 0, "shrinkB": marker_pt} if r > 12 else None
        out.append(ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=fontsize,
                               ha=ha, va=va, arrowprops=arrow, **text_kw))
        placed.append(box)
    return out


def grouped_bars(ax: Any, groups: Sequence[str], series: Sequence[tuple[str, Sequence[float | None], Any]], *,
                 width: float = 0.8, errors: Sequence[Sequence[tuple[float, float] | None]] | None = None) -> bool:
    """One group of bars per entry of ``groups`` (x positions 0..n-1), one bar per series
    ``(label, values, colour)`` in each. ``None`` draws nothing (no value: absent); ``0`` draws a short bold stroke
    on the axis in the series' colour (a measured zero, gid :data:`ZERO_GID`). ``errors`` (per series, per group:
    the distances below and above the value, or None) draws each value's interval as an error bar, zeros
    included. Returns whether any zero was drawn (then add :func:`zero_legend_handle` to the legend)."""
    import numpy as np

    n = max(1, len(series))
    w = width / n
    xs = np.arange(len(groups))
    zeros = False
    for i, (label, values, colour) in enumerate(series):
        pos = xs + (i - (n - 1) / 2) * w
        keep = np.array([v is not None and v != 0 for v in values], dtype=bool)
        heights = np.array([v if v is not None else 0.0 for v in values], dtype=float)
        ax.bar(pos[keep], heights[keep], w, color=colour, label=label)
        for p, v in zip(pos, values, strict=True):
            if v is not None and v == 0:
                zeros = True
                ax.plot([p - w * 0.45, p + w * 0.45], [0, 0], color=colour, linewidth=3.5, solid_capstyle="butt",
                        clip_on=False, zorder=4, gid=ZERO_GID)
        if errors is not None:
            for p, v, e in zip(pos, values, errors[i], strict=True):
                if v is not None and e is not None:
                    ax.errorbar([p], [v], yerr=[[e[0]], [e[1]]], fmt="none", ecolor="0.15", elinewidth=0.7,
                                capsize=1.5, zorder=5)
    ax.set_xticks(xs, groups)
    return zeros


def zero_legend_handle() -> Any:
    """The legend entry of :func:`grouped_bars`' zero stroke (for a legend built by hand)."""
    from matplotlib.lines import Line2D

    return Line2D([], [], color="0.2", linewidth=3.5, label="stroke on the axis: measured 0 (no mark: no value)")


def level_line(ax: Any, y: float, label: str, **kw: Any) -> Any:
    """A level as a horizontal line across the axes (in the legend as ``label``)."""
    return ax.axhline(y, label=label, **{**LEVEL_STYLE, **kw})


def _outline(t: Any, renderer: Any) -> list[tuple[float, float]]:
    """The four display-space corners of a drawn text's box, rotated with the text (its window extent is the
    axis-aligned box around them; two rotated tick labels side by side overlap as boxes, not as outlines)."""
    ext = t.get_window_extent(renderer)
    angle = t.get_rotation() % 360
    if angle % 90 == 0:
        return [(ext.x0, ext.y0), (ext.x1, ext.y0), (ext.x1, ext.y1), (ext.x0, ext.y1)]
    t.set_rotation(0)
    try:
        flat = t.get_window_extent(renderer)
    finally:
        t.set_rotation(angle)
    c, s_ = math.cos(math.radians(angle)), math.sin(math.radians(angle))
    corners = [(x * c - y * s_, x * s_ + y * c) for x, y in ((0, 0), (flat.width, 0), (flat.width, flat.height),
                                                              (0, flat.height))]
    dx, dy = ext.x0 - min(x for x, _ in corners), ext.y0 - min(y for _, y in corners)
    return [(x + dx, y + dy) for x, y in corners]


def _apart(a: list[tuple[float, float]], b: list[tuple[float, float]], tolerance: float) -> bool:
    """Whether two convex outlines overlap by at most ``tolerance`` pixels along some edge normal (separating
    axis theorem)."""
    for poly in (a, b):
        for (x0, y0), (x1, y1) in zip(poly, poly[1:] + poly[:1], strict=True):
            nx, ny = y0 - y1, x1 - x0
            norm = math.hypot(nx, ny) or 1.0
            nx, ny = nx / norm, ny / norm
            pa = [x * nx + y * ny for x, y in a]
            pb = [x * nx + y * ny for x, y in b]
            if min(max(pa), max(pb)) - max(min(pa), min(pb)) <= tolerance:
                return True
    return False


def drawn_texts(fig: Any) -> list[tuple[str, list[tuple[float, float]]]]:
    """``(text, display outline)`` of every non-empty text the figure draws: titles, axis labels, the tick
    labels inside the view, legend entries, annotations and free texts (the outline turns with a rotated text)."""
    from matplotlib.text import Text

    fig.canvas.draw()
    renderer = _renderer(fig)
    found: list[tuple[str, list[tuple[float, float]]]] = []
    tick_labels: set[int] = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for tick in [*axis.majorTicks, *axis.minorTicks]:
                tick_labels.update((id(tick.label1), id(tick.label2)))
            for tick in axis._update_ticks():  # the ticks drawn (inside the view), as Axis.draw picks them
                for t in (tick.label1, tick.label2):
                    if t.get_visible() and t.get_text().strip():
                        found.append((t.get_text(), _outline(t, renderer)))
    for t in fig.findobj(Text):
        if id(t) not in tick_labels and t.get_visible() and t.get_text().strip():
            found.append((t.get_text(), _outline(t, renderer)))
    return found


def overlapping_texts(fig: Any, tolerance_px: float = 0.5) -> list[tuple[str, str]]:
    """The pairs of drawn texts (:func:`drawn_texts`) whose outlines overlap by more than ``tolerance_px``."""
    texts = drawn_texts(fig)
    return [(a, b) for i, (a, pa) in enumerate(texts) for b, pb in texts[i + 1:] if not _apart(pa, pb, tolerance_px)]
