"""The broker's HTTP contract (services/broker/contract.py) against what the broker really serves: the app of a
broker built over a real store (not started: no sockets but the in-process test client) answers every route a
client reads with ``data`` that validates against the model the clients check it with; every contract path is
a route of the app and every route is in the contract; the request models refuse what the server refuses."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import ValidationError

from services.broker import contract as bc
from services.broker.api import create_app
from services.broker.broker import Broker
from services.broker.config import BrokerConfig
from services.broker.store import Message
from services.common.answers import checked
from services.common.errors import RemoteError


class Client:
    """Requests to the app in process (httpx over ASGI), one event loop each."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        async def send() -> httpx.Response:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app), base_url="http://broker") as c:
                return await c.request(method, path, **kwargs)
        return asyncio.run(send())

    def post(self, path: str, json: Any) -> httpx.Response:
        return self.request("POST", path, json=json)


@pytest.fixture
def app(tmp_path: Path) -> Iterator[Client]:
    broker = Broker(BrokerConfig(storePathRootDir=str(tmp_path / "store")))
    broker.open_store()
    for i in range(5):
        broker.store.append(Message("TopicTest", f"m{i}".encode(), keys=f"k{i}", tags="t", queue_id=i % 2), 1_700_000)
    broker.store.append(Message("TopicTest", b"\xff\xfe", queue_id=0), 1_700_001)  # not UTF-8: bodyBase64
    broker.store.set_confirm_offset(broker.store.max_offset)
    broker.store.epochs.append(1, 0)
    yield Client(create_app(broker))
    broker.store.close()


def data(client: Client, method: str, path: str, **kwargs: Any) -> Any:
    return client.request(method, path, **kwargs).json()["data"]


def test_every_answer_a_client_reads_fits_its_model(app: Client) -> None:
    info = checked(bc.RuntimeInfo, data(app, "GET", bc.RUNTIME_INFO), "broker")
    assert (info.role, info.maxOffset, info.minOffset) == ("FENCED", info.confirmOffset, 0)
    assert list(info.shown())[:6] == ["clusterName", "brokerName", "brokerId", "brokerAddress", "haAddress", "role"]
    cache = checked(bc.EpochCache, data(app, "GET", bc.EPOCH_CACHE), "broker")
    assert [(e.epoch, e.startOffset, e.endOffset) for e in cache.epochEntries] == [(1, 0, cache.maxOffset)]
    assert checked(bc.HaStatus, data(app, "GET", bc.HA_STATUS), "broker").role == "FENCED"
    topics = checked(bc.Topics, data(app, "GET", bc.TOPICS), "broker")
    assert topics.queue_ids("TopicTest") == [0, 1, 2, 3] and topics.queue_ids("Nope") is None
    pulled = checked(bc.PullResult, data(app, "GET", bc.PULL_MESSAGE, params={
        "topic": "TopicTest", "queueId": 0, "queueOffset": 0, "maxNums": 10}), "broker")
    assert [m.body for m in pulled.messages] == ["m0", "m2", "m4", None]
    assert pulled.messages[-1].bodyBase64 == "//4=" and pulled.status == "FOUND"
    # A send to a broker that does not know its role yet is refused, in the contract's shape too.
    sent = checked(bc.SendResult, data(app, "POST", bc.SEND_MESSAGE, json={"topic": "T", "body": "x"}), "broker")
    assert sent.status == "SERVICE_NOT_AVAILABLE"
    batch = checked(bc.SendBatchResult, data(app, "POST", bc.SEND_MESSAGES, json={
        "messages": [{"topic": "T", "body": "x"}]}), "broker")
    assert batch.status == "SERVICE_NOT_AVAILABLE" and batch.results == []
    assert checked(bc.RoleAnswer, data(app, "GET", bc.HEALTHZ), "broker").role == "FENCED"
    metrics = app.request("GET", "/metrics").text  # retention's state too
    for line in ("mqctl_broker_min_offset 0.0", "mqctl_broker_disk_full 0.0", "mqctl_broker_segments_deleted 0.0"):
        assert line in metrics


def test_the_contract_names_every_route_and_only_those(app: Client) -> None:
    served = set(app.app.openapi()["paths"])
    declared = {getattr(bc, name) for name in dir(bc) if name.isupper() and isinstance(getattr(bc, name), str)
                and getattr(bc, name).startswith("/") and getattr(bc, name) != bc.PREFIX}
    assert served == declared


def test_an_answer_that_breaks_the_contract_names_the_field() -> None:
    with pytest.raises(RemoteError, match=r"broker 10\.0\.0\.1:10911's answer is malformed \(EpochCache: "
                                          r"epochEntries\.0\.epoch"):
        checked(bc.EpochCache, {"role": "MASTER", "maxOffset": 1, "epochEntries": [{"epoch": "one"}]},
                "broker 10.0.0.1:10911")


@pytest.mark.parametrize("body,problem", [
    ({"topic": "T"}, "exactly one of body"),
    ({"topic": "T", "body": "x", "bodyBase64": "eA=="}, "exactly one of body"),
    ({"topic": "", "body": "x"}, "at least 1 character"),
    ({"topic": "T", "body": "x", "queueId": -1}, "greater than or equal to 0"),
])
def test_send_requests_the_server_refuses_the_model_refuses(app: Client, body: dict[str, object],
                                                            problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        bc.SendMessageRequest.model_validate(body)
    answer = app.post(bc.SEND_MESSAGE, json=body)
    assert answer.status_code == 400 and answer.json()["codeName"] == "INVALID_PARAMETER"


def test_request_models_round_trip_through_json() -> None:
    request = bc.SendMessagesRequest(messages=[bc.SendMessageRequest(topic="T", body="x", keys="k", queueId=1)])
    assert bc.SendMessagesRequest.model_validate_json(request.model_dump_json()) == request
    role = bc.RoleChangedRequest(masterBrokerId=1, masterAddress="a:1", masterEpoch=2, syncStateSet=[1, 2])
    assert bc.RoleChangedRequest.model_validate_json(role.model_dump_json()) == role
