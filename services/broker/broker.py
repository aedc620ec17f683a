"""The broker: store + flushing + controller mode + replication, and the put path's status rules."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from services.broker.config import BrokerConfig
from services.broker.consumer_offsets import ConsumerOffsets
from services.broker.controller_api import BrokerControllerApi, ControllerApi
from services.broker.controller_remoting import RemotingControllerApi
from services.broker.flush import FlushService
from services.broker.ha.auth import BrokerKey
from services.broker.metrics import BrokerMetrics
from services.broker.namesrv_registration import BrokerIdentity, NamesrvRegistration
from services.broker.record import StoreNotWritable
from services.broker.remoting import BrokerRemoting
from services.broker.replicas_manager import ReplicasManager, Role
from services.broker.replication import AutoSwitchReplication, Replication
from services.broker.retention import RetentionService
from services.broker.runtime_info import RuntimeFacts, runtime_facts
from services.broker.schedule.delay_offsets import DelayOffsetFile
from services.broker.schedule.service import ScheduleService
from services.broker.slave_sync import GroupSync, SlaveSync, TopicSync
from services.broker.stats import BrokerStats
from services.broker.store import AppendResult, Message, MessageIllegal, MessageStore
from services.broker.subscription_groups import SubscriptionGroups
from services.common.clock import Clock, SystemClock
from services.common.remoting_client import RemotingClient

log = logging.getLogger(__name__)

#: After the disk refused a write, sends are refused for this long without trying again (each try creates and
#: removes a segment file), as RocketMQ's store stays not writeable until its next check.
WRITE_RETRY_S = 1.0


@dataclass
class PutOutcome:
    status: str
    results: list[AppendResult] = field(default_factory=list)
    remark: str = ""
    master_address: str | None = None


class Broker:
    def __init__(self, config: BrokerConfig, clock: Clock | None = None,
                 on_fatal: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.io_lock = threading.Lock()
        self.store = MessageStore(config.store_dir, config.address, config.mappedFileSizeCommitLog,
                                  config.epoch_file, config.defaultTopicQueueNums, config.maxMessageSize,
                                  config.commitlog_dir, config.maxHashSlotNum, config.maxIndexNum,
                                  config.rocketmqHaPeers)
        self.key = broker_key(config)
        # The parts, each built from the ones it needs (nothing refers back to the broker itself): the store
        # and its flushing, the controllers' view of the group (ReplicasManager), replication, which follows
        # the role that view gives, and the name-server registration, which announces it.
        self.api = controller_api(config, self.key.public_hex)
        self.flush = FlushService(self.store, config.sync_flush, config.flushIntervalCommitLog, self.io_lock,
                                  config.flushIntervalConsumeQueue)
        self.replicas = ReplicasManager(config, self.store, self.api, self.clock, on_fatal=on_fatal)
        self.replication: Replication = AutoSwitchReplication(
            config, self.store, self.api, self.clock, self.io_lock, self.flush, self.replicas, self.key)
        self.namesrv = NamesrvRegistration(config, self.api.addresses, self._identity, self.store.topic_configs,
                                           self.clock, key=self.key, name_servers=config.name_server_addresses)
        self.replicas.listen(self.replication)
        self.replicas.listen(self.namesrv)
        self.retention = RetentionService(config, self.store, self.clock, self.io_lock,
                                          self.replication.retention_floor,
                                          paths=[config.commitlog_dir, config.store_dir])
        self.put_counts: dict[str, int] = {}
        self.write_error: str | None = None  # why the last write to the store was refused (None: it was not)
        self._write_retry_at = 0.0
        self.metrics = BrokerMetrics()
        self.metrics.attach(self)
        self.consumer_offsets = ConsumerOffsets(config.store_dir)
        self.slave_sync = SlaveSync.of(
            self._offsets_master, self.consumer_offsets,
            TopicSync(self.store.created_topics, lambda _: self.namesrv.trigger(), RemotingClient(timeout_s=3.0),
                      lambda: list(self.store.deleted)))
        self.subscription_groups = SubscriptionGroups(config.store_dir / "config" / "subscriptionGroup.json",
                                                      self.clock)
        group_sync = GroupSync(self.subscription_groups, RemotingClient(timeout_s=3.0))
        self.slave_sync.syncs.append(group_sync.sync_from)
        self.slave_sync.closers.append(group_sync.client.close)
        self.delay_rules = config.delay_rules()
        self.schedule = ScheduleService(self.delay_rules, self.store,
                                        DelayOffsetFile(config.store_dir / "config" / "delayOffset.json"), self.put,
                                        lambda: self.role is Role.MASTER, self.clock, RemotingClient(timeout_s=3.0))
        self.slave_sync.syncs.append(self.schedule.sync_from)
        self.stats = BrokerStats(self.clock.now_ms())
        self.remoting = BrokerRemoting(self)
        self.transactions = self.remoting.transactions
        self.slave_sync.syncs.append(self.transactions.sync_from)
        self.put_listeners: list[Callable[[list[Message]], None]] = [self.remoting.on_put]

    # ------------------------------------------------------------------ lifecycle
    def open_store(self) -> None:
        with self.io_lock:
            self.store.open()
        self.consumer_offsets.load()
        self.subscription_groups.load()
        self.schedule.offsets.load()
        self.transactions.file.load()
        log.info("store %s opened: commitlog [%d, %d), confirmOffset %d, epochs %s", self.config.store_dir,
                 self.store.min_offset, self.store.max_offset, self.store.confirm_offset,
                 [str(e) for e in self.store.epochs.entries()])

    async def start(self) -> None:
        self.flush.start()
        self.retention.start()
        await self.replication.start()
        await self.replicas.start()
        self.consumer_offsets.start()
        self.slave_sync.start()
        await self.remoting.start()
        self.schedule.start()
        self.transactions.start()
        self.namesrv.start()

    async def stop(self) -> None:
        await self.namesrv.stop()
        await self.schedule.stop()
        await self.transactions.stop()
        await self.remoting.stop()
        await self.slave_sync.stop()
        await self.consumer_offsets.stop()
        await self.replicas.stop()
        await self.replication.stop()
        await self.retention.stop()
        await self.flush.stop()
        with self.io_lock:
            self.store.close()
        await self.api.aclose()

    @property
    def role(self) -> Role:
        return self.replicas.state.role

    def _offsets_master(self) -> str | None:
        """The master whose consumer offsets and topics this broker copies: its own while it is a slave."""
        return self.replicas.state.master_address if self.role is Role.SLAVE else None

    def _identity(self) -> BrokerIdentity:
        state = self.replicas.state
        return BrokerIdentity(self.replicas.broker_id, state.role is Role.MASTER, state.master_epoch)

    # ------------------------------------------------------------------ the put path
    async def put(self, messages: list[Message], validated: bool = False) -> PutOutcome:
        """Store ``messages`` by the rules of the put path; ``validated``: the caller has run
        ``store.validate`` on each already (the remoting sends, which refuse a bad one alone)."""
        started = time.perf_counter()
        outcome = await self._put(messages, validated)
        if outcome.results:
            for listener in self.put_listeners:
                listener(messages)
        self.put_counts[outcome.status] = self.put_counts.get(outcome.status, 0) + 1
        elapsed = time.perf_counter() - started
        self.stats.on_put(self.clock.now_ms(), topic_counts(messages) if outcome.results else {},
                          sum(r.next_offset - r.commit_log_offset for r in outcome.results), int(elapsed * 1000),
                          bool(outcome.results))
        self.metrics.put_latency.observe(elapsed)
        self.metrics.put_status.labels(outcome.status).inc()
        self.metrics.put_messages.labels(outcome.status).inc(len(messages))
        return outcome

    async def delete_topic(self, topic: str) -> str | None:
        """DELETE_TOPIC_IN_BROKER's write: the topic's deletion mark (store.TOPIC_DELETED) through the put path,
        so that it is replicated and confirmed as a message is, and hides the topic's messages on every replica
        once confirmed. None when it is; else why not (a slave, too few in-sync replicas, a timeout)."""
        outcome = await self.put([self.store.deletion_mark(topic)])
        return None if outcome.status == "PUT_OK" else f"{outcome.status}: {outcome.remark}" if outcome.remark \
            else outcome.status

    async def _put(self, messages: list[Message], validated: bool) -> PutOutcome:
        state = self.replicas.state
        if self.store.closed:
            return PutOutcome("SERVICE_NOT_AVAILABLE", remark="the broker is shutting down")
        if self.retention.disk_full:
            return PutOutcome("SERVICE_NOT_AVAILABLE",
                              remark=f"the disk holding the store is over diskSpaceWarningLevelRatio "
                                     f"({self.retention.policy.warning:.0%} used): writes are refused until "
                                     "retention frees space (see docs/operations.md, 'Disk space')")
        if state.role is not Role.MASTER:
            where = f"; write to the master at {state.master_address}" if state.master_address else \
                "; the group has no master yet"
            reason = "this broker is a slave" if state.role is Role.SLAVE else \
                "this broker is fenced (it does not know its role yet)"
            return PutOutcome("SERVICE_NOT_AVAILABLE", remark=reason + where, master_address=state.master_address)
        try:
            for msg in () if validated else messages:
                self.store.validate(msg)
        except MessageIllegal as exc:
            return PutOutcome("MESSAGE_ILLEGAL", remark=str(exc))
        in_sync = self.replication.in_sync_replicas_nums()
        if in_sync < self.config.minInSyncReplicas:
            return PutOutcome("IN_SYNC_REPLICAS_NOT_ENOUGH",
                              remark=f"in-sync replicas not enough: {in_sync} in the SyncStateSet, "
                                     f"minInSyncReplicas is {self.config.minInSyncReplicas}")
        unreachable = self.replication.quorum_unreachable()
        if unreachable is not None:
            return PutOutcome("IN_SYNC_REPLICAS_NOT_ENOUGH", remark=unreachable)
        refused = self._not_writable()
        if refused is not None:
            return refused
        try:
            results = self.store.append_batch(messages, self.clock.now_ms())
        except StoreNotWritable as exc:
            return self._write_refused(exc)
        self._written()
        self.namesrv.note_topics(m.topic for m in messages)
        self.replication.on_appended()
        return await self._await_durability(results)

    def _not_writable(self) -> PutOutcome | None:
        """The refusal of a send while the disk is known to refuse writes (tried again every WRITE_RETRY_S)."""
        if self.write_error is None or time.monotonic() >= self._write_retry_at:
            return None
        return PutOutcome("SERVICE_NOT_AVAILABLE", remark=self._refusal())

    def _write_refused(self, exc: StoreNotWritable) -> PutOutcome:
        if self.write_error is None:
            log.error("the message store is not writable (%s): sends are refused with SERVICE_NOT_AVAILABLE until "
                      "there is room; reads and replication of what is stored go on", exc)
        self.write_error = str(exc)
        self._write_retry_at = time.monotonic() + WRITE_RETRY_S
        return PutOutcome("SERVICE_NOT_AVAILABLE", remark=self._refusal())

    def _refusal(self) -> str:
        return (f"the message store is not writable: {self.write_error}; nothing was stored, and sends are refused "
                "until there is room (see docs/operations.md, 'Full disk')")

    def _written(self) -> None:
        if self.write_error is not None:
            log.warning("the message store takes writes again")
            self.write_error = None

    async def _await_durability(self, results: list[AppendResult]) -> PutOutcome:
        next_offset = results[-1].next_offset
        waits: list[Any] = [self.replication.wait_for_acks(next_offset)]
        if self.config.sync_flush:
            waits.append(self.flush.wait_flushed(next_offset, self.config.syncFlushTimeout))
        outcomes = await asyncio.gather(*waits)
        if self.config.sync_flush and not outcomes[1]:
            return PutOutcome("FLUSH_DISK_TIMEOUT", results, "flush to disk timed out")
        if not outcomes[0]:
            return PutOutcome("FLUSH_SLAVE_TIMEOUT", results,
                              f"not enough replicas acknowledged within slaveTimeout ({self.config.slaveTimeout} ms)")
        return PutOutcome("PUT_OK", results)

    # ------------------------------------------------------------------ views
    def epoch_cache(self) -> dict[str, Any]:
        entries = self.store.epochs.entries()
        rows = [{"epoch": e.epoch, "startOffset": e.start_offset, "endOffset": e.end_offset} for e in entries]
        if rows:
            rows[-1]["endOffset"] = self.store.max_offset
        state = self.replicas.state
        return {"clusterName": self.config.brokerClusterName, "brokerName": self.config.brokerName,
                "brokerId": self.replicas.broker_id, "brokerAddress": self.config.address,
                "role": state.role.value, "masterEpoch": state.master_epoch, "epochEntries": rows,
                "maxOffset": self.store.max_offset, "confirmOffset": self.store.confirm_offset}

    def ha_status(self) -> dict[str, Any]:
        state = self.replicas.state
        return {"clusterName": self.config.brokerClusterName, "brokerName": self.config.brokerName,
                "brokerId": self.replicas.broker_id, "brokerAddr": self.config.address, "role": state.role.value,
                "masterEpoch": state.master_epoch, "maxOffset": self.store.max_offset,
                "confirmOffset": self.store.confirm_offset,
                "flushedOffset": self.flush.flushed_offset,
                **{k: v for k, v in self.replication.status().items() if k != "role"}}

    def runtime_info(self) -> dict[str, Any]:
        state = self.replicas.state
        return {
            "clusterName": self.config.brokerClusterName, "brokerName": self.config.brokerName,
            "brokerId": self.replicas.broker_id, "brokerAddress": self.config.address,
            "haAddress": self.config.ha_address, "role": state.role.value, "registered": self.replicas.registered,
            "masterEpoch": state.master_epoch, "masterBrokerId": state.master_broker_id,
            "masterAddress": state.master_address, "syncStateSet": sorted(state.sync_state_set),
            "syncStateSetEpoch": state.sync_state_set_epoch, "minOffset": self.store.min_offset,
            "maxOffset": self.store.max_offset, "confirmOffset": self.store.confirm_offset,
            "flushedOffset": self.flush.flushed_offset,
            "flushDiskType": self.config.flushDiskType, "controllerLeader": self.api.leader,
            "controllerProtocol": self.config.controllerProtocol,
            "putStatusCounts": dict(self.put_counts), "ha": self.replication.status(),
            "roleChangedTimestamp": self.replicas.role_changed_ms,
            "storeWriteError": self.write_error, "consumeQueueError": self.store.index_error,
        }

    def runtime_facts(self) -> RuntimeFacts:
        """What GET_BROKER_RUNTIME_INFO reports besides the counters (runtime_info.py)."""
        return runtime_facts(self.config, self.store, self.flush.flushed_offset, self.role is Role.MASTER,
                             self.clock.now_ms())


def topic_counts(messages: list[Message]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for msg in messages:
        counts[msg.topic] = counts.get(msg.topic, 0) + 1
    return counts


def broker_key(config: BrokerConfig) -> BrokerKey:
    """This broker's own key file, or with ``brokerKeySource=authToken`` its group's key (ha/auth.py)."""
    if config.brokerKeySource == "authToken":
        return BrokerKey.from_token(config.authToken, config.brokerClusterName, config.brokerName)
    return BrokerKey.load_or_create(config.key_file)


def controller_api(config: BrokerConfig, public_key: str) -> ControllerApi:
    """The broker's client of the controllers, in the protocol ``controllerProtocol`` names."""
    token = config.authToken or None
    if config.controllerProtocol == "remoting":
        group_key = public_key if config.brokerKeySource == "authToken" else ""
        return RemotingControllerApi(config.controllerAddr, timeout=3.0, token=token, public_key=public_key,
                                     group_key=group_key)
    return BrokerControllerApi(config.controllerAddr, timeout=3.0, token=token, public_key=public_key)
