"""Hand-made epoch-history rows for the Spark tests: one helper per kind of event."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession

from spark_reports.dataset import EPOCHS_SCHEMA, EVENTS_SCHEMA

CLUSTER = "DefaultCluster"
GROUP = "broker-a"


def _event(index: int, ts: int, kind: str, group: str, cluster: str, **fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(EVENTS_SCHEMA.fieldNames())
    row.update(clusterName=cluster, brokerName=group, index=index, eventType=kind, timestamp=ts, **fields)
    return row


def elect(index: int, ts: int, master: int, epoch: int, reason: str = "FAILOVER", group: str = GROUP,
          cluster: str = CLUSTER) -> dict[str, Any]:
    return _event(index, ts, "ELECT_MASTER", group, cluster, elected=True, electReason=reason,
                  masterBrokerId=master, masterEpoch=epoch, syncStateSet=[master])


def failed(index: int, ts: int, epoch: int, group: str = GROUP, cluster: str = CLUSTER) -> dict[str, Any]:
    """An ELECT_MASTER that found no candidate: the master is cleared."""
    return _event(index, ts, "ELECT_MASTER", group, cluster, elected=False, masterEpoch=epoch)


def alter(index: int, ts: int, ids: list[int], group: str = GROUP, cluster: str = CLUSTER) -> dict[str, Any]:
    return _event(index, ts, "ALTER_SYNC_STATE_SET", group, cluster, syncStateSet=ids)


def other(index: int, ts: int, kind: str = "APPLY_BROKER_ID", group: str = GROUP,
          cluster: str = CLUSTER) -> dict[str, Any]:
    return _event(index, ts, kind, group, cluster, brokerId=1, brokerAddress="127.0.0.1:10911")


def entry(broker_id: int, epoch: int, start: int, end: int, group: str = GROUP,
          cluster: str = CLUSTER) -> dict[str, Any]:
    return {"clusterName": cluster, "brokerName": group, "brokerId": broker_id,
            "brokerAddress": f"127.0.0.1:{10900 + broker_id}", "epoch": epoch, "startOffset": start,
            "endOffset": end}


def events_df(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    return _local(spark.createDataFrame(rows, EVENTS_SCHEMA))


def epochs_df(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    return _local(spark.createDataFrame(rows, EPOCHS_SCHEMA))


def _local(frame: DataFrame) -> DataFrame:
    """Materialise once in the JVM: otherwise every scan of the job re-reads the rows through Python
    workers, which makes each test seconds slower."""
    return frame.localCheckpoint(eager=True)
