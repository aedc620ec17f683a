"""A bare pysyncobj node: the baseline the controller's write path is compared with.

    python -m bench.raw_raft --self 127.0.0.1:P1 --peers 127.0.0.1:P2,127.0.0.1:P3 --dir D \
        --clients 8 --control C

Three of these form a cluster configured as the controller's Raft (journal and snapshot file, unbatched
appends, the same timeouts) with a replicated method that stores one JSON entry of the controller's
size. No HTTP, no state machine: what pysyncobj itself can commit on this machine.

The nodes take orders through the directory ``--control``: the leader writes ``ready`` once it can
commit; a file ``slice-N.go`` holding a number of seconds is claimed by the node that is leader, which
drives ``--clients`` threads of synchronous writes for that long and writes ``slice-N.json``. So the
caller can measure this cluster in slices, alternating with another; it ends the nodes with SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from pysyncobj import SyncObj, SyncObjConf, SyncObjException, replicated

from bench.common import run_workers


class Store(SyncObj):  # type: ignore[misc]
    def __init__(self, self_address: str, peers: list[str], conf: SyncObjConf) -> None:
        super().__init__(self_address, peers, conf)
        self.entries: dict[str, Any] = {}

    @replicated  # type: ignore[untyped-decorator]
    def put(self, entry: str) -> bool:
        data = json.loads(entry)
        self.entries[data["reqId"][:2]] = data
        return True


def entry(i: int) -> str:
    """About the size and shape of one controller log entry (an applyBrokerId event)."""
    return json.dumps({"v": 1, "kind": "events", "reqId": f"{i:032x}", "crc": 123456789, "events": [
        {"type": "ApplyBrokerIdEvent", "clusterName": "DefaultCluster", "brokerName": f"bench-{i % 64}",
         "brokerAddress": "127.0.0.1:10911", "newBrokerId": 1, "registerCheckCode": "127.0.0.1:10911;1",
         "timestamp": 1700000000000}]}, separators=(",", ":"))


def drive(node: Store, seconds: float, clients: int) -> dict[str, Any]:
    stop = time.monotonic() + seconds
    done = [0] * clients
    failed = [0] * clients
    latencies: list[list[float]] = [[] for _ in range(clients)]

    def worker(c: int) -> None:
        i = c
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            try:
                node.put(entry(i), sync=True, timeout=5)
                done[c] += 1
                latencies[c].append((time.perf_counter() - t0) * 1000)
            except SyncObjException:  # timeout, no leader, queue full
                failed[c] += 1
            i += clients

    elapsed = run_workers(worker, clients)
    return {"writes": sum(done), "seconds": elapsed, "failed": sum(failed),
            "latencies": [x for per in latencies for x in per]}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--self", dest="self_address", required=True)
    parser.add_argument("--peers", required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--control", required=True)
    parser.add_argument("--idle-timeout", type=float, default=600, help="exit after this long without orders")
    args = parser.parse_args()
    store = Path(args.dir)
    store.mkdir(parents=True, exist_ok=True)
    control = Path(args.control)
    control.mkdir(parents=True, exist_ok=True)
    conf = SyncObjConf(journalFile=str(store / "raft.journal"), fullDumpFile=str(store / "raft.dump"),
                       bindAddress=args.self_address, appendEntriesUseBatch=False,
                       appendEntriesPeriod=0.1, raftMinTimeout=0.6, raftMaxTimeout=1.2, connectionTimeout=1.5,
                       leaderFallbackTimeout=0.5, commandsWaitLeader=False, connectionRetryTime=1.0)
    node = Store(args.self_address, args.peers.split(","), conf)
    last_order = time.monotonic()
    try:
        while time.monotonic() - last_order < args.idle_timeout:
            if node._isLeader() and node.isReady():
                _publish(control / "ready", {"leader": args.self_address})
                for order in sorted(control.glob("slice-*.go")):
                    claimed = order.with_suffix(".run")
                    try:
                        order.rename(claimed)  # one node claims it
                    except FileNotFoundError:
                        continue
                    outcome = drive(node, float(claimed.read_text()), args.clients)
                    _publish(order.with_suffix(".json"), outcome)
                    last_order = time.monotonic()
            time.sleep(0.02)
    finally:
        node.destroy()
    return 0


def _publish(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc))
    tmp.rename(path)


if __name__ == "__main__":
    sys.exit(main())
