"""A measurement's memory timeline as a self-contained SVG (no JavaScript, no CDN). Pure: no Django.

Two series over time: the device view (NVML used, busiest device) and the host view (RSS of the
process tree), with the budget's expected peak and the usable memory as horizontal lines when known.
Every text is escaped here; the admin inserts the result as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import cast

WIDTH, HEIGHT = 720, 260
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 20, 40
COLOURS = {"device": "#e15759", "host": "#4e79a7", "budget": "#59a14f", "usable": "#555555"}
#: The usable memory is drawn on the chart when it is at most this many times the run's largest reading (or the
#: budget); above that the chart keeps the run's scale and the legend gives the figure.
USABLE_ON_CHART = 2.0


def _gib(value: float) -> str:
    return f"{value / 2**30:,.2f} GiB"


def _polyline(points: Sequence[tuple[float, float]], colour: str, label: str) -> str:
    if not points:
        return ""
    coordinates = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    return (
        f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{coordinates}">'
        f"<title>{escape(label)}</title></polyline>"
    )


def timeline_svg(
    timeline: Sequence[Sequence[float | int | None]],
    *,
    budget_bytes: int | None = None,
    usable_bytes: int | None = None,
    title: str = "memory over time",
) -> str:
    """An SVG line chart of ``[(t_seconds, device_used_bytes|None, host_rss_bytes|None), ...]``."""
    rows = [(float(cast(float, r[0])), r[1], r[2]) for r in timeline if len(r) >= 3]  # the time is never None
    if not rows:
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="40" role="img">'
            f'<text x="10" y="25" font-size="13">{escape(title)}: no samples were recorded</text></svg>'
        )
    t_max = max(t for t, _, _ in rows) or 1.0
    # scaled to the run: its readings and the budget line; the usable memory joins the scale only when it is near
    # them (a 3 GiB run on a 69 GiB GPU would otherwise be a flat line at the bottom), else the legend gives it
    figures = [v for _, d, h in rows for v in (d, h) if v is not None]
    figures += [budget_bytes] if budget_bytes else []
    data_max = max(figures or [1])
    off_chart = usable_bytes is not None and usable_bytes > USABLE_ON_CHART * data_max
    y_max = max(data_max, 0 if off_chart or not usable_bytes else usable_bytes) * 1.08 or 1
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(t: float) -> float:
        return LEFT + plot_w * t / t_max

    def y(v: float) -> float:
        return TOP + plot_h * (1 - v / y_max)

    device = [(x(t), y(d)) for t, d, _ in rows if d is not None]
    host = [(x(t), y(h)) for t, _, h in rows if h is not None]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" role="img" '
        f'font-family="sans-serif" font-size="11"><title>{escape(title)}</title>',
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="#fafafa" stroke="#ccc"/>',
    ]
    for i in range(5):
        value = y_max * i / 4
        parts.append(
            f'<text x="{LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{escape(_gib(value))}</text>'
            f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(value):.1f}" y2="{y(value):.1f}" stroke="#eee"/>'
        )
    parts.append(f'<text x="{LEFT}" y="{HEIGHT - 10}">0 s</text>')
    parts.append(f'<text x="{LEFT + plot_w}" y="{HEIGHT - 10}" text-anchor="end">{t_max:,.2f} s</text>')
    usable_line = None if off_chart else usable_bytes
    for mark, key, label in ((usable_line, "usable", "usable"), (budget_bytes, "budget", "budget")):
        if mark:
            parts.append(
                f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(mark):.1f}" y2="{y(mark):.1f}" '
                f'stroke="{COLOURS[key]}" stroke-dasharray="6 4"><title>{label} {escape(_gib(mark))}</title></line>'
            )
    parts.append(_polyline(device, COLOURS["device"], "device used (NVML)"))
    parts.append(_polyline(host, COLOURS["host"], "host RSS (process tree)"))
    usable_label = f"usable {_gib(usable_bytes)}, above the chart" if off_chart and usable_bytes else "usable"
    legend = [("device used (NVML)", "device", bool(device)), ("host RSS", "host", bool(host)),
              ("budget", "budget", bool(budget_bytes)), (usable_label, "usable", bool(usable_bytes))]  # fmt: skip
    lx = LEFT
    for label, key, shown in legend:
        if shown:
            parts.append(
                f'<rect x="{lx}" y="{HEIGHT - 24}" width="10" height="3" fill="{COLOURS[key]}"/>'
                f'<text x="{lx + 14}" y="{HEIGHT - 20}">{escape(label)}</text>'
            )
            lx += 20 + 7 * len(label)
    parts.append("</svg>")
    return "".join(parts)
