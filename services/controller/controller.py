"""The controller node: leadership gating, command execution through Raft, failure detection, elections.

Reads and writes of broker metadata are served only by a leader that has applied every earlier entry
(a no-op barrier commits when it takes office) and that can still reach a majority: each read first
commits a barrier shared by concurrent readers, so a leader cut off from the majority answers
``CONTROLLER_NOT_LEADER`` within about a second.

Writes are serialised (compute → propose → wait for apply), as RocketMQ's single-threaded event
scheduler does, so that two commands never decide on the same state.

Elections are level-triggered: the heartbeat scan elects when a master's heartbeats expire, and the
inactive-master scan re-checks every broker-set periodically, so a failed election is retried and no
group stays masterless while a candidate is alive.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

from services.common.clock import Clock, SystemClock
from services.common.codes import ResponseCode
from services.common.controller_client import NOT_LEADER_REMARK
from services.common.errors import ConfigError
from services.controller.config import (
    BLACK_LIST,
    FIELD_NAMES,
    RUNTIME_UPDATABLE,
    ControllerConfig,
    Peer,
    config_from_properties,
    persist_runtime_update,
)
from services.controller.elect_policy import DefaultElectPolicy
from services.controller.events import stamp
from services.controller.heartbeat import (
    DEFAULT_BROKER_CHANNEL_EXPIRED_TIME,
    BrokerHeartbeatManager,
    Heartbeat,
)
from services.controller.notifier import RoleChangeNotifier
from services.controller.raft import JournalNotWritable, RaftError, RaftNode
from services.controller.scans import Scans
from services.controller.state_machine import (
    ControllerResult,
    ElectMasterRequest,
    ReplicasInfoManager,
)
from services.controller.store_identity import StoreStamp, keep_stamp, new_cluster_id

log = logging.getLogger(__name__)

Command = Callable[[ReplicasInfoManager], ControllerResult]


class ControllerManager:
    def __init__(self, config: ControllerConfig, raft: RaftNode | None = None,
                 clock: Clock | None = None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.heartbeats = BrokerHeartbeatManager(self.clock, config.maxHeartbeatTimeoutMillis)
        self.raft = raft
        self.peers: list[Peer] = config.peers()
        self._serving = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._group_locks: dict[str, tuple[asyncio.Lock, int]] = {}
        self._barrier_lock: asyncio.Lock | None = None
        self._barrier_started = 0
        self._barrier_done = 0
        self._tasks: list[asyncio.Task[None]] = []
        self.notifier = RoleChangeNotifier(config.authToken, self.clock.now_ms)
        self.scans = Scans(self)
        self.elections: dict[str, int] = {}
        self.leader_since_ms: int | None = None
        self.stamp: StoreStamp | None = None
        self._on_foreign_store: Callable[[str], None] = lambda reason: None

    # ------------------------------------------------------------------ lifecycle
    def attach_raft(self, raft: RaftNode) -> None:
        self.raft = raft

    def attach_store_stamp(self, stamp: StoreStamp, on_foreign: Callable[[str], None]) -> None:
        """Keep ``stamp`` in step with the replicated cluster id; ``on_foreign`` is told (and must stop the
        node) if this node's state turns out to be another group's."""
        self.stamp = stamp
        self._on_foreign_store = on_foreign

    def cluster_id(self) -> str | None:
        """The group's id as this node knows it: from its state, else from its stamp (before its log replays)."""
        state = self.raft.read(lambda s: s.cluster_id) if self.raft is not None else None
        return state or (self.stamp.identity.cluster_id if self.stamp is not None else None) or None

    def on_raft_state_changed(self, is_leader: bool) -> None:
        """Called on pysyncobj's tick thread."""
        if not is_leader:
            self._serving = False
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._leadership_changed, is_leader)

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._barrier_lock = asyncio.Lock()
        self.notifier.start()
        self.scans.start()
        if self.stamp is not None and self.raft is not None:
            raft = self.raft
            self._tasks.append(asyncio.create_task(keep_stamp(self.stamp, lambda: raft.read(lambda s: s.cluster_id),
                                                              self._on_foreign_store), name="store-stamp"))
        if self.raft is not None and self.raft.is_leader():
            self._leadership_changed(True)

    async def stop(self) -> None:
        await self.scans.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)  # each ends, however it ends
        await self.notifier.stop()
        if self.stamp is not None and self.raft is not None:
            with contextlib.suppress(ConfigError):  # the last chance to stamp an id applied just now
                self.stamp.record(self.raft.read(lambda s: s.cluster_id))

    def _leadership_changed(self, is_leader: bool) -> None:
        if is_leader:
            self._tasks.append(asyncio.create_task(self._take_office(), name="take-office"))
        else:
            self._serving = False
            self.leader_since_ms = None
            log.info("this controller is no longer the leader")

    async def _take_office(self) -> None:
        assert self.raft is not None
        while self.raft.is_leader() and not self._serving:
            # The group's first leader also gives it its id (store_identity.py); a later proposal is ignored.
            proposed = None if self.raft.read(lambda s: s.cluster_id) else new_cluster_id()
            try:
                await self.raft.barrier(timeout_s=1.0, cluster_id=proposed)
            except JournalNotWritable:
                await asyncio.sleep(1.0)  # the journal logged why; it tries again by itself
                continue
            except RaftError as exc:
                log.info("leader barrier not committed yet (%s); retrying", exc.reason)
                await asyncio.sleep(0.05)
                continue
            if self.raft.is_leader():
                self._serving = True
                self.leader_since_ms = self.clock.monotonic_ms()
                log.info("this controller is now the leader and serving requests")

    def apply_config_update(self, props: dict[str, str]) -> ControllerResult:
        """A runtime config update as an API answers it: refused for the black list, unknown keys and
        properties that need a restart; persisted otherwise."""
        if not props:
            return ControllerResult(code=int(ResponseCode.INVALID_PARAMETER), remark="no properties to update")
        for key in props:
            if key in BLACK_LIST:
                return ControllerResult(code=int(ResponseCode.NO_PERMISSION),
                                        remark="Can not update config in black list.")
            if key not in FIELD_NAMES:
                return ControllerResult(code=int(ResponseCode.INVALID_PARAMETER),
                                        remark=f"unknown controller property {key!r}")
            if key not in RUNTIME_UPDATABLE:
                return ControllerResult(code=int(ResponseCode.NO_PERMISSION),
                                        remark=f"{key} cannot be changed on a running controller; edit the config "
                                               "file and restart it")
        try:
            self.update_config(props)
        except ConfigError as exc:
            return ControllerResult(code=int(ResponseCode.INVALID_PARAMETER), remark=exc.remark)
        except OSError as exc:  # nothing changed: the update is applied only once it is saved
            return ControllerResult(code=int(ResponseCode.SYSTEM_ERROR),
                                    remark=f"cannot save the update to {self.config.config_store_file} "
                                           f"({exc.strerror or exc}); nothing was changed")
        return ControllerResult(data={"config": self.config.as_properties()})

    def update_config(self, props: dict[str, str]) -> None:
        """Apply runtime updates and persist them so they survive a restart (any node, not replicated)."""
        new_config = config_from_properties(props, self.config)
        new_config.validate()
        persist_runtime_update(self.config.config_store_file, props)
        self.config = new_config
        if "logLevel" in props:
            logging.getLogger().setLevel(new_config.logLevel.upper())

    # ------------------------------------------------------------------ leadership view
    @property
    def serving(self) -> bool:
        return (self._serving and self.raft is not None and self.raft.is_leader()
                and self.raft.journal_fault() is None)

    def leader_peer(self) -> Peer | None:
        if self.raft is None:
            return None
        raft_addr = self.raft.leader_address()
        return next((p for p in self.peers if p.raft_address == raft_addr), None)

    def not_leader(self) -> ControllerResult:
        fault = self.raft.journal_fault() if self.raft is not None else None
        if fault is not None:
            return sitting_out(fault)
        leader = self.leader_peer()
        me = self.config.self_peer()
        address = leader.address if leader is not None and leader.id != me.id else None
        return ControllerResult(code=int(ResponseCode.CONTROLLER_NOT_LEADER),
                                remark=NOT_LEADER_REMARK,
                                data={"controllerLeaderId": leader.id if leader is not None and address else None,
                                      "controllerLeaderAddress": address})

    def metadata(self) -> dict[str, Any]:
        leader = self.leader_peer()
        me = self.config.self_peer()
        data: dict[str, Any] = {
            "group": self.config.controllerDLegerGroup,
            "controllerLeaderId": leader.id if leader else None,
            "controllerLeaderAddress": leader.address if leader else None,
            "isLeader": self.serving, "selfId": me.id, "selfAddress": me.address,
            "peers": [f"{p.id}:{p.address}" for p in self.peers], "clusterId": self.cluster_id(),
        }
        if self.raft is not None:
            data["raft"] = self.raft.status()
            data["appliedEvents"] = self.raft.read(lambda s: s.next_event_index)  # on this node, unconfirmed
        return data

    # ------------------------------------------------------------------ liveness
    def alive(self, cluster: str, broker_name: str, broker_id: int) -> bool:
        return self.heartbeats.is_active(broker_name, broker_id)

    def policy(self) -> DefaultElectPolicy:
        return DefaultElectPolicy(self.alive, lambda c, n, i: self.heartbeats.find(n, i))

    def heartbeat_grace_ms(self) -> int:
        timeouts = [i.heartbeatTimeoutMs for i in self.heartbeats.snapshot()]
        return max(timeouts) if timeouts else DEFAULT_BROKER_CHANNEL_EXPIRED_TIME

    def in_heartbeat_grace(self) -> bool:
        """Just after start-up the live table is still filling up: a master missing from it is not
        known to be dead yet."""
        return self.heartbeats.uptime_ms() < self.heartbeat_grace_ms()

    def on_heartbeat(self, hb: Heartbeat) -> None:
        self.heartbeats.on_heartbeat(hb)

    def bounded_heartbeat_timeout(self, value: int | None) -> int:
        """A broker's heartbeat timeout as the live table may hold it: its default when absent, and never
        beyond maxHeartbeatTimeoutMillis (a huge value would keep a dead master 'alive'). For a oneway
        heartbeat, which cannot be answered with an error."""
        if value is None or value <= 0:
            return DEFAULT_BROKER_CHANNEL_EXPIRED_TIME
        return min(value, self.config.maxHeartbeatTimeoutMillis)

    async def on_channel_closed(self, cluster: str, broker_name: str, broker_id: int) -> None:
        """The broker's liveness channel closed: its process (or its link to us) is gone."""
        if self.heartbeats.find(broker_name, broker_id) is None:
            return
        log.warning("liveness channel of broker %s/%s id %d closed; marked inactive", cluster, broker_name, broker_id)
        self.heartbeats.remove(broker_name, broker_id)
        if not self.serving or self.raft is None:
            return
        replica = self.raft.read(lambda m: m.broker_sets.get(broker_name))
        if replica is not None and replica.masterBrokerId == broker_id:
            await self.trigger_elect_master(broker_name)

    async def register_broker(self, cluster: str, broker_name: str, broker_id: int, address: str,
                              request_id: str | None = None, public_key: str = "") -> ControllerResult:
        result = await self.write(broker_name, lambda m: m.register_broker(
            cluster, broker_name, broker_id, address, self.alive, public_key), request_id)
        if result.ok:
            # A registration is a new incarnation of the broker: forget what its previous process reported
            # (a restarted log may be shorter), but do not count it dead meanwhile (heartbeat.py).
            self.heartbeats.registered(broker_name, broker_id)
        return result

    # ------------------------------------------------------------------ command execution
    async def read(self, command: Command) -> ControllerResult:
        if not self.serving:
            return self.not_leader()
        try:
            await self._read_barrier()
        except RaftError:
            return self.not_leader()
        if not self.serving:
            return self.not_leader()
        assert self.raft is not None
        return self.raft.read(command)

    def read_barrier_timeout_s(self) -> float:
        """A leader cut off from the majority cannot commit the barrier: reads fail after this long."""
        return min(self.config.controllerRequestTimeoutMillis, self.config.raftLeaderFallbackTimeoutMillis + 500) / 1000

    async def _read_barrier(self) -> None:
        assert self.raft is not None and self._barrier_lock is not None
        arrival = self._barrier_started
        async with self._barrier_lock:
            if self._barrier_done > arrival:
                return  # a barrier that began after this read arrived has committed
            self._barrier_started += 1
            generation = self._barrier_started
            await self.raft.barrier(timeout_s=self.read_barrier_timeout_s())
            self._barrier_done = generation

    async def write(self, group: str, command: Command, request_id: str | None = None) -> ControllerResult:
        """Evaluate ``command`` against the applied state and commit its events.

        Writes to one broker group are serialized: each is evaluated only after the previous one's
        events are applied. Every command reads and changes its own group's broker set alone, so writes
        to different groups are evaluated and proposed concurrently and Raft carries them together."""
        if not self.serving:
            return self.not_leader()
        assert self.raft is not None
        async with self._group_lock(group):
            if not self.serving:
                return self.not_leader()
            result = self.raft.read(command)
            if not result.events:
                return result
            now = self.clock.now_ms()
            events = [stamp(e, now) for e in result.events]
            try:
                await self.raft.propose_events(events, self.config.controllerRequestTimeoutMillis / 1000,
                                               request_id)
            except RaftError as exc:
                if not self.serving:
                    return self.not_leader()
                return ControllerResult(code=int(ResponseCode.SYSTEM_ERROR),
                                        remark=f"{exc.reason}; the request may be retried with the same "
                                               "requestId")
            return replace(result, events=tuple(events))

    async def write_anywhere(self, group: str, command: Command) -> ControllerResult:
        """``write`` on the leader; on a follower, ``command`` is evaluated on this node's state and its events
        go to the leader through Raft (pysyncobj forwards a follower's proposal), so that every node of the
        group takes the write, as every name server takes mqadmin's KV writes. Only for commands whose
        events are right however far this node's state trails (a KV put or delete: apply checks the bounds
        again, alike on every node)."""
        if self.serving:
            return await self.write(group, command)
        if self.raft is None or self.raft.journal_fault() is not None or self.leader_peer() is None:
            return self.not_leader()
        result = self.raft.read(command)
        if not result.events:
            return result
        events = [stamp(e, self.clock.now_ms()) for e in result.events]
        try:
            await self.raft.propose_events(events, self.config.controllerRequestTimeoutMillis / 1000)
        except RaftError as exc:
            return ControllerResult(code=int(ResponseCode.SYSTEM_ERROR),
                                    remark=f"{exc.reason} (forwarded to the leader); the request may be retried")
        return replace(result, events=tuple(events))

    @contextlib.asynccontextmanager
    async def _group_lock(self, group: str) -> AsyncIterator[None]:
        lock, users = self._group_locks.get(group, (asyncio.Lock(), 0))
        self._group_locks[group] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._group_locks[group]
            if users == 1:
                del self._group_locks[group]
            else:
                self._group_locks[group] = (lock, users - 1)

    # ------------------------------------------------------------------ elections
    async def elect_master(self, request: ElectMasterRequest, request_id: str | None = None) -> ControllerResult:
        if (not request.controller_triggered and not request.designateElect
                and self._master_unknown_during_grace(request.brokerName)):
            return ControllerResult(code=int(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED),
                                    remark="The controller has just started and is still collecting broker "
                                           "heartbeats; retry the election shortly")
        result = await self.write(request.brokerName, lambda m: m.elect_master(
            request, self.policy(), self.config.enableElectUncleanMaster, self.alive), request_id)
        if result.ok:
            self.elections[str(result.data and result.data.get("electReason"))] = \
                self.elections.get(str(result.data and result.data.get("electReason")), 0) + 1
            self.notify_role_changed(result)
        return result

    def _master_unknown_during_grace(self, broker_name: str) -> bool:
        if not self.in_heartbeat_grace() or self.raft is None:
            return False
        info = self.raft.read(lambda m: m.broker_sets.get(broker_name))
        master = info.masterBrokerId if info is not None else None
        return master is not None and self.heartbeats.find(broker_name, master) is None

    async def trigger_elect_master(self, broker_name: str) -> ControllerResult | None:
        """Controller-triggered election with bounded retries; the periodic scan retries beyond that."""
        result = None
        for attempt in range(1, self.config.electMasterMaxRetryCount + 1):
            if not self.serving:
                return result
            result = await self.elect_master(ElectMasterRequest("", broker_name, None, False))
            log.info("election for %s (attempt %d): %s %s", broker_name, attempt,
                     ResponseCode(result.code).name if result.code in ResponseCode._value2member_map_
                     else result.code, result.remark or "")
            if result.code in (ResponseCode.SUCCESS, ResponseCode.CONTROLLER_MASTER_STILL_EXIST,
                               ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE):
                return result
        return result

    def notify_role_changed(self, result: ControllerResult) -> None:
        data = result.data or {}
        if self.config.notifyBrokerRoleChanged and data.get("masterBrokerId") is not None:
            self.notifier.notify(data, self.heartbeats.is_active)

    # ------------------------------------------------------------------ scans (kept as the manager's API)
    async def scan_not_active_brokers(self) -> None:
        await self.scans.not_active_brokers()

    async def scan_inactive_masters(self) -> None:
        await self.scans.inactive_masters()


def sitting_out(fault: str) -> ControllerResult:
    """The answer of a node whose Raft journal cannot be written: not the leader (what it knows of the leader is
    stale while it sits out), with the reason, so that a client asks another node and an operator sees why."""
    return ControllerResult(code=int(ResponseCode.CONTROLLER_NOT_LEADER),
                            remark=f"this controller {fault}; it takes no part in Raft until it can (it resumes by "
                                   "itself once the disk has room): ask another controller",
                            data={"controllerLeaderId": None, "controllerLeaderAddress": None})
