"""Scale benchmark of ``mqctl report``: generate an N-event epoch-history dataset with Spark itself, then
run the report job on it the way the CLI does, and print the time and peak memory.

    python bench/report_scale.py                      # 10 million events (minutes; not for CI)
    python bench/report_scale.py --events 200000      # a quick run
    python bench/report_scale.py --conf spark.driver.memory=2g

The dataset (Parquet) is generated in a child process, so the measured JVM is the report's alone, and is
kept under ``--dir`` for reuse (``--regenerate`` to rebuild). Generation uses only ``spark.range`` and
hash functions (no Python per row). Each group cycles through ten events: an election (mostly FAILOVER,
some ADMIN / UNCLEAN, 4% failed), set expands and shrinks (sometimes to the master alone), and address
and id events; every replica reports an epoch entry per election, with a few diverging start offsets.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

T0 = 1_700_000_000_000
STEP_MS = 3_000
CYCLE = 10


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", nargs="?", default="run", choices=("run", "generate"),
                        help="run (default): generate if needed, then measure; generate: only generate")
    parser.add_argument("--events", type=int, default=10_000_000, help="events to generate (default 10M)")
    parser.add_argument("--groups", type=int, default=1_000, help="broker groups (default 1000)")
    parser.add_argument("--clusters", type=int, default=4, help="clusters the groups are spread over")
    parser.add_argument("--dir", type=Path, default=None, help="dataset directory (default bench/results/...)")
    parser.add_argument("--output", type=Path, default=None, help="report directory (default: next to --dir)")
    parser.add_argument("--regenerate", action="store_true", help="rebuild the dataset even if present")
    parser.add_argument("--spark-master", default="local[*]")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="Spark setting")
    args = parser.parse_args(argv)
    args.dir = args.dir or ROOT / "bench" / "results" / f"report-scale-{args.events}"
    args.output = args.output or args.dir.with_name(args.dir.name + "-report")
    return args


# ---------------------------------------------------------------------- generation
def generate(args: argparse.Namespace) -> None:
    from pyspark.sql import functions as F

    from spark_reports.dataset import EPOCHS_SCHEMA, EVENTS_SCHEMA
    from spark_reports.session import SessionOptions, build_session, parse_conf

    spark = build_session(SessionOptions(master=args.spark_master, conf=parse_conf(args.conf),
                                         app_name="report-scale-generate", log_file=args.dir / "spark-driver.log"))
    try:
        started = time.monotonic()
        events = _events(spark, args.events, args.groups, args.clusters)
        events.select(*[F.col(f.name).cast(f.dataType) for f in EVENTS_SCHEMA.fields]) \
            .write.mode("overwrite").parquet(str(args.dir / "events"))
        elections = -(-args.events // (args.groups * CYCLE))
        epochs = _epochs(spark, args.groups, args.clusters, elections)
        epochs.select(*[F.col(f.name).cast(f.dataType) for f in EPOCHS_SCHEMA.fields]) \
            .write.mode("overwrite").parquet(str(args.dir / "epochs"))
        (args.dir / "generated.json").write_text(json.dumps({
            "events": args.events, "groups": args.groups, "clusters": args.clusters,
            "asOf": T0 + args.events * STEP_MS, "seconds": round(time.monotonic() - started, 1)}) + "\n")
    finally:
        spark.stop()


def _events(spark, n: int, groups: int, clusters: int):  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    g = F.col("id") % groups
    seq = F.floor(F.col("id") / groups)
    cycle = F.floor(seq / CYCLE)
    pos = seq % CYCLE
    h = F.abs(F.xxhash64("id"))
    master = (F.pmod(F.xxhash64(g, cycle), F.lit(3)) + 1).cast("long")
    other = (F.pmod(master, F.lit(3)) + 1).cast("long")
    everyone = F.array(*[F.lit(i).cast("long") for i in (1, 2, 3)])
    reason = (F.when(seq == 0, "INITIAL").when(h % 100 < 80, "FAILOVER").when(h % 100 < 90, "ADMIN")
              .otherwise("UNCLEAN"))
    elected = (seq == 0) | (h % 25 != 0)
    kind = (F.when(pos == 0, "ELECT_MASTER").when(pos.isin(1, 2, 4, 5, 8), "ALTER_SYNC_STATE_SET")
            .when((pos == 7) & (h % 4 == 0), "ALTER_SYNC_STATE_SET").when(pos == 6, "APPLY_BROKER_ID")
            .when((pos == 9) & (h % 50 == 0), "CLEAN_BROKER_DATA").otherwise("UPDATE_BROKER_ADDRESS"))
    sync = (F.when(pos == 0, F.array(master)).when(pos.isin(1, 4), F.array(master, other))
            .when(pos == 7, F.array(master)).otherwise(everyone))
    is_elect, is_alter = kind == "ELECT_MASTER", kind == "ALTER_SYNC_STATE_SET"
    return (spark.range(n)
            .select(F.concat(F.lit("cluster-"), (g % clusters).cast("string")).alias("clusterName"),
                    F.concat(F.lit("broker-"), g.cast("string")).alias("brokerName"),
                    F.col("id").alias("index"),
                    kind.alias("eventType"),
                    (F.lit(T0) + F.col("id") * STEP_MS + h % 1000).alias("timestamp"),
                    F.when(is_elect, elected).alias("elected"),
                    F.when(is_elect & elected, reason).alias("electReason"),
                    F.when(~is_elect | elected, master).alias("masterBrokerId"),
                    (cycle + 1).alias("masterEpoch"),
                    F.when(is_alter | is_elect, sync).alias("syncStateSet"),
                    seq.alias("syncStateSetEpoch"),
                    F.when(~is_elect & ~is_alter, other).alias("brokerId"),
                    F.when(~is_elect & ~is_alter, F.lit("127.0.0.1:10911")).alias("brokerAddress"),
                    F.lit(None).cast("array<long>").alias("brokerIds")))


def _epochs(spark, groups: int, clusters: int, elections: int):  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    per_group = elections * 3
    g = F.floor(F.col("id") / per_group)
    epoch = F.floor((F.col("id") % per_group) / 3) + 1
    replica = F.col("id") % 3 + 1
    drift = F.when((replica == 3) & (F.pmod(F.xxhash64(g, epoch), F.lit(50)) == 0), 17).otherwise(0)
    start = epoch * 1_000_000 + drift
    return (spark.range(groups * per_group)
            .select(F.concat(F.lit("cluster-"), (g % clusters).cast("string")).alias("clusterName"),
                    F.concat(F.lit("broker-"), g.cast("string")).alias("brokerName"),
                    replica.alias("brokerId"),
                    F.concat(F.lit("127.0.0.1:"), (10_000 + replica).cast("string")).alias("brokerAddress"),
                    epoch.alias("epoch"), start.alias("startOffset"), (start + 999_999).alias("endOffset")))


# ---------------------------------------------------------------------- measurement
def vm_hwm_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def du_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def measure(args: argparse.Namespace) -> dict[str, object]:
    from pyspark import SparkContext

    from spark_reports.paths import dataset_bytes
    from spark_reports.pipeline import SMALL_INPUT_BYTES, run_report
    from spark_reports.session import SessionOptions, build_session, parse_conf

    meta = json.loads((args.dir / "generated.json").read_text())
    started = time.monotonic()
    spark = build_session(SessionOptions(master=args.spark_master, conf=parse_conf(args.conf),
                                         app_name="report-scale", log_file=args.output / "spark-driver.log",
                                         small_input=dataset_bytes(args.dir) < SMALL_INPUT_BYTES))  # as mqctl report
    session_s = time.monotonic() - started
    gateway = SparkContext._gateway
    jvm_pid = gateway.proc.pid if gateway is not None and getattr(gateway, "proc", None) else None
    try:
        result = run_report(spark, args.dir, args.output, as_of_ms=int(meta["asOf"]))
        driver_memory = spark.conf.get("spark.driver.memory", "1g (default)")
        jvm_peak = vm_hwm_mb(jvm_pid) if jvm_pid else None
    finally:
        spark.stop()
    return {
        "events": result.stats.events, "epochEntries": result.stats.epoch_entries,
        "groups": len(result.summary["groups"]), "datasetMB": round(du_mb(args.dir), 1),
        "sparkMaster": args.spark_master, "driverMemory": driver_memory, "cores": os.cpu_count(),
        "sessionSeconds": round(session_s, 1),
        **{f"{k}Seconds": round(v, 1) for k, v in result.timings.items()},
        "wallSeconds": round(time.monotonic() - started, 1),
        "jvmPeakRssMB": round(jvm_peak) if jvm_peak else None,
        "pythonPeakRssMB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "clusterTotals": {k: result.summary["cluster"][k] for k in ("masterEpochs", "failovers", "divergentEpochs")},
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "generate":
        generate(args)
        return 0
    if args.regenerate or not (args.dir / "generated.json").exists():
        started = time.monotonic()
        print(f"generating {args.events:,} events in {args.dir} ...", flush=True)
        command = [sys.executable, __file__, "generate", "--events", str(args.events), "--groups", str(args.groups),
                   "--clusters", str(args.clusters), "--dir", str(args.dir), "--spark-master", args.spark_master]
        subprocess.run(command, check=True)
        print(f"generated in {time.monotonic() - started:.1f}s", flush=True)
    print(json.dumps(measure(args), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
