"""One report run: dataset → validated → job → files. Shared by ``mqctl report``, ``spark-submit`` and the
benchmark, so all three produce the same outputs."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_reports import render
from spark_reports.charts import GroupTimeline
from spark_reports.dataset import DatasetStats, load, translate_errors, validate
from spark_reports.epoch_metrics import KEY, cluster_summary, compute, timeline

#: Timelines are drawn for this many groups (the most failovers first), each with its latest changes.
TIMELINE_GROUPS = 50
TIMELINE_CHANGES = 200
#: Inputs below this size run their shuffles in as many partitions as Spark has cores instead of 200.
SMALL_INPUT_BYTES = 32 * 1024 * 1024
SEPARATOR = "\u0000"  # cannot occur in a cluster or broker name


@dataclass
class ReportResult:
    summary: dict[str, Any]
    stats: DatasetStats
    output: Path
    files: dict[str, Path] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)


def now_ms() -> int:
    return int(time.time() * 1000)


def run_report(spark: SparkSession, input_dir: str | Path, output_dir: str | Path, as_of_ms: int | None = None,
               cluster: str | None = None, meta: dict[str, Any] | None = None) -> ReportResult:
    """Validate ``input_dir``, run the job, write every output under ``output_dir``.

    ``as_of_ms`` defaults to now, or to the newest event's timestamp when that is later (a controller
    whose clock runs ahead of ours must not have its newest events dropped)."""
    output = Path(output_dir)
    output.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    started = time.monotonic()
    data = load(spark, input_dir, cluster)
    _fit_shuffles(spark, data.size_bytes)
    stats = validate(data, input_dir)
    as_of = as_of_ms if as_of_ms is not None else max(now_ms(), stats.max_timestamp or 0)
    timings["validate"] = time.monotonic() - started
    with translate_errors(input_dir):
        groups_df = compute(data.events, data.epochs, as_of)[0].cache()  # small: one row per group
        try:
            groups = [row.asDict(recursive=True) for row in groups_df.orderBy(*KEY).collect()]
            cluster_row = cluster_summary(groups_df).first()  # from the cache, not the events again
            timings["job"] = time.monotonic() - started - timings["validate"]
            timelines = _timelines(data.events, groups, as_of)
            groups_df.coalesce(1).write.mode("overwrite").parquet(str(output.resolve() / render.PARQUET_NAME))
        finally:
            groups_df.unpersist()
    assert cluster_row is not None  # a global aggregation always yields one row
    summary = {"asOf": as_of, "groups": groups, "cluster": cluster_row.asDict(recursive=True)}
    timings["spark"] = time.monotonic() - started
    files = render.write_outputs(output, summary, timelines,
                                 {"input": str(input_dir), "events": stats.events,
                                  "epochEntries": stats.epoch_entries, **(meta or {})})
    files["parquet"] = output / render.PARQUET_NAME
    timings["total"] = time.monotonic() - started
    return ReportResult(summary, stats, output, files, timings)


def _fit_shuffles(spark: SparkSession, size_bytes: int) -> None:
    """A small input in 200 shuffle partitions spends its time scheduling tasks and writing tiny files
    (a 10,000-event job: 3.2 s warm, 1.6 s with one partition per core). Unless the user chose a number."""
    key = "spark.sql.shuffle.partitions"
    if size_bytes < SMALL_INPUT_BYTES and not spark.sparkContext.getConf().contains(key):
        spark.conf.set(key, str(max(1, spark.sparkContext.defaultParallelism)))


def _timelines(events: DataFrame, groups: list[dict[str, Any]], as_of: int) -> list[GroupTimeline]:
    """Only the drawn groups' latest changes reach the driver (a small, bounded result), in one job."""
    ranked = sorted(groups, key=lambda g: (g["failoverRank"], g["clusterName"], g["brokerName"]))
    order = [(g["clusterName"], g["brokerName"]) for g in ranked[:TIMELINE_GROUPS]]
    masters_df, spans_df = timeline(events, as_of, TIMELINE_CHANGES)
    spans_df = spans_df.select(*KEY, "index", "start", "end", F.lit(None).cast("boolean").alias("elected"),
                               *[F.lit(None).cast("long").alias(c) for c in ("brokerId", "epoch")],
                               F.lit(None).cast("string").alias("reason"))
    both = (masters_df.withColumn("kind", F.lit("master"))
            .unionByName(spans_df.withColumn("kind", F.lit("span")))
            .filter(F.concat_ws(SEPARATOR, *KEY).isin([SEPARATOR.join(k) for k in order])))
    rows = [row.asDict() for row in both.collect()] if order else []
    return render.build_timelines(order, [r for r in rows if r["kind"] == "master"],
                                  [r for r in rows if r["kind"] == "span"], as_of, TIMELINE_CHANGES)
