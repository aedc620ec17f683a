"""Controller write capacity: committed metadata writes through the HTTP API of a 3-node controller
(journal on), against bare pysyncobj writes on 3 nodes measured in the same run.

    python -m bench.controller_writes [--seconds 10] [--clients 16]

HTTP: ``--clients`` concurrent callers, one keep-alive connection each, POST ``applyBrokerId`` to the
leader (every call commits one write: an event for one of 64 broker sets; writes that arrive together share a
log entry, the controller's group commit). Raw: the same number of threads inside
the leader process of a bare pysyncobj cluster, each calling a replicated method synchronously with an
entry of the same size (``bench/raw_raft.py``). CPU time per committed write is charged to each process.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import (
    cpu_seconds,
    read_response,
    request_bytes,
    scratch_dir,
    summary,
    table,
    write_result,
)
from mqctl.localcluster import ControllerCluster, free_port_pair, wait_until


def raw_pysyncobj(root: Path, seconds: float, clients: int) -> dict[str, Any]:
    ports = [free_port_pair() for _ in range(3)]
    addresses = [f"127.0.0.1:{p + 1}" for p in ports]
    result = root / "raw-result.json"
    procs = []
    try:
        for i, address in enumerate(addresses):
            peers = ",".join(a for a in addresses if a != address)
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "bench.raw_raft", "--self", address, "--peers", peers,
                 "--dir", str(root / f"raw-n{i}"), "--seconds", str(seconds), "--clients", str(clients),
                 "--result", str(result)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        before = [0.0] * 3
        started = time.monotonic()
        while not result.exists():  # charge CPU from the first moment every node is up
            if time.monotonic() - started > seconds + 60:
                raise RuntimeError("the raw pysyncobj cluster produced no result")
            if time.monotonic() - started < 1.0:
                before = [cpu_seconds(p.pid) for p in procs]
            time.sleep(0.05)
        used = sum(cpu_seconds(p.pid) - b for p, b in zip(procs, before))
        outcome: dict[str, Any] = json.loads(result.read_text())
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=10)
    outcome["cpuUsPerWrite"] = round(used * 1e6 / max(1, outcome["writesPerSec"] * seconds), 1)
    return outcome


def http_writes(root: Path, seconds: float, clients: int) -> dict[str, Any]:
    cluster = ControllerCluster(root / "http", size=3, extra={"logLevel": "WARNING"})
    cluster.configure()
    cluster.start()
    try:
        leader = cluster.leader(timeout=60)
        url = f"http://{leader.address}/v1/controller/applyBrokerId"
        body = {"clusterName": "DefaultCluster", "brokerName": "bench-0", "appliedBrokerId": 1,
                "registerCheckCode": "127.0.0.1:10911;1"}
        with httpx.Client(timeout=5.0) as c:  # the broker sets exist before the clock starts
            for g in range(64):
                wait_until(lambda g=g: c.post(url, json={**body, "brokerName": f"bench-{g}"}).json()["code"] == 0,
                           30, "the first applyBrokerId")
        pids = [n.process.pid for n in cluster.nodes if n.process is not None]
        before = [cpu_seconds(p) for p in pids]
        me = time.process_time()
        started = time.monotonic()
        done, failed, latencies = asyncio.run(_drive(leader.address, body, seconds, clients))
        elapsed = time.monotonic() - started
        loadgen = time.process_time() - me
        per_node = [cpu_seconds(p) - b for p, b in zip(pids, before)]
        used = sum(per_node)
        writes = done
        leader_index = next(i for i, n in enumerate(cluster.nodes) if n is leader)
    finally:
        cluster.stop()
    return {"writesPerSec": writes / elapsed, "failed": failed,
            "latencyMs": summary(latencies),
            "cpuUsPerWrite": round(used * 1e6 / max(1, writes), 1),
            "leaderCpuUsPerWrite": round(per_node[leader_index] * 1e6 / max(1, writes), 1),
            "leaderCpuPct": round(100 * per_node[leader_index] / elapsed, 1),
            "loadgenCpuUsPerWrite": round(loadgen * 1e6 / max(1, writes), 1)}


async def _drive(address: str, body: dict[str, Any], seconds: float,
                 clients: int) -> tuple[int, dict[str, int], list[float]]:
    """``clients`` keep-alive connections, each sending its next write when the last is answered. The
    requests are encoded once (one per broker set), so the load generator costs little CPU."""
    host, _, port = address.rpartition(":")
    requests = [request_bytes(address, "/v1/controller/applyBrokerId", {**body, "brokerName": f"bench-{g}"})
                for g in range(64)]
    stop = time.monotonic() + seconds
    done = 0
    failed: dict[str, int] = {}
    latencies: list[float] = []

    async def client(k: int) -> None:
        nonlocal done
        reader, writer = await asyncio.open_connection(host, int(port))
        i = k
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            writer.write(requests[i % 64])
            reply = json.loads(await read_response(reader))
            if reply["code"] == 0:
                done += 1
                latencies.append((time.perf_counter() - t0) * 1000)
            else:
                failed[str(reply["code"])] = failed.get(str(reply["code"]), 0) + 1
            i += clients
        writer.close()

    await asyncio.gather(*(client(k) for k in range(clients)))
    return done, failed, latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--clients", type=int, default=16)
    args = parser.parse_args()
    gc.collect()
    gc.freeze()
    root = scratch_dir("mqctl-bench-ctl-")
    raw = raw_pysyncobj(root, args.seconds, args.clients)
    http = http_writes(root, args.seconds, args.clients)
    rows = [{"case": "bare pysyncobj, in-process callers", "writesPerSec": raw["writesPerSec"],
             "p50Ms": raw["latencyMs"]["p50"], "p99Ms": raw["latencyMs"]["p99"],
             "cpuUsPerWrite": raw["cpuUsPerWrite"]},
            {"case": "controller HTTP API (applyBrokerId)", "writesPerSec": http["writesPerSec"],
             "p50Ms": http["latencyMs"]["p50"], "p99Ms": http["latencyMs"]["p99"],
             "cpuUsPerWrite": http["cpuUsPerWrite"]}]
    ratio = http["writesPerSec"] / raw["writesPerSec"]
    print(table(rows, ["case", "writesPerSec", "p50Ms", "p99Ms", "cpuUsPerWrite"]))
    print(f"\nHTTP / raw (same run): {ratio:.2f}x; failed HTTP writes: {http['failed'] or 0}")
    path = write_result("controller_writes", {"args": vars(args), "raw": raw, "http": http, "httpOverRaw": ratio})
    print(f"result: {path}")


if __name__ == "__main__":
    main()
