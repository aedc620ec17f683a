"""Terminal output of ``mqctl report``."""

from __future__ import annotations

import io
import json
from typing import Any

from rich.console import Console

from mqctl.app import App
from mqctl.render_report import duration, show_report


def summary(groups: int = 1) -> dict[str, Any]:
    rows = [{"clusterName": "DefaultCluster", "brokerName": f"broker-{i}", "replicas": 3, "masterEpochs": 2,
             "failovers": 1 if i == 0 else 0, "uncleanElections": 0, "adminElections": 0, "failedElections": 0,
             "meanTenureMs": 90_000.0, "maxTenureMs": 90_000, "currentTenureMs": 1_500, "shrinkCount": 1,
             "expandCount": 2, "underReplicatedMs": 4_000, "divergentEpochs": [2] if i == 0 else [],
             "currentMasterBrokerId": 2, "currentMasterEpoch": 2, "failoverRank": 1 if i == 0 else 2}
            for i in range(groups)]
    return {"asOf": 0, "groups": rows, "cluster": {
        "groups": groups, "clusterNames": ["DefaultCluster"], "replicas": 3 * groups, "masterEpochs": 2 * groups,
        "failovers": 1, "uncleanElections": 0, "adminElections": 0, "failedElections": 0, "shrinkCount": groups,
        "expandCount": 2 * groups, "underReplicatedMs": 4_000 * groups, "divergentEpochs": 1,
        "failoverRanking": [{"rank": r["failoverRank"], "failovers": r["failovers"], "clusterName": r["clusterName"],
                             "brokerName": r["brokerName"]} for r in rows]}}


def render(fmt: str, doc: dict[str, Any]) -> str:
    out = io.StringIO()
    show_report(App(out=Console(file=out, width=200, highlight=False, soft_wrap=True)), fmt, doc)
    return out.getvalue()


def test_json_is_the_summary() -> None:
    doc = summary()
    assert json.loads(render("json", doc)) == doc


def test_tables() -> None:
    text = render("table", summary())
    assert "Masters and elections as of 1970-01-01 00:00:00Z" in text
    assert "│ DefaultCluster │ broker-0 │          2 (2) │       2 │" in text
    assert "1.5 min" in text and "4.0 s" in text
    assert "most failovers   │ DefaultCluster/broker-0 (1)" in text


def test_many_groups_are_cut_in_the_terminal() -> None:
    text = render("table", summary(groups=60))
    assert "the 50 groups with the most failovers of 60" in text
    assert "broker-0 " in text and "broker-59" not in text


def test_duration() -> None:
    assert [duration(v) for v in (None, 0, 59_000, 3_600_000)] == ["-", "0.0 s", "59.0 s", "1.0 h"]
