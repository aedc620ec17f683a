"""Side by side with RocketMQ: many brokers against each side's controller group, speaking RocketMQ's
remoting protocol as its brokers do.

    python -m bench.vs_rocketmq_controller_load [--brokers 1000] [--replicas 3] [--controllers 3]
                                                [--concurrency 32] [--alter-rounds 6] [--soak 60]
                                                [--interval 1.0] [--heartbeat-timeout-ms 3000] [--version 5.3.3]

Each side is a group of ``--controllers`` controllers and nothing else: RocketMQ's standalone DLedger
controllers with the test kit's settings (tests/rocketmq: inactive brokers scanned every 2 s), ours with the
same scan interval. The load is one lean Python process simulating ``--brokers`` brokers in groups of
``--replicas``, each with its own connection to every controller, through the client our broker uses to
talk to RocketMQ's controllers (services/broker/controller_remoting.py): the requests a RocketMQ broker in
controller mode sends, in its order.

1. **Registration**: each broker asks 1012 GET_NEXT_BROKER_ID, 1013 APPLY_BROKER_ID and 1003
   REGISTER_BROKER of the leader; the brokers of a group one after the other, ``--concurrency`` groups at a
   time. Registrations per second (three requests each) and the p99 of one registration.
2. **Heartbeats**: every broker then sends a oneway 904 BROKER_HEARTBEAT to every controller every
   ``--interval`` s (spread over the interval), asking for a ``--heartbeat-timeout-ms`` timeout.
3. **Elections**: the first broker of each group asks 1002 ELECT_MASTER for itself.
4. **Alters**: each master asks 1001 ALTER_SYNC_STATE_SET ``--alter-rounds`` times, its set with every
   replica and without one in turn. Alters per second, p99.
5. **Soak**: heartbeats go on for ``--soak`` s; then each group's master and master epoch are read (1006):
   a changed one is a false failover, as is a broker the controllers no longer count alive.

The sides run one after the other (RocketMQ's first). Ratios are ours / RocketMQ's. Result file
``vs_rocketmq_controller_load``.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import resource
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import scratch_dir, summary, table, write_result
from bench.vs_rocketmq_controller_failover import agreed_leader
from mqctl.cluster import ControllerCluster
from services.broker.controller_remoting import RemotingControllerApi
from services.common.codes import ResponseCode
from services.common.errors import MqctlError
from services.common.remoting_client import RemotingClient
from services.controller import contract
from services.remoting.bodies import BrokerReplicasInfo, encode_broker_names
from services.remoting.command import RequestCode, make_request
from tests.rocketmq import PINNED
from tests.rocketmq.fetch import RocketMQ, require_java
from tests.rocketmq.jvm import JavaProcess, poll, stop_all
from tests.rocketmq.servers import ControllerGroup, Runtime

CLUSTER = "LoadCluster"
SCAN_MS = 2000


@dataclass
class Simulated:
    """One simulated broker: its group, address, id once applied, and its own controller client."""

    group: str
    address: str
    api: RemotingControllerApi
    broker_id: int = 0


@dataclass
class Group:
    name: str
    members: list[Simulated]
    master_id: int | None = None
    master_epoch: int = 0
    set_epoch: int = 0
    failures: list[str] = field(default_factory=list)


def timed(latencies: list[float], began: float) -> None:
    latencies.append((time.monotonic() - began) * 1000)


async def register(group: Group, latencies: list[float]) -> None:
    for broker in group.members:
        began = time.monotonic()
        broker.broker_id = await broker.api.get_next_broker_id(CLUSTER, group.name)
        await broker.api.apply_broker_id(CLUSTER, group.name, broker.broker_id,
                                         f"{broker.address};{time.time_ns() // 1_000_000}")
        await broker.api.register_broker(CLUSTER, group.name, broker.broker_id, broker.address)
        timed(latencies, began)


async def heartbeats(broker: Simulated, interval: float, offset: float, timeout_ms: int,
                     counts: dict[str, int]) -> None:
    await asyncio.sleep(offset)
    beat = contract.HeartbeatRequest(clusterName=CLUSTER, brokerName=broker.group, brokerAddr=broker.address,
                                     brokerId=broker.broker_id, heartbeatTimeoutMills=timeout_ms)
    while True:
        began = time.monotonic()
        written = await broker.api.heartbeat_all(beat)
        counts["sent"] += written
        counts["unwritten"] += len(broker.api.addresses) - written
        await asyncio.sleep(max(0.0, interval - (time.monotonic() - began)))


async def elect(group: Group, latencies: list[float]) -> None:
    first = group.members[0]
    began = time.monotonic()
    view = await first.api.elect_self(CLUSTER, group.name, first.broker_id)
    timed(latencies, began)
    if view is None or view.masterBrokerId is None:
        group.failures.append("not elected")
        return
    group.master_id, group.master_epoch = view.masterBrokerId, view.masterEpoch or 0
    group.set_epoch = view.syncStateSetEpoch or 0


async def alter(group: Group, rounds: int, latencies: list[float]) -> None:
    master = next((b for b in group.members if b.broker_id == group.master_id), None)
    if master is None or len(group.members) < 2:
        return  # a group of one has no other set to alter to
    everyone = sorted(b.broker_id for b in group.members)
    dropped = max(i for i in everyone if i != master.broker_id)
    for r in range(rounds):
        members = everyone if r % 2 == 0 else [i for i in everyone if i != dropped]
        began = time.monotonic()
        try:
            result = await master.api.alter_sync_state_set(group.name, master.broker_id, group.master_epoch,
                                                           members, group.set_epoch)
        except MqctlError as exc:
            group.failures.append(f"alter: {exc}")
            return
        timed(latencies, began)
        group.set_epoch = result.newSyncStateSetEpoch


async def read_groups(addresses: list[str], names: list[str]) -> dict[str, Any]:
    """Every group's replicas as the leader has them (1006 asked of each controller until one answers it)."""
    client = RemotingClient(timeout_s=30.0)
    try:
        found: dict[str, Any] = {}
        for start in range(0, len(names), 200):
            request = make_request(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, start + 1, None,
                                   encode_broker_names(names[start:start + 200]))
            for address in addresses:
                answer = await client.call(address, request)
                if answer.code == ResponseCode.SUCCESS:
                    break
            else:
                raise RuntimeError(f"no controller answered 1006: the last said {answer.code} {answer.remark}")
            found.update(BrokerReplicasInfo.decode(answer.body).replicas_info_table if answer.body else {})
        return found
    finally:
        await client.close()


async def run_side(name: str, addresses: list[str], leader: str | None, args: argparse.Namespace) -> dict[str, Any]:
    # the leader first: no client's first request pays for asking a follower (both sides alike)
    joined = ";".join(sorted(addresses, key=lambda a: a != leader))
    groups = [Group(f"{name}-{g:04d}", []) for g in range((args.brokers + args.replicas - 1) // args.replicas)]
    for i in range(args.brokers):
        group = groups[i // args.replicas]
        group.members.append(Simulated(group.name, f"127.0.0.1:{30000 + i}", RemotingControllerApi(joined, 10.0)))
    limit = asyncio.Semaphore(args.concurrency)

    async def limited(step: Any, *rest: Any) -> None:
        async with limit:
            try:
                await step(*rest)
            except MqctlError as exc:
                rest[0].failures.append(f"{step.__name__}: {exc}")
    figures: dict[str, Any] = {"side": name, "brokers": args.brokers, "groups": len(groups)}
    register_ms: list[float] = []
    began = time.monotonic()
    await asyncio.gather(*(limited(register, g, register_ms) for g in groups))
    figures["registrations_per_s"] = len(register_ms) / (time.monotonic() - began)
    figures["register"] = summary(register_ms)
    counts = {"sent": 0, "unwritten": 0}
    everyone = [b for g in groups for b in g.members if b.broker_id]
    beating = [asyncio.create_task(heartbeats(b, args.interval, args.interval * i / len(everyone),
                                              args.heartbeat_timeout_ms, counts))
               for i, b in enumerate(everyone)]
    try:
        await asyncio.sleep(2 * args.interval)  # every controller has heard every broker before the elections
        elect_ms: list[float] = []
        began = time.monotonic()
        await asyncio.gather(*(limited(elect, g, elect_ms) for g in groups))
        figures["elections_per_s"] = len(elect_ms) / (time.monotonic() - began)
        figures["elect"] = summary(elect_ms)
        alter_ms: list[float] = []
        began = time.monotonic()
        await asyncio.gather(*(limited(alter, g, args.alter_rounds, alter_ms) for g in groups))
        figures["alters_per_s"] = len(alter_ms) / (time.monotonic() - began)
        figures["alter"] = summary(alter_ms)
        sent_before = counts["sent"]
        began = time.monotonic()
        await asyncio.sleep(args.soak)
        figures["heartbeats_per_s"] = (counts["sent"] - sent_before) / (time.monotonic() - began)
        figures["heartbeats_unwritten"] = counts["unwritten"]
        now = await read_groups(sorted(addresses, key=lambda a: a != leader), [g.name for g in groups])
    finally:
        for task in beating:
            task.cancel()
        await asyncio.gather(*beating, return_exceptions=True)
        for group in groups:
            for broker in group.members:
                await broker.api.aclose()
    moved = [g.name for g in groups if g.master_id is not None and
             (now.get(g.name) is None or now[g.name].master_broker_id != g.master_id
              or now[g.name].master_epoch != g.master_epoch)]
    dead = sum(1 for info in now.values() for r in (*info.in_sync_replicas, *info.not_in_sync_replicas)
               if r.alive is False)
    figures.update({"false_failovers": len(moved), "counted_dead": dead,
                    "failures": sum(len(g.failures) for g in groups),
                    "failure_sample": [f for g in groups for f in g.failures][:5]})
    return figures


def theirs(root: Path, version: str, size: int, processes: list[JavaProcess]) -> list[str]:
    """RocketMQ's controllers, started; ``processes`` gets each as it starts (the caller stops them)."""
    runtime = Runtime(require_java(), RocketMQ(version).fetch(), root / "home")
    group = ControllerGroup(runtime, root / "controllers", size, {"scanNotActiveBrokerInterval": SCAN_MS})
    for process in group.processes:
        processes.append(process)
        process.start()
    return group.addresses


def ours(root: Path, size: int) -> ControllerCluster:
    cluster = ControllerCluster(root / "controllers", size=size,
                                extra={"logLevel": "WARNING", "scanNotActiveBrokerInterval": SCAN_MS})
    cluster.configure()
    cluster.start()
    return cluster


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--brokers", type=int, default=1000)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--controllers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=32, help="groups registering (electing, altering) at once")
    parser.add_argument("--alter-rounds", type=int, default=6)
    parser.add_argument("--soak", type=float, default=60.0, help="seconds of heartbeats after the alters")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between a broker's heartbeats")
    parser.add_argument("--heartbeat-timeout-ms", type=int, default=3000)
    parser.add_argument("--version", default=PINNED, help="RocketMQ's version")
    args = parser.parse_args(argv)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))
    root = scratch_dir("mqctl-vs-rocketmq-controller-load-")
    figures = []
    processes: list[JavaProcess] = []
    cluster: ControllerCluster | None = None
    try:
        addresses = theirs(root / "rocketmq", args.version, args.controllers, processes)
        leader = poll(lambda: agreed_leader(addresses), 180.0, "RocketMQ's controllers to agree on a leader")
        figures.append(asyncio.run(run_side("rocketmq", addresses, leader, args)))
        stop_all(processes)  # gone before ours start: their shutdown takes no CPU from our run
        cluster = ours(root / "ours", args.controllers)
        addresses = [node.address for node in cluster.nodes]
        leader = poll(lambda: agreed_leader(addresses), 180.0, "our controllers to agree on a leader")
        figures.append(asyncio.run(run_side("mqctl", addresses, leader, args)))
    finally:
        if cluster is not None:
            cluster.stop()
        stop_all(processes)
    their_figures, mine = figures

    def ratio(ours_value: float, theirs_value: float) -> float | None:
        return ours_value / theirs_value if theirs_value and math.isfinite(ours_value / theirs_value) else None
    ratios = {"registrations_per_s": ratio(mine["registrations_per_s"], their_figures["registrations_per_s"]),
              "alters_per_s": ratio(mine["alters_per_s"], their_figures["alters_per_s"]),
              "register_p99_ms": ratio(mine["register"]["p99"], their_figures["register"]["p99"]),
              "alter_p99_ms": ratio(mine["alter"]["p99"], their_figures["alter"]["p99"])}
    rows = [{"side": f["side"], "registrations_per_s": f["registrations_per_s"], "register_p99_ms": f["register"]["p99"],
             "elections_per_s": f["elections_per_s"], "alters_per_s": f["alters_per_s"],
             "alter_p99_ms": f["alter"]["p99"], "heartbeats_per_s": f["heartbeats_per_s"],
             "false_failovers": f["false_failovers"], "counted_dead": f["counted_dead"], "failures": f["failures"]}
            for f in figures]
    print(table(rows, list(rows[0])))
    print("ours / RocketMQ's: " + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items() if v is not None))
    path = write_result("vs_rocketmq_controller_load", {
        "rocketmq_version": args.version, "brokers": args.brokers, "replicas": args.replicas,
        "controllers": args.controllers, "concurrency": args.concurrency, "alter_rounds": args.alter_rounds,
        "soak_s": args.soak, "interval_s": args.interval, "heartbeat_timeout_ms": args.heartbeat_timeout_ms,
        "sides": figures, "ratios_ours_over_rocketmq": ratios})
    print(f"result: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
