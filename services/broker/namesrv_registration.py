"""The broker's registrations with its name servers: every controller, over RocketMQ's remoting protocol.

A RocketMQ broker registers its topic configs with each of its name servers (REGISTER_BROKER, 103)
every 30 s, at once when its role changes, and when it creates a topic; it unregisters (104) when it
shuts down. This broker does the same with every controller of ``controllerAddr``, since the controllers
are the cluster's name servers (see services/controller/namesrv.py), with the same request a RocketMQ
broker sends, so the controller has one code path for both kinds of broker; and with every name server of
``namesrvAddr`` (RocketMQ's, when the controllers are RocketMQ's: those answer 103 with
REQUEST_CODE_NOT_SUPPORTED, which is noted once and not retried sooner than the next round).

What it registers, as a RocketMQ broker in controller mode does: id 0 while it is master and its own id
otherwise (also while it does not know its role yet); its DataVersion's stateVersion is the master epoch
it knows, and the counter moves whenever its topic configs change. Its topics are those of its store, each
with its config (topics.py: the queue counts and perm it was created with), plus, with
autoCreateTopicEnable, TBW102 (the auto-create topic, ``defaultTopicQueueNums`` queues) with read, write
and inherit permission: a client's producer then sends to a topic nobody created, and this broker creates it.

Each registration is also signed with the broker's own key (``signature`` and ``signedAt``), which the
controllers hold for its id: a controller takes a registration for an address of a group it manages only
with that signature, so nobody else can register in this broker's name. With an auth token configured,
each request is also signed with the token (services/remoting/acl.py), as the controllers then require.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from services.broker.config import BrokerConfig
from services.broker.ha.auth import BrokerKey
from services.broker.replicas_manager import RoleState
from services.broker.topics import PERM_INHERIT, PERM_READ_WRITE
from services.common.clock import Clock
from services.common.codes import ResponseCode
from services.common.errors import MqctlError
from services.common.remoting_client import RemotingClient
from services.common.signing import REGISTER_LABEL, request_message
from services.remoting import headers as h
from services.remoting import mqctl_ext as ext
from services.remoting.acl import sign
from services.remoting.command import RemotingCommand, RequestCode, make_request
from services.remoting.namesrv_bodies import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    body_crc32,
)

log = logging.getLogger(__name__)

__all__ = ["AUTO_CREATE_TOPIC", "DLQ_PREFIX", "REGISTER_INTERVAL_S", "RETRY_PREFIX", "BrokerIdentity",
           "NamesrvRegistration", "auto_create_config", "register_request", "sign_registration", "topic_table",
           "unregister_request"]

#: RocketMQ's registerNameServerPeriod default.
REGISTER_INTERVAL_S = 30.0
#: After a refusal, the next round comes this soon, doubling up to the interval (a controller that has not
#: yet applied this broker's registration with the controller refuses it for a moment).
RETRY_FIRST_S = 1.0
AUTO_CREATE_TOPIC = "TBW102"
#: RocketMQ's broker registers this system topic (one queue) with the rest of its topics. RocketMQ's name
#: server refuses a first registration that carries one topic only (it takes it for an incremental one
#: that came before the full one), which TBW102 alone would be: so the name servers of namesrvAddr get it too.
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"


@dataclass(frozen=True)
class BrokerIdentity:
    """Who the broker is right now: its controller id (None before it has one), whether it is master,
    and the master epoch it knows."""

    broker_id: int | None
    master: bool
    master_epoch: int


#: RocketMQ's MixAll.RETRY_GROUP_TOPIC_PREFIX and DLQ_GROUP_TOPIC_PREFIX: a consumer group's retry topic and its
#: dead-letter queue, each of one queue (topics.implicit_config).
RETRY_PREFIX, DLQ_PREFIX = "%RETRY%", "%DLQ%"


def auto_create_config(queue_nums: int) -> TopicConfig:
    """TBW102 as this broker holds it with autoCreateTopicEnable (RocketMQ's TopicConfigManager creates it so)."""
    return TopicConfig(AUTO_CREATE_TOPIC, queue_nums, queue_nums, PERM_READ_WRITE | PERM_INHERIT)


def topic_table(configs: Mapping[str, TopicConfig], queue_nums: int, auto_create: bool = True,
                self_test: bool = False) -> dict[str, TopicConfig]:
    """What the broker announces: every topic's config, and TBW102 with ``auto_create``."""
    table = {t: configs[t] for t in sorted(configs)}
    if auto_create:
        table[AUTO_CREATE_TOPIC] = auto_create_config(queue_nums)
    if self_test:
        table.setdefault(SELF_TEST_TOPIC, TopicConfig(SELF_TEST_TOPIC, 1, 1, PERM_READ_WRITE))
    return table


def register_request(config: BrokerConfig, broker_id: int, topics: dict[str, TopicConfig],
                     version: DataVersion) -> RemotingCommand:
    """REGISTER_BROKER as BrokerOuterAPI.registerBrokerAll writes it (JSON body, its CRC in the header)."""
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(topics, version)).encode()
    header = h.RegisterBrokerRequestHeader(
        broker_name=config.brokerName, broker_addr=config.address, cluster_name=config.brokerClusterName,
        ha_server_addr=config.ha_address, broker_id=broker_id, enable_acting_master=False,
        body_crc32=body_crc32(body))
    return make_request(RequestCode.REGISTER_BROKER, 0, header.to_ext_fields(), body)


def sign_registration(request: RemotingCommand, key: BrokerKey, now_ms: int) -> RemotingCommand:
    """``request`` (a 103) with the broker's signature over it, made now."""
    fields = {**request.ext_fields, ext.SIGNED_AT: str(now_ms)}
    message = request_message(REGISTER_LABEL, request.code, fields, ext.REGISTRATION_SIGNED_FIELDS, request.body)
    fields["signature"] = key.sign(message).hex()
    return replace(request, ext_fields=fields)


def unregister_request(config: BrokerConfig, broker_id: int) -> RemotingCommand:
    header = h.UnRegisterBrokerRequestHeader(broker_name=config.brokerName, broker_addr=config.address,
                                             cluster_name=config.brokerClusterName, broker_id=broker_id)
    return make_request(RequestCode.UNREGISTER_BROKER, 0, header.to_ext_fields())


class NamesrvRegistration:
    def __init__(self, config: BrokerConfig, addresses: list[str], identity: Callable[[], BrokerIdentity],
                 topics: Callable[[], Mapping[str, TopicConfig]], clock: Clock, interval_s: float = REGISTER_INTERVAL_S,
                 timeout_s: float = 6.0, key: BrokerKey | None = None, retry_first_s: float = RETRY_FIRST_S,
                 name_servers: Iterable[str] = ()) -> None:
        self.config = config
        self.key = key
        self.retry_first_s = retry_first_s
        self.addresses = addresses
        #: Name servers of namesrvAddr that are not controllers (RocketMQ's): their table has SELF_TEST_TOPIC.
        self.name_servers = [a for a in dict.fromkeys(name_servers) if a not in addresses]
        self.identity = identity
        self.topics = topics
        self.clock = clock
        self.interval_s = interval_s
        token = config.authToken
        self.client = RemotingClient(timeout_s=timeout_s,
                                     signer=(lambda r: sign(r, token, clock.now_ms())) if token else None)
        self.known: Mapping[str, TopicConfig] = {}  # the topic configs of the last registration
        self.registered_id: int | None = None
        self._version = DataVersion()
        self._outcomes: dict[str, str | None] = {}
        self._retry_s: float | None = None  # set while some name server refuses this broker
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="namesrv-registration")

    async def stop(self) -> None:
        """Stop, and unregister from every controller (RocketMQ's unregisterBrokerAll on shutdown)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self.registered_id is not None:
            request = unregister_request(self.config, self.registered_id)
            await asyncio.gather(*(self._send(a, request, "unregister", 2.0)
                                   for a in self.addresses + self.name_servers))
            self.registered_id = None
        await self.client.close()

    def trigger(self) -> None:
        """Register again now (a role change)."""
        self._wake.set()

    # A role listener (ReplicasManager.listen): a new role is registered at once.
    async def on_master(self, state: RoleState) -> None:
        self.trigger()

    async def on_slave(self, state: RoleState) -> None:
        self.trigger()

    def on_sync_state_set(self, state: RoleState) -> None:
        """A SyncStateSet change does not change what is registered."""

    def on_controller_view(self, ss_epoch: int) -> None:
        """Nor does the controller's view of it."""

    def note_topics(self, topics: Iterable[str]) -> None:
        """Called on the put path: a topic this broker has not registered yet is registered at once."""
        if not self._wake.is_set() and any(t not in self.known for t in topics):
            self._wake.set()

    # ------------------------------------------------------------------ registering
    async def _run(self) -> None:
        while True:
            self._wake.clear()  # before registering: a trigger that comes during it is not lost
            try:
                await self.register_all()
            except Exception:  # the loop must survive anything; the next round retries
                log.exception("registration with the name servers failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), min(self._retry_s or self.interval_s, self.interval_s))

    async def register_all(self) -> None:
        me = self.identity()
        if me.broker_id is None:
            return  # no id yet: the role change that follows registration triggers the first round
        topics = self._current_topics()
        if topics != self.known or me.master_epoch != self._version.state_version:
            self._version = DataVersion(me.master_epoch, self.clock.now_ms(), self._version.counter + 1)
            self.known = topics
        broker_id = 0 if me.master else me.broker_id
        request = self._request(broker_id, topics, False)
        sends = [self._send(a, request, "register") for a in self.addresses]
        if self.name_servers:
            request = self._request(broker_id, topics, True)
            sends += [self._send(a, request, "register") for a in self.name_servers]
        taken = await asyncio.gather(*sends)
        self.registered_id = broker_id
        self._retry_s = None if all(taken) else min((self._retry_s or self.retry_first_s / 2) * 2, self.interval_s)

    def _request(self, broker_id: int, topics: Mapping[str, TopicConfig], self_test: bool) -> RemotingCommand:
        table = topic_table(topics, self.config.defaultTopicQueueNums, self.config.autoCreateTopicEnable, self_test)
        request = register_request(self.config, broker_id, table, self._version)
        return request if self.key is None else sign_registration(request, self.key, self.clock.now_ms())

    def _current_topics(self) -> Mapping[str, TopicConfig]:
        try:
            return dict(self.topics())
        except RuntimeError as exc:  # the store changed under the read (a truncation in a worker thread)
            log.debug("topics not read this round: %s", exc)
            return self.known

    async def _send(self, address: str, request: RemotingCommand, what: str,
                    timeout_s: float | None = None) -> bool:
        """Whether the name server took it (an unreachable one counts as taken: it retries at its pace)."""
        try:
            answer = await self.client.call(address, request, timeout_s)
        except MqctlError as exc:
            self._outcome(address, f"cannot {what} with the name server at {address}: {exc}", logging.INFO)
            return True
        if answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:  # a controller that is no name server
            self._outcome(address, f"{address} does not serve the name server's requests (RocketMQ's controllers "
                                   "do not): registrations go to the other name servers", logging.INFO)
            return True
        if answer.code != ResponseCode.SUCCESS:
            self._outcome(address, f"the name server at {address} refused to {what} this broker: "
                                   f"{answer.remark} (code {answer.code})", logging.WARNING)
            return False
        self._outcome(address, "", logging.INFO)
        return True

    def _outcome(self, address: str, problem: str, level: int) -> None:
        """Log a change of outcome only, not the same failure every 30 s."""
        if self._outcomes.get(address) != problem:
            log.log(level, problem or f"registered with the name server at {address}")
            self._outcomes[address] = problem
