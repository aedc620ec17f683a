"""The controller's RocketMQ remoting API: the same commands as the HTTP API, in RocketMQ's request codes,
custom headers and fastjson bodies, so a RocketMQ broker or mqadmin can use this controller.

Each request code maps onto the same ``ControllerManager`` call the HTTP route makes; only the encoding
differs. What RocketMQ's ``ControllerRequestProcessor`` answers, this answers: the response header and
body classes of each code, the controller's response codes (fencing, not-leader, ...) with their remarks,
``REQUEST_CODE_NOT_SUPPORTED`` for codes it does not serve. A malformed custom header or body is answered
``INVALID_PARAMETER`` naming the field.

A broker that sends its heartbeats (904) or registers (1003) on a connection owns that connection: when
it closes, the broker is treated as gone at once, as RocketMQ's controller does with a closed channel.

The controller is also the cluster's name server (RocketMQ's ``enableControllerInNamesrv``): 103-106
and 322 are served by ``namesrv_remoting.py`` from this node's route table, and a 904 keeps the sender's
name-server registration fresh, as RocketMQ's name server treats it.

With ``authToken`` configured, the requests the HTTP API protects (every write, heartbeats included) and
the name-server registrations (103, 104, 322) must be signed with the token (services/remoting/acl.py:
an HMAC over the request code, the signing time, every field by name and the body, each signature accepted
once; RocketMQ's own ACL signature is not enough); others are refused with ``NO_PERMISSION`` naming why,
and a oneway one is dropped.

mqctl's brokers add a few fields to RocketMQ's requests (their key, the master's signature over an
alter, ``asyncLearner``) and ask 88001 GET_BROKER_KEYS: see services/remoting/mqctl_ext.py.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from services.common.codes import ResponseCode
from services.common.offload import Busy, Offload
from services.controller.heartbeat import MAX_PRIORITY, Heartbeat
from services.controller.namesrv import RouteTable
from services.controller.namesrv_admin import NameServerAdmin, read_properties
from services.controller.namesrv_remoting import NameServerRemoting, controller_view
from services.controller.state_machine import ControllerResult, ElectMasterRequest
from services.remoting import bodies
from services.remoting import headers as h
from services.remoting import mqctl_ext as ext
from services.remoting.acl import Verifier
from services.remoting.command import RemotingCommand, RequestCode, make_request, make_response
from services.remoting.errors import BodyError, HeaderFieldError
from services.remoting.limits import (
    BROKER_NAMES_BODY,
    REGISTRATION_BODY,
    SMALL_BODY,
    BodyLimit,
    RequestLimits,
    server_limits,
)

if TYPE_CHECKING:
    from services.common.remoting_conn import RemotingConnection
    from services.controller.controller import ControllerManager

log = logging.getLogger(__name__)

RC = RequestCode

#: Requests that change state (or feed failure detection): refused when a token is configured.
PROTECTED = frozenset({RC.BROKER_HEARTBEAT, RC.CONTROLLER_ALTER_SYNC_STATE_SET, RC.CONTROLLER_ELECT_MASTER,
                       RC.CONTROLLER_REGISTER_BROKER, RC.UPDATE_CONTROLLER_CONFIG, RC.CLEAN_BROKER_DATA,
                       RC.CONTROLLER_APPLY_BROKER_ID, RC.REGISTER_BROKER, RC.UNREGISTER_BROKER,
                       RC.QUERY_DATA_VERSION, ext.GET_BROKER_KEYS, RC.PUT_KV_CONFIG, RC.DELETE_KV_CONFIG,
                       RC.WIPE_WRITE_PERM_OF_BROKER, RC.ADD_WRITE_PERM_OF_BROKER, RC.DELETE_TOPIC_IN_NAMESRV,
                       RC.UPDATE_NAMESRV_CONFIG})

#: The connection attribute naming the broker that owns it: (clusterName, brokerName, brokerId).
BROKER = "broker"


def _answer(request: RemotingCommand, result: ControllerResult, header: h.CustomHeader | None = None,
            body: bodies.Body | None = None) -> RemotingCommand:
    return make_response(request, result.code, result.remark,
                         header.to_ext_fields() if header is not None else None,
                         body.encode() if body is not None else b"")


def _members(data: dict[str, Any]) -> frozenset[int]:
    return frozenset(int(i) for i in data.get("syncStateSet") or [])


class ControllerRemoting:
    """Serves one request at a time per call; many calls run concurrently on a connection."""

    def __init__(self, manager: ControllerManager) -> None:
        self.m = manager
        self.offload = Offload(name="controller-decode")
        table = RouteTable(manager.clock.monotonic_ms, controller_view(manager), wall_ms=manager.clock.now_ms)
        self.admin = NameServerAdmin(table, manager, self.offload)
        self.namesrv = NameServerRemoting(table, self.offload, self.admin.order_topic_conf)
        self._verifier: Verifier | None = None
        self._routes = {
            RC.BROKER_HEARTBEAT: self._heartbeat,
            RC.CONTROLLER_GET_NEXT_BROKER_ID: self._next_broker_id,
            RC.CONTROLLER_APPLY_BROKER_ID: self._apply_broker_id,
            RC.CONTROLLER_REGISTER_BROKER: self._register_broker,
            RC.CONTROLLER_ALTER_SYNC_STATE_SET: self._alter_sync_state_set,
            RC.CONTROLLER_ELECT_MASTER: self._elect_master,
            RC.CONTROLLER_GET_REPLICA_INFO: self._replica_info,
            RC.CONTROLLER_GET_METADATA_INFO: self._metadata,
            RC.CONTROLLER_GET_SYNC_STATE_DATA: self._sync_state_data,
            RC.UPDATE_CONTROLLER_CONFIG: self._update_config,
            RC.GET_CONTROLLER_CONFIG: self._get_config,
            RC.CLEAN_BROKER_DATA: self._clean_broker_data,
            RC.REGISTER_BROKER: self.namesrv.register_broker,
            RC.UNREGISTER_BROKER: self.namesrv.unregister_broker,
            RC.GET_ROUTEINFO_BY_TOPIC: self.namesrv.route,
            RC.GET_BROKER_CLUSTER_INFO: self.namesrv.cluster_info,
            RC.QUERY_DATA_VERSION: self.namesrv.query_data_version,
            ext.GET_BROKER_KEYS: self._broker_keys,
            **self.admin.routes(),
        }

    def limits(self) -> RequestLimits:
        return request_limits(self._routes)

    async def handle(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        route = self._routes.get(request.code)
        if route is None:
            if request.is_oneway:
                return None
            return make_response(request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                 f" request type {request.code} not supported")
        if request.code in PROTECTED and self.m.config.authToken:
            refusal = self.verifier().check(request, self.m.clock.now_ms())
            if refusal is not None:
                log.info("refused request %d from %s: %s", request.code, conn.peer, refusal)
                return None if request.is_oneway else make_response(request, ResponseCode.NO_PERMISSION, refusal)
        try:
            answer: RemotingCommand | None = await route(request, conn)
        except (HeaderFieldError, BodyError) as exc:
            return None if request.is_oneway else make_response(request, ResponseCode.INVALID_PARAMETER, str(exc))
        except Busy as exc:
            log.info("request %d from %s refused: %s", request.code, conn.peer, exc)
            return None if request.is_oneway else make_response(request, ResponseCode.SYSTEM_BUSY, str(exc))
        return answer

    def verifier(self) -> Verifier:
        token = self.m.config.authToken
        if self._verifier is None or self._verifier.secret != token:
            self._verifier = Verifier(token)
        self._verifier.accept_legacy = self.m.config.acceptLegacySignatures  # runtime-updatable; memory kept
        return self._verifier

    def on_closed(self, conn: RemotingConnection) -> None:
        """A broker's connection closed: it is gone (its process, or its link to this controller)."""
        self.namesrv.on_closed(conn)
        owner = conn.attributes.get(BROKER)
        if owner is not None:
            asyncio.get_running_loop().create_task(self.m.on_channel_closed(*owner))

    # ------------------------------------------------------------------ broker registration and liveness
    async def _heartbeat(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand | None:
        hb = h.BrokerHeartbeatRequestHeader.from_ext_fields(request.ext_fields)
        mine = ext.BrokerExtension.from_ext_fields(request.ext_fields)
        if hb.broker_id is None:
            return None  # RocketMQ drops a heartbeat without an id
        self.m.on_heartbeat(Heartbeat(
            hb.cluster_name, hb.broker_name, hb.broker_addr, hb.broker_id,
            epoch=hb.epoch if hb.epoch is not None else -1,
            maxOffset=hb.max_offset if hb.max_offset is not None else -1,
            confirmOffset=hb.confirm_offset if hb.confirm_offset is not None else -1,
            heartbeatTimeoutMills=self.m.bounded_heartbeat_timeout(hb.heartbeat_timeout_mills),
            electionPriority=hb.election_priority if hb.election_priority is not None else MAX_PRIORITY,
            asyncLearner=mine.async_learner, incarnation=mine.incarnation or 0))
        conn.attributes[BROKER] = (hb.cluster_name, hb.broker_name, hb.broker_id)
        self.namesrv.table.touch(hb.cluster_name, hb.broker_addr, conn)
        return None

    async def _next_broker_id(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        req = h.GetNextBrokerIdRequestHeader.from_ext_fields(request.ext_fields)
        cluster, name = req.cluster_name or "", self._name(req.broker_name)
        result = await self.m.read(lambda s: s.get_next_broker_id(cluster, name))
        data = result.data or {}
        return _answer(request, result, h.GetNextBrokerIdResponseHeader(
            cluster_name=cluster, broker_name=name, next_broker_id=data.get("nextBrokerId")))

    async def _apply_broker_id(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        req = h.ApplyBrokerIdRequestHeader.from_ext_fields(request.ext_fields)
        cluster, name = req.cluster_name or "", self._name(req.broker_name)
        broker_id, code = self._id(req.applied_broker_id, "appliedBrokerId"), req.register_check_code or ""
        if not code:
            raise HeaderFieldError(type(req).__name__, "registerCheckCode", "is required")
        key = ext.BrokerExtension.from_ext_fields(request.ext_fields).public_key or ""
        result = await self.m.write(name, lambda s: s.apply_broker_id(cluster, name, broker_id, code, key))
        return _answer(request, result, h.ApplyBrokerIdResponseHeader(cluster_name=cluster, broker_name=name))

    async def _register_broker(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        req = h.RegisterBrokerToControllerRequestHeader.from_ext_fields(request.ext_fields)
        cluster, name = req.cluster_name or "", self._name(req.broker_name)
        broker_id = self._id(req.broker_id, "brokerId")
        if not req.broker_address:
            raise HeaderFieldError(type(req).__name__, "brokerAddress", "is required")
        key = ext.BrokerExtension.from_ext_fields(request.ext_fields).public_key or ""
        result = await self.m.register_broker(cluster, name, broker_id, req.broker_address, public_key=key)
        if result.ok:
            conn.attributes[BROKER] = (cluster, name, broker_id)
            self.m.notifier.remoting_brokers.add((name, broker_id))
        data = result.data or {}
        header = h.RegisterBrokerToControllerResponseHeader(
            cluster_name=cluster, broker_name=name, master_broker_id=data.get("masterBrokerId"),
            master_address=data.get("masterAddress"), master_epoch=data.get("masterEpoch"),
            sync_state_set_epoch=data.get("syncStateSetEpoch") if data.get("masterBrokerId") is not None else None)
        body = bodies.SyncStateSet(_members(data), int(data.get("syncStateSetEpoch") or 0)) if result.ok else None
        return _answer(request, result, header, body)

    # ------------------------------------------------------------------ master and SyncStateSet
    async def _alter_sync_state_set(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        req = h.AlterSyncStateSetRequestHeader.from_ext_fields(request.ext_fields)
        name = self._name(req.broker_name)
        master_id, epoch = self._id(req.master_broker_id, "masterBrokerId"), req.master_epoch or 0
        proposed = await self.offload.run(len(request.body), lambda: bodies.SyncStateSet.decode(request.body))
        signature = ext.BrokerExtension.from_ext_fields(request.ext_fields).signature or ""
        result = await self.m.write(name, lambda s: s.alter_sync_state_set(
            name, master_id, epoch, sorted(proposed.sync_state_set), proposed.sync_state_set_epoch, self.m.alive,
            signature))
        data = result.data or {}
        if not result.ok:
            return _answer(request, result)
        new_epoch = int(data["newSyncStateSetEpoch"])
        return _answer(request, result, h.AlterSyncStateSetResponseHeader(new_sync_state_set_epoch=new_epoch),
                       bodies.SyncStateSet(_members(data), new_epoch))

    async def _elect_master(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        req = h.ElectMasterRequestHeader.from_ext_fields(request.ext_fields)
        name = self._name(req.broker_name)
        broker_id = None if req.broker_id < 0 else req.broker_id
        if req.designate_elect and broker_id is None:
            raise HeaderFieldError(type(req).__name__, "brokerId", "is required with designateElect")
        result = await self.m.elect_master(ElectMasterRequest(req.cluster_name, name, broker_id, req.designate_elect))
        data = result.data or {}
        header = h.ElectMasterResponseHeader(
            master_broker_id=data.get("masterBrokerId"), master_address=data.get("masterAddress"),
            master_epoch=data.get("masterEpoch"), sync_state_set_epoch=data.get("syncStateSetEpoch"))
        group = None
        if result.ok:
            group = bodies.BrokerMemberGroup(data.get("clusterName"), data.get("brokerName"), {
                int(b["brokerId"]): str(b["brokerAddress"]) for b in data.get("brokers") or []})
        return _answer(request, result, header, bodies.ElectMasterResponseBody(group, _members(data)))

    async def _replica_info(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        name = self._name(h.GetReplicaInfoRequestHeader.from_ext_fields(request.ext_fields).broker_name)
        result = await self.m.read(lambda s: s.get_replica_info(name))
        if not result.ok:
            return _answer(request, result)
        data = result.data or {}
        return _answer(request, result, h.GetReplicaInfoResponseHeader(
            master_broker_id=data.get("masterBrokerId"), master_address=data.get("masterAddress"),
            master_epoch=data.get("masterEpoch")),
            bodies.SyncStateSet(_members(data), int(data.get("syncStateSetEpoch") or 0)))

    async def _broker_keys(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        name = self._name(ext.BrokerKeysRequestHeader.from_ext_fields(request.ext_fields).broker_name)
        result = await self.m.read(lambda s: s.broker_keys(name))
        if not result.ok:
            return _answer(request, result)
        keys = {int(k["brokerId"]): str(k["publicKey"]) for k in (result.data or {}).get("keys", [])}
        return _answer(request, result, None, ext.BrokerKeys(keys))

    async def _sync_state_data(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        names = await self.offload.run(len(request.body), lambda: bodies.decode_broker_names(request.body)) \
            if request.body else ()
        result = await self.m.read(lambda s: s.get_sync_state_data(list(names), self.m.alive))
        if not result.ok:
            return _answer(request, result)
        table = {}
        for group in (result.data or {}).get("brokers", []):
            table[group["brokerName"]] = bodies.ReplicasInfo(
                group["masterBrokerId"], group["masterAddress"], group["masterEpoch"], group["syncStateSetEpoch"],
                tuple(_identity(r) for r in group["inSyncReplicas"]),
                tuple(_identity(r) for r in group["notInSyncReplicas"]))
        return _answer(request, result, None, bodies.BrokerReplicasInfo(table))

    async def _clean_broker_data(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        req = h.CleanControllerBrokerDataRequestHeader.from_ext_fields(request.ext_fields)
        name = self._name(req.broker_name)
        result = await self.m.write(name, lambda s: s.clean_broker_data(
            req.cluster_name, name, req.broker_controller_ids_to_clean, req.is_clean_living_broker, self.m.alive))
        return _answer(request, result)

    # ------------------------------------------------------------------ the controller itself
    async def _metadata(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        data = self.m.metadata()
        peers = "".join(f"{p.id}:{p.address};" for p in self.m.peers)  # as DLedgerController writes them
        return make_response(request, ResponseCode.SUCCESS, None, h.GetMetaDataResponseHeader(
            group=data["group"], controller_leader_id=data["controllerLeaderId"],
            controller_leader_address=data["controllerLeaderAddress"], is_leader=bool(data["isLeader"]),
            peers=peers).to_ext_fields())

    async def _get_config(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        text = "".join(f"{k}={_prop(v)}\n" for k, v in self.m.config.as_properties().items())
        return make_response(request, ResponseCode.SUCCESS, None, None, text.encode("utf-8"))

    async def _update_config(self, request: RemotingCommand, conn: RemotingConnection) -> RemotingCommand:
        props = await self.offload.run(len(request.body), lambda: read_properties(request.body))
        result = self.m.apply_config_update(props)
        return _answer(request, result)

    # ------------------------------------------------------------------ field checks
    @staticmethod
    def _name(name: str | None) -> str:
        if not name or len(name) > 255:
            raise HeaderFieldError("header", "brokerName", "must be 1-255 characters")
        return name

    @staticmethod
    def _id(value: int | None, field: str) -> int:
        if value is None or value < 1:
            raise HeaderFieldError("header", field, f"must be a broker id of at least 1, got {value}")
        return value


def request_limits(served: Iterable[int]) -> RequestLimits:
    """What each request may carry (docs/remoting.md): a registration a broker's topics, 1006 a list of
    broker names, an alter, a DataVersion or a config update a small JSON or properties body; the rest none."""
    invalid = ResponseCode.INVALID_PARAMETER
    bodies: dict[int, BodyLimit] = {RC.REGISTER_BROKER: BodyLimit(REGISTRATION_BODY, invalid),
                                    RC.CONTROLLER_GET_SYNC_STATE_DATA: BodyLimit(BROKER_NAMES_BODY, invalid)}
    for code in (RC.CONTROLLER_ALTER_SYNC_STATE_SET, RC.UPDATE_CONTROLLER_CONFIG, RC.QUERY_DATA_VERSION,
                 RC.UPDATE_NAMESRV_CONFIG):
        bodies[code] = BodyLimit(SMALL_BODY, invalid)
    return server_limits(served, bodies, invalid, ResponseCode.REQUEST_CODE_NOT_SUPPORTED)


def role_change_request(payload: dict[str, Any]) -> RemotingCommand:
    """NOTIFY_BROKER_ROLE_CHANGED (1008, oneway) with what an election committed."""
    header = h.NotifyBrokerRoleChangedRequestHeader(
        master_address=payload.get("masterAddress"), master_epoch=payload.get("masterEpoch"),
        sync_state_set_epoch=payload.get("syncStateSetEpoch"), master_broker_id=payload.get("masterBrokerId"))
    body = bodies.SyncStateSet(_members(payload), int(payload.get("syncStateSetEpoch") or 0))
    return make_request(RC.NOTIFY_BROKER_ROLE_CHANGED, 0, header.to_ext_fields(), body.encode(), oneway=True)


def _identity(replica: dict[str, Any]) -> bodies.ReplicaIdentity:
    return bodies.ReplicaIdentity(replica["brokerName"], replica["brokerId"], replica["brokerAddress"],
                                  replica["alive"])


def _prop(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


__all__ = ["BROKER", "PROTECTED", "ControllerRemoting", "request_limits", "role_change_request"]
