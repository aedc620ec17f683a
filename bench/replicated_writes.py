"""Replicated write throughput and latency: one group of 3 with allAckInSyncStateSet=true, against a
single unreplicated broker measured in the same run.

    python -m bench.replicated_writes [--seconds 12] [--rounds 4] [--batch 100] [--size 1024] [--producers 4]

Each case: producers (threads, one HTTP connection each) send batches of ``--batch`` messages of
``--size`` bytes as fast as the broker acknowledges them; msg/s counts PUT_OK messages only. Then the
same at half the measured maximum rate, for the ack latency distribution.

The single broker and the replicated group run side by side (one idle while the other is measured),
and their peak is measured in ``--rounds`` alternating slices of ``--seconds / --rounds`` (single,
replicated, replicated, single, ...): this machine's speed drifts by tens of percent within a minute,
and alternating puts the same drift into both sides of the ratio.
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

from bench.common import alternate, cpu_seconds, run_workers, scratch_dir, summary, table, write_result
from mqctl.cluster import DevCluster
from services.broker import contract as bc
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
                conn.request("POST", bc.SEND_MESSAGES, body=payload, headers=headers)
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
            "ackLatencyMs": summary(lat), "latencies": lat}


class Case:
    """One cluster under test: its peak is measured in slices (``slice``), then ``finish`` measures
    the half-rate and unbatched latencies and returns the row."""

    def __init__(self, name: str, replicas: int, flush: str, args: argparse.Namespace, root: Path) -> None:
        self.name, self.replicas, self.flush, self.args = name, replicas, flush, args
        self.cluster = start(root / name, replicas, flush)
        master = self.cluster.master_of("broker-a")
        assert master is not None
        self.master = master
        self.slices: list[dict[str, Any]] = []
        self.cpu: dict[str, float] = {}

    def drive(self, seconds: float, rate: float | None = None, batch: int | None = None,
              producers: int | None = None) -> dict[str, Any]:
        a = self.args
        return drive(self.master.address, seconds, batch or a.batch, a.size, producers or a.producers, rate)

    def slice(self, seconds: float, measured: bool = True) -> None:
        """Drive at full speed for ``seconds``; when ``measured``, count the messages as the peak and
        charge every process's CPU time to them."""
        if not measured:
            self.drive(seconds)
            return
        pids = {n.name: self.cluster.pid(n) for n in self.cluster.brokers() + self.cluster.controllers()}
        before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        me = time.process_time()
        result = self.drive(seconds)
        used = {name: cpu_seconds(pid) - before[name] for name, pid in pids.items()}
        roles = {"master": used.pop(self.master.name), "loadgen": time.process_time() - me,
                 "slaves": sum(v for k, v in used.items() if not k.startswith("n")),
                 "controllers": sum(v for k, v in used.items() if k.startswith("n"))}
        for role, spent in roles.items():
            self.cpu[role] = self.cpu.get(role, 0.0) + spent
        self.slices.append(result)

    @property
    def peak_rate(self) -> float:
        return sum(r["acked"] for r in self.slices) / sum(r["seconds"] for r in self.slices)

    def finish(self) -> dict[str, Any]:
        seconds = self.args.seconds
        half = self.drive(seconds, rate=self.peak_rate / 2)
        unbatched = self.drive(min(seconds, 5), batch=1, producers=1)
        acked = max(sum(r["acked"] for r in self.slices), 1)
        elapsed = sum(r["seconds"] for r in self.slices)
        cpu = {role: round(spent * 1e6 / acked, 1) for role, spent in self.cpu.items()}
        cpu["total"] = round(sum(cpu.values()), 1)
        cpu["cpuBusyPct"] = round(100 * sum(self.cpu.values()) / (elapsed * (os.cpu_count() or 1)), 1)
        peak_lat = summary([x for r in self.slices for x in r["latencies"]])
        statuses: dict[str, int] = {}
        for r in self.slices:
            for k, v in r["statuses"].items():
                statuses[k] = statuses.get(k, 0) + v
        return {"case": self.name, "replicas": self.replicas, "flush": self.flush, "msgPerSec": self.peak_rate,
                "sliceMsgPerSec": [round(r["msgPerSec"]) for r in self.slices],
                "p50Ms": peak_lat["p50"], "p99Ms": peak_lat["p99"],
                "halfRateMsgPerSec": half["msgPerSec"], "halfRateP50Ms": half["ackLatencyMs"]["p50"],
                "halfRateP99Ms": half["ackLatencyMs"]["p99"],
                "unbatchedMsgPerSec": unbatched["msgPerSec"], "unbatchedP50Ms": unbatched["ackLatencyMs"]["p50"],
                "unbatchedP99Ms": unbatched["ackLatencyMs"]["p99"], "cpuUsPerMsg": cpu, "statuses": statuses}

    def down(self) -> None:
        self.cluster.down(grace=5)


def measure(specs: list[tuple[str, int, str]], args: argparse.Namespace, root: Path) -> list[dict[str, Any]]:
    cases: list[Case] = []
    try:
        for name, replicas, flush in specs:
            cases.append(Case(name, replicas, flush, args, root))
        alternate(cases, args.rounds, args.seconds, warmup=2)
        return [c.finish() for c in cases]
    finally:
        for c in cases:
            c.down()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=12, help="peak measuring time per case")
    parser.add_argument("--rounds", type=int, default=4, help="alternating slices the peak time is cut into")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--producers", type=int, default=4)
    args = parser.parse_args()
    root = scratch_dir("mqctl-bench-")
    gc.collect()
    gc.freeze()  # the load generator's own start-up objects: keep its collector pauses out of the latencies
    rows = measure([("single broker, ASYNC_FLUSH", 1, "ASYNC_FLUSH"),
                    ("3 replicas allAck, ASYNC_FLUSH", 3, "ASYNC_FLUSH")], args, root)
    rows += measure([("3 replicas allAck, SYNC_FLUSH", 3, "SYNC_FLUSH")], args, root)
    ratio = rows[1]["msgPerSec"] / rows[0]["msgPerSec"]
    slice_ratios = [round(r / s, 2) for s, r in zip(rows[0]["sliceMsgPerSec"], rows[1]["sliceMsgPerSec"])]
    print(table(rows, ["case", "msgPerSec", "p50Ms", "p99Ms", "halfRateP50Ms", "halfRateP99Ms",
                       "unbatchedMsgPerSec", "unbatchedP50Ms"]))
    print("\nCPU time per acknowledged message at the peak (µs), by process:")
    print(table([{"case": r["case"], **r["cpuUsPerMsg"]} for r in rows],
                ["case", "master", "slaves", "controllers", "loadgen", "total", "cpuBusyPct"]))
    print(f"\nreplicated / single (same run, alternating slices): {ratio:.2f}x; slice by slice: "
          + ", ".join(f"{x:.2f}x" for x in slice_ratios))
    path = write_result("replicated_writes", {"args": vars(args), "cases": rows, "replicatedOverSingle": ratio,
                                              "sliceRatios": slice_ratios})
    print(f"result: {path}")


if __name__ == "__main__":
    main()
