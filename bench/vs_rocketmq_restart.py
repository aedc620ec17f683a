"""Side by side with RocketMQ: how long a broker with a large commitlog, and a controller group with many
events, take to serve again after a crash.

    python -m bench.vs_rocketmq_restart [--broker-mib 1024] [--controller-events 100000] [--restarts 3]
                                        [--fill-slice 10] [--version 5.3.3]

**Broker.** Each side is one controller (RocketMQ's with its name server) and one broker, one replica,
ASYNC_FLUSH (as ``bench.vs_rocketmq`` sets them up). The kit's Java load program (mode ``load``, one thread
sending 1 KiB messages asynchronously) fills each side's commitlog with ``--broker-mib`` MiB, the sides
alternating in slices of ``--fill-slice`` s. Then, ``--restarts`` times per side, alternating: the broker is
sent SIGKILL (what a crash leaves: RocketMQ recovers its store "abnormally", from its checkpoint) and started
again; *answering* is its first answer to 28 GET_BROKER_RUNTIME_INFO, *master* the moment its controller
names it the group's master again (1006), both from the new process's start and asked every 20 ms.

**Controllers.** Each side is a group of three controllers and nothing else (RocketMQ's standalone DLedger
controllers, from the kit). ``--controller-events`` writes (1013 CONTROLLER_APPLY_BROKER_ID, a new group
each: one replicated entry) are committed through the leader, 64 at a time; every node is then sent SIGKILL
and all are started again; *serving* is the first write committed after the start (the group has elected a
leader and its state machine holds the log again), asked of every node at once every 10 ms. Once per side.

Ratios are ours / RocketMQ's. Result file ``vs_rocketmq_restart``.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import scratch_dir, table, write_result
from bench.vs_rocketmq import GROUP, Load, create_topic, ours, stop_ours, theirs
from bench.vs_rocketmq_controller_failover import Writer, agreed_leader
from bench.vs_rocketmq_controller_failover import ours as our_controllers
from bench.vs_rocketmq_controller_failover import theirs as their_controllers
from mqctl.cluster import BrokerNode, ControllerCluster
from services.common.codes import ResponseCode
from services.common.errors import MqctlError
from services.common.remoting_client import RemotingClient
from services.remoting.command import RequestCode, make_request
from services.remoting.headers import ApplyBrokerIdRequestHeader
from tests.rocketmq import PINNED
from tests.rocketmq.javaclients import JavaClients
from tests.rocketmq.jvm import JavaProcess, poll
from tests.rocketmq.probe import broker_answers, sync_state

TICK_S = 0.02
READY_S = 300.0
KIB_PER_MESSAGE = 1.2  # a 1 KiB body's commitlog record with the client's properties, about


def until(check: Callable[[], bool], began: float, what: str) -> float:
    """Seconds from ``began`` until ``check`` holds, asked every TICK_S (a failed ask is a no)."""
    while time.monotonic() - began < READY_S:
        try:
            if check():
                return time.monotonic() - began
        except (OSError, MqctlError, RuntimeError, TimeoutError):
            pass
        time.sleep(TICK_S)
    raise RuntimeError(f"{what}: not within {READY_S:.0f} s")


class BrokerSide:
    def __init__(self, name: str, address: str, controller: str, kill: Callable[[], None],
                 start: Callable[[], None]) -> None:
        self.name, self.address, self.controller, self.kill, self.start = name, address, controller, kill, start
        self.restarts: list[dict[str, float]] = []

    def is_master(self) -> bool:
        info = sync_state(self.controller.split(";")[0], GROUP, 1.0)
        return info is not None and info.master_address == self.address

    def restart(self) -> None:
        self.kill()
        began = time.monotonic()
        self.start()
        answering = until(lambda: broker_answers(self.address, 1.0), began, f"{self.name}'s broker to answer")
        master = until(self.is_master, began, f"{self.name}'s broker to be master")
        self.restarts.append({"answering_s": answering, "master_s": master})


async def fill_controllers(leader: str, events: int, side: str) -> float:
    """``events`` applyBrokerId writes through the leader, 64 in flight; returns the seconds it took."""
    client = RemotingClient(timeout_s=30.0)
    failures: list[int] = []

    async def one(i: int) -> None:
        header = ApplyBrokerIdRequestHeader(cluster_name="FillCluster", broker_name=f"{side}-fill-{i}",
                                            applied_broker_id=1, register_check_code=f"127.0.0.1:1;{i}")
        answer = await client.call(leader, make_request(RequestCode.CONTROLLER_APPLY_BROKER_ID, i + 1,
                                                        header.to_ext_fields()))
        if answer.code != ResponseCode.SUCCESS:
            failures.append(answer.code)
    began = time.monotonic()
    try:
        for start in range(0, events, 64):
            await asyncio.gather(*(one(i) for i in range(start, min(events, start + 64))))
    finally:
        await client.close()
    if failures:
        raise RuntimeError(f"{side}: {len(failures)} of {events} writes failed (codes {sorted(set(failures))})")
    return time.monotonic() - began


def controller_restart(name: str, addresses: list[str], kill_all: Callable[[], None],
                       start_all: Callable[[], None], events: int) -> dict[str, Any]:
    leader: str = poll(lambda: agreed_leader(addresses), READY_S, f"{name}'s controllers to agree")
    fill_s = asyncio.run(fill_controllers(leader, events, name))
    kill_all()
    writer = Writer(f"{name}-after")
    began = time.monotonic()
    start_all()
    serving = asyncio.run(writer.first_success(addresses, began, READY_S))
    if serving is None:
        raise RuntimeError(f"{name}'s controllers committed no write within {READY_S:.0f} s of their start")
    return {"side": name, "events": events, "fill_s": fill_s, "serving_s": serving}


def brokers_part(args: argparse.Namespace, root: Path) -> list[dict[str, Any]]:
    clients = JavaClients(args.version).build()
    rocketmq = theirs(root / "rocketmq", args.version)
    controllers: ControllerCluster | None = None
    brokers: list[BrokerNode] = []
    loads: list[Load] = []
    try:
        rocketmq.start()
        controllers, brokers = ours(root / "ours")
        namesrvs = (("rocketmq", rocketmq.namesrv_addr), ("mqctl", controllers.addresses))
        for name, namesrv in namesrvs:
            create_topic(clients, root / f"create-{name}", namesrv)
            loads.append(Load(clients, root / f"load-{name}", namesrv, 1, 1024, "async", 256))
        wanted = args.broker_mib * 1024 / KIB_PER_MESSAGE
        sent = [0, 0]
        rounds = 0
        while min(sent) < wanted:
            for i in (0, 1) if rounds % 2 == 0 else (1, 0):
                if sent[i] < wanted:
                    acked = loads[i].slice(args.fill_slice)["sent"]
                    if acked == 0:
                        raise RuntimeError(f"{namesrvs[i][0]}: no send acknowledged in {args.fill_slice} s while filling")
                    sent[i] += acked
            rounds += 1
        for load in loads:
            load.close()
        their_broker = rocketmq.brokers[0]

        def their_kill() -> None:
            their_broker.process.signal(signal.SIGKILL)
            their_broker.process.wait_exit(30)

        our_broker = brokers[0]

        def our_kill() -> None:
            our_broker.kill(signal.SIGKILL)
        sides = [BrokerSide("rocketmq", their_broker.address, rocketmq.controller_addrs, their_kill,
                            their_broker.process.start),
                 BrokerSide("mqctl", our_broker.address, controllers.addresses, our_kill, our_broker.start)]
        for r in range(args.restarts):
            for side in sides if r % 2 == 0 else sides[::-1]:
                side.restart()
                print(f"{side.name} broker restart {r + 1}: {side.restarts[-1]}", flush=True)
        return [{"side": side.name, "messages": sent[i], "restarts": side.restarts,
                 "answering_s": statistics.median(x["answering_s"] for x in side.restarts),
                 "master_s": statistics.median(x["master_s"] for x in side.restarts)}
                for i, side in enumerate(sides)]
    finally:
        for load in loads:
            load.close()
        stop_ours(controllers, brokers)
        rocketmq.stop()


def controllers_part(args: argparse.Namespace, root: Path) -> list[dict[str, Any]]:
    processes: list[JavaProcess] = []
    cluster: ControllerCluster | None = None
    try:
        their_side = their_controllers(root / "rocketmq-controllers", args.version, 3, processes)

        def their_kill_all() -> None:
            for process in processes:
                process.signal(signal.SIGKILL)
            for process in processes:
                process.wait_exit(30)

        def their_start_all() -> None:
            for process in processes:
                process.start()
        found = [controller_restart("rocketmq", their_side.addresses, their_kill_all, their_start_all,
                                    args.controller_events)]
        their_kill_all()
        our_side, cluster = our_controllers(root / "our-controllers", 3)
        found.append(controller_restart("mqctl", our_side.addresses, cluster.kill_all, cluster.start,
                                        args.controller_events))
        return found
    finally:
        if cluster is not None:
            cluster.stop()
        for process in processes:
            process.signal(signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--broker-mib", type=int, default=1024, help="commitlog to fill per side")
    parser.add_argument("--controller-events", type=int, default=100_000)
    parser.add_argument("--restarts", type=int, default=3, help="broker restarts per side")
    parser.add_argument("--fill-slice", type=float, default=10.0, help="seconds of each filling slice")
    parser.add_argument("--version", default=PINNED, help="RocketMQ's version")
    args = parser.parse_args(argv)
    root = scratch_dir("mqctl-vs-rocketmq-restart-")
    broker_figures = brokers_part(args, root / "brokers")
    controller_figures = controllers_part(args, root / "controllers")
    ratios = {"broker_answering_s": broker_figures[1]["answering_s"] / broker_figures[0]["answering_s"],
              "broker_master_s": broker_figures[1]["master_s"] / broker_figures[0]["master_s"],
              "controllers_serving_s": controller_figures[1]["serving_s"] / controller_figures[0]["serving_s"]}
    print(table([{k: f[k] for k in ("side", "messages", "answering_s", "master_s")} for f in broker_figures],
                ["side", "messages", "answering_s", "master_s"]))
    print(table(controller_figures, ["side", "events", "fill_s", "serving_s"]))
    print("ours / RocketMQ's: " + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items()))
    path = write_result("vs_rocketmq_restart", {
        "rocketmq_version": args.version, "broker_mib": args.broker_mib, "controller_events": args.controller_events,
        "brokers": broker_figures, "controllers": controller_figures, "ratios_ours_over_rocketmq": ratios})
    print(f"result: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
