"""Epoch timelines as inline SVG (for report.html) and as PNG (matplotlib, Agg backend).

One picture per broker group: a lane per broker id showing when it was master; the lane "no master"
shows elections that cleared the master; shaded spans are when the SyncStateSet held one broker;
markers above the lanes flag failovers (▼) and unclean elections (✖).
"""

from __future__ import annotations

import html
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REASON_COLORS = {"INITIAL": "#2e7d32", "FAILOVER": "#ef6c00", "ADMIN": "#1565c0", "UNCLEAN": "#c62828"}
MASTER_FILL = "#5c8fd6"
NO_MASTER_FILL = "#bdbdbd"
SHADE = "#f4c7c3"
NO_MASTER_LANE = "no master"


@dataclass(frozen=True)
class Mastership:
    start: int
    end: int
    elected: bool
    broker_id: int | None
    epoch: int | None
    reason: str | None


@dataclass(frozen=True)
class GroupTimeline:
    cluster: str
    broker: str
    masters: tuple[Mastership, ...]
    spans: tuple[tuple[int, int], ...]
    as_of: int
    truncated: bool = False

    @property
    def title(self) -> str:
        return f"{self.cluster} / {self.broker}"

    def lanes(self) -> list[str]:
        ids = sorted({m.broker_id for m in self.masters if m.elected and m.broker_id is not None})
        lanes = [f"broker {i}" for i in ids]
        if any(not m.elected for m in self.masters):
            lanes.append(NO_MASTER_LANE)
        return lanes or [NO_MASTER_LANE]

    def lane_of(self, m: Mastership) -> str:
        return f"broker {m.broker_id}" if m.elected and m.broker_id is not None else NO_MASTER_LANE

    def window(self) -> tuple[int, int]:
        starts = [m.start for m in self.masters] + [s for s, _ in self.spans]
        first = min(starts) if starts else self.as_of - 1
        return first, max(self.as_of, first + 1)


def fmt_time(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def fmt_duration(ms: float | None) -> str:
    if ms is None:
        return "—"
    seconds = float(ms) / 1000
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.1f} s"


def _describe(m: Mastership) -> str:
    span = f"{fmt_time(m.start)} → {fmt_time(m.end)} ({fmt_duration(m.end - m.start)})"
    if not m.elected:
        return f"no master (failed election), epoch {m.epoch}: {span}"
    return f"broker {m.broker_id} master, epoch {m.epoch}, {m.reason}: {span}"


# ---------------------------------------------------------------------- SVG
def svg(t: GroupTimeline, width: int = 960) -> str:
    left, right, top, lane_h, gap, axis_h = 96, 16, 22, 18, 6, 28
    lanes = t.lanes()
    height = top + len(lanes) * (lane_h + gap) + axis_h
    first, last = t.window()

    def x(ms: int) -> float:
        return left + (width - left - right) * (ms - first) / (last - first)

    def y(lane: str) -> int:
        return top + lanes.index(lane) * (lane_h + gap)

    body_h = len(lanes) * (lane_h + gap) - gap
    parts = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
              f'viewBox="0 0 {width} {height}" role="img" aria-label="epoch timeline of {html.escape(t.title)}">')]
    for start, end in t.spans:
        parts.append(f'<rect x="{x(start):.1f}" y="{top - 3}" width="{max(x(end) - x(start), 0.5):.1f}" '
                     f'height="{body_h + 6}" fill="{SHADE}"><title>SyncStateSet held one broker: '
                     f'{fmt_time(start)} → {fmt_time(end)} ({fmt_duration(end - start)})</title></rect>')
    for lane in lanes:
        parts.append(f'<text x="{left - 8}" y="{y(lane) + 13}" text-anchor="end" class="lane">'
                     f'{html.escape(lane)}</text>')
    for m in t.masters:
        fill = MASTER_FILL if m.elected else NO_MASTER_FILL
        parts.append(f'<rect x="{x(m.start):.1f}" y="{y(t.lane_of(m))}" width="{max(x(m.end) - x(m.start), 1):.1f}" '
                     f'height="{lane_h}" fill="{fill}" stroke="#fff" stroke-width="0.5">'
                     f'<title>{html.escape(_describe(m))}</title></rect>')
        parts.append(_svg_marker(m, x(m.start), top))
    axis_y = top + body_h + 4
    parts.append(f'<line x1="{left}" y1="{axis_y}" x2="{width - right}" y2="{axis_y}" stroke="#888"/>')
    for i in range(5):
        ms = first + (last - first) * i // 4
        anchor = "start" if i == 0 else "end" if i == 4 else "middle"
        parts.append(f'<text x="{x(ms):.1f}" y="{axis_y + 16}" text-anchor="{anchor}" class="tick">'
                     f'{fmt_time(ms)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _svg_marker(m: Mastership, x: float, top: int) -> str:
    if not m.elected or m.reason not in ("FAILOVER", "UNCLEAN"):
        return ""
    color = REASON_COLORS[m.reason]
    label = html.escape(f"{m.reason} at {fmt_time(m.start)}: broker {m.broker_id}, epoch {m.epoch}")
    if m.reason == "UNCLEAN":
        return (f'<g stroke="{color}" stroke-width="2.5"><title>{label}</title>'
                f'<line x1="{x - 5:.1f}" y1="{top - 16}" x2="{x + 5:.1f}" y2="{top - 6}"/>'
                f'<line x1="{x - 5:.1f}" y1="{top - 6}" x2="{x + 5:.1f}" y2="{top - 16}"/></g>')
    return (f'<path d="M{x - 5:.1f},{top - 14} L{x + 5:.1f},{top - 14} L{x:.1f},{top - 4} Z" fill="{color}">'
            f'<title>{label}</title></path>')


LEGEND_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="720" height="22">'
    f'<rect x="0" y="4" width="22" height="12" fill="{MASTER_FILL}"/><text x="28" y="15">master</text>'
    f'<rect x="90" y="4" width="22" height="12" fill="{NO_MASTER_FILL}"/><text x="118" y="15">no master</text>'
    f'<rect x="200" y="4" width="22" height="12" fill="{SHADE}"/>'
    '<text x="228" y="15">SyncStateSet of one broker</text>'
    f'<path d="M420,4 L432,4 L426,16 Z" fill="{REASON_COLORS["FAILOVER"]}"/><text x="440" y="15">failover</text>'
    f'<g stroke="{REASON_COLORS["UNCLEAN"]}" stroke-width="2.5"><line x1="520" y1="4" x2="532" y2="16"/>'
    '<line x1="520" y1="16" x2="532" y2="4"/></g><text x="540" y="15">unclean election</text></svg>')


# ---------------------------------------------------------------------- PNG
def preload() -> threading.Thread:
    """Import matplotlib (~0.4 s) in the background, e.g. while the Spark JVM starts and Python only waits."""
    def load() -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot

    thread = threading.Thread(target=load, name="preload-matplotlib", daemon=True)
    thread.start()
    return thread


def png(timelines: list[GroupTimeline], path: Path, max_groups: int = 12) -> Path:
    """All drawn groups stacked in one PNG (the first ``max_groups``: the most failovers first)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt
    from matplotlib.artist import Artist
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    shown = timelines[:max_groups]
    heights = [0.9 + 0.35 * len(t.lanes()) for t in shown] or [1.0]
    fig, axes = plt.subplots(len(heights), 1, figsize=(11, sum(heights) + 0.9), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    if not shown:
        axes[0][0].text(0.5, 0.5, "no broker groups in the dataset", ha="center", va="center")
        axes[0][0].set_axis_off()
    for ax, t in zip((row[0] for row in axes), shown, strict=False):
        _png_group(ax, t, mdates)
    handles: list[Artist] = [
        Patch(color=MASTER_FILL, label="master"), Patch(color=NO_MASTER_FILL, label="no master"),
        Patch(color=SHADE, label="SyncStateSet of one broker"),
        Line2D([], [], color=REASON_COLORS["FAILOVER"], marker="v", ls="", label="failover"),
        Line2D([], [], color=REASON_COLORS["UNCLEAN"], marker="X", ls="", label="unclean election")]
    fig.legend(handles=handles, loc="lower center", ncol=5, frameon=False, fontsize=8)
    fig.tight_layout(rect=(0, 0.06 if shown else 0, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _png_group(ax: Any, t: GroupTimeline, mdates: Any) -> None:
    def day(ms: float) -> float:
        return float(mdates.date2num(datetime.fromtimestamp(ms / 1000, tz=UTC)))

    lanes = t.lanes()
    first, last = t.window()
    # One artist per kind of mark, not one per bar: a group can have hundreds of changes, and
    # matplotlib's cost is per artist.
    if t.spans:  # shading over every lane (the y-limits set below)
        ax.broken_barh([(day(start), day(end) - day(start)) for start, end in t.spans], (-1.0, len(lanes) + 0.6),
                       facecolors=SHADE, lw=0)
    bars: dict[tuple[int, bool], list[tuple[float, float]]] = {}
    marks: dict[str, list[float]] = {}
    for m in t.masters:
        row = lanes.index(t.lane_of(m))
        bars.setdefault((row, m.elected), []).append((day(m.start), max(day(m.end) - day(m.start), 1e-9)))
        if m.elected and m.reason in ("FAILOVER", "UNCLEAN"):
            marks.setdefault(m.reason, []).append(day(m.start))
    for (row, elected), ranges in bars.items():
        ax.broken_barh(ranges, (row - 0.4, 0.8), facecolors=MASTER_FILL if elected else NO_MASTER_FILL,
                       edgecolor="white", lw=0.4)
    for reason, xs in marks.items():
        ax.plot(xs, [-0.75] * len(xs), marker="v" if reason == "FAILOVER" else "X", ls="",
                color=REASON_COLORS[reason], ms=7, clip_on=False)
    pad = (last - first) / 100
    ax.set_xlim(day(first - pad), day(last + pad))
    ax.set_ylim(len(lanes) - 0.4, -1.0)  # first lane on top, as in the HTML
    ax.set_yticks(range(len(lanes)), lanes, fontsize=8)
    ax.set_title(t.title + ("  (latest changes only)" if t.truncated else ""), fontsize=9, loc="left")
    locator = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=UTC))
    ax.tick_params(axis="x", labelsize=8)
