"""HTTP/JSON API of the controller (FastAPI). Thin: validate, call the ControllerManager, wrap."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Query, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse

from services.common.auth import install_token_check, token_ok
from services.common.codes import ResponseCode
from services.common.envelope import install_error_handlers, respond
from services.common.fields import (
    JAVA_LONG_MAX,
)
from services.common.httpserver import new_app
from services.common.metrics import mount_metrics
from services.controller import contract as c
from services.controller.config import config_from_properties
from services.controller.console import install_console
from services.controller.contract import (
    MAX_LIST,
    AlterSyncStateSetRequest,
    ApplyBrokerIdRequest,
    BrokerSetRequest,
    CleanBrokerDataRequest,
    ElectMasterBody,
    HeartbeatRequest,
    RegisterBrokerRequest,
)
from services.controller.controller import ControllerManager
from services.controller.heartbeat import Heartbeat
from services.controller.metrics import controller_registry
from services.controller.state_machine import ControllerResult, ElectMasterRequest


def _answer(result: ControllerResult) -> JSONResponse:
    return respond(result.code, result.remark, result.data)




def _manager(request: Request) -> ControllerManager:
    manager: ControllerManager = request.app.state.manager
    return manager


#: The manager of the app serving the request (create_app puts it in app.state).
Manager = Annotated[ControllerManager, Depends(_manager)]
router = APIRouter(prefix=c.PREFIX)


def create_app(manager: ControllerManager) -> FastAPI:
    app = new_app("mqctl controller", "RocketMQ-style controller API")
    app.state.manager = manager
    install_error_handlers(app)
    install_token_check(app, lambda: manager.config.authToken, c.PROTECTED_PATHS)
    app.include_router(router)
    mount_metrics(app, controller_registry(manager))
    app.add_api_route("/healthz", healthz, methods=["GET"])
    install_console(app, manager)
    return app


@router.get(c.route(c.METADATA))
async def metadata(m: Manager) -> JSONResponse:
    return respond(ResponseCode.SUCCESS, None, m.metadata())


@router.post(c.route(c.GET_NEXT_BROKER_ID))
async def get_next_broker_id(req: BrokerSetRequest, m: Manager) -> JSONResponse:
    return _answer(await m.read(lambda s: s.get_next_broker_id(req.clusterName, req.brokerName)))


@router.post(c.route(c.APPLY_BROKER_ID))
async def apply_broker_id(req: ApplyBrokerIdRequest, m: Manager) -> JSONResponse:
    return _answer(await m.write(req.brokerName, lambda s: s.apply_broker_id(
        req.clusterName, req.brokerName, req.appliedBrokerId, req.registerCheckCode, req.publicKey),
        req.requestId))


@router.post(c.route(c.REGISTER_BROKER))
async def register_broker(req: RegisterBrokerRequest, m: Manager) -> JSONResponse:
    return _answer(await m.register_broker(req.clusterName, req.brokerName, req.brokerId, req.brokerAddress,
                                           req.requestId, req.publicKey))


@router.post(c.route(c.HEARTBEAT))
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


@router.websocket(c.route(c.CHANNEL))
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


@router.post(c.route(c.ALTER_SYNC_STATE_SET))
async def alter_sync_state_set(req: AlterSyncStateSetRequest, m: Manager) -> JSONResponse:
    return _answer(await m.write(req.brokerName, lambda s: s.alter_sync_state_set(
        req.brokerName, req.masterBrokerId, req.masterEpoch, req.newSyncStateSet,
        req.syncStateSetEpoch, m.alive, req.signature), req.requestId))


@router.post(c.route(c.ELECT_MASTER))
async def elect_master(req: ElectMasterBody, m: Manager) -> JSONResponse:
    broker_id = None if req.brokerId < 0 else req.brokerId
    if req.designateElect and broker_id is None:
        return respond(ResponseCode.INVALID_PARAMETER, "designateElect needs a brokerId")
    request = ElectMasterRequest(req.clusterName, req.brokerName, broker_id, req.designateElect)
    return _answer(await m.elect_master(request, req.requestId))


@router.get(c.route(c.REPLICA_INFO))
async def replica_info(brokerName: Annotated[str, Query(min_length=1, max_length=255)], m: Manager) -> JSONResponse:
    return _answer(await m.read(lambda s: s.get_replica_info(brokerName)))


@router.get(c.route(c.BROKER_KEYS))
async def broker_keys(brokerName: Annotated[str, Query(min_length=1, max_length=255)], m: Manager) -> JSONResponse:
    """Public keys the replicas of a group prove their identity with (ha/auth.py); public data."""
    return _answer(await m.read(lambda s: s.broker_keys(brokerName)))


@router.get(c.route(c.SYNC_STATE_DATA))
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


@router.post(c.route(c.CLEAN_BROKER_DATA))
async def clean_broker_data(req: CleanBrokerDataRequest, m: Manager) -> JSONResponse:
    return _answer(await m.write(req.brokerName, lambda s: s.clean_broker_data(
        req.clusterName, req.brokerName, req.brokerControllerIdsToClean, req.isCleanLivingBroker,
        m.alive), req.requestId))


@router.get(c.route(c.EVENTS))
async def events(m: Manager, fromIndex: Annotated[int, Query(ge=0, le=JAVA_LONG_MAX)] = 0,
                 limit: Annotated[int, Query(ge=1, le=10_000)] = 1000) -> JSONResponse:
    def page(s: Any) -> ControllerResult:
        events = s.events_page(fromIndex, limit)
        next_index = events[-1]["index"] + 1 if events else max(fromIndex, s.next_event_index)
        return ControllerResult(data={"events": events, "nextIndex": next_index,
                                      "latestIndex": s.next_event_index - 1})
    return _answer(await m.read(page))


@router.get(c.route(c.CONFIG))
async def get_config(m: Manager) -> JSONResponse:
    return respond(ResponseCode.SUCCESS, None, {"config": m.config.as_properties()})


@router.post(c.route(c.CONFIG))
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
