"""The two kinds of controllers and the two kinds of brokers that failover.py's scenario runs with: mqctl's
controller group (its nodes are the name servers too) or RocketMQ's DLedger group and name server; RocketMQ's
Java brokers or mqctl's brokers speaking remoting to the controllers. Each is started here and always
stopped by its ``close``."""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqctl.cluster import BrokerNode, ControllerCluster, make_broker
from tests.rocketmq import probe
from tests.rocketmq.errors import ProcessExited
from tests.rocketmq.jvm import JavaProcess, poll, stop_all
from tests.rocketmq.ports import free_block
from tests.rocketmq.servers import Broker, ControllerGroup, NameServer, Props, Runtime


def answering(address: str, alive: Callable[[], None] = lambda: None) -> None:
    """A restarted controller answers again (a Java client that picks it as its name server while it does
    not fails to start: RocketMQ 5.5.0's push consumer)."""
    poll(lambda: probe.controller_metadata(address), 90, f"controller {address} answering", alive)


class OurControllers:
    """Three mqctl controllers; each also serves the name server's requests."""

    def __init__(self, root: Path, props: dict[str, Any]) -> None:
        self.cluster = ControllerCluster(root, extra=props)
        self.cluster.configure()
        self.cluster.start()
        self.cluster.leader(timeout=60)
        self.addresses = self.namesrv = self.cluster.addresses

    def leader(self) -> str:
        return self.cluster.leader(timeout=5).address

    def kill_leader(self) -> str:
        node = self.cluster.leader(timeout=30)
        node.kill()
        return node.address

    def restart(self, address: str) -> None:
        next(n for n in self.cluster.nodes if n.address == address).start()
        answering(address)

    def close(self) -> None:
        self.cluster.stop()


class TheirControllers:
    """RocketMQ's name server and three DLedger controllers."""

    def __init__(self, runtime: Runtime, root: Path, props: Props) -> None:
        ports = free_block(3, 0)
        self.namesrv_server = NameServer(runtime, root / "namesrv", ports.namesrv)
        self.group = ControllerGroup(runtime, root / "controllers", ports.controllers, props)
        self.processes = [self.namesrv_server.process, *self.group.processes]
        try:
            for process in self.processes:
                process.start()
            self.namesrv_server.wait_ready()
            self.group.wait_ready()
        except BaseException:
            self.close()
            raise
        self.addresses = self.group.address_list
        self.namesrv = self.namesrv_server.address

    def leader(self) -> str:
        """The leader every running controller names."""
        running = [a for a, p in zip(self.group.addresses, self.group.processes, strict=True) if p.alive()]
        leaders = {probe.controller_metadata(address).controller_leader_address for address in running}
        leader = leaders.pop() if len(leaders) == 1 else None
        if leader not in running:
            raise ProcessExited(f"the running controllers name no common leader among them: {leaders or leader}")
        return str(leader)

    def _process(self, address: str) -> JavaProcess:
        return self.group.processes[self.group.addresses.index(address)]

    def kill_leader(self) -> str:
        address = self.leader()
        self._process(address).signal(signal.SIGKILL)
        self._process(address).wait_exit(10)
        return address

    def restart(self, address: str) -> None:
        self._process(address).start()
        answering(address, self._process(address).check_alive)

    def close(self) -> None:
        stop_all(list(reversed(self.processes)))


@dataclass
class JavaBrokers:
    """Three RocketMQ brokers of one group in controller mode (``brokerId=-1``)."""

    runtime: Runtime
    root: Path
    controllers: str
    namesrv: str
    props: Props
    brokers: list[Broker] = field(default_factory=list)
    running: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        ports = free_block(0, 3).brokers
        self.brokers = [Broker(self.runtime, self.root / f"b{i}", "broker-a", port, self.controllers, self.namesrv,
                               self.props) for i, port in enumerate(ports)]

    def address(self, index: int) -> str:
        return self.brokers[index].address

    def start(self, index: int) -> None:
        self.brokers[index].process.start()
        self.running.add(index)

    def signal(self, index: int, sig: signal.Signals) -> None:
        process = self.brokers[index].process
        process.signal(sig)
        if sig == signal.SIGKILL:
            process.wait_exit(10)
            self.running.discard(index)

    def check_alive(self) -> None:
        for index in self.running:
            self.brokers[index].process.check_alive()

    def close(self) -> None:
        for index in range(3):
            self.brokers[index].process.signal(signal.SIGCONT)
        stop_all([b.process for b in self.brokers])


@dataclass
class OurBrokers:
    """Three mqctl brokers of one group, talking to the controllers over remoting."""

    root: Path
    controllers: str
    props: dict[str, Any]
    nodes: list[BrokerNode] = field(default_factory=list)
    running: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        used: set[int] = set()
        self.nodes = [make_broker(self.root, "broker-a", i, self.controllers, used, **self.props) for i in range(3)]

    def address(self, index: int) -> str:
        return self.nodes[index].address

    def start(self, index: int) -> None:
        self.nodes[index].start()
        self.running.add(index)

    def signal(self, index: int, sig: signal.Signals) -> None:
        self.nodes[index].kill(sig)
        if sig == signal.SIGKILL:
            self.running.discard(index)

    def check_alive(self) -> None:
        for index in self.running:
            node = self.nodes[index]
            if not node.alive():
                raise ProcessExited(f"broker {node.address} exited; {node.log_file}:\n"
                                    + "\n".join(node.log_file.read_text().splitlines()[-30:]))

    def close(self) -> None:
        for node in self.nodes:
            node.kill(signal.SIGCONT)
            node.stop()
