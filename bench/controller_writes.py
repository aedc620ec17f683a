"""Controller write capacity: committed metadata writes through the HTTP API of a 3-node controller
(journal on), against bare pysyncobj writes on 3 nodes measured in the same run.

    python -m bench.controller_writes [--seconds 10] [--clients 8]

HTTP: ``--clients`` threads, one keep-alive connection each, POST ``applyBrokerId`` to the leader (every
call commits one Raft entry: an event for a broker set of 64). Raw: the same number of threads inside
the leader process of a bare pysyncobj cluster, each calling a replicated method synchronously with an
entry of the same size (``bench/raw_raft.py``). CPU time per committed write is charged to each process.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import summary, table, write_result
from bench.replicated_writes import cpu_seconds
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
        stop = time.monotonic() + seconds
        done = [0] * clients
        failed: dict[str, int] = {}
        latencies: list[list[float]] = [[] for _ in range(clients)]
        lock = threading.Lock()

        def worker(k: int) -> None:
            i = k
            with httpx.Client(timeout=5.0) as client:
                while time.monotonic() < stop:
                    t0 = time.perf_counter()
                    reply = client.post(url, json={**body, "brokerName": f"bench-{i % 64}"}).json()
                    if reply["code"] == 0:
                        done[k] += 1
                        latencies[k].append((time.perf_counter() - t0) * 1000)
                    else:
                        with lock:
                            failed[reply.get("remark") or str(reply["code"])] = failed.get(str(reply["code"]), 0) + 1
                    i += clients

        me = time.process_time()
        threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(clients)]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - started
        loadgen = time.process_time() - me
        used = sum(cpu_seconds(p) - b for p, b in zip(pids, before))
        writes = sum(done)
    finally:
        cluster.stop()
    return {"writesPerSec": writes / elapsed, "failed": failed,
            "latencyMs": summary([x for per in latencies for x in per]),
            "cpuUsPerWrite": round(used * 1e6 / max(1, writes), 1),
            "loadgenCpuUsPerWrite": round(loadgen * 1e6 / max(1, writes), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--clients", type=int, default=8)
    args = parser.parse_args()
    gc.collect()
    gc.freeze()
    root = Path(tempfile.mkdtemp(prefix="mqctl-bench-ctl-"))
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
