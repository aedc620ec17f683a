"""Side by side with RocketMQ: the controller leader killed, until the next controller write commits.

    python -m bench.vs_rocketmq_controller_failover [--kills 20] [--controllers 3] [--version 5.3.3]

Each side is a group of ``--controllers`` controllers and nothing else: RocketMQ's standalone DLedger
controllers with the test kit's settings (tests/rocketmq; DLedger's election timing is not a setting of
RocketMQ's controller config), ours with their defaults (Raft election timeout 1-2 s). Both are driven by
the same client, over RocketMQ's remoting protocol: a write is 1013 CONTROLLER_APPLY_BROKER_ID for a new
group (a DLedger or Raft entry), the leader found with 1005 CONTROLLER_GET_METADATA_INFO.

One kill: a write is seen to commit; the leader every node names is sent SIGKILL; from that moment the
client tries a write on every surviving controller at once, a new group each, every 10 ms (each attempt
waits up to 2 s for its answer), until one answers SUCCESS: that time is the figure. The killed node is started again and the group waited on until
every node names the same leader. Kills alternate between the sides (A B, B A, ...). Per side: p50, p99,
max; the ratio is ours / RocketMQ's. Result file ``vs_rocketmq_controller_failover``.
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

from bench.common import percentile, scratch_dir, table, write_result
from mqctl.cluster import ControllerCluster, ControllerNode
from services.common.codes import ResponseCode
from services.common.errors import MqctlError
from services.common.remoting_client import RemotingClient
from services.remoting.command import RemotingCommand, RequestCode, make_request
from services.remoting.headers import ApplyBrokerIdRequestHeader
from tests.rocketmq import PINNED
from tests.rocketmq.fetch import RocketMQ, require_java
from tests.rocketmq.jvm import JavaProcess, poll
from tests.rocketmq.probe import controller_metadata
from tests.rocketmq.servers import ControllerGroup, Runtime
from tests.support.remoting import ask

#: The longest a side may take to commit a write after its leader is killed before the run fails.
WRITE_TIMEOUT_S = 60.0
READY_S = 120.0


def agreed_leader(addresses: list[str]) -> str | None:
    """The leader every node names, or None while they do not agree or one does not answer."""
    try:
        leaders = {controller_metadata(address, 1.0).controller_leader_address for address in addresses}
    except (OSError, MqctlError, RuntimeError, TimeoutError):
        return None
    leader = leaders.pop() if len(leaders) == 1 else None
    return leader if leader in addresses else None


class Writer:
    """Applies broker ids for new groups, a name per attempt, so each success is one new replicated entry."""

    def __init__(self, side: str) -> None:
        self.side, self.count = side, 0

    def request(self) -> RemotingCommand:
        self.count += 1
        header = ApplyBrokerIdRequestHeader(cluster_name="BenchCluster", broker_name=f"{self.side}-{self.count}",
                                            applied_broker_id=1, register_check_code=f"127.0.0.1:1;{self.count}")
        return make_request(RequestCode.CONTROLLER_APPLY_BROKER_ID, self.count, header.to_ext_fields())

    def write(self, address: str, timeout_s: float = 0.5) -> bool:
        try:
            return ask(address, self.request(), timeout_s).code == ResponseCode.SUCCESS
        except (OSError, MqctlError, RuntimeError, TimeoutError):
            return False

    async def first_success(self, addresses: list[str], began: float, timeout_s: float) -> float | None:
        """Seconds from ``began`` (monotonic) to the first write any of ``addresses`` commits, each asked every
        10 ms (an attempt waits up to 2 s for its answer); None after ``timeout_s``."""
        client = RemotingClient(timeout_s=2.0)
        done = asyncio.Event()
        found: list[float] = []

        async def keep_asking(address: str) -> None:
            while not done.is_set() and time.monotonic() - began < timeout_s:
                try:
                    answer = await client.call(address, self.request())
                except (OSError, MqctlError):
                    answer = None
                if answer is not None and answer.code == ResponseCode.SUCCESS:
                    found.append(time.monotonic() - began)
                    done.set()
                    return
                await asyncio.sleep(0.01)
        try:
            await asyncio.gather(*(keep_asking(address) for address in addresses))
        finally:
            await client.close()
        return min(found) if found else None


class Side:
    def __init__(self, name: str, addresses: list[str], kill: Callable[[str], None],
                 restart: Callable[[str], None], reap: Callable[[str], None]) -> None:
        self.name, self.addresses, self.kill, self.restart, self.reap = name, addresses, kill, restart, reap
        self.writer = Writer(name)
        self.kills: list[dict[str, Any]] = []

    def wait_whole(self) -> str:
        leader: str = poll(lambda: agreed_leader(self.addresses), READY_S, f"{self.name}'s controllers to agree")
        return leader

    def one_kill(self) -> dict[str, Any]:
        leader = self.wait_whole()
        poll(lambda: self.writer.write(leader, 3.0) or None, 30.0, f"a write through {self.name}'s leader")
        survivors = [a for a in self.addresses if a != leader]
        hit = time.monotonic()
        self.kill(leader)
        before = self.writer.count
        first = asyncio.run(self.writer.first_success(survivors, hit, WRITE_TIMEOUT_S))
        if first is None:
            raise RuntimeError(f"{self.name}: no write committed {WRITE_TIMEOUT_S} s after the leader was killed")
        self.reap(leader)
        self.restart(leader)
        kill = {"old_leader": leader, "ms": first * 1000, "attempts": self.writer.count - before,
                "new_leader": self.wait_whole()}
        self.kills.append(kill)
        return kill

    def figures(self) -> dict[str, Any]:
        times = [k["ms"] for k in self.kills]
        return {"side": self.name, "kills": len(times), "p50_ms": percentile(times, 50),
                "p99_ms": percentile(times, 99), "max_ms": max(times),
                "mean_ms": statistics.fmean(times), "each": self.kills}


def theirs(root: Path, version: str, size: int, processes: list[JavaProcess]) -> Side:
    """RocketMQ's controllers, started; ``processes`` gets each as it starts (the caller stops them)."""
    runtime = Runtime(require_java(), RocketMQ(version).fetch(), root / "home")
    group = ControllerGroup(runtime, root / "controllers", size)
    for process in group.processes:
        processes.append(process)
        process.start()
    by_address = dict(zip(group.addresses, group.processes, strict=True))

    def kill(address: str) -> None:
        by_address[address].signal(signal.SIGKILL)

    def reap(address: str) -> None:
        by_address[address].wait_exit(30)

    def restart(address: str) -> None:
        by_address[address].start()
    return Side("rocketmq", group.addresses, kill, restart, reap)


def ours(root: Path, size: int) -> tuple[Side, ControllerCluster]:
    cluster = ControllerCluster(root / "controllers", size=size, extra={"logLevel": "WARNING"})
    cluster.configure()
    cluster.start()
    by_address: dict[str, ControllerNode] = {node.address: node for node in cluster.nodes}

    def kill(address: str) -> None:
        process = by_address[address].process
        if process is not None:
            process.send_signal(signal.SIGKILL)

    def reap(address: str) -> None:
        by_address[address].kill()  # already dead: waits for the exit

    def restart(address: str) -> None:
        by_address[address].start()
    return Side("mqctl", list(by_address), kill, restart, reap), cluster


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=20, help="kills per side")
    parser.add_argument("--controllers", type=int, default=3)
    parser.add_argument("--version", default=PINNED, help="RocketMQ's version")
    args = parser.parse_args(argv)
    root = scratch_dir("mqctl-vs-rocketmq-controllers-")
    processes: list[JavaProcess] = []
    cluster: ControllerCluster | None = None
    try:
        their_side = theirs(root / "rocketmq", args.version, args.controllers, processes)
        our_side, cluster = ours(root / "ours", args.controllers)
        sides = [their_side, our_side]
        for k in range(args.kills):
            for side in sides if k % 2 == 0 else sides[::-1]:
                kill = side.one_kill()
                print(f"{side.name} kill {k + 1}: {kill['ms']:.0f} ms ({kill['old_leader']} -> {kill['new_leader']})",
                      flush=True)
        figures = [side.figures() for side in sides]
    finally:
        if cluster is not None:
            cluster.stop()
        for process in processes:
            process.signal(signal.SIGTERM)
        for process in processes:
            if not process.wait_exit(15):
                process.signal(signal.SIGKILL)
    their_figures, mine = figures
    ratios = {key: mine[key] / their_figures[key] for key in ("p50_ms", "p99_ms", "max_ms")}
    columns = ["side", "kills", "p50_ms", "p99_ms", "max_ms", "mean_ms"]
    print(table([{k: f[k] for k in columns} for f in figures], columns))
    print("ours / RocketMQ's: " + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items()))
    path = write_result("vs_rocketmq_controller_failover", {
        "rocketmq_version": args.version, "kills": args.kills, "controllers": args.controllers, "sides": figures,
        "ratios_ours_over_rocketmq": ratios})
    print(f"result: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
