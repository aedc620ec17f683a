"""Controller leader failover: the leader of a 3-node controller cluster is killed with SIGKILL; how long
until a new leader commits writes again.

    python -m bench.controller_failover [--kills 10]

Each kill is measured from the signal to: *elected* (a survivor's Raft state is LEADER), *serving* (it
answers as leader, i.e. its no-op barrier committed) and *first write* (an ``applyBrokerId`` committed
through it). The client side polls every 10 ms, trying every survivor, so its own back-off is not
measured. The killed node is then restarted and catches up before the next kill. Raft timings are the
controller's defaults (election timeout 0.6–1.2 s, heartbeat 0.1 s).
"""

from __future__ import annotations

import argparse
import gc
import time
from typing import Any

import httpx

from bench.common import scratch_dir, summary, table, write_result
from mqctl.cluster import ControllerCluster, ControllerNode, wait_until

BODY = {"clusterName": "DefaultCluster", "brokerName": "failover-bench", "appliedBrokerId": 1,
        "registerCheckCode": "127.0.0.1:10911;1"}


def metadata(client: httpx.Client, node: ControllerNode) -> dict[str, Any] | None:
    try:
        return dict(client.get(f"http://{node.address}/v1/controller/metadata", timeout=0.5).json()["data"])
    except (httpx.HTTPError, ValueError, KeyError):
        return None


def write_ok(client: httpx.Client, node: ControllerNode) -> bool:
    try:
        reply = client.post(f"http://{node.address}/v1/controller/applyBrokerId", json=BODY, timeout=1.0).json()
    except (httpx.HTTPError, ValueError):
        return False
    return bool(reply.get("code") == 0)


def one_kill(cluster: ControllerCluster, client: httpx.Client) -> dict[str, float]:
    leader = cluster.leader(timeout=60)
    wait_until(lambda: write_ok(client, leader), 30, "a write through the current leader")
    survivors = [n for n in cluster.nodes if n is not leader]
    killed_at = time.monotonic()
    leader.kill()
    marks: dict[str, float] = {}
    while "firstWrite" not in marks:
        for node in survivors:
            meta = metadata(client, node)
            if meta is None:
                continue
            now = time.monotonic() - killed_at
            if meta.get("raft", {}).get("state") == "LEADER":
                marks.setdefault("elected", now)
            if meta.get("isLeader"):
                marks.setdefault("elected", now)
                marks.setdefault("serving", now)
                if write_ok(client, node):
                    marks["firstWrite"] = time.monotonic() - killed_at
                    break
        if time.monotonic() - killed_at > 30:
            raise RuntimeError("no new leader served a write within 30 s")
        time.sleep(0.01)
    leader.start()
    target = metadata(client, next(n for n in survivors if (metadata(client, n) or {}).get("isLeader")))
    wanted = int((target or {}).get("appliedEvents", 0))
    wait_until(lambda: int((metadata(client, leader) or {}).get("appliedEvents", -1)) >= wanted, 60,
               "the restarted controller to catch up")
    return {k: v * 1000 for k, v in marks.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=10)
    args = parser.parse_args()
    gc.collect()
    gc.freeze()
    root = scratch_dir("mqctl-bench-ctl-failover-")
    cluster = ControllerCluster(root, size=3, extra={"logLevel": "WARNING"})
    cluster.configure()
    cluster.start()
    kills: list[dict[str, float]] = []
    try:
        with httpx.Client() as client:
            for i in range(args.kills):
                kills.append(one_kill(cluster, client))
                print(f"kill {i + 1}: " + ", ".join(f"{k} {v:.0f} ms" for k, v in kills[-1].items()), flush=True)
    finally:
        cluster.stop()
    rows = [{"phase": phase, **{k: v for k, v in summary([k_[phase] for k_ in kills]).items() if k != "mean"}}
            for phase in ("elected", "serving", "firstWrite")]
    print(table(rows, ["phase", "n", "p50", "p90", "p99", "max"]))
    path = write_result("controller_failover", {"args": vars(args), "kills": kills,
                                                "phasesMs": {r["phase"]: r for r in rows}})
    print(f"result: {path}")


if __name__ == "__main__":
    main()
