"""Failover time: the master of a group of 3 is killed repeatedly while a client writes; each kill is
split into detection + election commit (kill → the controller's ELECT_MASTER event, stamped by the
leader), role change (event → the new master switched role) and client recovery (→ first PUT_OK).

    python -m bench.failover [--kills 20] [--mode kill|stop]

``kill`` is SIGKILL (sockets close: detected through the broker's liveness channel); ``stop`` is
SIGSTOP (a silent death: detected when the 3 s heartbeat timeout expires).
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
import time
from typing import Any

import httpx

from bench.common import scratch_dir, summary, table, write_result
from mqctl.cluster import DevCluster, wait_until
from services.broker import contract as bc
from services.controller import contract
from tests.chaos.harness import free_base_port

GROUP = "broker-a"


class Writer(threading.Thread):
    """Writes one message at a time to whoever is master; records the time and broker of every PUT_OK."""

    def __init__(self, cluster: DevCluster) -> None:
        super().__init__(daemon=True)
        self.cluster, self.stop_event = cluster, threading.Event()
        self.ok_times: list[tuple[int, str]] = []

    def run(self) -> None:
        address = None
        with httpx.Client(timeout=1.0) as client:
            while not self.stop_event.is_set():
                try:
                    if address is None:
                        master = self.cluster.master_of(GROUP)
                        address = master.address if master else None
                        if address is None:
                            time.sleep(0.01)
                            continue
                    r = client.post(f"http://{address}{bc.SEND_MESSAGE}", json={"topic": "F", "body": "x"})
                    if r.json()["data"]["status"] == "PUT_OK":
                        self.ok_times.append((int(time.time() * 1000), address))
                    else:
                        address = None
                except Exception:  # noqa: BLE001  a dead master, a refused write: look for the master again
                    address = None
                    time.sleep(0.01)


def elect_event_after(cluster: DevCluster, epoch: int) -> dict[str, Any] | None:
    with cluster.client(timeout=2.0) as client:
        data = client.call("GET", contract.EVENTS, params={"fromIndex": 0, "limit": 10000}).data
    for e in data["events"]:
        if e["eventType"] == "ELECT_MASTER" and e["elected"] and (e["masterEpoch"] or 0) > epoch:
            return dict(e)
    return None


def one_failover(cluster: DevCluster, writer: Writer, mode: str) -> dict[str, float]:
    state = cluster.sync_state(GROUP)
    epoch = state["masterEpoch"]
    master = cluster.master_of(GROUP)
    assert master is not None
    pid = cluster.pid(master)
    assert pid is not None
    t0 = int(time.time() * 1000)
    os.kill(pid, signal.SIGKILL if mode == "kill" else signal.SIGSTOP)
    event = wait_until(lambda: elect_event_after(cluster, epoch), 60, "the election", interval=0.02)
    new = next(n for n in cluster.brokers(GROUP) if n.address == cluster.sync_state(GROUP)["masterAddress"])
    with httpx.Client(timeout=2.0) as client:
        info = wait_until(lambda: (i := client.get(f"http://{new.address}{bc.RUNTIME_INFO}").json()["data"])
                          ["role"] == "MASTER" and i, 30, "the role change", interval=0.02)
    # from the new master only: an answer the old one sent just before the signal can be read after it
    first_ok = wait_until(lambda: next((t for t, by in writer.ok_times if t > t0 and by == new.address), None),
                          30, "a PUT_OK from the new master", interval=0.02)
    if mode == "stop":
        os.kill(pid, signal.SIGCONT)
    else:
        cluster.start_node(master)
    size = len(cluster.brokers(GROUP))
    wait_until(lambda: cluster._group_healthy(GROUP, size), 60, "the group to heal", interval=0.2)
    elected, role = event["timestamp"], info["roleChangedTimestamp"]
    return {"detectAndElectMs": elected - t0, "roleChangeMs": max(0, role - elected),
            "clientRecoveryMs": max(0, first_ok - role), "totalMs": first_ok - t0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--mode", choices=("kill", "stop"), default="kill")
    args = parser.parse_args()
    root = scratch_dir("mqctl-bench-failover-")
    cluster = DevCluster.create(root, 3, 1, 3, free_base_port())
    cluster.up(timeout=120)
    writer = Writer(cluster)
    writer.start()
    rows = []
    try:
        for i in range(args.kills):
            rows.append(one_failover(cluster, writer, args.mode))
            print(f"kill {i + 1}/{args.kills}: {rows[-1]}", flush=True)
    finally:
        writer.stop_event.set()
        cluster.down(grace=5)
    phases = {k: summary([r[k] for r in rows]) for k in rows[0]}
    print(table([{"phase": k, **v} for k, v in phases.items()], ["phase", "n", "p50", "p90", "p99", "max"]))
    path = write_result(f"failover_{args.mode}", {"args": vars(args), "kills": rows, "phases": phases})
    print(f"result: {path}")


if __name__ == "__main__":
    main()
