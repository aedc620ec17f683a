"""Restart time: a broker with a large commitlog, and a controller with many applied events.

    python -m bench.restart [--broker-mib 1024] [--controller-events 100000]

Broker: a store of ``--broker-mib`` MiB of 1 KiB messages (64 MiB segments, consume queues dispatched,
a checkpoint written every 64 MiB) is left as a crashed process leaves it: the last checkpoint is up to
one segment old and the log ends in a torn record. A broker process is then started on it; *ready* is
its first HTTP answer (the store is recovered before the server listens). Measured against starting a
broker on an empty store in the same run, which is the process's own start-up (imports, config, ports).

Controller: ``--controller-events`` events are committed through the HTTP API of a 3-node cluster; one
follower is then stopped with SIGKILL and started again; *ready* is the moment it reports, through its
own API, that it has applied everything the leader had committed. Its empty start-up is measured too.
"""

from __future__ import annotations

import argparse
import gc
import os
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from bench.common import run_workers, scratch_dir, table, write_result
from mqctl.cluster import ControllerCluster, free_port_pair, make_broker, wait_until
from services.broker import contract as bc
from services.broker.store import Message, MessageStore

SEGMENT = 64 * 2**20


def build_crashed_store(store_dir: Path, mib: int) -> dict[str, Any]:
    """A store of about ``mib`` MiB as SIGKILL leaves it: stale checkpoint, torn tail."""
    store = MessageStore(store_dir, "127.0.0.1:10911", SEGMENT)
    store.open()
    store.epochs.append(1, 0)
    batch = [Message("Bench", b"x" * 1024, queue_id=q % 8) for q in range(1000)]
    target = mib * 2**20
    next_checkpoint = SEGMENT
    while store.max_offset < target:
        store.append_batch(batch, 1_700_000_000_000)
        store.set_confirm_offset(store.max_offset)
        if store.max_offset >= next_checkpoint:
            store.flush()  # fsyncs the data and writes the checkpoint, as the flush service does
            next_checkpoint += SEGMENT
    end = store.max_offset
    seg = store.commitlog.segments[-1]
    os.pwrite(seg.fd, b"\x00\x00\x04\x2a\xaa\xbb\xcc\xdd" + b"torn", end - seg.start)  # half a record
    for s in store.commitlog.segments:  # the process dies: no final flush, no checkpoint
        os.close(s.fd)
    for cq in store.queues.queues.values():
        os.close(cq.fd)
    return {"commitlogBytes": end, "segments": len(store.commitlog.segments)}


def time_broker_start(root: Path, name: str, store_from: Path | None, controllers: str) -> dict[str, Any]:
    node = make_broker(root, name, 1, controllers, logLevel="WARNING")
    node.write_conf()
    if store_from is not None:
        store_from.rename(node.store_dir)
    started = time.monotonic()
    node.start()
    try:
        with httpx.Client(timeout=1.0) as c:
            def up() -> dict[str, Any] | None:
                r = c.get(f"http://{node.address}{bc.RUNTIME_INFO}")
                return r.json()["data"] if r.status_code == 200 else None
            info = wait_until(up, 120, f"broker {name} to answer", interval=0.02)
        ready = time.monotonic() - started
    finally:
        node.stop()
    return {"readySeconds": ready, "maxOffset": info["maxOffset"], "confirmOffset": info["confirmOffset"]}


def broker_case(root: Path, mib: int) -> list[dict[str, Any]]:
    controllers = ",".join(f"127.0.0.1:{free_port_pair()}" for _ in range(3))  # nobody there: fenced
    t0 = time.monotonic()
    shape = build_crashed_store(root / "built" / "store", mib)
    built = time.monotonic() - t0
    empty = time_broker_start(root, "empty", None, controllers)
    full = time_broker_start(root, "full", root / "built" / "store", controllers)
    assert full["maxOffset"] == shape["commitlogBytes"], (full, shape)  # torn tail cut, nothing else lost
    return [{"case": "broker, empty store", "readySeconds": empty["readySeconds"]},
            {"case": f"broker, {shape['commitlogBytes'] / 2**20:,.0f} MiB commitlog after a crash",
             "readySeconds": full["readySeconds"], "storeRecoverySeconds": full["readySeconds"] - empty["readySeconds"],
             "commitlogBytes": shape["commitlogBytes"], "segments": shape["segments"],
             "buildSeconds": built}]


def controller_case(root: Path, events: int, clients: int = 16) -> list[dict[str, Any]]:
    cluster = ControllerCluster(root / "ctl", size=3, extra={"logLevel": "WARNING"})
    cluster.configure()
    cluster.start()
    try:
        leader = cluster.leader(timeout=60)
        url = f"http://{leader.address}/v1/controller/applyBrokerId"
        body = {"clusterName": "DefaultCluster", "appliedBrokerId": 1, "registerCheckCode": "127.0.0.1:10911;1"}
        counter = iter(range(events))
        lock = threading.Lock()

        def worker(_: int) -> None:
            with httpx.Client(timeout=10.0) as c:
                while True:
                    with lock:
                        i = next(counter, None)
                    if i is None:
                        return
                    while c.post(url, json={**body, "brokerName": f"bench-{i % 1000}"}).json()["code"] != 0:
                        time.sleep(0.01)

        filled = run_workers(worker, clients)
        with httpx.Client(timeout=5.0) as c:
            latest = c.get(f"http://{leader.address}/v1/controller/events", params={"limit": 1}).json()
            applied_target = latest["data"]["latestIndex"]
            follower = next(n for n in cluster.nodes if n is not leader)
            follower.kill()
            started = time.monotonic()
            follower.start()

            def caught_up() -> bool:
                status = c.get(f"http://{follower.address}/v1/controller/metadata").json()["data"]
                return int(status.get("appliedEvents", 0)) > applied_target
            wait_until(caught_up, 120, "the restarted controller to catch up", interval=0.02)
            ready = time.monotonic() - started
    finally:
        cluster.stop()
    return [{"case": f"controller follower, {applied_target + 1:,} events applied", "readySeconds": ready,
             "events": applied_target + 1, "buildSeconds": filled}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--broker-mib", type=int, default=1024)
    parser.add_argument("--controller-events", type=int, default=100_000)
    args = parser.parse_args()
    gc.collect()
    gc.freeze()
    root = scratch_dir("mqctl-bench-restart-")
    rows = broker_case(root, args.broker_mib) + controller_case(root, args.controller_events)
    print(table(rows, ["case", "readySeconds", "storeRecoverySeconds", "buildSeconds"]))
    path = write_result("restart", {"args": vars(args), "cases": rows})
    print(f"result: {path}")


if __name__ == "__main__":
    main()
