"""The report's aggregation on Spark against the same aggregation in DuckDB, on the same Parquet files,
in the same run.

    python -m bench.report_vs_duckdb [--events 10000000] [--spark-master local[2]] [--threads 2]

The dataset is ``bench/report_scale.py``'s (generated on first use, then reused). Spark: a session is
started first (its start-up is reported apart), then the report's job (``compute``: every per-group
metric, collected to the driver) is timed, twice (the first run includes query planning and JIT warm-up).
DuckDB: the same metrics written as one SQL query over the same files, with as many threads as Spark
has cores. Both answers are compared group by group, so the timing compares equal work.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import RESULTS, table, write_result

ROOT = Path(__file__).resolve().parent.parent

DUCKDB_SQL = """
WITH ev AS (SELECT * FROM read_parquet('{events}') WHERE "timestamp" <= {as_of}),
ep AS (SELECT * FROM read_parquet('{epochs}')),
el AS (
    SELECT clusterName, brokerName, "index", "timestamp", coalesce(elected, false) AS elected, electReason,
           masterBrokerId, masterEpoch,
           lead("timestamp") OVER (PARTITION BY clusterName, brokerName ORDER BY "index") AS endTs
    FROM ev WHERE eventType = 'ELECT_MASTER'),
elm AS (
    SELECT clusterName, brokerName,
           count(*) FILTER (WHERE elected) AS masterEpochs,
           count(*) FILTER (WHERE elected AND electReason IN ('FAILOVER', 'UNCLEAN')) AS failovers,
           count(*) FILTER (WHERE elected AND electReason = 'UNCLEAN') AS uncleanElections,
           count(*) FILTER (WHERE elected AND electReason = 'ADMIN') AS adminElections,
           count(*) FILTER (WHERE NOT elected) AS failedElections,
           avg(endTs - "timestamp") FILTER (WHERE elected AND endTs IS NOT NULL) AS meanTenureMs,
           max(endTs - "timestamp") FILTER (WHERE elected AND endTs IS NOT NULL) AS maxTenureMs,
           max({as_of} - "timestamp") FILTER (WHERE elected AND endTs IS NULL) AS currentTenureMs,
           arg_max({{'elected': elected, 'master': masterBrokerId, 'epoch': masterEpoch}}, "index") AS last
    FROM el GROUP BY clusterName, brokerName),
sc AS (
    SELECT clusterName, brokerName, "index", "timestamp", eventType = 'ALTER_SYNC_STATE_SET' AS isAlter,
           CASE WHEN eventType = 'ALTER_SYNC_STATE_SET' THEN len(syncStateSet) ELSE 1 END AS setSize
    FROM ev
    WHERE eventType = 'ALTER_SYNC_STATE_SET' OR (eventType = 'ELECT_MASTER' AND coalesce(elected, false))),
sc2 AS (
    SELECT *, lag(setSize) OVER w AS prevSize,
           min(CASE WHEN NOT isAlter THEN "timestamp" END) OVER (PARTITION BY clusterName, brokerName)
               AS firstElection,
           coalesce(lead("timestamp") OVER w, {as_of}) AS endRaw
    FROM sc WINDOW w AS (PARTITION BY clusterName, brokerName ORDER BY "index")),
scm AS (
    SELECT clusterName, brokerName,
           count(*) FILTER (WHERE isAlter AND setSize < prevSize) AS shrinkCount,
           count(*) FILTER (WHERE isAlter AND setSize > prevSize) AS expandCount,
           sum(CASE WHEN setSize = 1 AND firstElection IS NOT NULL
                    THEN greatest(endRaw, firstElection) - greatest("timestamp", firstElection) END)
               AS underReplicatedMs
    FROM sc2 GROUP BY clusterName, brokerName),
rep AS (SELECT clusterName, brokerName, count(DISTINCT brokerId) AS replicas FROM ep GROUP BY clusterName, brokerName),
dv AS (
    SELECT clusterName, brokerName, list_sort(list(epoch)) AS divergentEpochs
    FROM (SELECT clusterName, brokerName, epoch FROM ep GROUP BY clusterName, brokerName, epoch
          HAVING count(DISTINCT startOffset) > 1)
    GROUP BY clusterName, brokerName),
keys AS (SELECT DISTINCT clusterName, brokerName
         FROM (SELECT clusterName, brokerName FROM ev UNION ALL SELECT clusterName, brokerName FROM ep)),
g AS (
    SELECT k.clusterName, k.brokerName, coalesce(rep.replicas, 0) AS replicas,
           coalesce(masterEpochs, 0) AS masterEpochs, coalesce(failovers, 0) AS failovers,
           coalesce(uncleanElections, 0) AS uncleanElections, coalesce(adminElections, 0) AS adminElections,
           coalesce(failedElections, 0) AS failedElections, meanTenureMs, maxTenureMs, currentTenureMs,
           coalesce(shrinkCount, 0) AS shrinkCount, coalesce(expandCount, 0) AS expandCount,
           coalesce(underReplicatedMs, 0) AS underReplicatedMs,
           coalesce(divergentEpochs, []::BIGINT[]) AS divergentEpochs,
           CASE WHEN last.elected THEN last.master END AS currentMasterBrokerId,
           last.epoch AS currentMasterEpoch
    FROM keys k
    LEFT JOIN elm USING (clusterName, brokerName) LEFT JOIN scm USING (clusterName, brokerName)
    LEFT JOIN rep USING (clusterName, brokerName) LEFT JOIN dv USING (clusterName, brokerName))
SELECT *, rank() OVER (ORDER BY failovers DESC) AS failoverRank FROM g ORDER BY clusterName, brokerName
"""


def duckdb_run(dataset: Path, as_of: int, threads: int) -> tuple[float, list[dict[str, Any]]]:
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    sql = DUCKDB_SQL.format(events=dataset / "events" / "*.parquet", epochs=dataset / "epochs" / "*.parquet",
                            as_of=as_of)
    started = time.monotonic()
    cursor = con.execute(sql)
    columns = [d[0] for d in cursor.description]
    rows = [dict(zip(columns, r)) for r in cursor.fetchall()]
    elapsed = time.monotonic() - started
    con.close()
    return elapsed, rows


def spark_runs(dataset: Path, as_of: int, master: str, conf: list[str], runs: int) -> dict[str, Any]:
    from spark_reports.dataset import load
    from spark_reports.epoch_metrics import KEY, compute
    from spark_reports.paths import dataset_bytes
    from spark_reports.pipeline import SMALL_INPUT_BYTES
    from spark_reports.session import SessionOptions, build_session, parse_conf

    started = time.monotonic()
    spark = build_session(SessionOptions(master=master, conf=parse_conf(conf), app_name="report-vs-duckdb",
                                         log_file=dataset.with_name(dataset.name + "-duckdb-cmp") / "spark.log",
                                         small_input=dataset_bytes(dataset) < SMALL_INPUT_BYTES))  # as mqctl report
    session_s = time.monotonic() - started
    times = []
    rows: list[dict[str, Any]] = []
    try:
        for _ in range(runs):
            t0 = time.monotonic()
            data = load(spark, dataset)
            groups = compute(data.events, data.epochs, as_of)[0]
            rows = [r.asDict(recursive=True) for r in groups.orderBy(*KEY).collect()]
            times.append(time.monotonic() - t0)
    finally:
        spark.stop()
    return {"sessionSeconds": session_s, "runSeconds": times, "rows": rows}


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(float(a), float(b), rel_tol=1e-9)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return bool(a == b)


def compare(spark_rows: list[dict[str, Any]], duck_rows: list[dict[str, Any]]) -> list[str]:
    problems = []
    if len(spark_rows) != len(duck_rows):
        problems.append(f"{len(spark_rows)} groups from Spark, {len(duck_rows)} from DuckDB")
    for s, d in zip(spark_rows, duck_rows):
        for key, value in s.items():
            if not same(value, d.get(key)):
                problems.append(f"{s['clusterName']}/{s['brokerName']} {key}: Spark {value!r}, DuckDB {d.get(key)!r}")
    return problems[:10]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--groups", type=int, default=1_000)
    parser.add_argument("--spark-master", default="local[2]")
    parser.add_argument("--threads", type=int, default=2, help="DuckDB threads (match the Spark cores)")
    parser.add_argument("--runs", type=int, default=2, help="Spark runs of the job on one session")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="Spark setting")
    args = parser.parse_args()
    dataset = RESULTS / f"report-scale-{args.events}"
    if not (dataset / "generated.json").exists():
        print(f"generating {args.events:,} events in {dataset} ...", flush=True)
        subprocess.run([sys.executable, str(ROOT / "bench" / "report_scale.py"), "generate", "--events",
                        str(args.events), "--groups", str(args.groups), "--dir", str(dataset),
                        "--spark-master", args.spark_master], check=True)
    as_of = int(json.loads((dataset / "generated.json").read_text())["asOf"])
    duck_s, duck_rows = duckdb_run(dataset, as_of, args.threads)
    spark = spark_runs(dataset, as_of, args.spark_master, args.conf, args.runs)
    problems = compare(spark["rows"], duck_rows)
    rows = [{"engine": "DuckDB", "seconds": duck_s, "ratio": 1.0},
            *[{"engine": f"Spark {args.spark_master}, run {i + 1}", "seconds": s, "ratio": s / duck_s}
              for i, s in enumerate(spark["runSeconds"])]]
    print(table(rows, ["engine", "seconds", "ratio"]))
    print(f"\nSpark session start-up (not in the ratio): {spark['sessionSeconds']:.1f}s; "
          f"{len(duck_rows):,} groups; results {'identical' if not problems else 'DIFFER'}")
    for p in problems:
        print("  " + p)
    path = write_result("report_vs_duckdb", {
        "args": vars(args), "events": json.loads((dataset / "generated.json").read_text())["events"],
        "duckdbSeconds": duck_s, "sparkSessionSeconds": spark["sessionSeconds"],
        "sparkRunSeconds": spark["runSeconds"], "firstRunRatio": spark["runSeconds"][0] / duck_s,
        "groups": len(duck_rows), "differences": problems})
    print(f"result: {path}")
    if problems:
        sys.exit(1)


if __name__ == "__main__":
    main()
