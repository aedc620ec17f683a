"""The epoch-history metrics: per broker group, how masters changed, why, for how long, and whether the
replicas agree on their epochs.

Theory of operation. Everything is a DataFrame transformation built from Spark's own functions (no
Python UDFs, so executors never start Python), and nothing but the per-group result reaches the driver.
The group key is (clusterName, brokerName); within a group the controller's ``index`` is the apply order.

- *Elections* are the ELECT_MASTER events. ``lead(timestamp)`` over the group's elections gives each
  elected master's tenure: it ends at the group's next ELECT_MASTER (elected or not), or is still open
  at ``as_of``.
- *The SyncStateSet* changes at ALTER_SYNC_STATE_SET (to the event's set) and at an elected ELECT_MASTER
  (reset to ``{master}``). ``lag(size)`` over those changes counts shrinks and expands; ``lead(timestamp)``
  gives how long each set lasted, which is summed where the set held one broker, from the group's first
  election to ``as_of``.
- *Epochs* come from the brokers' epoch files: an epoch number is divergent when the replicas reporting
  it disagree on its ``startOffset``.

Events stamped after ``as_of`` are ignored, so a report "as of" a past time shows the history up to then.
Every metric is defined in docs/report.md; :func:`compute` is pure (DataFrames in, DataFrames out) so the
tests drive it with hand-made data. ``jobs/epoch_history.py`` runs the whole report under ``spark-submit``.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, LongType

from spark_reports.columns import GROUP_COLUMNS, SUMMED

KEY = ("clusterName", "brokerName")


def _in_order() -> WindowSpec:
    return Window.partitionBy(*KEY).orderBy("index")


def _count(condition: Column) -> Column:
    return F.count_if(F.coalesce(condition, F.lit(False)))


def _visible(events: DataFrame, as_of_ms: int) -> DataFrame:
    return events.filter(F.col("timestamp") <= F.lit(as_of_ms))


# ---------------------------------------------------------------------- elections and tenures
def elections(events: DataFrame, as_of_ms: int) -> DataFrame:
    """ELECT_MASTER events with ``endTs``: the next ELECT_MASTER's timestamp, null while open."""
    return (_visible(events, as_of_ms)
            .filter(F.col("eventType") == "ELECT_MASTER")
            .select(*KEY, "index", "timestamp", F.coalesce("elected", F.lit(False)).alias("elected"),
                    "electReason", "masterBrokerId", "masterEpoch")
            .withColumn("endTs", F.lead("timestamp").over(_in_order())))


def _election_metrics(events: DataFrame, as_of_ms: int) -> DataFrame:
    elected, reason = F.col("elected"), F.col("electReason")
    closed = F.when(elected & F.col("endTs").isNotNull(), F.col("endTs") - F.col("timestamp"))
    open_tenure = F.when(elected & F.col("endTs").isNull(), F.lit(as_of_ms) - F.col("timestamp"))
    last = F.max_by(F.struct("elected", "masterBrokerId", "masterEpoch"), "index")
    return (elections(events, as_of_ms)
            .groupBy(*KEY)
            .agg(_count(elected).alias("masterEpochs"),
                 _count(elected & reason.isin("FAILOVER", "UNCLEAN")).alias("failovers"),
                 _count(elected & (reason == "UNCLEAN")).alias("uncleanElections"),
                 _count(elected & (reason == "ADMIN")).alias("adminElections"),
                 _count(~elected).alias("failedElections"),
                 F.try_divide(F.sum(closed), F.count(closed)).alias("meanTenureMs"),
                 F.max(closed).alias("maxTenureMs"),
                 F.max(open_tenure).alias("currentTenureMs"),
                 last.alias("last"))
            .withColumns({"currentMasterBrokerId": F.when(F.col("last.elected"), F.col("last.masterBrokerId")),
                          "currentMasterEpoch": F.col("last.masterEpoch")})
            .drop("last"))


# ---------------------------------------------------------------------- the SyncStateSet
def sync_state_changes(events: DataFrame, as_of_ms: int) -> DataFrame:
    """Each change of a group's SyncStateSet with its size, the previous size, and the span it lasted
    (``spanStart``/``spanEnd`` clipped to start no earlier than the group's first election)."""
    is_alter = F.col("eventType") == "ALTER_SYNC_STATE_SET"
    is_election = (F.col("eventType") == "ELECT_MASTER") & F.coalesce(F.col("elected"), F.lit(False))
    ordered = _in_order()
    whole = ordered.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    first_election = F.min(F.when(~F.col("isAlter"), F.col("timestamp"))).over(whole)
    end = F.coalesce(F.lead("timestamp").over(ordered), F.lit(as_of_ms))
    elected_once = F.col("firstElection").isNotNull()
    return (_visible(events, as_of_ms)
            .filter(is_alter | is_election)
            .select(*KEY, "index", "timestamp", is_alter.alias("isAlter"),
                    F.when(is_alter, F.size("syncStateSet")).otherwise(F.lit(1)).alias("setSize"))
            .withColumns({"prevSize": F.lag("setSize").over(ordered), "firstElection": first_election})
            # greatest() skips nulls, hence the when(): a group never elected has no span at all
            .withColumns({"spanStart": F.when(elected_once, F.greatest("timestamp", "firstElection")),
                          "spanEnd": F.when(elected_once, F.greatest(end, F.col("firstElection")))}))


def _sync_state_metrics(events: DataFrame, as_of_ms: int) -> DataFrame:
    alter, size, prev = F.col("isAlter"), F.col("setSize"), F.col("prevSize")
    alone = F.when(size == 1, F.col("spanEnd") - F.col("spanStart"))
    return (sync_state_changes(events, as_of_ms)
            .groupBy(*KEY)
            .agg(_count(alter & (size < prev)).alias("shrinkCount"),
                 _count(alter & (size > prev)).alias("expandCount"),
                 F.sum(alone).alias("underReplicatedMs")))


# ---------------------------------------------------------------------- replicas' epoch files
def _epoch_metrics(epochs: DataFrame) -> DataFrame:
    """``replicas`` (distinct brokerIds) and ``divergentEpochs`` per group. An epoch diverges when its
    replicas' startOffsets are not all equal, i.e. their min and max differ (nulls ignored, as a distinct
    count would). Only plain hash aggregations over the ~3 rows per epoch: collecting sets per epoch
    instead makes Spark fall back to sort-based aggregation (more than 128 keys), which took about a
    fifth of the job's task time on 10 M events."""
    replicas = (epochs.filter(F.col("brokerId").isNotNull()).select(*KEY, "brokerId").distinct()
                .groupBy(*KEY).agg(F.count(F.lit(1)).alias("replicas")))
    divergent = (epochs.groupBy(*KEY, "epoch")
                 .agg(F.min("startOffset").alias("lo"), F.max("startOffset").alias("hi"))
                 .filter(F.col("lo") != F.col("hi"))
                 .groupBy(*KEY).agg(F.sort_array(F.collect_list("epoch")).alias("divergentEpochs")))
    return replicas.join(divergent, list(KEY), "full")


# ---------------------------------------------------------------------- the job
def compute(events: DataFrame, epochs: DataFrame, as_of_ms: int) -> tuple[DataFrame, DataFrame]:
    """Per-group metrics (one row per group, ``GROUP_COLUMNS``) and the cluster-wide row."""
    groups = (_visible(events, as_of_ms).select(*KEY).union(epochs.select(*KEY)).distinct()
              .join(_election_metrics(events, as_of_ms), list(KEY), "left")
              .join(_sync_state_metrics(events, as_of_ms), list(KEY), "left")
              .join(_epoch_metrics(epochs), list(KEY), "left"))
    empty = F.array().cast(ArrayType(LongType()))
    groups = (groups.withColumns({name: F.coalesce(F.col(name), F.lit(0).cast(LongType())) for name in SUMMED}
                                 | {"divergentEpochs": F.coalesce("divergentEpochs", empty)})
              .withColumn("failoverRank", F.rank().over(Window.orderBy(F.desc("failovers"))))
              .select(*GROUP_COLUMNS))
    return groups, cluster_summary(groups)


def cluster_summary(groups: DataFrame) -> DataFrame:
    """One row: the group count, each count summed, and the groups ranked by failovers."""
    ranked = F.struct(F.col("failoverRank").alias("rank"), F.col("failovers"), *[F.col(k) for k in KEY])
    sums = [F.coalesce(F.sum(name), F.lit(0)).cast(LongType()).alias(name) for name in SUMMED]
    return groups.agg(
        F.count(F.lit(1)).alias("groups"),
        F.sort_array(F.collect_set("clusterName")).alias("clusterNames"),
        *sums,
        F.coalesce(F.sum(F.size("divergentEpochs")), F.lit(0)).cast(LongType()).alias("divergentEpochs"),
        F.sort_array(F.collect_list(ranked)).alias("failoverRanking"))


# ---------------------------------------------------------------------- timelines (for the pictures)
def timeline(events: DataFrame, as_of_ms: int, latest: int = 200) -> tuple[DataFrame, DataFrame]:
    """The latest ``latest`` masterships and under-replicated spans per group, for drawing.

    Masterships: ``start``/``end`` (``as_of`` if open), ``elected`` (false: the master was cleared and
    none elected), ``brokerId``, ``epoch``, ``reason``. Spans: ``start``/``end`` where the set held one broker.
    """
    newest_first = Window.partitionBy(*KEY).orderBy(F.desc("index"))
    masters = (elections(events, as_of_ms)
               .select(*KEY, "index", F.col("timestamp").alias("start"),
                       F.coalesce("endTs", F.lit(as_of_ms)).alias("end"), "elected",
                       F.col("masterBrokerId").alias("brokerId"), F.col("masterEpoch").alias("epoch"),
                       F.col("electReason").alias("reason"))
               .withColumn("n", F.row_number().over(newest_first))
               .filter(F.col("n") <= latest).drop("n"))
    spans = (sync_state_changes(events, as_of_ms)
             .filter((F.col("setSize") == 1) & (F.col("spanEnd") > F.col("spanStart")))
             .select(*KEY, "index", F.col("spanStart").alias("start"), F.col("spanEnd").alias("end"))
             .withColumn("n", F.row_number().over(newest_first))
             .filter(F.col("n") <= latest).drop("n"))
    return masters, spans
