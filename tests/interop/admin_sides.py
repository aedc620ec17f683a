"""One side of a comparison: a cluster that real mqadmin (and mqctl) administer, RocketMQ's or ours, seen
only through its addresses and RocketMQ's requests (probe.py), so that both are driven the same way."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from services.remoting.bodies import ReplicasInfo
from tests.rocketmq import probe
from tests.rocketmq.cluster import mqadmin
from tests.rocketmq.jvm import poll
from tests.rocketmq.servers import Runtime

GROUP, CLUSTER = "broker-a", "DefaultCluster"


@dataclass(frozen=True)
class Replica:
    address: str


@dataclass(frozen=True)
class Side:
    """``name`` is "rocketmq" or "ours"; ``namesrv`` is what mqadmin's -n gets (our controllers serve the
    name server's role); mqadmin runs from ``runtime`` (the version under test) with its logs in ``admin``."""

    name: str
    controllers: tuple[str, ...]
    namesrv: str
    runtime: Runtime
    admin: Path

    @property
    def controller_addrs(self) -> str:
        return ";".join(self.controllers)

    # What the questions of conftest.py read of a RocketMQCluster, read the same way of either side.
    group = GROUP

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv

    @property
    def brokers(self) -> list[Replica]:
        info = self.sync_state()
        return [Replica(str(r.broker_address)) for r in (*info.in_sync_replicas, *info.not_in_sync_replicas)]

    @property
    def version(self) -> str:
        """The version of the mqadmin that administers the side."""
        return self.runtime.rocketmq.version

    def mqadmin(self, *args: str) -> subprocess.CompletedProcess[str]:
        return mqadmin(self.runtime, self.admin, args, self.namesrv)

    def leader(self, timeout_s: float = 60.0) -> str:
        """The leader every controller names."""
        def agreed() -> str | None:
            leaders = {probe.controller_metadata(a).controller_leader_address for a in self.controllers}
            leader = leaders.pop() if len(leaders) == 1 else None
            return leader if leader in self.controllers else None
        return poll(agreed, timeout_s, f"a controller leader of {self.name}")

    def follower(self) -> str:
        leader = self.leader()
        return next(a for a in self.controllers if a != leader)

    def sync_state(self) -> ReplicasInfo:
        info = probe.sync_state(self.leader(), GROUP)
        assert info is not None, f"{self.name}: {GROUP} is not registered"
        return info

    def steady(self, replicas: int = 3, timeout_s: float = 90.0) -> ReplicasInfo:
        """A master, and exactly ``replicas`` replicas, every one alive and in the SyncStateSet."""
        def full() -> ReplicasInfo | None:
            info = self.sync_state()
            members = info.in_sync_replicas
            if info.master_address and not info.not_in_sync_replicas and len(members) == replicas \
                    and all(r.alive for r in members):
                return info
            return None
        return poll(full, timeout_s, f"{self.name}: a master and {replicas} replicas in sync")

    def in_sync(self, broker_id: int, timeout_s: float = 90.0) -> ReplicasInfo:
        """The group once ``broker_id`` is alive and in its SyncStateSet (the others may not be yet)."""
        def joined() -> ReplicasInfo | None:
            info = self.sync_state()
            return info if any(r.broker_id == broker_id and r.alive for r in info.in_sync_replicas) else None
        return poll(joined, timeout_s, f"{self.name}: broker {broker_id} in the SyncStateSet")

    def broker(self, broker_id: int) -> str:
        info = self.sync_state()
        return next(str(r.broker_address) for r in (*info.in_sync_replicas, *info.not_in_sync_replicas)
                    if r.broker_id == broker_id)


def mqctl(*args: str) -> subprocess.CompletedProcess[str]:
    """Our CLI, as an operator runs it (no MQCTL_* variable from the environment)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQCTL_")}
    return subprocess.run([sys.executable, "-m", "mqctl", "--timeout", "10", *args], capture_output=True,
                          text=True, timeout=120, env=env, check=False)


def succeeded(tool: str, args: tuple[str, ...], done: subprocess.CompletedProcess[str]) -> str:
    """The tool's stdout, if it succeeded: mqadmin exits 0 even when a command fails, so a stack trace on
    its stderr is a failure too."""
    failed = done.returncode != 0 or (tool == "mqadmin" and "Exception" in done.stderr)
    assert not failed, f"{tool} {' '.join(args)} failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr[-3000:]}"
    return done.stdout
