"""The controller API's field validation (issue 19, items 9 and 12): every number from the network is a
strict integer inside its RocketMQ type's range, the heartbeat timeout is capped by the controller's
configuration (so the start-up grace period is too), and request ids are short and plain. Each refusal is
INVALID_PARAMETER naming the field, and changes nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from services.common.clock import FakeClock
from services.common.codes import ResponseCode as RC
from services.controller import api as controller_api
from services.controller.config import ControllerConfig
from services.controller.controller import ControllerManager
from services.controller.heartbeat import Heartbeat

P = "/v1/controller"
LONG_MAX = 2**63 - 1


class Client:
    """Requests to an ASGI app in this process, one event loop per request (the routes under test keep no
    state between requests in the loop)."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        async def send() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://controller") as client:
                return await client.request(method, path, **kwargs)
        return asyncio.run(send())

    def post(self, path: str, json: Any) -> httpx.Response:
        return self.request("POST", path, json=json)

    def get(self, path: str, params: Any = None) -> httpx.Response:
        return self.request("GET", path, params=params)


class StubRaft:
    """The little of RaftNode the validated routes reach: none of these requests may get to it."""

    def is_leader(self) -> bool:
        return False

    def journal_fault(self) -> str | None:
        return None

    def leader_address(self) -> str | None:
        return None

    def read(self, fn: Any) -> Any:
        raise AssertionError("a refused request reached the state machine")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def manager(clock: FakeClock) -> ControllerManager:
    config = ControllerConfig(maxHeartbeatTimeoutMillis=60_000)
    m = ControllerManager(config, clock=clock)
    m.attach_raft(StubRaft())  # type: ignore[arg-type]
    return m


@pytest.fixture
def client(manager: ControllerManager) -> Client:
    return Client(controller_api.create_app(manager))


def heartbeat(**fields: Any) -> dict[str, Any]:
    return {"clusterName": "c", "brokerName": "b", "brokerAddr": "127.0.0.1:10911", "brokerId": 1, **fields}


def refused(client: Client, path: str, body: dict[str, Any], field: str) -> None:
    response = client.post(f"{P}/{path}", json=body)
    answer = response.json()
    assert response.status_code == 400 and answer["code"] == RC.INVALID_PARAMETER, answer
    assert field in answer["remark"], answer


# ---------------------------------------------------------------------------------- heartbeat timeout
def test_a_heartbeat_timeout_of_ten_to_the_18_is_refused(client: Client, manager: ControllerManager) -> None:
    refused(client, "heartbeat", heartbeat(heartbeatTimeoutMills=10**18), "heartbeatTimeoutMills")
    assert manager.heartbeats.snapshot() == []


def test_the_timeout_cap_is_the_controllers_configuration(client: Client, manager: ControllerManager) -> None:
    refused(client, "heartbeat", heartbeat(heartbeatTimeoutMills=60_001), "maxHeartbeatTimeoutMillis")
    ok = client.post(f"{P}/heartbeat", json=heartbeat(heartbeatTimeoutMills=60_000)).json()
    assert ok["code"] == RC.SUCCESS, ok
    assert [i.heartbeatTimeoutMs for i in manager.heartbeats.snapshot()] == [60_000]


def test_no_heartbeat_extends_the_start_up_grace_beyond_the_cap(manager: ControllerManager,
                                                                 clock: FakeClock) -> None:
    """Whatever path a heartbeat comes by (the remoting protocol clamps, the live table clamps again),
    the grace ends at maxHeartbeatTimeoutMillis after start-up: a dead master is then replaced."""
    manager.on_heartbeat(Heartbeat("c", "any-name", "127.0.0.1:1", 7, heartbeatTimeoutMills=10**18))
    assert manager.in_heartbeat_grace()
    clock.advance(60_000)
    assert not manager.in_heartbeat_grace()
    assert manager.heartbeat_grace_ms() == 60_000


# ---------------------------------------------------------------------------------- numbers
BAD_IDS = [2**63, True, False, "1", 1.0, 0, -1, None]


@pytest.mark.parametrize("value", BAD_IDS, ids=repr)
@pytest.mark.parametrize("path, field, body", [
    ("applyBrokerId", "appliedBrokerId",
     {"clusterName": "c", "brokerName": "b", "registerCheckCode": "127.0.0.1:1;1"}),
    ("registerBroker", "brokerId", {"clusterName": "c", "brokerName": "b", "brokerAddress": "127.0.0.1:1"}),
    ("alterSyncStateSet", "masterBrokerId",
     {"brokerName": "b", "masterEpoch": 1, "newSyncStateSet": [1], "syncStateSetEpoch": 1}),
])
def test_broker_ids_are_java_longs_of_at_least_1(client: Client, path: str, field: str, body: dict[str, Any],
                                                 value: Any) -> None:
    refused(client, path, {**body, field: value}, field)


@pytest.mark.parametrize("value", [2**63, True, "2", 2.0, 0, -1], ids=repr)
def test_heartbeat_broker_ids_too(client: Client, manager: ControllerManager, value: Any) -> None:
    refused(client, "heartbeat", heartbeat(brokerId=value), "brokerId")
    assert manager.heartbeats.snapshot() == []


def test_the_largest_java_long_is_a_broker_id(client: Client, manager: ControllerManager) -> None:
    assert client.post(f"{P}/heartbeat", json=heartbeat(brokerId=LONG_MAX)).json()["code"] == RC.SUCCESS
    assert [i.brokerId for i in manager.heartbeats.snapshot()] == [LONG_MAX]


@pytest.mark.parametrize("field, value", [
    ("epoch", 2**31), ("epoch", -2), ("epoch", True), ("epoch", "1"),
    ("maxOffset", 2**63), ("maxOffset", -2), ("maxOffset", 1.5),
    ("confirmOffset", 2**63), ("confirmOffset", -2),
    ("heartbeatTimeoutMills", 0), ("heartbeatTimeoutMills", True), ("heartbeatTimeoutMills", "3000"),
    ("electionPriority", 2**31), ("electionPriority", -(2**31) - 1), ("electionPriority", False),
    ("asyncLearner", "true"), ("asyncLearner", 1),
], ids=repr)
def test_heartbeat_numbers_are_strict_and_in_range(client: Client, manager: ControllerManager, field: str,
                                                   value: Any) -> None:
    refused(client, "heartbeat", heartbeat(**{field: value}), field)
    assert manager.heartbeats.snapshot() == []


@pytest.mark.parametrize("field, value", [
    ("masterEpoch", 2**31), ("masterEpoch", -1), ("masterEpoch", True),
    ("syncStateSetEpoch", 2**31), ("syncStateSetEpoch", -1), ("syncStateSetEpoch", "1"),
    ("newSyncStateSet", [1, 2**63]), ("newSyncStateSet", [True]), ("newSyncStateSet", list(range(1, 1002))),
], ids=lambda v: repr(v)[:40])
def test_alter_sync_state_set_epochs_and_members(client: Client, field: str, value: Any) -> None:
    body = {"brokerName": "b", "masterBrokerId": 1, "masterEpoch": 1, "newSyncStateSet": [1],
            "syncStateSetEpoch": 1, field: value}
    refused(client, "alterSyncStateSet", body, field)


@pytest.mark.parametrize("value", [0, -2, 2**63, True, "1"], ids=repr)
def test_elect_master_broker_id_is_none_or_an_id(client: Client, value: Any) -> None:
    refused(client, "electMaster", {"clusterName": "c", "brokerName": "b", "brokerId": value}, "brokerId")


def test_flags_are_booleans(client: Client) -> None:
    refused(client, "electMaster", {"brokerName": "b", "brokerId": 1, "designateElect": "yes"}, "designateElect")
    refused(client, "cleanBrokerData", {"brokerName": "b", "isCleanLivingBroker": 1}, "isCleanLivingBroker")


def test_query_numbers_are_bounded(client: Client) -> None:
    answer = client.get(f"{P}/events", params={"fromIndex": str(2**63)}).json()
    assert answer["code"] == RC.INVALID_PARAMETER and "fromIndex" in answer["remark"], answer
    names = client.get(f"{P}/syncStateData", params={"brokerName": ["x" * 256]}).json()
    assert names["code"] == RC.INVALID_PARAMETER and "brokerName" in names["remark"], names


# ---------------------------------------------------------------------------------- request ids
@pytest.mark.parametrize("request_id", ["x" * 129, "x" * 2**20, "a b", "é", "id\n2", "", 12], ids=lambda v: repr(v)[:20])
def test_request_ids_are_short_and_plain(client: Client, request_id: Any) -> None:
    body = {"clusterName": "c", "brokerName": "b", "appliedBrokerId": 1, "registerCheckCode": "127.0.0.1:1;1",
            "requestId": request_id}
    refused(client, "applyBrokerId", body, "requestId")


def test_a_128_character_uuid_like_id_passes_validation(client: Client) -> None:
    body = {"clusterName": "c", "brokerName": "b", "appliedBrokerId": 1, "registerCheckCode": "127.0.0.1:1;1",
            "requestId": "0123-abcd_EF.9:" + "z" * 113}
    answer = client.post(f"{P}/applyBrokerId", json=body).json()
    assert answer["code"] == RC.CONTROLLER_NOT_LEADER, answer  # validated, then refused by the stub's leadership
