"""The name server's request codes on the controller: 103 REGISTER_BROKER, 104 UNREGISTER_BROKER,
105 GET_ROUTEINFO_BY_TOPIC, 106 GET_BROKER_CLUSTER_INFO and 322 QUERY_DATA_VERSION, answered as RocketMQ's
name server answers them (``DefaultRequestProcessor``, ``ClientRequestProcessor``), from the table in ``namesrv.py``.

Every controller node answers them from its own table, leader or not. A registration belongs to the
connection it came on: when that connection closes, the broker is forgotten at once, and only that
connection may unregister it. A registration of a group the controller manages must come from an address
the controller has for it, and be signed with the broker's key when the controller holds one (``signature``
and ``signedAt``, see services/remoting/mqctl_ext.py; the rules are in namesrv.py).

A registration may list tens of thousands of topics. Its body is read, its topics checked and its digest
taken off the event loop (``Offload``: a worker thread for a large body), and the table takes them a
thousand at a time between turns of the loop (``RouteTable.registering``), one registration after another.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, TypeVar

from services.common.codes import ResponseCode
from services.common.offload import Offload
from services.common.signing import REGISTER_LABEL, request_message
from services.controller.namesrv import (
    ControllerGroup,
    ControllerView,
    Limits,
    Proof,
    Registration,
    RouteRefused,
    RouteTable,
    check_topics,
)
from services.remoting import headers as h
from services.remoting import mqctl_ext as ext
from services.remoting.command import RemotingCommand, make_response
from services.remoting.namesrv_bodies import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfigSerializeWrapper,
    body_crc32,
)

if TYPE_CHECKING:
    from services.common.remoting_conn import RemotingConnection
    from services.controller.controller import ControllerManager

log = logging.getLogger(__name__)

__all__ = ["STANDARD_JSON_VERSION", "ZONE_NAME", "NameServerRemoting", "controller_view", "read_registration",
           "registration_proof", "stepped", "topic_not_exist"]

#: MQVersion.Version.V4_9_4: from this requester version on, a route is answered in standard JSON.
STANDARD_JSON_VERSION = 401
#: MixAll.ZONE_NAME: the extFields entry a broker names its zone in (not part of the header class).
ZONE_NAME = "__ZONE_NAME"
#: FAQUrl.suggestTodo(FAQUrl.APPLY_TOPIC_URL), which RocketMQ appends to the TOPIC_NOT_EXIST remark.
_APPLY_TOPIC_TIP = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."


def registration_proof(request: RemotingCommand) -> Proof | None:
    """The broker's signature over a registration, if it carries one (a RocketMQ broker's does not)."""
    mine = ext.BrokerExtension.from_ext_fields(request.ext_fields)
    if mine.signature is None or mine.signed_at is None:
        return None
    message = request_message(REGISTER_LABEL, request.code, request.ext_fields, ext.REGISTRATION_SIGNED_FIELDS,
                              request.body)
    return Proof(mine.signature, mine.signed_at, message)


def topic_not_exist(topic: str) -> str:
    return f"No topic route info in name server for the topic: {topic}{_APPLY_TOPIC_TIP}"


def controller_view(manager: ControllerManager) -> ControllerView:
    """Who the controller state on this node says each group's master is (a follower's state may trail
    the leader's by a few entries; a route only needs it to catch up with an election)."""
    def view(broker_name: str) -> ControllerGroup | None:
        raft = manager.raft
        if raft is None:
            return None
        return raft.read(lambda s: None if (bs := s.broker_sets.get(broker_name)) is None else ControllerGroup(
            bs.clusterName, bs.masterBrokerId, {i: e.address for i, e in bs.brokers.items()},
            {i: e.publicKey for i, e in bs.brokers.items() if e.publicKey}))
    return view


T = TypeVar("T")


class NameServerRemoting:
    def __init__(self, table: RouteTable, offload: Offload | None = None,
                 order_topic_conf: Callable[[str], str | None] | None = None) -> None:
        """``order_topic_conf``: a topic's orderTopicConf for its route (None: the route has none)."""
        self.table = table
        self.offload = offload or Offload()
        self.order_topic_conf = order_topic_conf or (lambda topic: None)
        self._registering = asyncio.Lock()

    async def register_broker(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        req = h.RegisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        limits = self.table.limits
        try:
            wrapper, proof = await self.offload.run(
                len(request.body), lambda: (read_registration(request, req, limits), registration_proof(request)))
            async with self._registering:
                result = await stepped(self.table.registering(Registration(
                    req.cluster_name, req.broker_name, req.broker_id, req.broker_addr, req.ha_server_addr,
                    wrapper.topic_config_table, wrapper.data_version, req.heartbeat_timeout_millis,
                    req.enable_acting_master, request.ext_fields.get(ZONE_NAME), channel=conn, proof=proof),
                    topics_checked=True))
        except RouteRefused as exc:
            return make_response(request, exc.code, exc.remark)
        header = h.RegisterBrokerResponseHeader(ha_server_addr=result.ha_address, master_addr=result.master_address)
        return make_response(request, ResponseCode.SUCCESS, None, header.to_ext_fields())

    async def unregister_broker(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        req = h.UnRegisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        if not self.table.unregister(req.cluster_name, req.broker_addr, req.broker_name, conn):
            log.info("unregister of %s (%s) from %s ignored: not registered on that connection",
                     req.broker_addr[:80], req.broker_name[:80], conn.peer)
        return make_response(request, ResponseCode.SUCCESS)  # as RocketMQ answers every unregister

    async def query_data_version(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        """Whether the broker's topic configs changed since it last registered here (then it registers)."""
        req = h.QueryDataVersionRequestHeader.from_ext_fields(request.ext_fields)
        theirs = await self.offload.run(len(request.body), lambda: DataVersion.decode(request.body))
        ours = self.table.query_data_version(req.cluster_name, req.broker_addr, conn)
        header = h.QueryDataVersionResponseHeader(changed=ours is None or ours != theirs)
        return make_response(request, ResponseCode.SUCCESS, None, header.to_ext_fields(),
                             ours.encode() if ours is not None else b"")

    async def route(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        req = h.GetRouteInfoRequestHeader.from_ext_fields(request.ext_fields)
        route = self.table.route(req.topic)
        if route is None:
            return make_response(request, ResponseCode.TOPIC_NOT_EXIST, topic_not_exist(req.topic))
        order_conf = self.order_topic_conf(req.topic)
        if order_conf is not None:
            route = dataclasses.replace(route, order_topic_conf=order_conf)
        standard = request.version >= STANDARD_JSON_VERSION or bool(req.accept_standard_json_only)
        return make_response(request, ResponseCode.SUCCESS, None, None, route.encode(standard=standard))

    async def cluster_info(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        return make_response(request, ResponseCode.SUCCESS, None, None, self.table.cluster_info().encode())

    def on_closed(self, conn: RemotingConnection) -> None:
        self.table.on_channel_closed(conn)


def read_registration(request: RemotingCommand, req: h.RegisterBrokerRequestHeader,
                      limits: Limits) -> TopicConfigSerializeWrapper:
    """A REGISTER_BROKER's body, decoded and its topics checked (pure: done off the loop when large);
    raises RouteRefused (a CRC that does not match) or BodyError."""
    if req.body_crc32 != 0 and body_crc32(request.body) != req.body_crc32:
        raise RouteRefused(ResponseCode.SYSTEM_ERROR, "crc32 not match")
    body = RegisterBrokerBody.decode_request(request.body, compressed=req.compressed, version=request.version)
    wrapper = body.topic_config_serialize_wrapper
    check_topics(wrapper.topic_config_table, limits)
    return wrapper


async def stepped(steps: Generator[None, None, T]) -> T:
    """Run ``steps`` to its end, letting the event loop run between two steps."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: T = done.value
            return result
        await asyncio.sleep(0)
