"""HTTP/JSON API of the broker (FastAPI), same envelope and error style as the controller."""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.responses import JSONResponse

from services.broker import contract
from services.broker.broker import Broker, PutOutcome
from services.broker.commitlog import MessageRecord
from services.broker.remoting_messages import RESERVED_PREFIX
from services.broker.store import MESSAGE_DAMAGED, Message
from services.common.auth import install_token_check
from services.common.codes import ResponseCode
from services.common.envelope import install_error_handlers, respond
from services.common.fields import JAVA_INT_MAX, JAVA_LONG_MAX
from services.common.httpserver import new_app
from services.common.metrics import mount_metrics

#: Envelope code for each put status (RocketMQ's response codes).
PUT_CODES = {
    "PUT_OK": ResponseCode.SUCCESS,
    "FLUSH_DISK_TIMEOUT": ResponseCode.FLUSH_DISK_TIMEOUT,
    "FLUSH_SLAVE_TIMEOUT": ResponseCode.FLUSH_SLAVE_TIMEOUT,
    "SERVICE_NOT_AVAILABLE": ResponseCode.SERVICE_NOT_AVAILABLE,
    "MESSAGE_ILLEGAL": ResponseCode.MESSAGE_ILLEGAL,
    "IN_SYNC_REPLICAS_NOT_ENOUGH": ResponseCode.SYSTEM_ERROR,
}


def to_message(req: contract.SendMessageRequest) -> Message:
    """The message a send request asks to store (ValueError for a body that is not valid base64)."""
    if req.bodyBase64 is not None:
        try:
            raw = base64.b64decode(req.bodyBase64, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("bodyBase64 is not valid base64") from None
    else:
        raw = (req.body or "").encode("utf-8")
    return Message(req.topic, raw, req.keys, req.tags, req.queueId, dict(req.properties))


def _result_json(outcome: PutOutcome, index: int) -> dict[str, Any]:
    r = outcome.results[index] if index < len(outcome.results) else None
    return {"status": outcome.status, "msgId": r.msg_id if r else None, "queueId": r.queue_id if r else None,
            "queueOffset": r.queue_offset if r else None, "commitLogOffset": r.commit_log_offset if r else None}


def _answer(outcome: PutOutcome, data: dict[str, Any]) -> JSONResponse:
    if outcome.master_address is not None or outcome.status == "SERVICE_NOT_AVAILABLE":
        data["masterAddress"] = outcome.master_address
    return respond(PUT_CODES[outcome.status], outcome.remark, data, status=200)


def record_json(rec: MessageRecord, store_host: str) -> dict[str, Any]:
    from services.broker.store import message_id
    try:
        body: str | None = rec.body.decode("utf-8")
        body_b64 = None
    except UnicodeDecodeError:
        body, body_b64 = None, base64.b64encode(rec.body).decode("ascii")
    props = {k: v for k, v in rec.properties.items()
             if k not in ("KEYS", "TAGS") and not k.startswith(RESERVED_PREFIX)}
    return {"msgId": message_id(store_host, rec.physical_offset), "topic": rec.topic, "queueId": rec.queue_id,
            "queueOffset": rec.queue_offset, "commitLogOffset": rec.physical_offset, "body": body,
            "bodyBase64": body_b64, "keys": rec.keys, "tags": rec.tags, "properties": props,
            "storeTimestamp": rec.store_timestamp, "storeSize": rec.size}


def _broker(request: Request) -> Broker:
    broker: Broker = request.app.state.broker
    return broker


#: The broker of the app serving the request (create_app puts it in app.state).
BrokerDep = Annotated[Broker, Depends(_broker)]
router = APIRouter(prefix=contract.PREFIX)


def create_app(broker: Broker) -> FastAPI:
    app = new_app("mqctl broker", "RocketMQ-style broker API (controller mode)")
    app.state.broker = broker
    install_error_handlers(app)
    install_token_check(app, lambda: broker.config.authToken, contract.PROTECTED_PATHS)
    app.include_router(router)
    mount_metrics(app, broker.metrics.registry)
    app.add_api_route(contract.HEALTHZ, healthz, methods=["GET"])
    return app


@router.post(contract.route(contract.SEND_MESSAGE))
async def send_message(req: contract.SendMessageRequest, b: BrokerDep) -> JSONResponse:
    try:
        msg = to_message(req)
    except ValueError as exc:
        return respond(ResponseCode.INVALID_PARAMETER, str(exc))
    outcome = await b.put([msg])
    return _answer(outcome, _result_json(outcome, 0))


@router.post(contract.route(contract.SEND_MESSAGES))
async def send_messages(req: contract.SendMessagesRequest, b: BrokerDep) -> JSONResponse:
    try:
        msgs = [to_message(m) for m in req.messages]
    except ValueError as exc:
        return respond(ResponseCode.INVALID_PARAMETER, str(exc))
    outcome = await b.put(msgs)
    results = [_result_json(outcome, i) for i in range(len(msgs))] if outcome.results else []
    return _answer(outcome, {"status": outcome.status, "results": results})


@router.get(contract.route(contract.PULL_MESSAGE))
async def pull_message(b: BrokerDep, topic: Annotated[str, Query(min_length=1, max_length=255)],
                       queueId: Annotated[int, Query(ge=0, le=JAVA_INT_MAX)] = 0,
                       queueOffset: Annotated[int, Query(ge=0, le=JAVA_LONG_MAX)] = 0,
                       maxNums: Annotated[int, Query(ge=1, le=1024)] = 32) -> JSONResponse:
    result = b.store.get_messages(topic, queueId, queueOffset, maxNums)
    code = ResponseCode.SYSTEM_ERROR if result.status == MESSAGE_DAMAGED else ResponseCode.SUCCESS
    return respond(code, result.remark or None, {
        "status": result.status, "nextBeginOffset": result.next_begin_offset,
        "minOffset": result.min_offset, "maxOffset": result.max_offset,
        "messages": [record_json(r, b.config.address) for r in result.records]})


# The status views are held to the contract as they are served (a drift is a server error, not a client's
# KeyError); the send and pull answers, on the hot path, are held to it by tests/unit/broker/test_contract.py.
@router.get(contract.route(contract.TOPICS))
async def topics(b: BrokerDep) -> JSONResponse:
    return respond(ResponseCode.SUCCESS, None, contract.Topics.model_validate({"topics": b.store.topics()}).model_dump())


@router.get(contract.route(contract.EPOCH_CACHE))
async def epoch_cache(b: BrokerDep) -> JSONResponse:
    return respond(ResponseCode.SUCCESS, None, contract.EpochCache.model_validate(b.epoch_cache()).model_dump())


@router.get(contract.route(contract.RUNTIME_INFO))
async def runtime_info(b: BrokerDep) -> JSONResponse:
    return respond(ResponseCode.SUCCESS, None, contract.RuntimeInfo.model_validate(b.runtime_info()).shown())


@router.get(contract.route(contract.HA_STATUS))
async def ha_status(b: BrokerDep) -> JSONResponse:
    return respond(ResponseCode.SUCCESS, None, contract.HaStatus.model_validate(b.ha_status()).shown())


@router.post(contract.route(contract.NOTIFY_ROLE_CHANGED))
async def notify_role_changed(req: contract.RoleChangedRequest, b: BrokerDep) -> JSONResponse:
    """A hint only: the broker applies what the controller leader says, never this body."""
    await b.replicas.on_role_change_notified()
    return respond(ResponseCode.SUCCESS, None, {"role": b.role.value})


async def healthz(b: BrokerDep) -> JSONResponse:
    return respond(ResponseCode.SUCCESS, None, {"role": b.role.value})
