"""Timelines and the files written from a summary (no Spark needed)."""

from __future__ import annotations

import json
from pathlib import Path

from spark_reports.charts import GroupTimeline, Mastership, fmt_duration, fmt_time, svg
from spark_reports.render import build_timelines, csv_value, report_html, write_outputs

DAY = 86_400_000


def timeline() -> GroupTimeline:
    return GroupTimeline("C", "broker-a", (
        Mastership(0, DAY, True, 1, 1, "INITIAL"),
        Mastership(DAY, 2 * DAY, True, 2, 2, "FAILOVER"),
        Mastership(2 * DAY, 2 * DAY + 5000, False, None, 3, None),
        Mastership(2 * DAY + 5000, 3 * DAY, True, 3, 4, "UNCLEAN")), ((DAY, DAY + 60_000),), 3 * DAY)


def test_formatting() -> None:
    assert fmt_time(0) == "1970-01-01 00:00:00Z"
    assert [fmt_duration(v) for v in (None, 1500, 90_000, 2 * 3_600_000, 3 * DAY)] == [
        "—", "1.5 s", "1.5 min", "2.0 h", "3.0 d"]
    assert [csv_value(v) for v in (None, [1, 2], 3.5, "x")] == ["", "1;2", "3.5", "x"]


def test_lanes_and_svg() -> None:
    t = timeline()
    assert t.lanes() == ["broker 1", "broker 2", "broker 3", "no master"]
    picture = svg(t)
    assert picture.startswith("<svg") and picture.endswith("</svg>")
    assert "FAILOVER at 1970-01-02 00:00:00Z: broker 2, epoch 2" in picture
    assert "UNCLEAN at 1970-01-03 00:00:05Z: broker 3, epoch 4" in picture
    assert "no master (failed election), epoch 3" in picture
    assert "SyncStateSet held one broker: 1970-01-02 00:00:00Z → 1970-01-02 00:01:00Z (1.0 min)" in picture


def test_build_timelines_keeps_order_and_flags_truncation() -> None:
    masters = [{"clusterName": "C", "brokerName": "b", "index": i, "start": i, "end": i + 1, "elected": True,
                "brokerId": 1, "epoch": i, "reason": "FAILOVER"} for i in (3, 1, 2)]
    result = build_timelines([("C", "b"), ("C", "quiet")], masters, [], as_of=10, limit=3)
    assert [(t.broker, t.truncated) for t in result] == [("b", True), ("quiet", False)]
    assert [m.epoch for m in result[0].masters] == [1, 2, 3]


def test_write_outputs_without_groups(tmp_path: Path) -> None:
    summary = {"asOf": 5, "groups": [], "cluster": {"groups": 0, "clusterNames": [], "failoverRanking": [],
                                                    **dict.fromkeys(("replicas", "masterEpochs", "failovers", "uncleanElections", "adminElections", "failedElections", "shrinkCount", "expandCount", "underReplicatedMs", "divergentEpochs"), 0)}}
    files = write_outputs(tmp_path, summary, [], {"input": "x"})
    assert json.loads(files["summary"].read_text()) == summary
    assert files["png"].read_bytes()[:4] == b"\x89PNG"
    assert "No broker groups in the dataset." in files["html"].read_text()
    assert files["csv"].read_text().count("\n") == 1


def test_html_escapes_names() -> None:
    t = GroupTimeline("<C>", "b&c", (), (), 10)
    page = report_html({"asOf": 10, "groups": [], "cluster": {"clusterNames": ["<C>"], "failoverRanking": []}},
                       [t], {"input": "<dir>"})
    assert "<C>" not in page and "&lt;C&gt;" in page
    assert "&lt;dir&gt;" in page and "b&amp;c" in page
