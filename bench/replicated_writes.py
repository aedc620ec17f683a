"""Replicated write throughput and latency: one group of 3 with allAckInSyncStateSet=true, against a
single unreplicated broker measured in the same run.

    python -m bench.replicated_writes [--seconds 10] [--batch 100] [--size 1024] [--producers 4]

Each case: producers (threads, one HTTP connection each) send batches of ``--batch`` messages of
``--size`` bytes as fast as the broker acknowledges them; msg/s counts PUT_OK messages only. Then the
same at half the measured maximum rate, for the ack latency distribution.
"""

from __future__ import annotations

import argparse
import gc
import http.client
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import cpu_seconds, run_workers, scratch_dir, summary, table, write_result
from mqctl.devcluster import DevCluster
from tests.chaos.harness import free_base_port


def start(root: Path, replicas: int, flush: str) -> DevCluster:
    cluster = DevCluster.create(root, 3, 1, replicas, free_base_port())
    for node in cluster.brokers():
        conf = cluster.conf_file(node)
        text = conf.read_text().replace("flushIntervalCommitLog=200", "flushIntervalCommitLog=500")
        conf.write_text(text + f"flushDiskType={flush}\nlogLevel=WARNING\n")
    for node in cluster.controllers():
        conf = cluster.conf_file(node)
        conf.write_text(conf.read_text() + "logLevel=WARNING\n")
    cluster.up(timeout=120)
    return cluster


def drive(address: str, seconds: float, batch: int, size: int, producers: int,
          rate: float | None = None) -> dict[str, Any]:
    """Producers send batches as fast as acknowledged, or (``rate``) at evenly spaced moments: each
    producer sends every ``producers * batch / rate`` seconds, the producers offset from each other."""
    body = "x" * size
    # The load generator shares the CPUs with the cluster, so it is kept lean: the request body is
    # encoded once and sent over the standard library's keep-alive HTTP connection (httpx took
    # ~4 µs more CPU per message, which the cluster then did not have).
    payload = json.dumps({"messages": [{"topic": "Bench", "body": body} for _ in range(batch)]}).encode()
    headers = {"Content-Type": "application/json"}
    stop = time.monotonic() + seconds
    acked = [0] * producers
    latencies: list[list[float]] = [[] for _ in range(producers)]
    statuses: dict[str, int] = {}
    lock = threading.Lock()
    interval = producers * batch / rate if rate else 0.0
    origin = time.monotonic() + 0.05

    def worker(i: int) -> None:
        next_at = origin + i * interval / producers
        host, _, port = address.rpartition(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=10.0)
        try:
            while time.monotonic() < stop:
                if interval:
                    wait = next_at - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)
                    next_at += interval
                t0 = time.perf_counter()
                conn.request("POST", "/v1/broker/sendMessages", body=payload, headers=headers)
                answer = conn.getresponse().read()
                latencies[i].append((time.perf_counter() - t0) * 1000)
                status = json.loads(answer)["data"]["status"]
                with lock:
                    statuses[status] = statuses.get(status, 0) + 1
                if status == "PUT_OK":
                    acked[i] += batch
        finally:
            conn.close()

    elapsed = run_workers(worker, producers)
    lat = [x for per in latencies for x in per]
    return {"msgPerSec": sum(acked) / elapsed, "acked": sum(acked), "seconds": elapsed, "statuses": statuses,
            "ackLatencyMs": summary(lat)}


def cpu_per_message(cluster: DevCluster, master: str, run: Any) -> tuple[dict[str, Any], dict[str, float]]:
    """Run ``run()`` and charge the CPU time every process used to each acknowledged message (µs/msg)."""
    pids = {n.name: cluster.pid(n) for n in cluster.brokers() + cluster.controllers()}
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    me = time.process_time()
    result = run()
    used = {name: cpu_seconds(pid) - before[name] for name, pid in pids.items()}
    roles = {"master": used.pop(master), "loadgen": time.process_time() - me,
             "slaves": sum(v for k, v in used.items() if not k.startswith("n")),
             "controllers": sum(v for k, v in used.items() if k.startswith("n"))}
    n = max(result["acked"], 1)
    per_msg = {role: round(seconds * 1e6 / n, 1) for role, seconds in roles.items()}
    per_msg["total"] = round(sum(per_msg.values()), 1)
    per_msg["cpuBusyPct"] = round(100 * sum(roles.values()) / (result["seconds"] * (os.cpu_count() or 1)), 1)
    return result, per_msg


def case(name: str, replicas: int, flush: str, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    cluster = start(root / name, replicas, flush)
    try:
        master = cluster.master_of("broker-a")
        assert master is not None
        drive(master.address, 2, args.batch, args.size, args.producers)  # warm-up
        peak, cpu = cpu_per_message(cluster, master.name, lambda: drive(
            master.address, args.seconds, args.batch, args.size, args.producers))
        half = drive(master.address, args.seconds, args.batch, args.size, args.producers,
                     rate=peak["msgPerSec"] / 2)
        single = drive(master.address, min(args.seconds, 5), 1, args.size, 1)
    finally:
        cluster.down(grace=5)
    return {"case": name, "replicas": replicas, "flush": flush, "msgPerSec": peak["msgPerSec"],
            "p50Ms": peak["ackLatencyMs"]["p50"], "p99Ms": peak["ackLatencyMs"]["p99"],
            "halfRateMsgPerSec": half["msgPerSec"], "halfRateP50Ms": half["ackLatencyMs"]["p50"],
            "halfRateP99Ms": half["ackLatencyMs"]["p99"],
            "unbatchedMsgPerSec": single["msgPerSec"], "unbatchedP50Ms": single["ackLatencyMs"]["p50"],
            "unbatchedP99Ms": single["ackLatencyMs"]["p99"], "cpuUsPerMsg": cpu,
            "statuses": peak["statuses"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--producers", type=int, default=4)
    args = parser.parse_args()
    root = scratch_dir("mqctl-bench-")
    gc.collect()
    gc.freeze()  # the load generator's own start-up objects: keep its collector pauses out of the latencies
    rows = [case("single broker, ASYNC_FLUSH", 1, "ASYNC_FLUSH", args, root),
            case("3 replicas allAck, ASYNC_FLUSH", 3, "ASYNC_FLUSH", args, root),
            case("3 replicas allAck, SYNC_FLUSH", 3, "SYNC_FLUSH", args, root)]
    ratio = rows[1]["msgPerSec"] / rows[0]["msgPerSec"]
    print(table(rows, ["case", "msgPerSec", "p50Ms", "p99Ms", "halfRateP50Ms", "halfRateP99Ms",
                       "unbatchedMsgPerSec", "unbatchedP50Ms"]))
    print("\nCPU time per acknowledged message at the peak (µs), by process:")
    print(table([{"case": r["case"], **r["cpuUsPerMsg"]} for r in rows],
                ["case", "master", "slaves", "controllers", "loadgen", "total", "cpuBusyPct"]))
    print(f"\nreplicated / single (same run): {ratio:.2f}x")
    path = write_result("replicated_writes", {"args": vars(args), "cases": rows, "replicatedOverSingle": ratio})
    print(f"result: {path}")


if __name__ == "__main__":
    main()
