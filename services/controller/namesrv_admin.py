"""The name server's administrative codes on the controller, answered as RocketMQ's ``DefaultRequestProcessor``
answers them: 100-102 and 219 (KV config), 206 (every topic), 205 and 327 (wipe or add a broker group's
write permission), 216 (delete a topic's routes), 901 (a group's members), 318 and 319 (the name server's
configuration).

What each reads and writes:

* the KV config is the controller group's replicated state (kv_config.py): a put or delete is committed
  through Raft by whichever node takes it (a follower hands it to the leader), and reads come from this
  node's applied state, so any node answers them, as any name server does;
* 205, 327, 216 and 901 act on this node's own route table (namesrv.py), as on one RocketMQ name server:
  mqadmin sends them to every name server it is given, so give it every controller;
* 318 and 319 are this node's configuration: the name-server properties it acts on
  (``NAMESRV_UPDATABLE``) are changed and persisted as ``updateControllerConfig`` changes the others.

The writes (100, 102, 205, 216, 318, 327) are in remoting.PROTECTED: with ``authToken``, only a request
signed with the token is taken. None of them can put an address in a route: a group the controller manages
still shows only the controller's addresses and master (docs/security.md).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from services.common.codes import ResponseCode
from services.common.errors import ConfigError
from services.common.offload import Offload
from services.common.props import parse_properties
from services.controller.config import BLACK_LIST, FIELD_NAMES, NAMESRV_UPDATABLE
from services.controller.kv_config import ORDER_TOPIC_CONFIG, KvRefused, check_kv_names
from services.controller.namesrv import RouteTable
from services.controller.state_machine import ControllerResult, ReplicasInfoManager
from services.remoting import bodies
from services.remoting import headers as h
from services.remoting.command import RemotingCommand, RequestCode, make_response
from services.remoting.errors import BodyError, HeaderFieldError
from services.remoting.javaorder import hash_map_order

if TYPE_CHECKING:
    from services.common.remoting_conn import RemotingConnection
    from services.controller.controller import ControllerManager

log = logging.getLogger(__name__)

__all__ = ["KV_GROUP", "NameServerAdmin", "namesrv_properties", "namesrv_update_refusal", "read_properties"]

T = TypeVar("T")

#: The write lock KV config writes take on the leader (a NUL cannot start a broker name, so no group shares it).
KV_GROUP = "\x00kv-config"
#: Header fields that name a group or topic: a lookup key, never longer than a name can be.
_MAX_NAME = 255


def namesrv_properties(manager: ControllerManager) -> dict[str, str]:
    """319's properties: RocketMQ's NamesrvConfig names for what this node does (the first two can change)."""
    config = manager.config
    return {"orderMessageEnable": _bool(config.orderMessageEnable),
            "enableAllTopicList": _bool(config.enableAllTopicList),
            "enableTopicList": "false", "returnOrderTopicConfigToBroker": "false", "supportActingMaster": "false",
            "deleteTopicWithBrokerRegistration": "false", "needWaitForService": "false",
            "enableControllerInNamesrv": "true", "listenPort": str(config.self_peer().port)}


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _name(value: str | None, header: str, field: str) -> str:
    if not value or len(value) > _MAX_NAME:
        raise HeaderFieldError(header, field, f"must be 1-{_MAX_NAME} characters")
    return value


def _answer(request: RemotingCommand, result: ControllerResult) -> RemotingCommand:
    return make_response(request, result.code, None if result.ok else result.remark)


class NameServerAdmin:
    def __init__(self, table: RouteTable, manager: ControllerManager, offload: Offload) -> None:
        self.table = table
        self.m = manager
        self.offload = offload

    def routes(self) -> dict[int, Callable[[RemotingCommand, RemotingConnection], Awaitable[RemotingCommand]]]:
        """The codes this serves, for the remoting dispatch table."""
        rc = RequestCode
        return {rc.PUT_KV_CONFIG: self.put_kv_config, rc.GET_KV_CONFIG: self.get_kv_config,
                rc.DELETE_KV_CONFIG: self.delete_kv_config, rc.GET_KVLIST_BY_NAMESPACE: self.kv_list,
                rc.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.topic_list,
                rc.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm, rc.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm,
                rc.DELETE_TOPIC_IN_NAMESRV: self.delete_topic, rc.GET_BROKER_MEMBER_GROUP: self.member_group,
                rc.UPDATE_NAMESRV_CONFIG: self.update_config, rc.GET_NAMESRV_CONFIG: self.get_config}

    # ------------------------------------------------------------------ KV config (replicated)
    def order_topic_conf(self, topic: str) -> str | None:
        """A route's orderTopicConf: the topic's ORDER_TOPIC_CONFIG entry, when orderMessageEnable is on."""
        raft = self.m.raft
        if raft is None or not self.m.config.orderMessageEnable:
            return None
        return raft.read(lambda s: s.kv.get(ORDER_TOPIC_CONFIG, topic))

    async def put_kv_config(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        req = h.PutKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        result = await self.m.write_anywhere(KV_GROUP, lambda s: s.put_kv_config(req.namespace, req.key, req.value))
        if result.ok:
            log.info("KV config %.80s/%.80s set by %s", req.namespace, req.key, conn.peer)
        return _answer(request, result)

    async def delete_kv_config(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        req = h.DeleteKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        result = await self.m.write_anywhere(KV_GROUP, lambda s: s.delete_kv_config(req.namespace, req.key))
        if result.ok:
            log.info("KV config %.80s/%.80s deleted by %s", req.namespace, req.key, conn.peer)
        return _answer(request, result)

    async def get_kv_config(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        req = h.GetKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        try:
            check_kv_names(req.namespace, req.key)
        except KvRefused as exc:
            return make_response(request, exc.code, exc.remark)
        value = self._read(lambda s: s.kv.get(req.namespace, req.key), None)
        if value is None:
            return make_response(request, ResponseCode.QUERY_NOT_FOUND,
                                 f"No config item, Namespace: {req.namespace} Key: {req.key}")
        return make_response(request, ResponseCode.SUCCESS, None, h.GetKVConfigResponseHeader(value=value).to_ext_fields())

    async def kv_list(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        req = h.GetKVListByNamespaceRequestHeader.from_ext_fields(request.ext_fields)
        try:
            check_kv_names(req.namespace)
        except KvRefused as exc:
            return make_response(request, exc.code, exc.remark)
        table = self._read(lambda s: s.kv.namespace(req.namespace), None)
        if table is None:
            return make_response(request, ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {req.namespace}")
        return make_response(request, ResponseCode.SUCCESS, None, None, bodies.KVTable(table).encode())

    def _read(self, fn: Callable[[ReplicasInfoManager], T], default: T) -> T:
        """From this node's applied state, leader or not (a name server answers from what it holds)."""
        raft = self.m.raft
        return default if raft is None else raft.read(fn)

    # ------------------------------------------------------------------ this node's route table
    async def topic_list(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        if not self.m.config.enableAllTopicList:
            return make_response(request, ResponseCode.SYSTEM_ERROR, "disable")
        topics = self.table.topics()
        body = await self.offload.run(len(topics) * 16, lambda: bodies.TopicList(tuple(hash_map_order(topics))).encode())
        return make_response(request, ResponseCode.SUCCESS, None, None, body)

    async def wipe_write_perm(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        req = h.WipeWritePermOfBrokerRequestHeader.from_ext_fields(request.ext_fields)
        name = _name(req.broker_name, type(req).__name__, "brokerName")
        count = self.table.set_write_perm(name, writable=False)
        log.info("write permission of broker group %.80s wiped by %s: %d topics", name, conn.peer, count)
        header = h.WipeWritePermOfBrokerResponseHeader(wipe_topic_count=count)
        return make_response(request, ResponseCode.SUCCESS, None, header.to_ext_fields())

    async def add_write_perm(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        req = h.AddWritePermOfBrokerRequestHeader.from_ext_fields(request.ext_fields)
        name = _name(req.broker_name, type(req).__name__, "brokerName")
        count = self.table.set_write_perm(name, writable=True)
        log.info("write permission of broker group %.80s added by %s: %d topics", name, conn.peer, count)
        header = h.AddWritePermOfBrokerResponseHeader(add_topic_count=count)
        return make_response(request, ResponseCode.SUCCESS, None, header.to_ext_fields())

    async def delete_topic(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        req = h.DeleteTopicFromNamesrvRequestHeader.from_ext_fields(request.ext_fields)
        topic = _name(req.topic, type(req).__name__, "topic")
        self.table.delete_topic(topic, req.cluster_name or None)
        log.info("routes of topic %.80s deleted by %s", topic, conn.peer)
        return make_response(request, ResponseCode.SUCCESS)

    async def member_group(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        req = h.GetBrokerMemberGroupRequestHeader.from_ext_fields(request.ext_fields)
        name = _name(req.broker_name, type(req).__name__, "brokerName")
        group = bodies.BrokerMemberGroup(req.cluster_name, name, self.table.member_group(name))
        return make_response(request, ResponseCode.SUCCESS, None, None,
                             bodies.GetBrokerMemberGroupResponseBody(group).encode())

    # ------------------------------------------------------------------ this node's configuration
    async def get_config(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        text = "".join(f"{k}={v}\n" for k, v in namesrv_properties(self.m).items())
        return make_response(request, ResponseCode.SUCCESS, None, None, text.encode("utf-8"))

    async def update_config(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        props = await self.offload.run(len(request.body), lambda: read_properties(request.body))
        refusal = namesrv_update_refusal(props)
        if refusal is not None:
            return make_response(request, refusal.code, refusal.remark)
        result = self.m.apply_config_update(props) if props else ControllerResult()
        if result.ok:
            log.info("name-server config %s changed by %s", sorted(props), conn.peer)
        return _answer(request, result)


def namesrv_update_refusal(props: dict[str, str]) -> KvRefused | None:
    """Why 318 refuses these properties (None: it takes them): RocketMQ's black list as RocketMQ answers it,
    then anything this node does not change at run time as a name server."""
    for key in props:
        if key in BLACK_LIST or key in ("kvConfigPath", "configBlackList"):
            return KvRefused(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
    for key in props:
        if key not in NAMESRV_UPDATABLE:
            where = "a controller property: use updateControllerConfig" if key in FIELD_NAMES else \
                "not a name-server property this controller acts on"
            return KvRefused(ResponseCode.INVALID_PARAMETER,
                             f"{key[:80]!r} cannot be changed with UPDATE_NAMESRV_CONFIG ({where}); it changes "
                             f"{', '.join(NAMESRV_UPDATABLE)}")
    return None


def read_properties(body: bytes) -> dict[str, str]:
    """A config update's body (318, 1009): properties text; raises BodyError."""
    try:
        return parse_properties(body.decode("utf-8"), "the request body")
    except (UnicodeDecodeError, ConfigError) as exc:
        raise BodyError(f"the body is not properties text: {exc}") from None
