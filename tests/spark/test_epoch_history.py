"""Each metric of the epoch-history job on small hand-made histories, with exact expected values.

Times are small integers (ms) so the arithmetic can be checked by eye; each test's docstring or
comments show it.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from spark_reports.columns import GROUP_COLUMNS
from spark_reports.epoch_metrics import cluster_summary, compute, timeline
from tests.spark.builders import CLUSTER, GROUP, alter, elect, entry, epochs_df, events_df, failed, other

pytestmark = pytest.mark.spark


def run(spark: SparkSession, events: list[dict[str, Any]], epochs: list[dict[str, Any]] | None = None,
        as_of: int = 10_000) -> tuple[dict[tuple[str, str], dict[str, Any]], dict[str, Any]]:
    groups, _ = compute(events_df(spark, events), epochs_df(spark, epochs or []), as_of)
    groups = groups.cache()  # the cluster row is computed from the groups, as the pipeline does
    rows = {(r["clusterName"], r["brokerName"]): r.asDict(recursive=True) for r in groups.collect()}
    total = cluster_summary(groups).first()
    groups.unpersist()
    assert total is not None
    return rows, total.asDict(recursive=True)


def one(spark: SparkSession, events: list[dict[str, Any]], epochs: list[dict[str, Any]] | None = None,
        as_of: int = 10_000) -> dict[str, Any]:
    rows, _ = run(spark, events, epochs, as_of)
    assert list(rows) == [(CLUSTER, GROUP)]
    return rows[(CLUSTER, GROUP)]


def test_election_counts_and_tenures(spark: SparkSession) -> None:
    g = one(spark, [
        other(0, 1_000),
        elect(1, 2_000, master=1, epoch=1, reason="INITIAL"),
        elect(2, 5_000, master=2, epoch=2, reason="FAILOVER"),   # tenure of 1: 3000
        elect(3, 6_000, master=3, epoch=3, reason="ADMIN"),      # tenure of 2: 1000
        failed(4, 8_000, epoch=4),                               # tenure of 3: 2000, ended by a failed election
        elect(5, 9_000, master=1, epoch=5, reason="UNCLEAN"),    # open: 10000 - 9000
        alter(6, 9_500, [1, 2]),
    ])
    assert (g["masterEpochs"], g["failovers"], g["uncleanElections"], g["adminElections"],
            g["failedElections"]) == (4, 2, 1, 1, 1)
    assert (g["meanTenureMs"], g["maxTenureMs"], g["currentTenureMs"]) == (2_000.0, 3_000, 1_000)
    assert (g["currentMasterBrokerId"], g["currentMasterEpoch"]) == (1, 5)


def test_tenure_nulls_without_closed_or_open_tenures(spark: SparkSession) -> None:
    rows, _ = run(spark, [
        elect(0, 1_000, master=1, epoch=1, reason="INITIAL", group="only-open"),
        elect(0, 1_000, master=1, epoch=1, reason="INITIAL", group="cleared"),
        failed(1, 3_000, epoch=2, group="cleared"),
    ], as_of=4_000)
    only_open, cleared = rows[(CLUSTER, "only-open")], rows[(CLUSTER, "cleared")]
    assert (only_open["meanTenureMs"], only_open["maxTenureMs"], only_open["currentTenureMs"]) == (None, None, 3_000)
    assert (cleared["meanTenureMs"], cleared["maxTenureMs"], cleared["currentTenureMs"]) == (2_000.0, 2_000, None)
    assert (cleared["currentMasterBrokerId"], cleared["currentMasterEpoch"]) == (None, 2)
    assert cleared["failedElections"] == 1


def test_events_after_as_of_are_ignored(spark: SparkSession) -> None:
    events = [elect(0, 1_000, master=1, epoch=1, reason="INITIAL"), elect(1, 5_000, master=2, epoch=2)]
    g = one(spark, events, as_of=3_000)
    assert (g["masterEpochs"], g["failovers"], g["currentTenureMs"]) == (1, 0, 2_000)
    assert (g["currentMasterBrokerId"], g["currentMasterEpoch"], g["underReplicatedMs"]) == (1, 1, 2_000)
    later = one(spark, events, as_of=6_000)
    assert (later["masterEpochs"], later["failovers"], later["maxTenureMs"], later["currentTenureMs"]) == (2, 1, 4_000,
                                                                                                          1_000)


SET_HISTORY = [
    alter(0, 500, [1, 2]),                                  # before any election: no previous set
    elect(1, 1_000, master=1, epoch=1, reason="INITIAL"),   # the set becomes {1}
    alter(2, 2_000, [1, 2]),                                # expand 1 → 2
    alter(3, 3_000, [1, 2, 3]),                             # expand 2 → 3
    alter(4, 4_000, [1, 3]),                                # shrink 3 → 2
    alter(5, 5_000, [1, 2]),                                # same size: neither
    alter(6, 6_000, [1]),                                   # shrink 2 → 1
    elect(7, 7_000, master=2, epoch=2),                     # reset to {2}: an election, not a shrink
    alter(8, 8_000, [2, 3]),                                # expand 1 → 2
]


def test_shrinks_and_expands(spark: SparkSession) -> None:
    g = one(spark, SET_HISTORY)
    assert (g["shrinkCount"], g["expandCount"]) == (2, 3)


def test_under_replicated_time(spark: SparkSession) -> None:
    # One broker in the set: 1000-2000 (after the election), 6000-7000 (shrunk to {1}), 7000-8000 (new
    # election); the [500, 1000) set before the first election is not counted.
    assert one(spark, SET_HISTORY)["underReplicatedMs"] == 3_000
    g = one(spark, [elect(0, 1_000, master=1, epoch=1, reason="INITIAL"), alter(1, 2_000, [1, 2]),
                    alter(2, 4_000, [1])])
    assert g["underReplicatedMs"] == 1_000 + 6_000  # open until as_of=10000
    never_elected = one(spark, [alter(0, 1_000, [1]), alter(1, 2_000, [1, 2])])
    assert (never_elected["underReplicatedMs"], never_elected["shrinkCount"], never_elected["expandCount"]) == (0, 0,
                                                                                                                 1)


def test_replicas_and_divergent_epochs(spark: SparkSession) -> None:
    rows, _ = run(spark, [elect(0, 1_000, master=1, epoch=1, reason="INITIAL", group="events-only")], [
        entry(1, 1, 0, 100), entry(1, 2, 100, 250),
        entry(2, 1, 0, 100), entry(2, 2, 100, 200), entry(2, 3, 200, 300),
        entry(3, 1, 0, 90), entry(3, 2, 120, 200), entry(3, 3, 200, 300),    # epoch 2 starts elsewhere
        entry(1, 5, 10, 20, group="epochs-only"), entry(2, 5, 12, 20, group="epochs-only"),
        entry(1, 1, 0, 10, group="epochs-only"), entry(2, 4, 0, 12, group="epochs-only"),
    ])
    assert (rows[(CLUSTER, GROUP)]["replicas"], rows[(CLUSTER, GROUP)]["divergentEpochs"]) == (3, [2])
    epochs_only = rows[(CLUSTER, "epochs-only")]
    assert (epochs_only["replicas"], epochs_only["divergentEpochs"]) == (2, [5])
    assert (epochs_only["masterEpochs"], epochs_only["failovers"], epochs_only["underReplicatedMs"]) == (0, 0, 0)
    assert (epochs_only["meanTenureMs"], epochs_only["currentTenureMs"], epochs_only["currentMasterBrokerId"],
            epochs_only["currentMasterEpoch"]) == (None, None, None, None)
    events_only = rows[(CLUSTER, "events-only")]
    assert (events_only["replicas"], events_only["divergentEpochs"]) == (0, [])


def test_divergent_epochs_sorted(spark: SparkSession) -> None:
    g = one(spark, [], [entry(1, 9, 0, 5), entry(2, 9, 1, 5), entry(1, 3, 0, 5), entry(2, 3, 7, 9),
                        entry(1, 4, 4, 4), entry(2, 4, 4, 8)])
    assert g["divergentEpochs"] == [3, 9]


def test_cluster_sums_and_failover_ranking(spark: SparkSession) -> None:
    events = [
        elect(0, 1_000, 1, 1, "INITIAL", group="a", cluster="C1"), elect(1, 2_000, 2, 2, group="a", cluster="C1"),
        elect(2, 3_000, 1, 3, group="a", cluster="C1"),
        elect(3, 1_000, 1, 1, "INITIAL", group="b", cluster="C1"), alter(4, 2_000, [1, 2], group="b", cluster="C1"),
        elect(0, 1_000, 1, 1, "INITIAL", group="a", cluster="C2"), elect(1, 2_000, 2, 2, group="a", cluster="C2"),
        elect(2, 3_000, 1, 3, "UNCLEAN", group="a", cluster="C2"),
        elect(3, 1_000, 1, 1, "INITIAL", group="c", cluster="C2"), elect(4, 2_000, 2, 2, "UNCLEAN", group="c",
                                                                         cluster="C2"),
        failed(5, 2_500, 3, group="c", cluster="C2"),
    ]
    rows, total = run(spark, events, [entry(1, 1, 0, 5, group="b", cluster="C1"),
                                      entry(2, 1, 1, 5, group="b", cluster="C1")], as_of=4_000)
    assert {k: r["failoverRank"] for k, r in rows.items()} == {
        ("C1", "a"): 1, ("C2", "a"): 1, ("C2", "c"): 3, ("C1", "b"): 4}
    assert total == {
        "groups": 4, "clusterNames": ["C1", "C2"], "replicas": 2, "masterEpochs": 9, "failovers": 5,
        "uncleanElections": 2, "adminElections": 0, "failedElections": 1, "shrinkCount": 0, "expandCount": 1,
        # a: 1000-2000 and 2000-3000 then 3000-4000 alone = 3000 (twice); b: 1000-2000; c: 1000-2000, 2000-4000
        "underReplicatedMs": 3_000 + 3_000 + 1_000 + 3_000, "divergentEpochs": 1,
        "failoverRanking": [
            {"rank": 1, "failovers": 2, "clusterName": "C1", "brokerName": "a"},
            {"rank": 1, "failovers": 2, "clusterName": "C2", "brokerName": "a"},
            {"rank": 3, "failovers": 1, "clusterName": "C2", "brokerName": "c"},
            {"rank": 4, "failovers": 0, "clusterName": "C1", "brokerName": "b"},
        ]}


def test_empty_dataset(spark: SparkSession) -> None:
    rows, total = run(spark, [], [])
    assert rows == {}
    assert total["groups"] == 0 and total["failovers"] == 0 and total["failoverRanking"] == []


def test_output_columns(spark: SparkSession) -> None:
    groups, _ = compute(events_df(spark, SET_HISTORY), epochs_df(spark, []), 10_000)
    assert tuple(groups.columns) == GROUP_COLUMNS


def _plan(frame: DataFrame) -> str:
    return str(frame._jdf.queryExecution().executedPlan().toString())


def test_plans_use_no_python(spark: SparkSession) -> None:
    """Executors never start Python: no Python UDF of any kind in the job's plans."""
    events, epochs = events_df(spark, SET_HISTORY), epochs_df(spark, [entry(1, 1, 0, 1)])
    groups, cluster = compute(events, epochs, 10_000)
    masters, spans = timeline(events, 10_000)
    for frame in (groups, cluster, masters, spans):
        plan = _plan(frame)
        assert "Python" not in plan and "ArrowEval" not in plan, plan


def test_timeline_rows(spark: SparkSession) -> None:
    masters, spans = timeline(events_df(spark, SET_HISTORY), 10_000)
    got = [(r["start"], r["end"], r["elected"], r["brokerId"], r["epoch"], r["reason"])
           for r in masters.orderBy("index").collect()]
    assert got == [(1_000, 7_000, True, 1, 1, "INITIAL"), (7_000, 10_000, True, 2, 2, "FAILOVER")]
    assert [(r["start"], r["end"]) for r in spans.orderBy("index").collect()] == [
        (1_000, 2_000), (6_000, 7_000), (7_000, 8_000)]
    latest, _ = timeline(events_df(spark, SET_HISTORY), 10_000, latest=1)
    assert [r["start"] for r in latest.collect()] == [7_000]
