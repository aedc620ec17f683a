"""The broker's one way to the controllers (services/broker/controller_api.py), tested without processes:
the HTTP implementation over an injected ``httpx.MockTransport``, the remoting one over an injected client,
and the broker's registration and first election (ReplicasManager) against an in-memory controller."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.broker.config import BrokerConfig, config_from_properties
from services.broker.controller_api import BrokerControllerApi
from services.broker.controller_remoting import RemotingControllerApi
from services.broker.replicas_manager import ReplicasManager, Role
from services.broker.store import MessageStore
from services.common.clock import FakeClock
from services.common.codes import ResponseCode
from services.common.errors import ConfigError, RemoteError, UnreachableError
from services.controller import contract
from services.remoting import bodies
from services.remoting import headers as h
from services.remoting.command import RemotingCommand, RequestCode, make_response

A, B, C = "10.0.0.1:9878", "10.0.0.2:9878", "10.0.0.3:9878"


def envelope(code: int, data: Any = None, remark: str = "") -> httpx.Response:
    return httpx.Response(200, json={"code": code, "codeName": "", "remark": remark, "data": data})


class Controllers:
    """Three controllers over HTTP: B leads, A follows (and names B), C is down."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str | None]] = []  # (host, path, Authorization)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        host = f"{request.url.host}:{request.url.port}"
        self.seen.append((host, request.url.path, request.headers.get("authorization")))
        if host == C:
            raise httpx.ConnectError("connection refused", request=request)
        if request.url.path.endswith("/heartbeat"):
            return envelope(ResponseCode.SUCCESS, {"isLeader": host == B})
        if request.url.path.endswith("/metadata"):
            return envelope(ResponseCode.SUCCESS, {"peers": [f"n0:{A}", f"n1:{B}", f"n2:{C}"]})
        if host == A:
            return envelope(ResponseCode.CONTROLLER_NOT_LEADER, {"controllerLeaderAddress": B})
        if request.url.path.endswith("/replicaInfo"):
            return envelope(ResponseCode.SUCCESS, {"masterBrokerId": 1, "masterAddress": "10.0.0.9:10911",
                                                   "masterEpoch": 3, "syncStateSet": [1], "syncStateSetEpoch": 4})
        if request.url.path.endswith("/electMaster"):
            body = json.loads(request.content)
            return envelope(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED, None, f"no candidate for {body['brokerName']}")
        return envelope(ResponseCode.CONTROLLER_INVALID_REQUEST, None, "unexpected")


def http_api(controllers: Controllers, token: str | None = "s3cret") -> BrokerControllerApi:
    return BrokerControllerApi(f"{A};{B};{C}", timeout=1.0, token=token,
                               transport=httpx.MockTransport(controllers))


def test_http_follows_the_leader_and_sends_the_token_only_where_it_may() -> None:
    controllers = Controllers()

    async def run() -> None:
        api = http_api(controllers)
        try:
            info = await api.get_replica_info("broker-a")
            assert (info.masterBrokerId, info.masterEpoch, api.leader) == (1, 3, B)
            assert await api.elect_self("c", "broker-a", 2) is None  # ELECT_MASTER_FAILED is an answer
            beat = contract.HeartbeatRequest(clusterName="c", brokerName="broker-a", brokerAddr="x:1")
            assert await api.heartbeat_all(beat) == 2  # C is down
        finally:
            await api.aclose()
    asyncio.run(run())
    assert all(auth == "Bearer s3cret" for host, _, auth in controllers.seen if host in (A, B, C))
    leader_calls = [path for host, path, _ in controllers.seen if host == B and "heartbeat" not in path]
    assert leader_calls == [contract.REPLICA_INFO, contract.ELECT_MASTER]  # the leader is kept


def test_http_without_a_leader_is_an_error_naming_the_reason() -> None:
    def no_leader(request: httpx.Request) -> httpx.Response:
        return envelope(ResponseCode.CONTROLLER_NOT_LEADER, {"controllerLeaderAddress": None})

    async def run() -> None:
        api = BrokerControllerApi(A, timeout=0.5, transport=httpx.MockTransport(no_leader))
        try:
            with pytest.raises(RemoteError, match="lost its majority") as info:
                await api.get_replica_info("broker-a")
            assert info.value.code == ResponseCode.CONTROLLER_NOT_LEADER
        finally:
            await api.aclose()
    asyncio.run(run())


class RemotingControllers:
    """The client a RemotingControllerApi is given: A is not the leader, B is; C's answers are malformed."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.oneways: list[tuple[str, int]] = []

    async def call(self, address: str, request: RemotingCommand, timeout_s: float | None = None) -> RemotingCommand:
        self.calls.append((address, request.code))
        if address == A:
            return make_response(request, ResponseCode.CONTROLLER_NOT_LEADER, "not leader")
        if address == C:
            return make_response(request, ResponseCode.SUCCESS, None, {"masterEpoch": "not a number"})
        if request.code == RequestCode.CONTROLLER_GET_REPLICA_INFO:
            header = h.GetReplicaInfoResponseHeader(master_broker_id=2, master_address="10.0.0.9:10921",
                                                    master_epoch=5)
            return make_response(request, ResponseCode.SUCCESS, None, header.to_ext_fields(),
                                 bodies.SyncStateSet(frozenset({2, 3}), 7).encode())
        return make_response(request, ResponseCode.SUCCESS)

    async def oneway(self, address: str, request: RemotingCommand) -> None:
        if address == C:
            raise UnreachableError(f"{address} is unreachable")
        self.oneways.append((address, request.code))

    async def close(self) -> None:
        pass


def test_remoting_finds_the_leader_among_the_configured_addresses() -> None:
    client = RemotingControllers()

    async def run() -> None:
        api = RemotingControllerApi(f"{A};{B};{C}", timeout=1.0, client=client)  # type: ignore[arg-type]
        info = await api.get_replica_info("broker-a")
        assert (info.masterBrokerId, info.masterEpoch, info.syncStateSet, info.syncStateSetEpoch) == (2, 5, [2, 3], 7)
        assert api.leader == B
        await api.get_replica_info("broker-a")
        assert await api.heartbeat_all(contract.HeartbeatRequest(clusterName="c", brokerName="broker-a",
                                                                 brokerAddr="x:1", brokerId=1, incarnation=9)) == 2
    asyncio.run(run())
    assert client.calls == [(A, 1004), (B, 1004), (B, 1004)]  # then straight to the leader it found
    assert client.oneways == [(A, 904), (B, 904)]


def test_remoting_a_malformed_answer_is_a_remote_error() -> None:
    client = RemotingControllers()

    async def run() -> None:
        api = RemotingControllerApi(C, timeout=1.0, client=client)  # type: ignore[arg-type]
        with pytest.raises(RemoteError, match="malformed") as info:
            await api.get_replica_info("broker-a")
        assert info.value.code == ResponseCode.SYSTEM_ERROR
    asyncio.run(run())


class InMemoryController:
    """Just enough of a controller for a broker's start: ids, registration, a first election."""

    token = None
    public_key = ""
    channels_included = True  # no liveness websockets to open
    leader = A

    def __init__(self) -> None:
        self.addresses = [A]
        self.master: int | None = None
        self.beats: list[contract.HeartbeatRequest] = []

    async def aclose(self) -> None:
        pass

    async def get_next_broker_id(self, cluster: str, broker_name: str) -> int:
        return 1

    async def apply_broker_id(self, cluster: str, broker_name: str, broker_id: int, check_code: str) -> None:
        pass

    async def register_broker(self, cluster: str, broker_name: str, broker_id: int,
                              address: str) -> contract.MasterView:
        return contract.MasterView(masterBrokerId=self.master, syncStateSetEpoch=0)

    async def heartbeat_all(self, beat: contract.HeartbeatRequest) -> int:
        self.beats.append(beat)
        return 1

    async def elect_self(self, cluster: str, broker_name: str, broker_id: int) -> contract.MasterView | None:
        self.master = broker_id
        return contract.MasterView(masterBrokerId=broker_id, masterAddress="127.0.0.1:10911", masterEpoch=1,
                                   syncStateSet=[broker_id], syncStateSetEpoch=1)

    async def get_replica_info(self, broker_name: str) -> contract.MasterView:
        assert self.master is not None
        return contract.MasterView(masterBrokerId=self.master, masterAddress="127.0.0.1:10911", masterEpoch=1,
                                   syncStateSet=[self.master], syncStateSetEpoch=1)


def test_a_broker_registers_heartbeats_and_becomes_the_first_master(tmp_path: Path) -> None:
    config = BrokerConfig(storePathRootDir=str(tmp_path / "store"), brokerHeartbeatInterval=50,
                          syncBrokerMetadataPeriod=50, controllerHeartBeatTimeoutMills=1000)
    store = MessageStore(config.store_dir, config.address, 1 << 20, config.epoch_file)
    store.open()
    controller = InMemoryController()

    async def run() -> ReplicasManager:
        manager = ReplicasManager(config, store, controller, FakeClock())  # type: ignore[arg-type]
        await manager.start()
        for _ in range(200):
            if manager.state.role is Role.MASTER and len(controller.beats) >= 2:
                break
            await asyncio.sleep(0.01)
        await manager.stop()
        return manager

    manager = asyncio.run(run())
    try:
        assert (manager.broker_id, manager.state.role, manager.state.master_epoch) == (1, Role.MASTER, 1)
        assert controller.beats[0].brokerId == 1 and controller.beats[0].incarnation == manager.incarnation
        assert store.epochs.last_epoch() == 1  # the new epoch is recorded before the broker acts as master
        assert config.identity_file.read_text() == "DefaultCluster#broker-a#1"
    finally:
        store.close()


def test_http_an_answer_that_breaks_the_contract_is_a_remote_error() -> None:
    def hostile(request: httpx.Request) -> httpx.Response:
        return envelope(ResponseCode.SUCCESS, {"masterBrokerId": "one", "syncStateSet": "all of them"})

    async def run() -> None:
        api = BrokerControllerApi(A, timeout=0.5, transport=httpx.MockTransport(hostile))
        try:
            with pytest.raises(RemoteError, match="malformed .*MasterView") as info:
                await api.get_replica_info("broker-a")
            assert info.value.code == ResponseCode.SYSTEM_ERROR
        finally:
            await api.aclose()
    asyncio.run(run())


class KeylessControllers(RemotingControllers):
    """RocketMQ's controllers: 1006 lists the group's ids; 88001 is not served."""

    async def call(self, address: str, request: RemotingCommand, timeout_s: float | None = None) -> RemotingCommand:
        if request.code != RequestCode.CONTROLLER_GET_SYNC_STATE_DATA:
            self.calls.append((address, request.code))
            return make_response(request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, " request type not supported")
        self.calls.append((address, request.code))
        replicas = [bodies.ReplicaIdentity("broker-a", i, f"10.0.0.{i}:10911", True) for i in (1, 3)]
        info = bodies.ReplicasInfo(1, "10.0.0.1:10911", 2, 4, (replicas[0],), (replicas[1],))
        return make_response(request, ResponseCode.SUCCESS, None, None,
                             bodies.BrokerReplicasInfo({"broker-a": info}).encode())


def test_with_a_group_key_every_listed_id_has_it_and_88001_is_never_asked() -> None:
    client = KeylessControllers()

    async def run() -> None:
        api = RemotingControllerApi(B, timeout=1.0, client=client, group_key="ab" * 32)  # type: ignore[arg-type]
        assert await api.broker_keys("broker-a") == {1: "ab" * 32, 3: "ab" * 32}
        assert await api.registered_replicas("broker-a") == 2
    asyncio.run(run())
    assert [code for _, code in client.calls] == [1006, 1006]


@pytest.mark.parametrize(("props", "problem"), [
    ({"brokerKeySource": "vault"}, "brokerKeySource must be file or authToken"),
    ({"brokerKeySource": "authToken", "controllerProtocol": "remoting"}, "needs authToken"),
    ({"brokerKeySource": "authToken", "authToken": "t0ken-t0ken-t0ken"}, "controllerProtocol=remoting"),
])
def test_a_key_from_the_token_needs_the_token_and_remoting(props: dict[str, str], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        config_from_properties(props).validate()


def test_name_servers_of_their_own_are_kept() -> None:
    config = config_from_properties({"namesrvAddr": "10.0.0.5:9876; 10.0.0.6:9876"})
    assert config.name_server_addresses == ["10.0.0.5:9876", "10.0.0.6:9876"]
    assert BrokerConfig().name_server_addresses == []
    with pytest.raises(ConfigError, match="namesrvAddr: bad name server address 'nowhere'"):
        config_from_properties({"namesrvAddr": "nowhere"}).validate()


def test_a_periodic_task_says_once_that_the_controllers_fail_and_once_that_they_work_again(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = BrokerConfig(storePathRootDir=str(tmp_path / "store"))
    outcomes: list[Exception | None] = [UnreachableError("no leader"), UnreachableError("no leader"),
                                        UnreachableError("no leader"), None, None]

    done = asyncio.Event()

    async def sync_metadata() -> None:
        outcome = outcomes.pop(0) if outcomes else None
        if not outcomes:
            done.set()
        if outcome is not None:
            raise outcome

    async def run() -> None:
        manager = ReplicasManager(config, None, InMemoryController(), FakeClock())  # type: ignore[arg-type]
        task = asyncio.ensure_future(manager._every(1, sync_metadata))
        await asyncio.wait_for(done.wait(), 5)
        await asyncio.sleep(0)  # the step that ran the last action ends before the task is cancelled
        task.cancel()
    with caplog.at_level("INFO", logger="services.broker.replicas_manager"):
        asyncio.run(run())
    said = [r.getMessage() for r in caplog.records]
    assert said == ["periodic task sync_metadata failed: no leader", "periodic task sync_metadata works again"]
    assert all(r.exc_info is None for r in caplog.records)  # no traceback for an unreachable controller
