"""What a slave copies from its master besides the log, as RocketMQ's ``SlaveSynchronize`` does, every
``SYNC_INTERVAL_S`` while it is a slave: the consumer groups' offsets (consumer_offsets.py) and the
master's topic configs (``GET_ALL_TOPIC_CONFIG``, 21: queue counts, perm and the rest, as RocketMQ's
syncTopicConfig copies them) and the subscription groups (``GET_ALL_SUBSCRIPTIONGROUP_CONFIG``, 201, taken whole
when its DataVersion differs), so that after a failover consumers resume where they were and clients find the
same topics, with the same queues, and the same groups' settings on the new master."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection

from services.broker.consumer_offsets import SYNC_INTERVAL_S, ConsumerOffsets
from services.broker.namesrv_registration import AUTO_CREATE_TOPIC
from services.broker.subscription_groups import SubscriptionGroups
from services.broker.topics import TopicRegistry, TopicsFull, config_problem
from services.common.codes import ResponseCode
from services.common.errors import MqctlError
from services.common.remoting_client import RemotingClient
from services.remoting.admin_headers import GET_ALL_SUBSCRIPTIONGROUP_CONFIG
from services.remoting.broker_headers import GET_ALL_TOPIC_CONFIG
from services.remoting.command import make_request
from services.remoting.errors import BodyError
from services.remoting.namesrv_bodies import TopicConfigSerializeWrapper
from services.remoting.subscription_bodies import SubscriptionGroupWrapper

__all__ = ["GroupSync", "SlaveSync", "TopicSync"]

log = logging.getLogger(__name__)


class GroupSync:
    """The master's subscription groups, taken whole (a group deleted on the master goes here too)."""

    def __init__(self, groups: SubscriptionGroups, client: RemotingClient) -> None:
        self.groups = groups
        self.client = client

    async def sync_from(self, address: str) -> bool:
        try:
            answer = await self.client.call(address, make_request(GET_ALL_SUBSCRIPTIONGROUP_CONFIG, 0))
            if answer.code != ResponseCode.SUCCESS:
                log.warning("subscription groups from master %s: refused (%s)", address, answer.remark)
                return False
            wrapper = SubscriptionGroupWrapper.decode(answer.body)
        except (MqctlError, BodyError) as exc:
            log.warning("subscription groups from master %s: %s", address, exc)
            return False
        if await asyncio.to_thread(self.groups.copy, wrapper):
            log.info("subscription groups copied from master %s (%d groups, version %s)", address,
                     len(wrapper.table), wrapper.data_version.counter)
        return True


class TopicSync:
    """The master's topic configs, kept in this broker's registry: a topic it does not hold is created, one
    whose config differs is updated, and one the master no longer holds is removed if this broker's log holds
    its deletion (``deleted``: the topics whose deletion mark the store has indexed; a topic the master has not
    created yet stays). A config this broker cannot keep (topics.config_problem) is skipped with a warning; the
    master's answer is as hostile as any."""

    def __init__(self, registry: TopicRegistry, on_created: Callable[[list[str]], None], client: RemotingClient,
                 deleted: Callable[[], Collection[str]] = frozenset) -> None:
        self.registry = registry
        self.on_created = on_created
        self.client = client
        self.deleted = deleted

    async def sync_from(self, address: str) -> bool:
        try:
            answer = await self.client.call(address, make_request(GET_ALL_TOPIC_CONFIG, 0))
            if answer.code != ResponseCode.SUCCESS:
                log.warning("topics from master %s: refused (%s)", address, answer.remark)
                return False
            table = TopicConfigSerializeWrapper.decode(answer.body).topic_config_table
        except (MqctlError, BodyError) as exc:
            log.warning("topics from master %s: %s", address, exc)
            return False
        known = self.registry.configs
        for name in sorted(set(known) - set(table) & set(self.deleted())):
            if await asyncio.to_thread(self.registry.remove, name):
                log.info("topic %s removed: deleted on master %s", name, address)
        wanted = [c for name, c in sorted(table.items()) if name != AUTO_CREATE_TOPIC and name == c.topic_name
                  and known.get(name) != c]
        keep = [c for c in wanted if config_problem(c) is None]
        if len(keep) < len(wanted):
            log.warning("topics from master %s: %d config(s) this broker cannot keep were skipped", address,
                        len(wanted) - len(keep))
        if not keep:
            return True
        try:
            changed = await asyncio.to_thread(self.registry.put_all, keep)
        except TopicsFull as exc:
            log.warning("topics from master %s not all kept: %s", address, exc)
            return False
        if changed:
            log.info("topic config(s) of %s copied from master %s", ", ".join(changed[:20]), address)
            self.on_created(changed)
        return True


class SlaveSync:
    def __init__(self, master_address: Callable[[], str | None],
                 syncs: list[Callable[[str], Awaitable[bool]]],
                 closers: list[Callable[[], Awaitable[None]]] | None = None) -> None:
        self.master_address = master_address
        self.syncs = syncs
        self.closers = closers or []
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def of(cls, master_address: Callable[[], str | None], offsets: ConsumerOffsets, topics: TopicSync) -> SlaveSync:
        return cls(master_address, [offsets.sync_from, topics.sync_from], [topics.client.close])

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="slave-sync")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        for close in self.closers:
            await close()

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(SYNC_INTERVAL_S)
            address = self.master_address()
            if not address:
                continue
            for sync in self.syncs:
                try:
                    await sync(address)
                except Exception:  # a periodic task must survive anything (RocketMQ issue #7219)
                    log.exception("copying from master %s failed", address)
