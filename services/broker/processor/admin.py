"""What an administrator or a controller asks a broker: RocketMQ's AdminBrokerProcessor.

UPDATE_AND_CREATE_TOPIC (17), GET_TOPIC_CONFIG (351) and GET_ALL_TOPIC_CONFIG (21), the subscription groups'
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) and DELETE_SUBSCRIPTIONGROUP
(207), DELETE_TOPIC_IN_BROKER (215), GET_BROKER_CONFIG (26), GET_ALL_CONSUMER_OFFSET (43) and
GET_ALL_DELAY_OFFSET (45): how a slave copies its master's tables, the controller mode's GET_BROKER_EPOCH_CACHE (1007), GET_BROKER_HA_STATUS (907),
RESET_MASTER_FLUSH_OFFSET (908) and NOTIFY_BROKER_ROLE_CHANGED (1008, a hint only). With ``authToken``
set, the codes that change state (17, 200, 207, 215, 908, 1008) count only when signed with it (services/remoting/acl.py).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from services.broker.config import BrokerConfig
from services.broker.consumer_offsets import ConsumerOffsets
from services.broker.namesrv_registration import topic_table
from services.broker.processor.common import MASTER_ID, answer
from services.broker.record import valid_topic
from services.broker.replicas_manager import Role
from services.broker.store import MessageStore
from services.broker.subscription_groups import GroupsFull, SubscriptionGroups
from services.broker.topic_rules import Refusal, is_system_topic, topic_from_request
from services.broker.topics import TopicsFull
from services.common.clock import Clock
from services.common.codes import ResponseCode
from services.common.remoting_conn import RemotingConnection
from services.remoting import admin_headers as ah
from services.remoting import bodies, fastjson
from services.remoting import broker_bodies as bb
from services.remoting import broker_headers as bh
from services.remoting.acl import Verifier
from services.remoting.command import RemotingCommand
from services.remoting.errors import HeaderFieldError
from services.remoting.headers import NotifyBrokerRoleChangedRequestHeader
from services.remoting.namesrv_bodies import DataVersion, TopicConfigSerializeWrapper
from services.remoting.subscription_bodies import GROUP_PATTERN, SubscriptionGroupConfig

__all__ = ["AdminParts", "AdminProcessor", "ha_runtime_info", "java_text"]

log = logging.getLogger(__name__)

#: The largest SubscriptionGroupConfig body read (a group's settings are well under 1 KiB; its optional lists
#: are bounded by subscription_bodies.MAX_ITEMS).
MAX_GROUP_BODY = 256 * 1024


@dataclass(frozen=True)
class AdminParts:
    """What the admin codes read of the broker: its views (dicts as the HTTP API serves them) and its hint."""

    role: Callable[[], Role]
    epoch_cache: Callable[[], dict[str, Any]]
    ha_status: Callable[[], dict[str, Any]]
    role_change_notified: Callable[[], Awaitable[None]]
    topics_changed: Callable[[], None]
    io_lock: threading.Lock
    delay_offsets: Callable[[], bytes]
    transaction_progress: Callable[[], bytes]
    groups: SubscriptionGroups
    delete_topic: Callable[[str], Awaitable[str | None]]


class AdminProcessor:
    def __init__(self, config: BrokerConfig, store: MessageStore, offsets: ConsumerOffsets, clock: Clock,
                 parts: AdminParts) -> None:
        self.config = config
        self.store = store
        self.offsets = offsets
        self.clock = clock
        self.parts = parts
        self._verifier: Verifier | None = None

    async def transaction_progress(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        """The check progress of transactional messages (transaction/progress.py), as on disk (mqctl's 88002)."""
        return answer(request, ResponseCode.SUCCESS, None, None, self.parts.transaction_progress())

    async def all_delay_offsets(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        """The delivery progress of delayed and timed messages (schedule/delay_offsets.py), as on disk."""
        return answer(request, ResponseCode.SUCCESS, None, None, self.parts.delay_offsets())

    async def epoch_cache(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        data = self.parts.epoch_cache()
        entries = tuple(bodies.EpochEntry(e["epoch"], e["startOffset"], e["endOffset"]) for e in data["epochEntries"])
        # RocketMQ's broker reports id 0 while it is master (its brokerId then means its role)
        broker_id = MASTER_ID if self.parts.role() is Role.MASTER else (data["brokerId"] or 0)
        cache = bodies.EpochEntryCache(data["clusterName"], data["brokerName"], broker_id, entries, data["maxOffset"])
        return answer(request, ResponseCode.SUCCESS, None, None, cache.encode())

    async def create_topic(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        """RocketMQ's updateAndCreateTopic: the config as asked (topic_rules.topic_from_request), kept in
        topics.json and registered with the name servers at once; asking for the config a topic has already
        is a success that changes nothing. A topic whose queue counts shrink keeps its messages in the queues
        beyond them (a reader of the old route still reads them; GET_ALL_TOPIC_CONFIG lists the new counts)."""
        header = bh.CreateTopicRequestHeader.from_ext_fields(request.ext_fields)
        unsigned = self.unsigned(request)
        if unsigned is not None:
            return answer(request, ResponseCode.NO_PERMISSION, unsigned)
        config = topic_from_request(header, self.store.created_topics.get(header.topic))
        if isinstance(config, Refusal):
            return answer(request, config.code, config.remark)
        try:
            changed = await asyncio.to_thread(self.store.created_topics.put, config)
        except TopicsFull as exc:
            return answer(request, ResponseCode.SYSTEM_ERROR, str(exc))
        if changed:
            log.info("topic %s created or updated by %s: read %d, write %d, perm %d", header.topic, conn.peer,
                     config.read_queue_nums, config.write_queue_nums, config.perm)
            self.parts.topics_changed()
        return answer(request, ResponseCode.SUCCESS)

    async def all_topic_config(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        table = topic_table(self.store.topic_configs(), self.config.defaultTopicQueueNums,
                            self.config.autoCreateTopicEnable)
        return answer(request, ResponseCode.SUCCESS, None, None, TopicConfigSerializeWrapper(table).encode())

    async def topic_config(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        """GET_TOPIC_CONFIG (351): the topic as the broker announces it, or TOPIC_NOT_EXIST with RocketMQ's
        remark (mqadmin takes that answer as "no static mapping here")."""
        topic = ah.GetTopicConfigRequestHeader.from_ext_fields(request.ext_fields).topic
        config = topic_table(self.store.topic_configs(), self.config.defaultTopicQueueNums,
                             self.config.autoCreateTopicEnable).get(topic)
        if config is None:
            return answer(request, ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {topic[:256]}")
        return answer(request, ResponseCode.SUCCESS, None, None, fastjson.dumps(config.to_json()).encode())

    async def update_group(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200): the body's SubscriptionGroupConfig replaces the group's, on
        disk before the answer. With ``authToken`` set, only when signed."""
        refusal = self.unsigned(request)
        if refusal is not None:
            return answer(request, ResponseCode.NO_PERMISSION, refusal)
        config = SubscriptionGroupConfig.decode(request.body or b"", max_bytes=MAX_GROUP_BODY)
        try:
            await asyncio.to_thread(self.parts.groups.update, config)
        except GroupsFull as exc:
            return answer(request, ResponseCode.SYSTEM_ERROR, str(exc))
        log.info("subscription group %s created or updated by %s", config.group_name, conn.peer)
        return answer(request, ResponseCode.SUCCESS)

    async def all_groups(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201): every group's settings and the table's DataVersion."""
        return answer(request, ResponseCode.SUCCESS, None, None, self.parts.groups.wrapper().encode())

    async def delete_group(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        """DELETE_SUBSCRIPTIONGROUP (207): SUCCESS whether or not the group had settings, as RocketMQ answers;
        ``cleanOffset`` forgets its consumer offsets too. With ``authToken`` set, only when signed."""
        header = ah.DeleteSubscriptionGroupRequestHeader.from_ext_fields(request.ext_fields)
        refusal = self.unsigned(request)
        if refusal is not None:
            return answer(request, ResponseCode.NO_PERMISSION, refusal)
        if GROUP_PATTERN.fullmatch(header.group_name) is None:
            raise HeaderFieldError(type(header).__name__, "groupName",
                                   "must be 1-255 of letters, digits, '%', '|', '_' and '-'")
        deleted = await asyncio.to_thread(self.parts.groups.delete, header.group_name)
        cleaned = self.offsets.table.remove_group(header.group_name) if header.clean_offset else 0
        log.info("subscription group %s deleted by %s (settings %s, %d offset entries removed)", header.group_name,
                 conn.peer, "removed" if deleted else "absent", cleaned)
        return answer(request, ResponseCode.SUCCESS)

    async def delete_topic(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        """DELETE_TOPIC_IN_BROKER (215), as RocketMQ's deleteTopic: the topic's messages so far, its config and
        every group's offsets of it go (a system topic or a blank name is INVALID_PARAMETER with RocketMQ's
        remarks). The messages go by a mark in the log (store.TOPIC_DELETED), written as a message is, so
        the slaves drop them too and a restart does not bring them back; only a master takes it. A topic this
        broker does not hold is a success that changes nothing. With ``authToken`` set, only when signed."""
        topic = ah.DeleteTopicRequestHeader.from_ext_fields(request.ext_fields).topic
        refusal = self.unsigned(request)
        if refusal is not None:
            return answer(request, ResponseCode.NO_PERMISSION, refusal)
        if not topic.strip():
            return answer(request, ResponseCode.INVALID_PARAMETER, "The specified topic is blank.")
        if is_system_topic(topic):
            return answer(request, ResponseCode.INVALID_PARAMETER, f"The topic[{topic[:256]}] is conflict with "
                                                                    "system topic.")
        if not valid_topic(topic):
            raise HeaderFieldError("DeleteTopicRequestHeader", "topic", "must be 1-127 of letters, digits, '%', '|', "
                                   "'_' and '-'")
        if self.store.has_topic(topic):
            not_deleted = await self.parts.delete_topic(topic)
            if not_deleted is not None:
                return answer(request, ResponseCode.SYSTEM_ERROR, f"topic {topic} is not deleted: {not_deleted}")
        removed = await asyncio.to_thread(self.store.created_topics.remove, topic)
        cleaned = self.offsets.table.remove_topic(topic)
        log.info("topic %s deleted by %s (config %s, %d offset entries removed)", topic, conn.peer,
                 "removed" if removed else "absent", cleaned)
        self.parts.topics_changed()
        return answer(request, ResponseCode.SUCCESS)

    async def broker_config(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        """GET_BROKER_CONFIG (26): the broker's properties as ``key=value`` lines (RocketMQ's
        getAllConfigsFormatString), the auth token and TLS secrets masked; the ``version`` field is the
        configuration's DataVersion, which never changes (nothing is changed at run time)."""
        text = "".join(f"{k}={java_text(v)}\n" for k, v in self.config.as_properties().items())
        version = fastjson.dumps(DataVersion().to_json())
        return answer(request, ResponseCode.SUCCESS, None, {"version": version}, text.encode("utf-8"))

    async def all_offsets(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        return answer(request, ResponseCode.SUCCESS, None, None, self.offsets.table.snapshot().encode())

    async def ha_status(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        return answer(request, ResponseCode.SUCCESS, None, None, ha_runtime_info(self.parts.ha_status()).encode())

    async def reset_master_flush_offset(self, request: RemotingCommand,
                                        conn: RemotingConnection) -> RemotingCommand | None:
        """As RocketMQ's AdminBrokerProcessor: a broker that is not master records the offset (in its
        checkpoint); a master ignores it; both answer SUCCESS. With ``authToken`` set, only when signed."""
        header = bh.ResetMasterFlushOffsetHeader.from_ext_fields(request.ext_fields)
        refusal = self.unsigned(request)
        if refusal is not None:
            return answer(request, ResponseCode.NO_PERMISSION, refusal)
        offset = header.master_flush_offset
        if offset is not None and offset < 0:
            raise HeaderFieldError(type(header).__name__, "masterFlushOffset", f"must not be negative, got {offset}")
        if offset is not None and self.parts.role() is not Role.MASTER:
            def record() -> None:
                with self.parts.io_lock:
                    self.store.set_master_flushed_offset(offset)
            await asyncio.to_thread(record)
            log.info("master flush offset reset to %d by %s", offset, conn.peer)
        return answer(request, ResponseCode.SUCCESS)

    async def role_changed(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        NotifyBrokerRoleChangedRequestHeader.from_ext_fields(request.ext_fields)  # well formed, never applied
        refusal = self.unsigned(request)
        if refusal is not None:
            log.info("ignored a role-change notification over remoting from %s: %s", conn.peer, refusal)
            return answer(request, ResponseCode.NO_PERMISSION, refusal)
        await self.parts.role_change_notified()
        return answer(request, ResponseCode.SUCCESS)

    def unsigned(self, request: RemotingCommand) -> str | None:
        """With ``authToken`` set: why ``request`` is not signed with it (None if it is, or if no token)."""
        token = self.config.authToken
        if not token:
            return None
        if self._verifier is None or self._verifier.secret != token:
            self._verifier = Verifier(token)
        return self._verifier.check(request, self.clock.now_ms())


def java_text(value: object) -> str:
    """A property's value as Java's String.valueOf writes it (true, false; nothing for an absent one)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def ha_runtime_info(status: dict[str, Any]) -> bb.HARuntimeInfo:
    """Our haStatus view as RocketMQ's HARuntimeInfo."""
    if status.get("role") == "MASTER":
        slaves = tuple(bb.HAConnectionRuntimeInfo(
            s.get("slaveAddress"), int(s.get("ackOffset") or 0), int(s.get("lag") or 0), bool(s.get("inSync")),
            int(float(s.get("transferSpeedKBps") or 0) * 1024), _transfer_from_where(s))
            for s in status.get("slaves") or [])
        return bb.HARuntimeInfo(True, int(status.get("maxOffset") or 0), int(status.get("inSyncSlaveNums") or 0),
                                slaves)
    client = bb.HAClientRuntimeInfo(status.get("masterHaAddress") or status.get("masterAddress"),
                                    int(float(status.get("transferSpeedKBps") or 0) * 1024),
                                    int(status.get("maxOffset") or 0), int(status.get("lastReadTimestamp") or 0),
                                    int(status.get("lastWriteTimestamp") or 0), int(status.get("masterFlushOffset") or 0))
    return bb.HARuntimeInfo(False, 0, 0, (), client)


def _transfer_from_where(slave: dict[str, Any]) -> int:
    """The slave's ``transferFromWhere`` (-1 while the master holds nothing, as RocketMQ shows it)."""
    where = slave.get("transferFromWhere")
    return int(where) if where is not None else int(slave.get("transferOffset") or 0)
