"""Controller capacity for heartbeats: many simulated brokers heartbeating every controller.

    python -m bench.heartbeat_soak [--brokers 1000] [--replicas 3] [--minutes 5] [--interval 1.0]

A 3-node controller cluster (the local-cluster timings: 3 s heartbeat timeout, scans every 0.5 s) gets
``--brokers`` brokers in groups of ``--replicas``: each registers as a real broker does (applyBrokerId,
registerBroker), every group elects a master, and then every broker heartbeats each of the 3
controllers every ``--interval`` seconds on its own keep-alive connections, for ``--minutes``. The
simulated brokers live in ``--workers`` load processes (asyncio, requests encoded once), so the load
generator costs little next to the controllers.

Reported: heartbeat latency (request written → answer read) over all heartbeats, heartbeats sent vs
answered, and elections during the soak: none may happen while every broker is heartbeating, and
every group must keep its master and masterEpoch.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.common import (
    cpu_seconds,
    events_since,
    read_response,
    request_bytes,
    scratch_dir,
    summary,
    table,
    write_result,
)
from mqctl.cluster import DEMO_CONTROLLER, ControllerCluster, wait_until
from services.common.controller_client import ControllerClient
from services.controller import contract

CLUSTER = "SoakCluster"


def broker_names(brokers: int, replicas: int) -> list[tuple[str, int]]:
    """(brokerName, brokerId) for every simulated broker, groups of ``replicas``."""
    return [(f"soak-{i // replicas:04d}", i % replicas + 1) for i in range(brokers)]


def fake_address(index: int) -> str:
    return f"127.0.0.1:{20000 + index}"


# ---------------------------------------------------------------------------------------- load worker
async def simulate(indexes: list[int], names: list[tuple[str, int]], controllers: list[str], interval: float,
                   seconds: float, timeout_ms: int, ready_file: Path) -> dict[str, Any]:
    latencies: list[float] = []
    counts = {"sent": 0, "answered": 0, "failed": 0}
    start = time.monotonic() + 0.5
    stop = start + seconds

    async def broker(index: int) -> None:
        name, broker_id = names[index]
        body = {"clusterName": CLUSTER, "brokerName": name, "brokerAddr": fake_address(index),
                "brokerId": broker_id, "epoch": 1, "maxOffset": 0, "confirmOffset": 0,
                "heartbeatTimeoutMills": timeout_ms}
        conns = []
        for c in controllers:
            host, _, port = c.rpartition(":")
            conns.append((await asyncio.open_connection(host, int(port)),
                          request_bytes(c, contract.HEARTBEAT, body)))
        next_at = start + interval * (index % 997) / 997  # spread evenly over the interval
        while next_at < stop:
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            next_at += interval
            for (reader, writer), request in conns:  # one controller after another, as a broker does
                counts["sent"] += 1
                t0 = time.perf_counter()
                try:
                    writer.write(request)
                    answer = await asyncio.wait_for(read_response(reader), 5.0)
                except (OSError, asyncio.IncompleteReadError, TimeoutError):
                    counts["failed"] += 1
                    continue
                latencies.append((time.perf_counter() - t0) * 1000)
                counts["answered" if b'"code":0' in answer else "failed"] += 1
        for (_, writer), _ in conns:
            writer.close()

    tasks = [asyncio.create_task(broker(i)) for i in indexes]
    await asyncio.sleep(0.2)
    ready_file.touch()  # noqa: ASYNC240  once, to tell the parent process the brokers run
    await asyncio.gather(*tasks)
    return {"latencies": latencies, **counts}


def worker_main(args: argparse.Namespace) -> None:
    names = broker_names(args.brokers, args.replicas)
    indexes = list(range(args.worker_index, args.brokers, args.workers))
    gc.collect()
    gc.freeze()
    result = asyncio.run(simulate(indexes, names, args.controllers.split(","), args.interval,
                                  args.minutes * 60, args.timeout_ms, Path(args.result + ".ready")))
    Path(args.result).write_text(json.dumps(result))


# ---------------------------------------------------------------------------------------- driver
def register_all(client: ControllerClient, names: list[tuple[str, int]]) -> None:
    def one(index: int) -> None:
        name, broker_id = names[index]
        client.call("POST", contract.APPLY_BROKER_ID, json={
            "clusterName": CLUSTER, "brokerName": name, "appliedBrokerId": broker_id,
            "registerCheckCode": f"{fake_address(index)};{index}"})
        client.call("POST", contract.REGISTER_BROKER, json={
            "clusterName": CLUSTER, "brokerName": name, "brokerId": broker_id, "brokerAddress": fake_address(index)})
    with ThreadPoolExecutor(8) as pool:  # the first broker of a group creates its broker set
        list(pool.map(one, [i for i, (_, broker_id) in enumerate(names) if broker_id == 1]))
        list(pool.map(one, [i for i, (_, broker_id) in enumerate(names) if broker_id != 1]))


def masters(client: ControllerClient, groups: list[str]) -> dict[str, tuple[int | None, int | None]]:
    seen: dict[str, tuple[int | None, int | None]] = {}
    for i in range(0, len(groups), 50):
        env = client.call("GET", contract.SYNC_STATE_DATA, params={"brokerName": groups[i:i + 50]})
        for entry in env.data["brokers"]:
            seen[entry["brokerName"]] = (entry.get("masterBrokerId"), entry.get("masterEpoch"))
    return seen


def elect_all(client: ControllerClient, groups: list[str]) -> None:
    def one(group: str) -> None:
        client.call("POST", contract.ELECT_MASTER, json={"clusterName": CLUSTER, "brokerName": group,
                                                                "brokerId": 1, "designateElect": True})
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, groups))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", type=int, default=1000)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--minutes", type=float, default=5)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--timeout-ms", type=int, default=3000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker-index", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--controllers", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker_index is not None:
        worker_main(args)
        return
    gc.collect()
    gc.freeze()
    root = scratch_dir("mqctl-bench-soak-")
    names = broker_names(args.brokers, args.replicas)
    groups = sorted({n for n, _ in names})
    cluster = ControllerCluster(root, size=3, extra={"logLevel": "WARNING", **DEMO_CONTROLLER})
    cluster.configure()
    cluster.start()
    workers: list[subprocess.Popen[bytes]] = []
    try:
        cluster.leader(timeout=60)
        client = cluster.client(timeout=10.0)
        t0 = time.monotonic()
        register_all(client, names)
        registered = time.monotonic() - t0
        results = [root / f"worker-{w}.json" for w in range(args.workers)]
        for w in range(args.workers):
            workers.append(subprocess.Popen(
                [sys.executable, "-m", "bench.heartbeat_soak", "--brokers", str(args.brokers),
                 "--replicas", str(args.replicas), "--minutes", str(args.minutes), "--interval", str(args.interval),
                 "--timeout-ms", str(args.timeout_ms), "--workers", str(args.workers), "--worker-index", str(w),
                 "--controllers", ",".join(n.address for n in cluster.nodes), "--result", str(results[w])]))
        wait_until(lambda: all(Path(str(r) + ".ready").exists() for r in results), 60, "the load workers")
        time.sleep(args.interval * 1.5)  # every broker has heartbeated every controller
        elect_all(client, groups)
        before = masters(client, groups)
        assert all(m[0] is not None for m in before.values()), "a group has no master after the elections"
        first_index = client.call("GET", contract.EVENTS, params={"limit": 1}).data["latestIndex"] + 1
        pids = [n.process.pid for n in cluster.nodes if n.process is not None]
        cpu_before = [cpu_seconds(p) for p in pids]
        soak_started = time.monotonic()
        for w in workers:
            w.wait(timeout=args.minutes * 60 + 120)
        soak_seconds = time.monotonic() - soak_started
        cpu_used = [cpu_seconds(p) - b for p, b in zip(pids, cpu_before)]
        after = masters(client, groups)
        elections = [e for e in events_since(client, first_index) if e["eventType"] == "ELECT_MASTER"]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
        cluster.stop()
    per_worker = [json.loads(r.read_text()) for r in results]
    latencies = [x for r in per_worker for x in r["latencies"]]
    changed = sorted(g for g in groups if before.get(g) != after.get(g))
    row = {"brokers": args.brokers, "groups": len(groups), "minutes": args.minutes,
           "heartbeatsSent": sum(r["sent"] for r in per_worker),
           "answered": sum(r["answered"] for r in per_worker), "failed": sum(r["failed"] for r in per_worker),
           "p50Ms": summary(latencies)["p50"], "p99Ms": summary(latencies)["p99"], "maxMs": summary(latencies)["max"],
           "electionsDuringSoak": len(elections), "groupsWhoseMasterChanged": len(changed),
           "controllerCpuPct": [round(100 * c / soak_seconds, 1) for c in cpu_used],
           "registerSeconds": registered}
    print(table([row], ["brokers", "groups", "heartbeatsSent", "answered", "failed", "p50Ms", "p99Ms", "maxMs",
                        "electionsDuringSoak", "groupsWhoseMasterChanged"]))
    print(f"controller CPU during the soak (% of one core): {row['controllerCpuPct']}")
    path = write_result("heartbeat_soak", {"args": {k: v for k, v in vars(args).items() if v is not None},
                                            "result": row, "latencyMs": summary(latencies),
                                            "changedGroups": changed[:20], "elections": elections[:20]})
    print(f"result: {path}")
    if elections or changed:
        sys.exit(1)


if __name__ == "__main__":
    main()
