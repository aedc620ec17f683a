"""Writing a report's files: summary.json, groups.csv, report.html and timeline.png (groups.parquet is
written by Spark in the pipeline). Everything here works on the small per-group result and the bounded
timelines already on the driver; nothing here touches Spark."""

from __future__ import annotations

import csv
import html
import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from spark_reports.charts import LEGEND_SVG, GroupTimeline, Mastership, fmt_duration, fmt_time, png, svg
from spark_reports.columns import CLUSTER_COUNTS, DURATIONS, GROUP_COLUMNS

SUMMARY_NAME = "summary.json"
CSV_NAME = "groups.csv"
PARQUET_NAME = "groups.parquet"
HTML_NAME = "report.html"
PNG_NAME = "timeline.png"



def anchor(cluster: str, broker: str) -> str:
    """The id of a group's timeline in report.html, which the controllers' console links to (the console
    computes it the same way: services/controller/console.py)."""
    return "g-" + re.sub(r"[^A-Za-z0-9_.-]", "_", f"{cluster}/{broker}")


def build_timelines(order: Iterable[tuple[str, str]], masters: list[dict[str, Any]], spans: list[dict[str, Any]],
                    as_of: int, limit: int) -> list[GroupTimeline]:
    """Group the collected rows into one timeline per group, in ``order``."""
    by_group: dict[tuple[str, str], tuple[list[Mastership], list[tuple[int, int]]]] = {
        key: ([], []) for key in order}
    for m in sorted(masters, key=lambda r: r["index"]):
        key = (m["clusterName"], m["brokerName"])
        if key in by_group:
            by_group[key][0].append(Mastership(m["start"], m["end"], bool(m["elected"]), m["brokerId"],
                                               m["epoch"], m["reason"]))
    for s in sorted(spans, key=lambda r: r["index"]):
        key = (s["clusterName"], s["brokerName"])
        if key in by_group:
            by_group[key][1].append((s["start"], s["end"]))
    return [GroupTimeline(c, b, tuple(ms), tuple(ss), as_of, len(ms) >= limit or len(ss) >= limit)
            for (c, b), (ms, ss) in by_group.items()]


def write_outputs(output: Path, summary: dict[str, Any], timelines: list[GroupTimeline],
                  meta: dict[str, Any]) -> dict[str, Path]:
    files = {"summary": output / SUMMARY_NAME, "csv": output / CSV_NAME, "html": output / HTML_NAME,
             "png": output / PNG_NAME}
    write_summary(files["summary"], summary)
    write_csv(files["csv"], summary["groups"])
    files["html"].write_text(report_html(summary, timelines, meta), encoding="utf-8")
    png(timelines, files["png"])
    return files


def write_summary(path: Path, summary: dict[str, Any]) -> None:
    path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")


def csv_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return ";".join(str(v) for v in value)
    return str(value)


def write_csv(path: Path, groups: list[dict[str, Any]]) -> None:
    """One row per group; ``divergentEpochs`` as ``3;5``, nulls as empty fields."""
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(GROUP_COLUMNS)
        for group in groups:
            writer.writerow([csv_value(group.get(c)) for c in GROUP_COLUMNS])


# ---------------------------------------------------------------------- HTML
STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#222}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}h3{font-size:14px;margin:18px 0 4px}
.meta{color:#555;margin:0 0 12px}table{border-collapse:collapse;margin:4px 0}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:right;white-space:nowrap}
th{background:#f3f3f3}td.l,th.l{text-align:left}tr.hot td{background:#fff4e5}
svg text{font:11px system-ui,sans-serif;fill:#333}svg text.tick{fill:#666;font-size:10px}
.note{color:#666;font-size:12px}.wide{overflow-x:auto;max-width:100%}
"""


def _cell(name: str, value: Any) -> str:
    if name in DURATIONS and value is not None:
        return f'<td title="{value} ms">{html.escape(fmt_duration(value))}</td>'
    if name in ("clusterName", "brokerName"):
        return f'<td class="l">{html.escape(str(value))}</td>'
    text = "—" if value is None else ", ".join(map(str, value)) if isinstance(value, list) else str(value)
    return f"<td>{html.escape(text) if text else '—'}</td>"


def _groups_table(groups: list[dict[str, Any]]) -> str:
    head = "".join(f'<th class="{"l" if c in ("clusterName", "brokerName") else ""}">{c}</th>'
                   for c in GROUP_COLUMNS)
    rows = []
    for g in groups:
        hot = ' class="hot"' if g.get("failovers") or g.get("divergentEpochs") else ""
        rows.append(f"<tr{hot}>" + "".join(_cell(c, g.get(c)) for c in GROUP_COLUMNS) + "</tr>")
    return (f'<div class="wide"><table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
            "</div>")


def _cluster_table(cluster: dict[str, Any]) -> str:
    names = html.escape(", ".join(cluster.get("clusterNames") or []) or "—")
    rows = [f'<tr><th class="l">clusterNames</th><td class="l">{names}</td></tr>']
    for name in CLUSTER_COUNTS:
        value = cluster.get(name)
        shown = fmt_duration(value) if name in DURATIONS else str(value)
        rows.append(f'<tr><th class="l">{name}</th><td title="{value}">{html.escape(shown)}</td></tr>')
    return f"<table>{''.join(rows)}</table>"


def _ranking_table(cluster: dict[str, Any], top: int = 20) -> str:
    ranking = cluster.get("failoverRanking") or []
    rows = "".join(f'<tr><td>{r["rank"]}</td><td class="l">{html.escape(r["clusterName"])}</td>'
                   f'<td class="l">{html.escape(r["brokerName"])}</td><td>{r["failovers"]}</td></tr>'
                   for r in ranking[:top])
    more = f'<p class="note">{len(ranking) - top} more in {CSV_NAME}</p>' if len(ranking) > top else ""
    return (f'<table><tr><th>rank</th><th class="l">clusterName</th><th class="l">brokerName</th>'
            f"<th>failovers</th></tr>{rows}</table>{more}")


def _timelines_html(timelines: list[GroupTimeline], total_groups: int) -> str:
    if not timelines:
        return '<p class="note">No broker groups in the dataset.</p>'
    parts = [LEGEND_SVG]
    if total_groups > len(timelines):
        parts.append(f'<p class="note">The {len(timelines)} groups with the most failovers of {total_groups}.</p>')
    for t in timelines:
        note = ' <span class="note">(latest changes only)</span>' if t.truncated else ""
        parts.append(f'<h3 id="{anchor(t.cluster, t.broker)}">{html.escape(t.title)}{note}</h3>{svg(t)}')
    return "".join(parts)


def report_html(summary: dict[str, Any], timelines: list[GroupTimeline], meta: dict[str, Any]) -> str:
    """One self-contained page: no scripts, no external files."""
    as_of = int(summary["asOf"])
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    facts = [f"as of <b>{fmt_time(as_of)}</b> ({as_of})"]
    facts += [f"{html.escape(k)}: {html.escape(str(v))}" for k, v in meta.items() if v is not None]
    facts.append(f"generated {generated}")
    groups = summary["groups"]
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>Epoch history as of {fmt_time(as_of)}</title><style>{STYLE}</style></head><body>"
        f'<h1>Epoch history report</h1><p class="meta">{" · ".join(facts)}</p>'
        f"<h2>Cluster</h2>{_cluster_table(summary['cluster'])}"
        f"<h2>Groups ranked by failovers</h2>{_ranking_table(summary['cluster'])}"
        f"<h2>Per group ({len(groups)})</h2>{_groups_table(groups)}"
        f"<h2>Epoch timelines</h2>{_timelines_html(timelines, len(groups))}"
        '<p class="note">Metric definitions: docs/report.md in the mqctl sources.</p>'
        "</body></html>\n")
