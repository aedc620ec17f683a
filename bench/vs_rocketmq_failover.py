"""Side by side with RocketMQ: a group's failover as the same Java producer sees it, on both controller-mode
clusters at once.

    python -m bench.vs_rocketmq_failover [--kills 20] [--signal kill|stop] [--controllers 3] [--replicas 3]
                                         [--threads 4] [--heartbeat-timeout-ms 3000] [--route-poll-ms 1000]
                                         [--version 5.3.3]

Each side is a group of ``--replicas`` brokers in controller mode (ASYNC_FLUSH, ``allAckInSyncStateSet``)
under ``--controllers`` controllers: RocketMQ's from the test kit (with a name server), ours (the
controllers are the name servers). Both sides' brokers ask for the same heartbeat timeout
(``controllerHeartBeatTimeoutMills``), and both sides' controllers scan for inactive brokers and masters
every 2 s (the kit's setting). The load is the kit's Java program (mode ``load``, commands ``run``,
``first-ok-after``, ``stop``): one ``DefaultMQProducer`` per side, ``--threads`` threads sending 1 KiB
messages synchronously with the client's defaults (3 s send timeout, two retries) and the kit's 1 s route
refresh (``--route-poll-ms``: RocketMQ's own default is 30 s).

One kill: the side's senders start and are seen acknowledged; the group's master (as its controllers say) is
sent ``--signal`` (SIGKILL: its sockets close; SIGSTOP: a silent death, noticed when the heartbeat timeout
expires); the time is from that moment to the first SEND_OK the producer gets from another broker (the
store host of the message id says which). Meanwhile the side's name server is asked for the topic's route
every 10 ms (105 GET_ROUTEINFO_BY_TOPIC): *route* is the moment it first names another master, the servers'
own part of a failover; what the producer adds is its wait for its next route refresh (every second, the
kit's setting on both sides). The senders stop, the old master is started again (a stopped one is killed
first, as a crashed one would be: RocketMQ 5.3.3's, continued with SIGCONT instead, once did not rejoin its
group within 180 s) and the group waited on until its SyncStateSet is whole again. Kills alternate between
the sides (A B, B A, ...).

Per side: every kill's times, p50, p99 and max; the ratio is ours / RocketMQ's. Result file
``vs_rocketmq_failover_<signal>`` (``..._poll<ms>`` with another route refresh).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import sys
import time
from abc import ABC, abstractmethod
from typing import Any

from bench.common import percentile, scratch_dir, table, write_result
from bench.vs_rocketmq import TOPIC, Load, create_topic, ours, stop_ours, theirs, wait_our_group
from mqctl.cluster import BrokerNode, ControllerCluster
from services.common.codes import ResponseCode
from services.common.errors import MqctlError
from services.remoting.bodies import TopicRouteData
from services.remoting.command import RequestCode, make_request
from services.remoting.headers import GetRouteInfoRequestHeader
from tests.rocketmq import PINNED, RocketMQCluster
from tests.rocketmq.javaclients import JavaClients
from tests.rocketmq.servers import Broker, wait_master
from tests.support.remoting import ask

#: How long a kill may take to produce a SEND_OK from the new master before it counts as failed.
FIRST_OK_TIMEOUT_S = 60.0
ROUTE_TICK_S = 0.01
#: How long a group may take to be whole again after a kill (a restarted JVM broker, its catch-up).
WHOLE_S = 180.0


def routed_master(namesrv: str) -> str | None:
    """The master the name server routes the topic to (broker id 0), or None when it names none."""
    request = make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, 1, GetRouteInfoRequestHeader(topic=TOPIC).to_ext_fields())
    try:
        answer = ask(namesrv.split(";")[0], request, 1.0)
    except (OSError, MqctlError, TimeoutError):
        return None
    if answer.code != ResponseCode.SUCCESS or not answer.body:
        return None
    for broker in TopicRouteData.decode(answer.body).broker_datas:
        if 0 in broker.broker_addrs:
            return broker.broker_addrs[0]
    return None


def route_moved(namesrv: str, old: str, hit: float, timeout_s: float) -> float | None:
    """Seconds from ``hit`` (monotonic) until the name server routes to a master other than ``old``."""
    while time.monotonic() - hit < timeout_s:
        master = routed_master(namesrv)
        if master is not None and master != old:
            return time.monotonic() - hit
        time.sleep(ROUTE_TICK_S)
    return None


class Side(ABC):
    """What a kill needs from one side: its master, a way to kill it and bring it back, a whole group."""

    name = ""

    def __init__(self, load: Load, replicas: int, namesrv: str) -> None:
        self.load, self.replicas, self.namesrv = load, replicas, namesrv
        self.kills: list[dict[str, Any]] = []

    @abstractmethod
    def hit(self, address: str, sig: signal.Signals) -> None:
        """Send ``sig`` to the broker at ``address``."""

    @abstractmethod
    def recover(self, address: str, sig: signal.Signals) -> None:
        """Start the broker at ``address`` again after ``sig``."""

    @abstractmethod
    def wait_whole(self) -> str:
        """Wait until the group has a master and every replica in sync; the master's address."""

    def one_kill(self, sig: signal.Signals) -> dict[str, Any]:
        old = self.wait_whole()
        if self.load.ask("run", 30) != "RUNNING":
            raise RuntimeError(f"{self.name}: the load did not start its senders")
        # the senders are acknowledged before the kill (this also forgets what they saw before)
        started = json.loads(self.load.ask(f"first-ok-after {time.time_ns() // 1000} -1 30000", 60))
        if started["first_ok_us"] is None:
            raise RuntimeError(f"{self.name}: no send was acknowledged before the kill")
        port = int(old.rsplit(":", 1)[1])
        hit_us, hit = time.time_ns() // 1000, time.monotonic()
        self.hit(old, sig)
        assert self.load.process.stdin is not None
        self.load.process.stdin.write(f"first-ok-after {hit_us} {port} {int(FIRST_OK_TIMEOUT_S * 1000)}\n")
        self.load.process.stdin.flush()
        route = route_moved(self.namesrv, old, hit, FIRST_OK_TIMEOUT_S)
        answer = json.loads(self.load.line(FIRST_OK_TIMEOUT_S + 30))
        stopped = json.loads(self.load.ask("stop", 60))
        self.recover(old, sig)
        new = self.wait_whole()
        first = answer["first_ok_us"]
        kill = {"old_master": old, "new_master": new, "failed_sends": answer["failed"],
                "ms": (first - hit_us) / 1000 if first is not None else None,
                "route_ms": route * 1000 if route is not None else None, "sent": stopped["sent"]}
        self.kills.append(kill)
        return kill

    def figures(self) -> dict[str, Any]:
        times = [k["ms"] for k in self.kills if k["ms"] is not None]
        routes = [k["route_ms"] for k in self.kills if k["route_ms"] is not None]
        return {"side": self.name, "kills": len(self.kills), "no_new_master": len(self.kills) - len(times),
                "route_p50_ms": percentile(routes, 50), "route_p99_ms": percentile(routes, 99),
                "p50_ms": percentile(times, 50), "p99_ms": percentile(times, 99),
                "max_ms": max(times) if times else float("nan"),
                "mean_ms": statistics.fmean(times) if times else float("nan"), "each": self.kills}


class Theirs(Side):
    name = "rocketmq"

    def __init__(self, load: Load, replicas: int, cluster: RocketMQCluster) -> None:
        super().__init__(load, replicas, cluster.namesrv_addr)
        self.cluster = cluster

    def broker(self, address: str) -> Broker:
        return next(b for b in self.cluster.brokers if b.address == address)

    def hit(self, address: str, sig: signal.Signals) -> None:
        self.broker(address).process.signal(sig)

    def recover(self, address: str, sig: signal.Signals) -> None:
        process = self.broker(address).process
        if sig == signal.SIGSTOP:
            process.signal(signal.SIGKILL)  # a stopped process takes SIGKILL; see the module's note
        process.wait_exit(30)
        process.start()

    def wait_whole(self) -> str:
        assert self.cluster.controllers is not None
        master = wait_master(self.cluster.controllers, self.cluster.group, self.replicas, WHOLE_S).master_address
        assert master is not None  # sync_state waits for a master
        return master


class Ours(Side):
    name = "mqctl"

    def __init__(self, load: Load, replicas: int, controllers: ControllerCluster, brokers: list[BrokerNode]) -> None:
        super().__init__(load, replicas, controllers.addresses)
        self.controllers, self.brokers = controllers, brokers

    def broker(self, address: str) -> BrokerNode:
        return next(b for b in self.brokers if b.address == address)

    def hit(self, address: str, sig: signal.Signals) -> None:
        process = self.broker(address).process
        assert process is not None
        os.kill(process.pid, sig)

    def recover(self, address: str, sig: signal.Signals) -> None:
        node = self.broker(address)
        assert node.process is not None
        if sig == signal.SIGSTOP:
            os.kill(node.process.pid, signal.SIGKILL)  # a stopped process takes SIGKILL; see the module's note
        node.process.wait(30)
        node.start()

    def wait_whole(self) -> str:
        return wait_our_group(self.controllers, self.replicas, WHOLE_S)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=20, help="kills per side")
    parser.add_argument("--signal", default="kill", choices=("kill", "stop"))
    parser.add_argument("--controllers", type=int, default=3)
    parser.add_argument("--replicas", type=int, default=3, choices=(2, 3))
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--heartbeat-timeout-ms", type=int, default=3000,
                        help="controllerHeartBeatTimeoutMills of both sides' brokers")
    parser.add_argument("--route-poll-ms", type=int, default=1000,
                        help="how often the producer asks the name server for the topic's route (the kit's 1 s)")
    parser.add_argument("--version", default=PINNED, help="RocketMQ's version")
    args = parser.parse_args(argv)
    sig = signal.SIGKILL if args.signal == "kill" else signal.SIGSTOP
    root = scratch_dir("mqctl-vs-rocketmq-failover-")
    clients = JavaClients(args.version).build()
    timeout = {"controllerHeartBeatTimeoutMills": args.heartbeat_timeout_ms}
    rocketmq = theirs(root / "rocketmq", args.version, args.replicas, controllers_n=args.controllers, **timeout)
    controllers: ControllerCluster | None = None
    brokers: list[BrokerNode] = []
    loads: list[Load] = []
    try:
        rocketmq.start()
        controllers, brokers = ours(root / "ours", args.replicas, controllers_n=args.controllers, **timeout)
        namesrvs = (("rocketmq", rocketmq.namesrv_addr), ("mqctl", controllers.addresses))
        for name, namesrv in namesrvs:
            create_topic(clients, root / f"create-{name}", namesrv)
        for name, namesrv in namesrvs:
            loads.append(Load(clients, root / f"load-{name}", namesrv, args.threads, 1024,
                              route_poll_ms=args.route_poll_ms))
        sides: list[Side] = [Theirs(loads[0], args.replicas, rocketmq),
                             Ours(loads[1], args.replicas, controllers, brokers)]
        for k in range(args.kills):
            for side in sides if k % 2 == 0 else sides[::-1]:
                kill = side.one_kill(sig)
                print(f"{side.name} kill {k + 1}: route {kill['route_ms']} ms, first SEND_OK {kill['ms']} ms "
                      f"({kill['old_master']} -> {kill['new_master']})", flush=True)
        figures = [side.figures() for side in sides]
    finally:
        for load in loads:
            load.close()
        stop_ours(controllers, brokers)
        for process in rocketmq.processes():
            process.signal(signal.SIGCONT)
        rocketmq.stop()
    their_figures, mine = figures
    ratios = {key: (mine[key] / their_figures[key] if their_figures[key] and math.isfinite(mine[key] / their_figures[key])
                    else None)
              for key in ("route_p50_ms", "route_p99_ms", "p50_ms", "p99_ms", "max_ms")}
    columns = ["side", "kills", "no_new_master", "route_p50_ms", "route_p99_ms", "p50_ms", "p99_ms", "max_ms",
               "mean_ms"]
    print(table([{k: f[k] for k in columns} for f in figures], columns))
    print("ours / RocketMQ's: " + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items() if v is not None))
    name = f"vs_rocketmq_failover_{args.signal}" + ("" if args.route_poll_ms == 1000 else f"_poll{args.route_poll_ms}")
    path = write_result(name, {
        "rocketmq_version": args.version, "signal": args.signal, "kills": args.kills,
        "controllers": args.controllers, "replicas": args.replicas, "threads": args.threads,
        "heartbeat_timeout_ms": args.heartbeat_timeout_ms, "route_poll_ms": args.route_poll_ms, "sides": figures, "ratios_ours_over_rocketmq": ratios})
    print(f"result: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
