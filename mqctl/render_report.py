"""Terminal output of ``mqctl report``: rich tables, or summary.json as-is with ``--format json``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rich.table import Table
from rich.text import Text

from mqctl.app import App
from mqctl.terminal import terminal_safe

#: More groups than this are summarised in the terminal (every group is in the files).
MAX_ROWS = 50


def duration(ms: float | None) -> str:
    if ms is None:
        return "-"
    seconds = float(ms) / 1000
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.1f} s"


def utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")


@terminal_safe
def show_report(app: App, fmt: str, summary: dict[str, Any]) -> None:
    if fmt == "json":
        app.print_json(summary)
        return
    groups = sorted(summary["groups"], key=lambda g: (g["failoverRank"], g["clusterName"], g["brokerName"]))
    shown = groups[:MAX_ROWS]
    caption = f"the {MAX_ROWS} groups with the most failovers of {len(groups)}" if len(groups) > MAX_ROWS else None
    app.print(_elections(shown, summary["asOf"], caption))
    app.print(_replication(shown, caption))
    app.print(_cluster(summary["cluster"]))


def _elections(groups: list[dict[str, Any]], as_of: int, caption: str | None) -> Table:
    table = Table(title=f"Masters and elections as of {utc(as_of)}", title_justify="left", caption=caption)
    _name_columns(table, groups)
    for name in ("Master (epoch)", "Elected", "Failovers", "Unclean", "Admin", "Failed", "Mean tenure",
                 "Max tenure", "Current tenure"):
        table.add_column(name, justify="right")
    for g in groups:
        master = "-" if g["currentMasterBrokerId"] is None else str(g["currentMasterBrokerId"])
        table.add_row(g["clusterName"], g["brokerName"], f"{master} ({_text(g['currentMasterEpoch'])})",
                      str(g["masterEpochs"]), _count(g["failovers"], "yellow"), _count(g["uncleanElections"], "red"),
                      str(g["adminElections"]), _count(g["failedElections"], "red"), duration(g["meanTenureMs"]),
                      duration(g["maxTenureMs"]), duration(g["currentTenureMs"]))
    return table


def _replication(groups: list[dict[str, Any]], caption: str | None) -> Table:
    table = Table(title="Replication", title_justify="left", caption=caption)
    _name_columns(table, groups)
    for name in ("Replicas", "Shrinks", "Expands", "Under-replicated", "Divergent epochs"):
        table.add_column(name, justify="left" if name == "Divergent epochs" else "right")
    for g in groups:
        divergent = ", ".join(str(e) for e in g["divergentEpochs"])
        table.add_row(g["clusterName"], g["brokerName"], str(g["replicas"]), str(g["shrinkCount"]),
                      str(g["expandCount"]), duration(g["underReplicatedMs"]),
                      Text(divergent, style="red") if divergent else Text("-"))
    return table


def _cluster(cluster: dict[str, Any]) -> Table:
    table = Table(title="Cluster-wide", title_justify="left")
    table.add_column("Metric")
    table.add_column("Value", justify="right")
    table.add_row("clusters", ", ".join(cluster["clusterNames"]) or "-")
    for name in ("groups", "replicas", "masterEpochs", "failovers", "uncleanElections", "adminElections",
                 "failedElections", "shrinkCount", "expandCount", "divergentEpochs"):
        table.add_row(name, str(cluster[name]))
    table.add_row("underReplicated", duration(cluster["underReplicatedMs"]))
    ranked = [r for r in cluster["failoverRanking"] if r["failovers"]][:5]
    table.add_row("most failovers", "; ".join(f"{r['clusterName']}/{r['brokerName']} ({r['failovers']})" for r in ranked) or "-")
    return table


def _name_columns(table: Table, groups: list[dict[str, Any]]) -> None:
    """Cluster and broker names are what a reader looks for: other columns shrink first."""
    for title, key in (("Cluster", "clusterName"), ("Broker", "brokerName")):
        widest = max((len(g[key]) for g in groups), default=len(title))
        table.add_column(title, no_wrap=True, min_width=min(max(widest, len(title)), 24))


def _count(value: int, style: str) -> Text:
    return Text(str(value), style=style if value else "")


def _text(value: Any) -> str:
    return "-" if value is None else str(value)
