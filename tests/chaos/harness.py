"""Fault-injection harness: a real local cluster, a recording workload, a seeded fault schedule.

The workload's producers send uniquely numbered messages to whoever is master and record every outcome
(ok = PUT_OK, failed = a definite refusal, unknown = timeout or an answer that does not say). Faults are
drawn from a seeded random schedule, one at a time, each healed before the next. At the end the cluster
is brought back to health, consumers drain everything, and ``checker.py`` judges the history.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqctl.cluster import DevCluster, NodeSpec, wait_until
from mqctl.cluster.processes import free_port_span
from services.broker import contract as bc
from services.broker.ha.frames import (
    MasterFrameReader,
    ProtocolError,
    SlaveAck,
    SlaveHandshake,
    SlaveHello,
    SlaveProof,
)
from services.broker.store import load_checkpoint
from services.common.broker_client import BrokerClient
from services.common.errors import ConfigError, MqctlError
from services.common.httplimits import DEFAULT_MAX_CONNECTIONS, stranger_share
from services.common.remoting_client import RemotingClient
from services.controller import contract
from services.remoting.bodies import SyncStateSet
from services.remoting.command import RequestCode, make_request
from services.remoting.headers import NotifyBrokerRoleChangedRequestHeader
from tests.chaos.hosts import NETWORK_FAULT_KINDS, HostsCluster
from tests.chaos.java_workload import BROKER_PROPS as JAVA_BROKER_PROPS
from tests.chaos.java_workload import JavaWorkload
from tests.chaos.netproxy import Proxy, ProxySet
from tests.chaos.route_attack import attack as route_attack
from tests.chaos.route_attack import poisoned, route_of
from tests.netns.topology import IptablesUnavailable, NetemUnavailable, Topology
from tests.rocketmq.javaclients import JavaClients
from tests.support.frames import LARGEST_BODY, huge_request, send_frame
from tests.support.strangers import TricklerProcess, channel_url, cross_site_channel, raise_fd_limit

log = logging.getLogger("chaos")

GROUP = "broker-a"
CLUSTER = "DefaultCluster"
TOPIC = "ChaosTopic"
DEFINITE_FAILURES = ("SERVICE_NOT_AVAILABLE", "MESSAGE_ILLEGAL", "IN_SYNC_REPLICAS_NOT_ENOUGH")

FAULT_KINDS = ("kill_master", "kill_slave", "kill_controller_leader", "kill_controller_follower",
               "pause_master", "crash_master_unflushed", "admin_elect", "cut_master_from_controllers",
               "delay_master_to_controllers", "oneway_master_to_controllers", "impostor_slave",
               "forged_role_change", "cross_site_channel", "slowloris", "route_poisoning",
               "huge_frame")
#: In hosts mode (tests/chaos/hosts.py): the kernel makes the network faults, on every kind of link.
HOST_FAULT_KINDS = (*FAULT_KINDS, *NETWORK_FAULT_KINDS)


@dataclass
class Outcome:
    body: str
    producer: int
    seq: int
    status: str  # ok | failed | unknown
    detail: str
    sent_ms: int
    done_ms: int
    queue_id: int | None = None
    queue_offset: int | None = None


@dataclass
class FaultRecord:
    kind: str
    target: str
    at_ms: int
    healed_ms: int | None = None
    recovery_ms: int | None = None


@dataclass
class History:
    outcomes: list[Outcome] = field(default_factory=list)
    faults: list[FaultRecord] = field(default_factory=list)
    #: What an attack achieved that it must not (a failover, a peer kept out); the checker reports them.
    attack_effects: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, outcome: Outcome) -> None:
        with self.lock:
            self.outcomes.append(outcome)

    def ok_after(self, at_ms: int) -> int | None:
        with self.lock:
            times = [o.done_ms for o in self.outcomes if o.status == "ok" and o.sent_ms >= at_ms]
        return min(times) if times else None


def now_ms() -> int:
    return int(time.time() * 1000)


def free_base_port(span: int = 60) -> int:
    """The first of ``span`` free ports for a DevCluster (even: its nodes take them in pairs)."""
    return free_port_span(span, step=2)


class Producer(threading.Thread):
    def __init__(self, index: int, cluster: DevCluster, history: History, stop: threading.Event,
                 batch: int = 5, rate_limit_s: float = 0.0) -> None:
        super().__init__(daemon=True, name=f"producer-{index}")
        self.index, self.cluster, self.history, self.stop_event = index, cluster, history, stop
        self.batch, self.rate_limit_s = batch, rate_limit_s
        self.master: str | None = None
        self.seq = 0

    def run(self) -> None:
        with BrokerClient(4.0) as client:
            while not self.stop_event.is_set():
                self._send_batch(client)
                if self.rate_limit_s:
                    time.sleep(self.rate_limit_s)

    def _send_batch(self, client: BrokerClient) -> None:
        if self.master is None:
            try:
                master = self.cluster.master_of(GROUP)
            except MqctlError:
                master = None
            if master is None:
                time.sleep(0.1)
                return
            self.master = master.address
        bodies = [f"p{self.index}-{self.seq + i}" for i in range(self.batch)]
        seqs = list(range(self.seq, self.seq + self.batch))
        self.seq += self.batch
        sent = now_ms()
        try:
            env = client.request(self.master, "POST", bc.SEND_MESSAGES,
                                 json={"messages": [{"topic": TOPIC, "body": b, "queueId": self.index % 4}
                                                    for b in bodies]}, accept=tuple(range(1, 3000)))
        except MqctlError as exc:
            self._record(bodies, seqs, "unknown", str(exc), sent, None)
            self.master = None
            return
        data = env.data or {}
        status = str(data.get("status") or f"CODE_{env.code}")
        if status == "PUT_OK":
            self._record(bodies, seqs, "ok", status, sent, data.get("results"))
        else:
            kind = "failed" if status in DEFINITE_FAILURES else "unknown"
            self._record(bodies, seqs, kind, status, sent, data.get("results"))
            self.master = None
            time.sleep(0.05)

    def _record(self, bodies: list[str], seqs: list[int], status: str, detail: str, sent: int,
                results: list[dict[str, Any]] | None) -> None:
        done = now_ms()
        for i, (body, seq) in enumerate(zip(bodies, seqs)):
            r = results[i] if results and i < len(results) else {}
            self.history.record(Outcome(body, self.index, seq, status, detail, sent, done,
                                        r.get("queueId"), r.get("queueOffset")))


@dataclass
class ChaosRun:
    data_dir: Path
    seed: int
    duration_s: float
    producers: int = 2
    fault_gap_s: tuple[float, float] = (4.0, 8.0)
    kinds: tuple[str, ...] = FAULT_KINDS
    history: History = field(default_factory=History)
    cluster: DevCluster | None = None
    on_event: Callable[[str], None] = print
    #: How the brokers talk to the controllers (the broker property ``controllerProtocol``).
    controller_protocol: str = "http"

    proxies: ProxySet | None = None
    broker_links: dict[str, list[Proxy]] = field(default_factory=dict)
    #: Hosts mode: every node on its own host of this topology (tests/chaos/hosts.py).
    topology: Topology | None = None
    #: RocketMQ's Java clients in the workload too (tests/chaos/java_workload.py; loopback mode only).
    java: JavaClients | None = None
    workload: JavaWorkload | None = None

    def start(self) -> None:
        """Every broker reaches the controllers through its own proxies, so its link can be cut; in hosts
        mode the links are cut between the hosts instead."""
        if self.topology is not None:
            self.cluster = HostsCluster.on(self.data_dir, self.topology, GROUP)
            for node in self.cluster.brokers():
                conf = self.cluster.conf_file(node)
                conf.write_text(conf.read_text() + f"\ncontrollerProtocol={self.controller_protocol}\n")
            self.cluster.up(timeout=120)
            return
        self.cluster = DevCluster.create(self.data_dir, 3, 1, 3, free_base_port())
        self.proxies = ProxySet()
        for node in self.cluster.brokers():
            links = [self.proxies.add(c.address) for c in self.cluster.controllers()]
            self.broker_links[node.name] = links
            conf = self.cluster.conf_file(node)
            addrs = ";".join(p.address for p in links)
            extra = "".join(f"{k}={v}\n" for k, v in JAVA_BROKER_PROPS.items()) if self.java else ""
            conf.write_text("\n".join(f"controllerAddr={addrs}" if line.startswith("controllerAddr=") else line
                                      for line in conf.read_text().splitlines())
                            + f"\ncontrollerProtocol={self.controller_protocol}\n" + extra)
        self.cluster.up(timeout=120)
        if self.java is not None:
            namesrv = ";".join(c.address for c in self.cluster.controllers())
            self.workload = JavaWorkload(self.java, self.data_dir / "java", namesrv, int(self.duration_s) + 900)
            self.workload.start()

    def run(self) -> History:
        assert self.cluster is not None
        rng = random.Random(self.seed)
        stop = threading.Event()
        workers = [Producer(i, self.cluster, self.history, stop) for i in range(self.producers)]
        for w in workers:
            w.start()
        deadline = time.monotonic() + self.duration_s
        try:
            while time.monotonic() < deadline:
                time.sleep(rng.uniform(*self.fault_gap_s))
                if time.monotonic() >= deadline:
                    break
                kind = rng.choice(self.kinds)
                self.inject(kind, rng)
        finally:
            time.sleep(2.0)  # let the last fault's recovery show in the history
            stop.set()
            if self.workload is not None:
                self.workload.stop_producers()
            for w in workers:
                w.join(timeout=15)
        for fault in self.history.faults:
            first_ok = self.history.ok_after(fault.at_ms)
            fault.recovery_ms = None if first_ok is None else first_ok - fault.at_ms
        return self.history

    # ------------------------------------------------------------------ faults
    def inject(self, kind: str, rng: random.Random) -> None:
        assert self.cluster is not None
        handler = getattr(self, f"_fault_{kind}")
        try:
            target = handler(rng)
        except MqctlError as exc:
            self.on_event(f"[chaos] {kind}: skipped ({exc})")
            return
        if target is None:
            return
        self.heal()

    def _record_fault(self, kind: str, target: str) -> FaultRecord:
        record = FaultRecord(kind, target, now_ms())
        self.history.faults.append(record)
        self.on_event(f"[chaos] t={record.at_ms} {kind} -> {target}")
        return record

    def _master(self) -> NodeSpec:
        assert self.cluster is not None
        master = self.cluster.master_of(GROUP)
        if master is None or self.cluster.pid(master) is None:
            raise MqctlError("no live master")
        return master

    def _fault_kill_master(self, rng: random.Random) -> str:
        assert self.cluster is not None
        master = self._master()
        self._record_fault("kill_master", master.name)
        self.cluster.kill_node(master)
        time.sleep(rng.uniform(1.0, 4.0))
        return master.name

    def _fault_kill_slave(self, rng: random.Random) -> str:
        assert self.cluster is not None
        master = self._master()
        slaves = [n for n in self.cluster.brokers(GROUP) if n.name != master.name and self.cluster.pid(n)]
        if not slaves:
            raise MqctlError("no live slave")
        victim = rng.choice(slaves)
        self._record_fault("kill_slave", victim.name)
        self.cluster.kill_node(victim)
        time.sleep(rng.uniform(1.0, 4.0))
        return victim.name

    def _controller(self, leader: bool) -> NodeSpec:
        assert self.cluster is not None
        with self.cluster.client(timeout=1.0) as client:
            for node in self.cluster.controllers():
                try:
                    data = client.request_node(node.address, "GET", contract.METADATA).data
                except MqctlError:
                    continue
                if bool(data.get("isLeader")) == leader:
                    return node
        raise MqctlError("no such controller")

    def _fault_kill_controller_leader(self, rng: random.Random) -> str:
        assert self.cluster is not None
        node = self._controller(leader=True)
        self._record_fault("kill_controller_leader", node.name)
        self.cluster.kill_node(node)
        time.sleep(rng.uniform(1.0, 3.0))
        return node.name

    def _fault_kill_controller_follower(self, rng: random.Random) -> str:
        assert self.cluster is not None
        node = self._controller(leader=False)
        self._record_fault("kill_controller_follower", node.name)
        self.cluster.kill_node(node)
        time.sleep(rng.uniform(1.0, 3.0))
        return node.name

    def _fault_pause_master(self, rng: random.Random) -> str:
        """SIGSTOP the master for longer than its heartbeat timeout: a zombie that must be fenced."""
        assert self.cluster is not None
        master = self._master()
        pid = self.cluster.pid(master)
        assert pid is not None
        self._record_fault("pause_master", master.name)
        os.kill(pid, signal.SIGSTOP)
        time.sleep(rng.uniform(4.0, 6.0))
        os.kill(pid, signal.SIGCONT)
        return master.name

    def _fault_crash_master_unflushed(self, rng: random.Random) -> str:
        """SIGKILL the master, then cut its commitlog back to what it had fsynced (a power loss): the
        flushedOffset of its checkpoint file as the kill left it (a figure read from the broker before the
        kill could be older than what the broker flushed, and recorded, in between)."""
        assert self.cluster is not None
        master = self._master()
        self._record_fault("crash_master_unflushed", master.name)
        self.cluster.kill_node(master)
        store = self.cluster.node_dir(master) / "store"
        checkpoint, problem = load_checkpoint(store / "checkpoint")
        if problem:
            raise MqctlError(f"{master.name}'s checkpoint is {problem}")
        flushed = checkpoint.get("flushedOffset", 0)
        commitlog = store / "commitlog"
        for segment in sorted(commitlog.iterdir()):
            start = int(segment.name)
            if start >= flushed:
                segment.unlink()
            elif start + segment.stat().st_size > flushed:
                os.truncate(segment, flushed - start)
        time.sleep(rng.uniform(1.0, 3.0))
        return master.name

    def _fault_admin_elect(self, rng: random.Random) -> str | None:
        assert self.cluster is not None
        state = self.cluster.sync_state(GROUP)
        candidates = [r["brokerId"] for r in state.get("inSyncReplicas", [])
                      if r["brokerId"] != state.get("masterBrokerId") and r["alive"]]
        if not candidates:
            raise MqctlError("no other in-sync replica to elect")
        target = rng.choice(candidates)
        self._record_fault("admin_elect", f"broker id {target}")
        with self.cluster.client(timeout=3.0) as client:
            client.call("POST", contract.ELECT_MASTER, json={
                "clusterName": state["clusterName"], "brokerName": GROUP, "brokerId": target,
                "designateElect": True}, accept=tuple(range(1, 3000)))
        return f"broker id {target}"

    def _link_fault(self, kind: str, mode: str, rng: random.Random, delay_s: float = 0.0) -> str:
        """Impair the master's links to every controller for longer than its heartbeat timeout; the
        group must fail over and the isolated master must not acknowledge anything it cannot keep."""
        if self.topology is not None:
            return self._host_link_fault(kind, mode, rng, delay_s)
        assert self.proxies is not None
        master = self._master()
        self._record_fault(kind, master.name)
        for proxy in self.broker_links[master.name]:
            self.proxies.set_mode(proxy, mode, delay_s)
        time.sleep(rng.uniform(4.0, 6.0))
        for proxy in self.broker_links[master.name]:
            self.proxies.set_mode(proxy, "pass")
        return master.name

    def _fault_cut_master_from_controllers(self, rng: random.Random) -> str:
        return self._link_fault("cut_master_from_controllers", "cut", rng)

    def _fault_delay_master_to_controllers(self, rng: random.Random) -> str:
        return self._link_fault("delay_master_to_controllers", "delay", rng, delay_s=rng.uniform(0.5, 4.0))

    def _fault_oneway_master_to_controllers(self, rng: random.Random) -> str:
        return self._link_fault("oneway_master_to_controllers", "oneway", rng)

    # ------------------------------------------------------------------ hosts mode: the kernel's faults
    def _net(self) -> tuple[Topology, HostsCluster]:
        if self.topology is None or not isinstance(self.cluster, HostsCluster):
            raise MqctlError("a network fault between hosts needs hosts mode (--hosts)")
        return self.topology, self.cluster

    def _host_link_fault(self, kind: str, mode: str, rng: random.Random, delay_s: float) -> str:
        t, cluster = self._net()
        master = self._master()
        at = cluster.host(master)
        if mode == "delay":
            try:
                t.impair(at, delay_ms=int(delay_s * 1000), jitter_ms=int(delay_s * 250))
            except NetemUnavailable as exc:
                raise MqctlError(str(exc)) from None
        self._record_fault(kind, master.name)
        for controller in cluster.controllers():
            if mode == "cut":
                t.partition(at, cluster.host(controller))
            elif mode == "oneway":
                t.cut(at, cluster.host(controller))
        time.sleep(rng.uniform(4.0, 6.0))
        return master.name

    def _fault_partition_controller_leader(self, rng: random.Random) -> str:
        """The Raft leader loses the other controllers: they elect another; the brokers must follow it."""
        t, cluster = self._net()
        leader = self._controller(leader=True)
        self._record_fault("partition_controller_leader", leader.name)
        for other in cluster.controllers():
            if other.name != leader.name:
                t.partition(cluster.host(leader), cluster.host(other))
        time.sleep(rng.uniform(4.0, 6.0))
        return leader.name

    def _slaves(self, master: NodeSpec) -> list[NodeSpec]:
        assert self.cluster is not None
        return [n for n in self.cluster.brokers(GROUP) if n.name != master.name and self.cluster.pid(n)]

    def _fault_partition_master_from_slaves(self, rng: random.Random) -> str:
        """The replication links go (both ways): writes wait for the acks the quorum needs, then the set
        shrinks; nothing is acknowledged that the final master lacks."""
        t, cluster = self._net()
        master = self._master()
        self._record_fault("partition_master_from_slaves", master.name)
        for slave in self._slaves(master):
            t.partition(cluster.host(master), cluster.host(slave))
        time.sleep(rng.uniform(4.0, 7.0))
        return master.name

    def _fault_oneway_slave_to_master(self, rng: random.Random) -> str:
        """A slave still receives the log but its acks never arrive."""
        t, cluster = self._net()
        master = self._master()
        slaves = self._slaves(master)
        if not slaves:
            raise MqctlError("no live slave")
        slave = rng.choice(slaves)
        self._record_fault("oneway_slave_to_master", slave.name)
        t.cut(cluster.host(slave), cluster.host(master))
        time.sleep(rng.uniform(4.0, 7.0))
        return slave.name

    def _lossy(self, kind: str, pairs: list[tuple[str, str]], rng: random.Random) -> str:
        t, _ = self._net()
        pct = rng.uniform(10.0, 40.0)
        try:
            for src, dst in pairs:
                t.lose(src, dst, pct)
        except IptablesUnavailable as exc:
            t.heal()
            raise MqctlError(str(exc)) from None
        self._record_fault(kind, f"{pct:.0f}% loss on {len(pairs)} links")
        time.sleep(rng.uniform(5.0, 8.0))
        return kind

    def _fault_lossy_replication(self, rng: random.Random) -> str:
        _, cluster = self._net()
        master = self._master()
        links = [(cluster.host(a), cluster.host(b)) for s in self._slaves(master) for a, b in ((master, s), (s, master))]
        return self._lossy("lossy_replication", links, rng)

    def _fault_lossy_controllers(self, rng: random.Random) -> str:
        _, cluster = self._net()
        links = [(cluster.host(b), cluster.host(c)) for b in cluster.brokers() for c in cluster.controllers()]
        return self._lossy("lossy_controllers", links + [(c, b) for b, c in links], rng)

    def _broker_id(self, node: NodeSpec) -> int:
        with BrokerClient(2.0) as client:
            return int(client.request(node.address, "GET", bc.RUNTIME_INFO).data["brokerId"])

    def _fault_impostor_slave(self, rng: random.Random) -> str:
        """The attack of a peer that claims a real slave's (public) id on the master's HA port while that
        slave is paused, then, half the time, the master's SIGKILL: a write the impostor "acknowledged"
        would be lost if the paused slave were elected. The impostor never gets past the challenge."""
        assert self.cluster is not None
        master = self._master()
        state = self.cluster.sync_state(GROUP)
        in_sync = {r["brokerId"] for r in state.get("inSyncReplicas", [])} - {state.get("masterBrokerId")}
        slaves = [n for n in self.cluster.brokers(GROUP)
                  if n.name != master.name and self.cluster.pid(n) and self._broker_id(n) in in_sync]
        if not slaves:
            raise MqctlError("no live in-sync slave to impersonate")
        victim = rng.choice(slaves)
        victim_id, pid = self._broker_id(victim), self.cluster.pid(victim)
        assert pid is not None
        self._record_fault("impostor_slave", f"{victim.name} (id {victim_id})")
        os.kill(pid, signal.SIGSTOP)
        try:
            until = time.monotonic() + rng.uniform(4.0, 7.0)
            while time.monotonic() < until:
                impersonate(master.host, master.raft_or_ha_port, victim_id)
            if rng.random() < 0.5:
                self.cluster.kill_node(master)
        finally:
            os.kill(pid, signal.SIGCONT)
        time.sleep(rng.uniform(1.0, 2.0))
        return victim.name

    def _fault_forged_role_change(self, rng: random.Random) -> str:
        """Anyone who reaches a broker's port posts role changes: the master is told to follow a fake master
        at the highest epoch, a slave that it is master. Neither may act on it."""
        assert self.cluster is not None
        master = self._master()
        brokers = self.cluster.brokers(GROUP)
        self._record_fault("forged_role_change", master.name)
        with BrokerClient(2.0) as client:
            for node in brokers:
                fake_master = 99 if node.name == master.name else self._broker_id(node)
                try:
                    client.request(node.address, "POST", bc.NOTIFY_ROLE_CHANGED, json={
                        "masterBrokerId": fake_master, "masterAddress": "127.0.0.1:1" if fake_master == 99
                        else node.address, "masterEpoch": 2**31 - 1 - rng.randrange(3),
                        "syncStateSetEpoch": 2**31 - 1, "syncStateSet": [fake_master]})
                except MqctlError:
                    continue
                if self.controller_protocol == "remoting":
                    forge_role_change(node.address, fake_master, 2**31 - 1 - rng.randrange(3))
        time.sleep(rng.uniform(1.0, 2.0))
        return master.name

    def _master_epoch_kept(self, kind: str, epoch: int) -> None:
        assert self.cluster is not None
        now = self.cluster.sync_state(GROUP).get("masterEpoch")
        if now != epoch:
            self.history.attack_effects.append(f"{kind}: masterEpoch went from {epoch} to {now} during the attack")

    def _fault_cross_site_channel(self, rng: random.Random) -> str:
        """A web page from another site, opened by the operator, opens the liveness channel for the master's
        id on every controller and closes it at once: accepted, that failed the master over. Every controller
        must refuse it (403), and the master must stay."""
        assert self.cluster is not None
        master = self._master()
        state = self.cluster.sync_state(GROUP)
        master_id, epoch = state["masterBrokerId"], state["masterEpoch"]
        self._record_fault("cross_site_channel", f"{master.name} (id {master_id})")
        for controller in self.cluster.controllers():
            url = channel_url(controller.address, state["clusterName"], GROUP, master_id)
            status, _ = cross_site_channel(url, "http://attacker.example")
            if status != 403:
                self.history.attack_effects.append(f"cross_site_channel: {controller.name} answered {status}, not "
                                                   "403, to a page from another site")
        time.sleep(rng.uniform(1.0, 2.0))
        self._master_epoch_kept("cross_site_channel", epoch)
        return master.name

    def _started(self, node: NodeSpec) -> bool:
        """Start ``node``; False while its ports are not free yet (a killed process's sockets may linger)."""
        assert self.cluster is not None
        try:
            self.cluster.start_node(node)
        except ConfigError:
            return False
        return True

    def _fault_slowloris(self, rng: random.Random) -> str:
        """More connections than the strangers' half of the cap, each trickling a remoting frame a byte at a
        time, into every controller's port and the master's, while a slave restarts: it must register and
        rejoin the SyncStateSet during the attack, and nothing may fail over."""
        assert self.cluster is not None
        if self.topology is not None:
            raise MqctlError("a stranger needs an address apart from the workload's and this harness's: loopback only")
        master = self._master()
        slaves = self._slaves(master)
        if not slaves:
            raise MqctlError("no live slave to restart")
        epoch = self.cluster.sync_state(GROUP)["masterEpoch"]
        targets = [(n.host, n.port) for n in [*self.cluster.controllers(), master]]
        per_target = min(stranger_share(DEFAULT_MAX_CONNECTIONS) + 100,  # the strangers' half, and more
                         (raise_fd_limit() - 1024) // len(targets))  # as many as this process may open
        if per_target < 100:
            raise MqctlError("too few file descriptors here for the attack")
        attack = TricklerProcess(targets, per_target, pace_s=2.0).start()
        victim = rng.choice(slaves)
        self._record_fault("slowloris", f"{len(targets)} ports x {per_target} connections; {victim.name} restarted")
        try:
            wait_until(lambda: attack.opened >= len(targets) * per_target, 30,
                       "every trickling connection to open", interval=0.2)
            self.cluster.kill_node(victim)
            wait_until(lambda: self._started(victim), 10, f"{victim.name} to start again", interval=0.2)
            size = len(self.cluster.brokers(GROUP))
            wait_until(lambda: self.cluster is not None and self.cluster._group_healthy(GROUP, size), 60,
                       f"{victim.name} to rejoin during the attack", interval=0.2)
        except MqctlError as exc:
            self.history.attack_effects.append(f"slowloris: {exc}")
        finally:
            attack.stop()
        self._master_epoch_kept("slowloris", epoch)
        return victim.name

    def _fault_route_poisoning(self, rng: random.Random) -> str:
        """A stranger unregisters the group's brokers from every controller's name server and registers
        himself as its master (tests/chaos/route_attack.py), holding his connections for a few seconds while
        the producers run: every route must keep naming the controller's master as 0, and only the group."""
        assert self.cluster is not None
        master = self._master()
        members = {n.address for n in self.cluster.brokers(GROUP)}
        controllers = [c.address for c in self.cluster.controllers()]
        self._record_fault("route_poisoning", master.name)

        async def run() -> None:
            client = RemotingClient(timeout_s=2.0)
            try:
                before = {c for c in controllers if await _route_or_none(c) is not None}
                await route_attack(client, controllers, GROUP, CLUSTER, TOPIC, master.address, sorted(members))
                for _ in range(2):
                    await asyncio.sleep(rng.uniform(1.0, 3.0))
                    for controller in before:  # a node without the route before (down, or new) is not judged
                        problem = poisoned(await _route_or_none(controller), master.address, members)
                        if problem is not None:
                            self.history.attack_effects.append(f"route_poisoning: {controller}: {problem}")
            finally:
                await client.close()
        asyncio.run(run())
    def _fault_huge_frame(self, rng: random.Random) -> str:
        """A stranger's largest frames, each with the body that costs its reader the most: HEART_BEAT (34)
        at the master broker, CONTROLLER_GET_SYNC_STATE_DATA (1006) and REGISTER_BROKER (103) at the
        controller leader, all at once. The checker then finds no election while they were read."""
        assert self.cluster is not None
        master, leader = self._master(), self._controller(leader=True)
        self._record_fault("huge_frame", f"{master.name} (34), {leader.name} (1006, 103)")
        targets = [(master.address, RequestCode.HEART_BEAT), (leader.address, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA),
                   (leader.address, RequestCode.REGISTER_BROKER)]
        attacks = [threading.Thread(target=huge_frames, args=(address, code, rng.random() < 0.5), daemon=True)
                   for address, code in targets]
        for attack in attacks:
            attack.start()
        for attack in attacks:
            attack.join(timeout=180)
        time.sleep(rng.uniform(1.0, 2.0))
        return master.name

    # ------------------------------------------------------------------ healing and the final state
    def heal(self, timeout: float = 90.0) -> None:
        """Restart whatever is down, mend the network, and wait until the group is healthy again."""
        assert self.cluster is not None
        if self.topology is not None:
            self.topology.heal()
        for node in self.cluster.nodes:
            if self.cluster.pid(node) is None:
                self.cluster.start_node(node)
        size = len(self.cluster.brokers(GROUP))
        try:
            wait_until(lambda: self.cluster is not None and self.cluster._group_healthy(GROUP, size), timeout,
                       "the group to heal", interval=0.2)
        except MqctlError as exc:
            self.on_event(f"[chaos] warning: {exc}")
        if self.history.faults and self.history.faults[-1].healed_ms is None:
            self.history.faults[-1].healed_ms = now_ms()

    def drain_java(self, timeout: float = 180.0) -> None:
        """Once healed at the end: the Java consumers consume what they must, then every Java client stops."""
        if self.workload is not None:
            self.workload.drain(timeout)

    def stop(self) -> None:
        if self.workload is not None:
            self.workload.stop()
        if self.proxies is not None:
            self.proxies.close()
        if self.cluster is not None:
            for node in self.cluster.nodes:
                pid = self.cluster.pid(node)
                if pid is not None:
                    try:
                        os.kill(pid, signal.SIGCONT)
                    except ProcessLookupError:
                        pass
            self.cluster.down(grace=5.0)


async def _route_or_none(controller: str) -> dict[int, str] | None:
    try:
        return await route_of(controller, TOPIC)
    except MqctlError:
        return None


def forge_role_change(address: str, fake_master: int, epoch: int) -> None:
    """A forged NOTIFY_BROKER_ROLE_CHANGED (1008) over remoting, as a controller would send it."""
    header = NotifyBrokerRoleChangedRequestHeader(
        master_address="127.0.0.1:1" if fake_master == 99 else address, master_epoch=epoch,
        sync_state_set_epoch=2**31 - 1, master_broker_id=fake_master)
    request = make_request(RequestCode.NOTIFY_BROKER_ROLE_CHANGED, 0, header.to_ext_fields(),
                           SyncStateSet(frozenset({fake_master}), 2**31 - 1).encode(), oneway=True)

    async def send() -> None:
        client = RemotingClient(timeout_s=2.0)
        try:
            await client.oneway(address, request)
        except MqctlError:
            pass
        finally:
            await client.close()
    asyncio.run(send())


#: The frames of one huge_frame attack: the largest a frame may be, then sizes a per-code bound may admit.
HUGE_FRAME_SIZES = (LARGEST_BODY, 2**20 - 4096, 64 * 2**10 - 512)


def huge_frames(address: str, code: int, bare_key_first: bool) -> None:
    """Each of HUGE_FRAME_SIZES as one request of ``code`` on a connection of its own, the two kinds of
    hostile body in turn, waiting (at most 60 s) for the answer or the connection's end."""
    for index, size in enumerate(HUGE_FRAME_SIZES):
        try:
            send_frame(address, huge_request(code, size, (index % 2 == 0) == bare_key_first, index + 1), timeout_s=60.0)
        except OSError:
            continue


def impersonate(host: str, ha_port: int, slave_id: int) -> None:
    """One connection to the master's HA port as broker ``slave_id``: handshake, hello, a forged proof and
    an ack "for everything". The master must close it without counting the ack."""
    try:
        with socket.create_connection((host, ha_port), timeout=1.0) as sock:
            sock.sendall(SlaveHandshake(slave_id).encode() + SlaveHello(os.urandom(32)).encode())
            reader, deadline = MasterFrameReader(), time.monotonic() + 1.0
            while time.monotonic() < deadline and not reader.feed(sock.recv(4096)):
                pass
            sock.sendall(SlaveProof(os.urandom(64)).encode() + SlaveAck(2**40).encode())
            while sock.recv(4096):
                pass
    except (OSError, ProtocolError):
        time.sleep(0.05)
