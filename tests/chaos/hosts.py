"""The chaos run's hosts mode: the same cluster, workload, faults and checker, but every node on a host of its
own (a network namespace, tests/netns) and the network faults made by the kernel between hosts instead of by
loopback proxies: partitions and one-way cuts (blackhole routes) between controllers, between brokers and
controllers, and on the replication links between master and slaves, and random loss (iptables) on those
links. Delay and jitter need the kernel's netem, which some kernels lack: those faults are then skipped, and
the run says so.

The driver (the workload, the faults, the checker) runs on a seventh host, ``cli``, as a client would:
``python -m tests.chaos --hosts`` builds the hosts and runs itself again there."""

from __future__ import annotations

from pathlib import Path

from mqctl.cluster import DevCluster, NodeSpec
from tests.netns.topology import Topology

CONTROLLER_HOSTS = ("c0", "c1", "c2")
BROKER_HOSTS = ("b1", "b2", "b3")
CLIENT = "cli"
HOSTS = (*CONTROLLER_HOSTS, *BROKER_HOSTS, CLIENT)
CONTROLLER_PORT, BROKER_PORT = 9878, 10911

#: Network faults only hosts mode can make (the loopback mode's kinds apply too).
NETWORK_FAULT_KINDS = ("partition_controller_leader", "partition_master_from_slaves", "oneway_slave_to_master",
                       "lossy_replication", "lossy_controllers")


class HostsCluster(DevCluster):
    """A DevCluster whose nodes each run in their own network namespace, at their host's address."""

    def __init__(self, data_dir: Path, nodes: list[NodeSpec], topology: Topology) -> None:
        super().__init__(data_dir, nodes)
        self.topology = topology

    @classmethod
    def on(cls, data_dir: Path, topology: Topology, group: str) -> HostsCluster:
        nodes = [NodeSpec(f"n{i}", "controller", CONTROLLER_PORT, CONTROLLER_PORT + 1, host=topology.address(h))
                 for i, h in enumerate(CONTROLLER_HOSTS)]
        nodes += [NodeSpec(f"{group}-{r}", "broker", BROKER_PORT, BROKER_PORT + 1, group, host=topology.address(h))
                  for r, h in enumerate(BROKER_HOSTS, 1)]
        cluster = cls(data_dir, nodes, topology)
        cluster._write_configs()
        return cluster

    def host(self, node: NodeSpec) -> str:
        """The topology's name for the host ``node`` runs on."""
        return next(h for h in self.topology.hosts if self.topology.address(h) == node.host)

    def launcher(self, node: NodeSpec) -> list[str]:
        return ["ip", "netns", "exec", self.topology.ns(self.host(node))]


def topology_of(spec: str) -> Topology:
    """The topology a ``run:net`` spec names (built by the parent process, which also removes it)."""
    run, _, net = spec.partition(":")
    return Topology(HOSTS, run=run, net=int(net))
