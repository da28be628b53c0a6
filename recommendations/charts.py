"""Self-contained SVG charts for the admin (no JavaScript, no CDN). Pure: no Django.

- :func:`budget_bar_svg`: one configuration's per-device budget as a stacked bar of its components,
  against the usable memory, the line a fit must stay under (usable − margin) and the need as judged.
- :func:`scatter_svg`: estimate (x) against measurement (y) for one view, with the line y = x, each point
  linked to its measurement.

Every text is escaped here (``measurements.chart`` does the same); the admin inserts the result as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

BAR_WIDTH, BAR_HEIGHT = 560, 64
BAR_LEFT, BAR_RIGHT, BAR_TOP, BAR_THICKNESS = 10, 10, 16, 20
SCATTER_SIZE = 300
SCATTER_LEFT, SCATTER_RIGHT, SCATTER_TOP, SCATTER_BOTTOM = 70, 16, 24, 40
LINE_COLOURS = {"usable": "#555555", "limit": "#e15759", "need": "#000000", "identity": "#999999", "point": "#4e79a7"}
UNITS = {"bytes": (2**30, "GiB"), "ms": (1.0, "ms")}


def _gib(value: float) -> str:
    return f"{value / 2**30:,.2f} GiB"


def _vertical(x: float, top: float, bottom: float, colour: str, label: str, dashed: bool) -> str:
    dash = ' stroke-dasharray="4 3"' if dashed else ""
    return (
        f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{bottom}" stroke="{colour}" stroke-width="2"{dash}>'
        f"<title>{escape(label)}</title></line>"
    )


def budget_bar_svg(
    components: Sequence[tuple[str, int]],
    *,
    usable_bytes: int,
    need_bytes: int | None = None,
    margin_bytes: int | None = None,
    colours: Mapping[str, str] | None = None,
    title: str = "budget per device",
) -> str:
    """A stacked bar of ``[(component, bytes), ...]`` (each component's own peak) on an axis from 0 to the
    larger of their sum, the need and ``usable_bytes``; vertical lines at the usable memory, at usable −
    margin (the most a fit may need) and at the need the verdict judged (it may differ from the sum: vLLM
    needs its serving share, a calibration corrects the need)."""
    shown = [(name, value) for name, value in components if value > 0]
    total = sum(value for _, value in shown)
    scale_max = max(total, need_bytes or 0, usable_bytes, 1) * 1.02
    plot_w = BAR_WIDTH - BAR_LEFT - BAR_RIGHT
    bottom = BAR_TOP + BAR_THICKNESS

    def x(value: float) -> float:
        return BAR_LEFT + plot_w * value / scale_max

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{BAR_WIDTH}" height="{BAR_HEIGHT}" role="img" '
        f'font-family="sans-serif" font-size="11"><title>{escape(title)}</title>',
        f'<rect x="{BAR_LEFT}" y="{BAR_TOP}" width="{plot_w}" height="{BAR_THICKNESS}" fill="#fafafa" stroke="#ccc"/>',
    ]
    start = 0
    for name, value in shown:
        colour = (colours or {}).get(name, "#999999")
        parts.append(
            f'<rect x="{x(start):.1f}" y="{BAR_TOP}" width="{x(start + value) - x(start):.1f}" '
            f'height="{BAR_THICKNESS}" fill="{colour}"><title>{escape(f"{name}: {_gib(value)}")}</title></rect>'
        )
        start += value
    parts.append(_vertical(x(usable_bytes), BAR_TOP - 6, bottom + 6, LINE_COLOURS["usable"],
                           f"usable {_gib(usable_bytes)}", dashed=False))  # fmt: skip
    if margin_bytes:
        limit = usable_bytes - margin_bytes
        parts.append(_vertical(x(limit), BAR_TOP - 4, bottom + 4, LINE_COLOURS["limit"],
                               f"usable − margin {_gib(limit)}", dashed=True))  # fmt: skip
    if need_bytes is not None:
        parts.append(_vertical(x(need_bytes), BAR_TOP, bottom, LINE_COLOURS["need"], f"need {_gib(need_bytes)}",
                               dashed=False))  # fmt: skip
    caption = f"components {_gib(total)}"
    caption += f" · need {_gib(need_bytes)}" if need_bytes is not None else ""
    caption += f" · usable {_gib(usable_bytes)}"
    caption += f" · margin {_gib(margin_bytes)}" if margin_bytes else ""
    parts.append(f'<text x="{BAR_LEFT}" y="{BAR_HEIGHT - 10}">{escape(caption)}</text></svg>')
    return "".join(parts)


@dataclass(frozen=True, slots=True)
class Point:
    estimated: float  # x, in the chart's unit (bytes or ms)
    measured: float  # y, same unit
    label: str  # the tooltip
    href: str | None = None  # where a click on the point goes (the measurement's admin page)


def scatter_svg(points: Sequence[Point], *, unit: str = "bytes", title: str = "measured against estimated") -> str:
    """Measured (y) against estimated (x) on equal axes from 0, with the line y = x: points above it are
    runs that needed more than estimated. ``unit`` is ``"bytes"`` (axes in GiB) or ``"ms"``."""
    divisor, unit_label = UNITS[unit]
    if not points:
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{SCATTER_SIZE}" height="40" role="img">'
            f'<text x="10" y="25" font-size="13">{escape(title)}: no measurements</text></svg>'
        )
    top_value = max(max(p.estimated, p.measured) for p in points) * 1.08 or 1.0
    side = SCATTER_SIZE - SCATTER_LEFT - SCATTER_RIGHT
    width, height = SCATTER_SIZE, SCATTER_TOP + side + SCATTER_BOTTOM

    def x(value: float) -> float:
        return SCATTER_LEFT + side * value / top_value

    def y(value: float) -> float:
        return SCATTER_TOP + side * (1 - value / top_value)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'font-family="sans-serif" font-size="11"><title>{escape(title)}</title>',
        f'<text x="{SCATTER_LEFT}" y="14" font-weight="bold">{escape(title)}</text>',
        f'<rect x="{SCATTER_LEFT}" y="{SCATTER_TOP}" width="{side}" height="{side}" fill="#fafafa" stroke="#ccc"/>',
        f'<line x1="{x(0):.1f}" y1="{y(0):.1f}" x2="{x(top_value):.1f}" y2="{y(top_value):.1f}" '
        f'stroke="{LINE_COLOURS["identity"]}" stroke-dasharray="6 4"><title>measured = estimated</title></line>',
        f'<text x="{SCATTER_LEFT - 6}" y="{y(top_value) + 4:.1f}" text-anchor="end">{top_value / divisor:,.1f}</text>',
        f'<text x="{SCATTER_LEFT - 6}" y="{y(0) + 4:.1f}" text-anchor="end">0</text>',
        f'<text x="{x(top_value):.1f}" y="{y(0) + 14:.1f}" text-anchor="end">{top_value / divisor:,.1f}</text>',
        f'<text x="{SCATTER_LEFT + side / 2:.1f}" y="{height - 8}" text-anchor="middle">'
        f"estimated ({unit_label})</text>",
        f'<text x="14" y="{SCATTER_TOP + side / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {SCATTER_TOP + side / 2:.1f})">measured ({unit_label})</text>',
    ]
    for point in points:
        dot = (
            f'<circle cx="{x(point.estimated):.1f}" cy="{y(point.measured):.1f}" r="4" '
            f'fill="{LINE_COLOURS["point"]}"><title>{escape(point.label)}</title></circle>'
        )
        parts.append(f'<a href="{escape(point.href)}">{dot}</a>' if point.href else dot)
    parts.append("</svg>")
    return "".join(parts)
