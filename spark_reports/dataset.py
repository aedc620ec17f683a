"""The epoch-history dataset: a directory with ``events/`` and ``epochs/`` of JSON Lines or Parquet files.

Both tables are read with explicit schemas (never inferred: inference reads all the data once more and
guesses types from whatever it sees first), JSON in FAILFAST mode so a bad line is an error, not a row
of nulls. :func:`validate` then checks what a schema cannot express (required fields, known event types)
in one pass per table, and Spark's own read errors are turned into one :class:`DatasetError` line by
:func:`translate_errors`. The fields are documented in docs/report.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BooleanType, LongType, StringType, StructField, StructType

from spark_reports.errors import DatasetError, ReportError, spark_messages

EVENT_TYPES = ("APPLY_BROKER_ID", "UPDATE_BROKER_ADDRESS", "ELECT_MASTER", "ALTER_SYNC_STATE_SET",
               "CLEAN_BROKER_DATA")
ELECT_REASONS = ("INITIAL", "FAILOVER", "ADMIN", "UNCLEAN")

EVENTS_SCHEMA = StructType([
    StructField("clusterName", StringType()),
    StructField("brokerName", StringType()),
    StructField("index", LongType()),
    StructField("eventType", StringType()),
    StructField("timestamp", LongType()),
    StructField("elected", BooleanType()),
    StructField("electReason", StringType()),
    StructField("masterBrokerId", LongType()),
    StructField("masterEpoch", LongType()),
    StructField("syncStateSet", ArrayType(LongType())),
    StructField("syncStateSetEpoch", LongType()),
    StructField("brokerId", LongType()),
    StructField("brokerAddress", StringType()),
    StructField("brokerIds", ArrayType(LongType())),  # optional: CLEAN_BROKER_DATA's cleaned ids
])

EPOCHS_SCHEMA = StructType([
    StructField("clusterName", StringType()),
    StructField("brokerName", StringType()),
    StructField("brokerId", LongType()),
    StructField("brokerAddress", StringType()),
    StructField("epoch", LongType()),
    StructField("startOffset", LongType()),
    StructField("endOffset", LongType()),
])

CONDITION_PREFIX = re.compile(r"^\[[A-Z0-9_.]+\]\s*")
READ_ERROR_CONDITIONS = ("FAILED_READ_FILE", "MALFORMED_RECORD", "PATH_NOT_FOUND", "UNABLE_TO_INFER_SCHEMA",
                         "CANNOT_READ_FILE", "PARQUET_", "INVALID_JSON")


@dataclass(frozen=True)
class Dataset:
    events: DataFrame
    epochs: DataFrame
    #: total size of the input files
    size_bytes: int = 0


@dataclass(frozen=True)
class DatasetStats:
    events: int
    epoch_entries: int
    max_timestamp: int | None


def load(spark: SparkSession, root: str | Path, cluster: str | None = None) -> Dataset:
    """Read ``root/events`` and ``root/epochs``; only rows of ``cluster`` when given. Lazy: no data is read."""
    events, events_bytes = _read_table(spark, root, "events", EVENTS_SCHEMA)
    epochs, epochs_bytes = _read_table(spark, root, "epochs", EPOCHS_SCHEMA)
    if cluster is not None:
        events = events.filter(F.col("clusterName") == cluster)
        epochs = epochs.filter(F.col("clusterName") == cluster)
    return Dataset(events, epochs, events_bytes + epochs_bytes)


def _read_table(spark: SparkSession, root: str | Path, name: str, schema: StructType) -> tuple[DataFrame, int]:
    directory = Path(root) / name
    if not directory.is_dir():
        raise DatasetError(f"malformed dataset {root}: no {name}/ directory (expected events/ and epochs/ "
                           "holding *.jsonl or *.parquet files)")
    # absolute paths: on a cluster, executors resolve relative ones against their own working directory
    jsonl = sorted(str(p) for p in directory.resolve().rglob("*.jsonl") if p.is_file())
    parquet = sorted(str(p) for p in directory.resolve().rglob("*.parquet") if p.is_file())
    if not jsonl and not parquet:
        raise DatasetError(f"malformed dataset {root}: {directory} holds no *.jsonl or *.parquet file")
    frames = []
    if jsonl:
        frames.append(spark.read.schema(schema).option("mode", "FAILFAST").json(jsonl))
    if parquet:
        frames.append(spark.read.schema(schema).parquet(*parquet))
    frame = frames[0]
    for other in frames[1:]:
        frame = frame.unionByName(other)
    return frame, sum(Path(p).stat().st_size for p in jsonl + parquet)


# ---------------------------------------------------------------------- validation
def _missing(*names: str) -> Column:
    return F.greatest(*[F.col(n).isNull() for n in names]) if len(names) > 1 else F.col(names[0]).isNull()


def _event_checks() -> dict[str, Column]:
    elect = F.col("eventType") == "ELECT_MASTER"
    elected = elect & F.coalesce(F.col("elected"), F.lit(False))
    return {
        "lack clusterName, brokerName, index, eventType or timestamp":
            _missing("clusterName", "brokerName", "index", "eventType", "timestamp"),
        f"have an eventType other than {', '.join(EVENT_TYPES)}": ~F.col("eventType").isin(*EVENT_TYPES),
        "are ELECT_MASTER without elected": elect & F.col("elected").isNull(),
        "are elected ELECT_MASTER without masterBrokerId": elected & F.col("masterBrokerId").isNull(),
        f"are elected ELECT_MASTER whose electReason is not one of {', '.join(ELECT_REASONS)}":
            elected & ~F.coalesce(F.col("electReason").isin(*ELECT_REASONS), F.lit(False)),
        "are ALTER_SYNC_STATE_SET without syncStateSet":
            (F.col("eventType") == "ALTER_SYNC_STATE_SET") & F.col("syncStateSet").isNull(),
    }


def _epoch_checks() -> dict[str, Column]:
    return {"lack clusterName, brokerName, brokerId, epoch or startOffset":
            _missing("clusterName", "brokerName", "brokerId", "epoch", "startOffset")}


def validate(dataset: Dataset, root: str | Path) -> DatasetStats:
    """One aggregation per table: row counts, the newest timestamp, and a count per broken rule."""
    events = _counts(dataset.events, _event_checks(), "events", F.max("timestamp").alias("maxTimestamp"))
    epochs = _counts(dataset.epochs, _epoch_checks(), "epochs")
    with translate_errors(root):
        row = events.crossJoin(epochs).first()  # one Spark job for both tables
    assert row is not None  # global aggregations always yield one row
    broken = [f"{row[name]} {name.split(':', 1)[0]} rows {name.split(':', 1)[1]}"
              for name in row.asDict() if ":" in name and row[name]]
    if broken:
        raise DatasetError(f"malformed dataset {root}: {'; '.join(broken)}")
    return DatasetStats(int(row["events"]), int(row["epochs"]), row["maxTimestamp"])


def _counts(frame: DataFrame, checks: dict[str, Column], table: str, *extra: Column) -> DataFrame:
    """One row: the table's row count (named ``table``) and, per rule, ``table:rule`` = rows breaking it."""
    counts = [F.count_if(F.coalesce(rule, F.lit(False))).alias(f"{table}:{text}") for text, rule in checks.items()]
    return frame.agg(F.count(F.lit(1)).alias(table), *extra, *counts)


# ---------------------------------------------------------------------- Spark errors → one line
@contextmanager
def translate_errors(root: str | Path | None) -> Iterator[None]:
    """Turn a failed Spark action into a ReportError (a DatasetError if reading the input failed)."""
    from py4j.protocol import Py4JError  # type: ignore[import-untyped]
    from pyspark.errors import PySparkException

    try:
        yield
    except (PySparkException, Py4JError) as exc:
        messages = spark_messages(exc)
        condition = _condition(exc, next((m for m in messages if m.startswith("[")), ""))
        if root is not None and condition.startswith(READ_ERROR_CONDITIONS):
            raise DatasetError(f"malformed dataset {root}: {_read_error_detail(messages)}") from exc
        raise ReportError(f"the Spark job failed: {messages[-1]}") from exc


def _condition(exc: BaseException, message: str) -> str:
    getter = getattr(exc, "getCondition", None)
    condition = getter() if callable(getter) else None
    if condition:
        return str(condition)
    match = re.match(r"\[([A-Z0-9_.]+)\]", message)
    return match.group(1) if match else ""


def _read_error_detail(messages: list[str]) -> str:
    """``<file>: <the most specific reason>`` from Spark's FAILED_READ_FILE chain."""
    reading = next((m for m in messages if "reading file" in m), messages[0])
    match = re.search(r"reading file (\S+?)\.?(?:\s|$)", reading)
    where = f"{match.group(1).removeprefix('file://')}: " if match else ""
    if messages[-1] == reading:
        reason = reading.split("Encountered error while reading file", 1)[-1]
        reason = re.sub(r"^\s*\S+?\.\s+", "", reason) if where else CONDITION_PREFIX.sub("", reason)
        return f"{where}{reason.strip() or messages[0]}"
    return where + CONDITION_PREFIX.sub("", messages[-1])
