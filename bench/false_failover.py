"""False failovers under load: a healthy master must never be replaced.

    python -m bench.false_failover [--minutes 10] [--producers 4]

3 controllers and one group of 3 replicas with the local-cluster timings (broker heartbeat every 0.5 s,
3 s timeout: tighter than RocketMQ's defaults), ``allAckInSyncStateSet=true``; producers write 1 KiB
batches of 100 as fast as they are acknowledged for ``--minutes``, which keeps both cores busy. Nothing
is killed. Counted at the end: elections (ELECT_MASTER events) during the run, masterEpoch changes,
SyncStateSet shrinks, and put statuses other than PUT_OK. Exits non-zero on any election.
"""

from __future__ import annotations

import argparse
import gc
import threading
from typing import Any

from bench.common import events_since, scratch_dir, table, write_result
from bench.replicated_writes import drive, start
from services.controller import contract


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--producers", type=int, default=4)
    args = parser.parse_args()
    gc.collect()
    gc.freeze()
    root = scratch_dir("mqctl-bench-false-failover-")
    cluster = start(root / "cluster", 3, "ASYNC_FLUSH")
    try:
        master = cluster.master_of("broker-a")
        assert master is not None
        before = cluster.sync_state("broker-a")
        with cluster.client(timeout=10.0) as client:
            first = client.call("GET", contract.EVENTS, params={"limit": 1}).data["latestIndex"] + 1
        outcome: dict[str, Any] = {}

        def load() -> None:
            outcome.update(drive(master.address, args.minutes * 60, 100, 1024, args.producers))

        producer = threading.Thread(target=load, daemon=True)
        producer.start()
        producer.join()
        after = cluster.sync_state("broker-a")
        with cluster.client(timeout=10.0) as client:
            events = events_since(client, first)
    finally:
        cluster.down(grace=5)
    elections = [e for e in events if e["eventType"] == "ELECT_MASTER"]
    shrinks = [e for e in events if e["eventType"] == "ALTER_SYNC_STATE_SET"]
    row = {"minutes": args.minutes, "msgPerSec": outcome["msgPerSec"], "acked": outcome["acked"],
           "notPutOk": sum(v for k, v in outcome["statuses"].items() if k != "PUT_OK"),
           "elections": len(elections), "syncStateSetChanges": len(shrinks),
           "masterEpochBefore": before.get("masterEpoch"), "masterEpochAfter": after.get("masterEpoch")}
    print(table([row], list(row)))
    path = write_result("false_failover", {"args": vars(args), "result": row, "statuses": outcome["statuses"],
                                           "ackLatencyMs": outcome["ackLatencyMs"], "events": events[:50]})
    print(f"result: {path}")
    if elections or before.get("masterEpoch") != after.get("masterEpoch"):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
