"""HTTP/JSON API of the controller (FastAPI). Thin: validate, call the ControllerManager, wrap."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Query, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from services.common.auth import install_token_check, token_ok
from services.common.codes import ResponseCode
from services.common.envelope import install_error_handlers, respond
from services.common.fields import (
    JAVA_LONG_MAX,
    BrokerId,
    BrokerIdOrNone,
    Epoch,
    EpochOrNone,
    Flag,
    JavaInt,
    Name,
    Offset,
    OptionalName,
    RequestId,
)
from services.common.httpserver import new_app
from services.common.metrics import mount_metrics
from services.controller.config import config_from_properties
from services.controller.controller import ControllerManager
from services.controller.heartbeat import DEFAULT_BROKER_CHANNEL_EXPIRED_TIME, MAX_PRIORITY, Heartbeat
from services.controller.metrics import controller_registry
from services.controller.state_machine import ControllerResult, ElectMasterRequest

#: A broker's Ed25519 public key as 64 lower-case hex characters ("" or absent: the broker brings none).
PublicKey = Annotated[str, Field(pattern=r"^([0-9a-f]{64})?$")]
#: SyncStateSets and name lists: far more members than any broker group has, far fewer than a body could hold.
MAX_LIST = 1000


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=False)


class BrokerSetRequest(_Model):
    clusterName: Name
    brokerName: Name


class ApplyBrokerIdRequest(BrokerSetRequest):
    appliedBrokerId: BrokerId
    registerCheckCode: Name
    publicKey: PublicKey = ""
    requestId: RequestId | None = None


class RegisterBrokerRequest(BrokerSetRequest):
    brokerId: BrokerId
    brokerAddress: Name
    publicKey: PublicKey = ""
    requestId: RequestId | None = None


class HeartbeatRequest(_Model):
    clusterName: Name
    brokerName: Name
    brokerAddr: Name
    brokerId: BrokerId | None = None
    epoch: EpochOrNone = -1
    maxOffset: Offset = -1
    confirmOffset: Offset = -1
    # At most the controller's maxHeartbeatTimeoutMillis, checked by the route (it is configuration).
    heartbeatTimeoutMills: Annotated[StrictInt, Field(ge=1)] = DEFAULT_BROKER_CHANNEL_EXPIRED_TIME
    electionPriority: JavaInt = MAX_PRIORITY
    asyncLearner: Flag = False
    incarnation: Annotated[StrictInt, Field(ge=0, le=2**63 - 1)] = 0


class AlterSyncStateSetRequest(_Model):
    brokerName: Name
    masterBrokerId: BrokerId
    masterEpoch: Epoch
    newSyncStateSet: list[BrokerId] = Field(min_length=1, max_length=MAX_LIST)
    syncStateSetEpoch: Epoch
    #: The master's signature over the change (hex), required when the master registered a key.
    signature: Annotated[str, Field(pattern=r"^([0-9a-f]{128})?$")] = ""
    requestId: RequestId | None = None


class ElectMasterBody(_Model):
    clusterName: OptionalName = ""
    brokerName: Name
    brokerId: BrokerIdOrNone = -1
    designateElect: Flag = False
    requestId: RequestId | None = None


class CleanBrokerDataRequest(_Model):
    clusterName: OptionalName | None = None
    brokerName: Name
    brokerControllerIdsToClean: Annotated[str, Field(max_length=4096)] | None = None
    isCleanLivingBroker: Flag = False
    requestId: RequestId | None = None


def _answer(result: ControllerResult) -> JSONResponse:
    return respond(result.code, result.remark, result.data)


P = "/v1/controller"
#: Writes, and what brokers send (their calls and liveness), need the token when one is configured.
PROTECTED_PATHS = frozenset(f"{P}/{name}" for name in ("applyBrokerId", "registerBroker", "heartbeat",
                                                        "alterSyncStateSet", "electMaster", "cleanBrokerData",
                                                        "config"))


def _manager(request: Request) -> ControllerManager:
    manager: ControllerManager = request.app.state.manager
    return manager


#: The manager of the app serving the request (create_app puts it in app.state).
Manager = Annotated[ControllerManager, Depends(_manager)]
router = APIRouter(prefix=P)


def create_app(manager: ControllerManager) -> FastAPI:
    app = new_app("mqctl controller", "RocketMQ-style controller API")
    app.state.manager = manager
    install_error_handlers(app)
    install_token_check(app, lambda: manager.config.authToken, PROTECTED_PATHS)
    app.include_router(router)
    mount_metrics(app, controller_registry(manager))
    app.add_api_route("/healthz", healthz, methods=["GET"])
    return app


@router.get("/metadata")
async def metadata(m: Manager) -> JSONResponse:
    return respond(ResponseCode.SUCCESS, None, m.metadata())


@router.post("/getNextBrokerId")
async def get_next_broker_id(req: BrokerSetRequest, m: Manager) -> JSONResponse:
    return _answer(await m.read(lambda s: s.get_next_broker_id(req.clusterName, req.brokerName)))


@router.post("/applyBrokerId")
async def apply_broker_id(req: ApplyBrokerIdRequest, m: Manager) -> JSONResponse:
    return _answer(await m.write(req.brokerName, lambda s: s.apply_broker_id(
        req.clusterName, req.brokerName, req.appliedBrokerId, req.registerCheckCode, req.publicKey),
        req.requestId))


@router.post("/registerBroker")
async def register_broker(req: RegisterBrokerRequest, m: Manager) -> JSONResponse:
    return _answer(await m.register_broker(req.clusterName, req.brokerName, req.brokerId, req.brokerAddress,
                                           req.requestId, req.publicKey))


@router.post("/heartbeat")
async def heartbeat(req: HeartbeatRequest, m: Manager) -> JSONResponse:
    if req.brokerId is None:
        return respond(ResponseCode.CONTROLLER_INVALID_REQUEST, "Heart beat with empty brokerId")
    if req.heartbeatTimeoutMills > m.config.maxHeartbeatTimeoutMillis:
        return respond(ResponseCode.INVALID_PARAMETER,
                       f"invalid request: heartbeatTimeoutMills: {req.heartbeatTimeoutMills} is over this "
                       f"controller's maxHeartbeatTimeoutMillis ({m.config.maxHeartbeatTimeoutMillis})")
    m.on_heartbeat(Heartbeat(**req.model_dump()))
    leader = m.leader_peer()
    return respond(ResponseCode.SUCCESS, "Heart beat success",
                   {"controllerLeaderAddress": leader.address if leader else None, "isLeader": m.serving})


@router.websocket("/channel")
async def channel(websocket: WebSocket, clusterName: Annotated[str, Query(min_length=1, max_length=255)],
                  brokerName: Annotated[str, Query(min_length=1, max_length=255)],
                  brokerId: Annotated[int, Query(ge=1, le=JAVA_LONG_MAX)]) -> None:
    """A broker's liveness channel: while it is open the broker's process is up; when the process
    dies its socket closes and the broker is treated as inactive at once (RocketMQ's channel close),
    instead of after the heartbeat timeout."""
    m: ControllerManager = websocket.app.state.manager
    if not token_ok(m.config.authToken, websocket.headers.get("authorization")):
        await websocket.close(code=1008)
        return
    await websocket.accept()
    try:
        while True:
            await websocket.receive_text()
    except WebSocketDisconnect:
        pass
    finally:
        await m.on_channel_closed(clusterName, brokerName, brokerId)


@router.post("/alterSyncStateSet")
async def alter_sync_state_set(req: AlterSyncStateSetRequest, m: Manager) -> JSONResponse:
    return _answer(await m.write(req.brokerName, lambda s: s.alter_sync_state_set(
        req.brokerName, req.masterBrokerId, req.masterEpoch, req.newSyncStateSet,
        req.syncStateSetEpoch, m.alive, req.signature), req.requestId))


@router.post("/electMaster")
async def elect_master(req: ElectMasterBody, m: Manager) -> JSONResponse:
    broker_id = None if req.brokerId < 0 else req.brokerId
    if req.designateElect and broker_id is None:
        return respond(ResponseCode.INVALID_PARAMETER, "designateElect needs a brokerId")
    request = ElectMasterRequest(req.clusterName, req.brokerName, broker_id, req.designateElect)
    return _answer(await m.elect_master(request, req.requestId))


@router.get("/replicaInfo")
async def replica_info(brokerName: Annotated[str, Query(min_length=1, max_length=255)], m: Manager) -> JSONResponse:
    return _answer(await m.read(lambda s: s.get_replica_info(brokerName)))


@router.get("/brokerKeys")
async def broker_keys(brokerName: Annotated[str, Query(min_length=1, max_length=255)], m: Manager) -> JSONResponse:
    """Public keys the replicas of a group prove their identity with (ha/auth.py); public data."""
    return _answer(await m.read(lambda s: s.broker_keys(brokerName)))


@router.get("/syncStateData")
async def sync_state_data(m: Manager, brokerName: Annotated[list[str] | None, Query()] = None,
                          clusterName: Annotated[str | None, Query(max_length=255)] = None) -> JSONResponse:
    if not brokerName and not clusterName:
        return respond(ResponseCode.INVALID_PARAMETER, "give brokerName (repeatable) or clusterName")
    if brokerName and (len(brokerName) > MAX_LIST or any(len(n) > 255 for n in brokerName)):
        return respond(ResponseCode.INVALID_PARAMETER,
                       f"invalid request: brokerName: at most {MAX_LIST} names of at most 255 characters")

    def command(s: Any) -> ControllerResult:
        names = list(brokerName or []) or s.broker_names_of_cluster(clusterName)
        return s.get_sync_state_data(names, m.alive)  # type: ignore[no-any-return]
    return _answer(await m.read(command))


@router.post("/cleanBrokerData")
async def clean_broker_data(req: CleanBrokerDataRequest, m: Manager) -> JSONResponse:
    return _answer(await m.write(req.brokerName, lambda s: s.clean_broker_data(
        req.clusterName, req.brokerName, req.brokerControllerIdsToClean, req.isCleanLivingBroker,
        m.alive), req.requestId))


@router.get("/events")
async def events(m: Manager, fromIndex: Annotated[int, Query(ge=0, le=JAVA_LONG_MAX)] = 0,
                 limit: Annotated[int, Query(ge=1, le=10_000)] = 1000) -> JSONResponse:
    def page(s: Any) -> ControllerResult:
        events = s.events_page(fromIndex, limit)
        next_index = events[-1]["index"] + 1 if events else max(fromIndex, s.next_event_index)
        return ControllerResult(data={"events": events, "nextIndex": next_index,
                                      "latestIndex": s.next_event_index - 1})
    return _answer(await m.read(page))


@router.get("/config")
async def get_config(m: Manager) -> JSONResponse:
    return respond(ResponseCode.SUCCESS, None, {"config": m.config.as_properties()})


@router.post("/config")
async def update_config(body: dict[str, Any], m: Manager) -> JSONResponse:
    return _answer(m.apply_config_update({str(k): _prop_text(v) for k, v in body.items()}))


async def healthz(m: Manager) -> JSONResponse:
    alive = m.raft.tick_thread_alive() if m.raft is not None else False
    return respond(ResponseCode.SUCCESS if alive else ResponseCode.SYSTEM_ERROR,
                   None if alive else "raft tick thread is not running", {"raftAlive": alive})


def _prop_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


__all__ = ["config_from_properties", "create_app"]
