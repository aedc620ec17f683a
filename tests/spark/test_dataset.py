"""Loading the dataset: JSONL and Parquet with explicit schemas, and one clear error for a bad one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spark_reports.dataset import load, translate_errors, validate
from spark_reports.errors import DatasetError
from tests.spark.builders import alter, elect, entry, epochs_df, events_df

pytestmark = pytest.mark.spark


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def dataset(root: Path, events: list[dict[str, Any]], epochs: list[dict[str, Any]]) -> Path:
    write_jsonl(root / "events" / "events.jsonl", events)
    write_jsonl(root / "epochs" / "epochs.jsonl", epochs)
    return root


def test_jsonl_and_parquet_are_read_together(spark: SparkSession, tmp_path: Path) -> None:
    root = dataset(tmp_path, [elect(0, 1_000, 1, 1, "INITIAL")], [entry(1, 1, 0, 10)])
    events_df(spark, [alter(1, 2_000, [1, 2])]).write.parquet(str(root / "events" / "more.parquet"))  # a directory
    epochs_df(spark, [entry(2, 1, 0, 10)]).write.parquet(str(root / "epochs" / "more"))
    data = load(spark, root)
    assert sorted(r["index"] for r in data.events.collect()) == [0, 1]
    assert sorted(r["brokerId"] for r in data.epochs.collect()) == [1, 2]
    assert validate(data, root).events == 2
    files = [p for p in root.rglob("*") if p.is_file() and p.name.endswith((".jsonl", ".parquet"))]
    assert data.size_bytes == sum(p.stat().st_size for p in files) > 0


def test_unknown_fields_are_ignored_and_missing_optional_ones_are_null(spark: SparkSession, tmp_path: Path) -> None:
    minimal = {"clusterName": "C", "brokerName": "b", "index": 0, "eventType": "ELECT_MASTER", "timestamp": 5,
               "elected": True, "electReason": "INITIAL", "masterBrokerId": 1, "comment": "not in the schema"}
    root = dataset(tmp_path, [minimal], [])
    stats = validate(load(spark, root), root)
    assert (stats.events, stats.epoch_entries, stats.max_timestamp) == (1, 0, 5)


def test_cluster_filter(spark: SparkSession, tmp_path: Path) -> None:
    root = dataset(tmp_path, [elect(0, 1, 1, 1, "INITIAL", cluster="A"), elect(0, 1, 1, 1, "INITIAL", cluster="B")],
                   [entry(1, 1, 0, 1, cluster="A")])
    data = load(spark, root, cluster="B")
    assert [r["clusterName"] for r in data.events.collect()] == ["B"]
    assert data.epochs.count() == 0


def test_missing_directory(spark: SparkSession, tmp_path: Path) -> None:
    write_jsonl(tmp_path / "events" / "e.jsonl", [])
    with pytest.raises(DatasetError, match=r"no epochs/ directory"):
        load(spark, tmp_path)


def test_directory_without_data_files(spark: SparkSession, tmp_path: Path) -> None:
    root = dataset(tmp_path, [], [])
    (root / "events" / "events.jsonl").rename(root / "events" / "events.txt")
    with pytest.raises(DatasetError, match=r"events holds no \*\.jsonl or \*\.parquet file"):
        load(spark, root)


def test_invalid_json_line(spark: SparkSession, tmp_path: Path) -> None:
    root = dataset(tmp_path, [elect(0, 1, 1, 1, "INITIAL")], [])
    with open(root / "events" / "events.jsonl", "a", encoding="utf-8") as out:
        out.write('{"clusterName": "C", "index": \n')
    with pytest.raises(DatasetError) as info:
        validate(load(spark, root), root)
    message = str(info.value)
    assert message.startswith(f"malformed dataset {root}: {root}/events/events.jsonl: ")
    assert "\n" not in message


def test_wrong_type_in_json(spark: SparkSession, tmp_path: Path) -> None:
    root = dataset(tmp_path, [{**elect(0, 1, 1, 1, "INITIAL"), "timestamp": "yesterday"}], [])
    with pytest.raises(DatasetError, match=r"malformed dataset .*events\.jsonl"):
        validate(load(spark, root), root)


def test_wrong_type_in_parquet(spark: SparkSession, tmp_path: Path) -> None:
    root = dataset(tmp_path, [], [])
    (root / "epochs" / "epochs.jsonl").unlink()
    spark.createDataFrame([("C", "b", "one", 1, 0)], "clusterName string, brokerName string, brokerId string, "
                          "epoch long, startOffset long").write.parquet(str(root / "epochs" / "p"))
    with pytest.raises(DatasetError, match=r"malformed dataset .*\.parquet: .*brokerId"):
        validate(load(spark, root), root)


@pytest.mark.parametrize(("row", "problem"), [
    ({"eventType": "ELECT_MASTER", "elected": None}, "1 events rows are ELECT_MASTER without elected"),
    ({"eventType": "REBOOT"}, "1 events rows have an eventType other than"),
    ({"timestamp": None}, "1 events rows lack clusterName, brokerName, index, eventType or timestamp"),
    ({"electReason": "LUCK"}, "1 events rows are elected ELECT_MASTER whose electReason is not one of"),
    ({"masterBrokerId": None}, "1 events rows are elected ELECT_MASTER without masterBrokerId"),
])
def test_rule_violations(spark: SparkSession, tmp_path: Path, row: dict[str, Any], problem: str) -> None:
    root = dataset(tmp_path, [elect(0, 1, 1, 1, "INITIAL"), {**elect(1, 2, 2, 2), **row}], [])
    with pytest.raises(DatasetError) as info:
        validate(load(spark, root), root)
    assert str(info.value).startswith(f"malformed dataset {root}: {problem}")


def test_alter_without_set_and_epoch_without_offset(spark: SparkSession, tmp_path: Path) -> None:
    root = dataset(tmp_path, [{**alter(0, 1, [1]), "syncStateSet": None}], [{**entry(1, 1, 0, 1), "startOffset": None}])
    with pytest.raises(DatasetError) as info:
        validate(load(spark, root), root)
    assert str(info.value) == (f"malformed dataset {root}: 1 events rows are ALTER_SYNC_STATE_SET without "
                               "syncStateSet; 1 epochs rows lack clusterName, brokerName, brokerId, epoch or "
                               "startOffset")


def test_other_spark_failures_are_report_errors(spark: SparkSession) -> None:
    from spark_reports.errors import ReportError

    with pytest.raises(ReportError, match=r"^the Spark job failed: .*(DIVIDE_BY_ZERO|Division by zero)"), \
            translate_errors(None):
        spark.sql("SELECT 1 / 0 AS x").collect()
