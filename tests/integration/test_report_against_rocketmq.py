"""``mqctl report`` from a RocketMQ cluster (the stand-in servers of test_cli_against_rocketmq.py): Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.test_cli_against_rocketmq import Cluster, cluster, mqctl

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(180)]
__all__ = ["cluster"]  # the fixture, imported to be used here


def test_report_from_a_rocketmq_cluster_has_the_epochs(cluster: Cluster, tmp_path: Path) -> None:
    """A RocketMQ controller keeps no event log: the report is built from the brokers' epochs alone."""
    result = mqctl("report", "-a", cluster.leader.address, "-c", "DefaultCluster", "--output", str(tmp_path / "out"),
                   "--format", "json", timeout="120")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert [g["brokerName"] for g in summary["groups"]] == ["broker-a"]
    rows = [json.loads(line) for line in (tmp_path / "out" / "dataset" / "epochs" / "epochs.jsonl").read_text()
            .splitlines()]
    assert {(r["brokerAddress"], r["epoch"], r["startOffset"]) for r in rows} == {
        (cluster.master.address, 1, 0), (cluster.master.address, 2, 1000),
        (cluster.slave.address, 1, 0), (cluster.slave.address, 2, 1000)}
    assert (tmp_path / "out" / "dataset" / "events" / "events.jsonl").read_text() == ""
    without_cluster = mqctl("report", "-a", cluster.leader.address, "--output", str(tmp_path / "out2"))
    assert without_cluster.returncode == 2
    assert "keeps no event log: give -c CLUSTER" in without_cluster.stderr
