"""What an administrator or a controller asks a broker: RocketMQ's AdminBrokerProcessor.

UPDATE_AND_CREATE_TOPIC (17) and GET_ALL_TOPIC_CONFIG (21), GET_ALL_CONSUMER_OFFSET (43) and
GET_ALL_DELAY_OFFSET (45): how a slave copies its master's tables, the controller mode's GET_BROKER_EPOCH_CACHE (1007), GET_BROKER_HA_STATUS (907),
RESET_MASTER_FLUSH_OFFSET (908) and NOTIFY_BROKER_ROLE_CHANGED (1008, a hint only). With ``authToken``
set, the codes that change state (17, 908, 1008) count only when signed with it (services/remoting/acl.py).
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
from services.broker.replicas_manager import Role
from services.broker.store import MessageStore
from services.broker.topic_rules import Refusal, topic_from_request
from services.broker.topics import TopicsFull
from services.common.clock import Clock
from services.common.codes import ResponseCode
from services.common.remoting_conn import RemotingConnection
from services.remoting import bodies
from services.remoting import broker_bodies as bb
from services.remoting import broker_headers as bh
from services.remoting.acl import Verifier
from services.remoting.command import RemotingCommand
from services.remoting.errors import HeaderFieldError
from services.remoting.headers import NotifyBrokerRoleChangedRequestHeader
from services.remoting.namesrv_bodies import TopicConfigSerializeWrapper

__all__ = ["AdminParts", "AdminProcessor", "ha_runtime_info"]

log = logging.getLogger(__name__)


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
