"""A whole report run on a small dataset: every output file, and what each holds."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_reports.columns import GROUP_COLUMNS
from spark_reports.pipeline import SMALL_INPUT_BYTES, _fit_shuffles, run_report
from tests.spark.builders import alter, elect, entry, failed, other
from tests.spark.test_dataset import dataset

pytestmark = pytest.mark.spark

EVENTS = [
    other(0, 1_000),
    elect(1, 2_000, 1, 1, "INITIAL"), alter(2, 3_000, [1, 2]), alter(3, 4_000, [1, 2, 3]),
    elect(4, 6_000, 2, 2, "FAILOVER"), alter(5, 6_500, [2, 3]),
    failed(6, 7_000, 3),
    elect(7, 8_000, 3, 4, "UNCLEAN"),
    elect(0, 1_500, 1, 1, "INITIAL", group="broker-b"),
]
EPOCHS = [entry(1, 1, 0, 100), entry(2, 1, 0, 100), entry(2, 2, 100, 150), entry(3, 1, 0, 100),
          entry(3, 2, 110, 150), entry(3, 4, 150, 160), entry(1, 1, 0, 5, group="broker-b")]


@pytest.fixture(scope="module")
def report(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = dataset(tmp_path_factory.mktemp("dataset"), EVENTS, EPOCHS)
    output = tmp_path_factory.mktemp("report")
    result = run_report(spark, root, output, as_of_ms=10_000, meta={"sparkMaster": "local[2]"})
    assert result.stats.events == len(EVENTS) and result.stats.epoch_entries == len(EPOCHS)
    return output


def test_summary_json(report: Path) -> None:
    summary = json.loads((report / "summary.json").read_text())
    assert list(summary) == ["asOf", "groups", "cluster"] and summary["asOf"] == 10_000
    a, b = summary["groups"]
    assert list(a) == list(GROUP_COLUMNS)
    assert a == {
        "clusterName": "DefaultCluster", "brokerName": "broker-a", "replicas": 3, "masterEpochs": 3,
        "failovers": 2, "uncleanElections": 1, "adminElections": 0, "failedElections": 1,
        "meanTenureMs": 2_500.0, "maxTenureMs": 4_000, "currentTenureMs": 2_000, "shrinkCount": 0,
        "expandCount": 3, "underReplicatedMs": 1_000 + 500 + 2_000, "divergentEpochs": [2],
        "currentMasterBrokerId": 3, "currentMasterEpoch": 4, "failoverRank": 1}
    assert (b["brokerName"], b["replicas"], b["currentTenureMs"], b["failoverRank"]) == ("broker-b", 1, 8_500, 2)
    assert summary["cluster"]["groups"] == 2 and summary["cluster"]["failovers"] == 2
    assert [r["brokerName"] for r in summary["cluster"]["failoverRanking"]] == ["broker-a", "broker-b"]


def test_csv(report: Path) -> None:
    with open(report / "groups.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert rows[0] == list(GROUP_COLUMNS)
    assert rows[1][:3] == ["DefaultCluster", "broker-a", "3"]
    assert rows[1][GROUP_COLUMNS.index("divergentEpochs")] == "2"
    assert rows[2][GROUP_COLUMNS.index("meanTenureMs")] == ""  # null: broker-b has no closed tenure


def test_parquet(spark: SparkSession, report: Path) -> None:
    frame = spark.read.parquet(str(report / "groups.parquet"))
    assert tuple(frame.columns) == GROUP_COLUMNS
    rows = {r["brokerName"]: r for r in frame.collect()}
    assert rows["broker-a"]["divergentEpochs"] == [2] and rows["broker-b"]["maxTenureMs"] is None


def test_html_is_self_contained(report: Path) -> None:
    page = (report / "report.html").read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>") and page.count("<svg") >= 3  # legend + one per group
    assert "broker-a" in page and "FAILOVER at" in page and "UNCLEAN at" in page
    assert "SyncStateSet held one broker" in page
    for external in ("<script", "src=", "href=", "@import", "url("):
        assert external not in page


def test_png(report: Path) -> None:
    data = (report / "timeline.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5_000


class FakeConf:
    def __init__(self, preset: set[str]) -> None:
        self.preset, self.set_to = preset, {}

    def contains(self, key: str) -> bool:
        return key in self.preset

    def set(self, key: str, value: str) -> None:
        self.set_to[key] = value


class FakeSpark:
    """Only what _fit_shuffles reads: the settings given at start and the core count."""

    def __init__(self, preset: set[str]) -> None:
        self.conf = FakeConf(preset)
        self.sparkContext = self
        self.defaultParallelism = 2

    def getConf(self) -> FakeConf:
        return self.conf


@pytest.mark.parametrize(("size", "preset", "expected"), [
    (10_000, set(), {"spark.sql.shuffle.partitions": "2"}),        # small: one partition per core
    (SMALL_INPUT_BYTES, set(), {}),                                 # large: Spark's default
    (10_000, {"spark.sql.shuffle.partitions"}, {}),                 # the user's choice stays
])
def test_small_inputs_shuffle_in_one_partition_per_core(size: int, preset: set[str], expected: dict[str, str]) -> None:
    spark = FakeSpark(preset)
    _fit_shuffles(spark, size)  # type: ignore[arg-type]
    assert spark.conf.set_to == expected
