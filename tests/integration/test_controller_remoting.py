"""Three controller processes serve RocketMQ's remoting protocol on their client port (the same port as
HTTP), and two brokers speaking only remoting go through what a RocketMQ broker does: 1012 → 1013 → 1003,
then oneway 904 heartbeats; the first elects itself (1002), the master expands its SyncStateSet (1001, with
epoch fencing checked), and when the master's heartbeats stop the controller fails over to the in-sync
slave, which a 1004 and a 1006 show. A follower answers CONTROLLER_NOT_LEADER; an unknown code
REQUEST_CODE_NOT_SUPPORTED; a broker whose connection closes is gone at once."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mqctl.cluster import ControllerCluster
from services.common.codes import ResponseCode
from services.common.remoting_client import RemotingClient
from services.remoting import bodies
from services.remoting import headers as h
from services.remoting.command import RemotingCommand, RequestCode, make_request
from tests.integration.conftest import FAST_SCANS

pytestmark = pytest.mark.integration

RC, CODE = RequestCode, ResponseCode
CLUSTER, GROUP = "RmqCluster", "broker-r"


@pytest.fixture
def controllers(tmp_path: Path) -> Iterator[ControllerCluster]:
    cluster = ControllerCluster(tmp_path / "cluster", extra={**FAST_SCANS, "notifyBrokerRoleChanged": "true"})
    cluster.configure()
    cluster.start()
    try:
        cluster.leader(timeout=60)
        yield cluster
    finally:
        cluster.kill_all()


async def call(client: RemotingClient, address: str, code: int, header: h.CustomHeader | None = None,
               body: bytes = b"") -> RemotingCommand:
    ext = header.to_ext_fields() if header is not None else None
    return await client.call(address, make_request(code, 0, ext, body), timeout_s=5)


async def leader_of(client: RemotingClient, addresses: list[str]) -> str:
    """What a RocketMQ broker does: ask any controller (1005) who leads."""
    for _ in range(100):
        for address in addresses:
            with contextlib.suppress(Exception):
                answer = await call(client, address, RC.CONTROLLER_GET_METADATA_INFO)
                leader = answer.ext_fields.get("controllerLeaderAddress")
                if answer.ext_fields.get("isLeader") == "true":
                    return address
                if leader:
                    return leader
        await asyncio.sleep(0.1)
    raise AssertionError("no controller leader")


@dataclass
class RemotingBroker:
    """A broker that speaks only remoting to the controllers, as RocketMQ's ReplicasManager does."""

    controllers: list[str]
    address: str
    client: RemotingClient = field(default_factory=lambda: RemotingClient(timeout_s=5))
    broker_id: int = 0
    beating: asyncio.Task[None] | None = None

    async def register(self) -> RemotingCommand:
        leader = await leader_of(self.client, self.controllers)
        nxt = await call(self.client, leader, RC.CONTROLLER_GET_NEXT_BROKER_ID,
                         h.GetNextBrokerIdRequestHeader(cluster_name=CLUSTER, broker_name=GROUP))
        assert nxt.code == CODE.SUCCESS, nxt.remark
        self.broker_id = int(nxt.ext_fields["nextBrokerId"])
        applied = await call(self.client, leader, RC.CONTROLLER_APPLY_BROKER_ID, h.ApplyBrokerIdRequestHeader(
            cluster_name=CLUSTER, broker_name=GROUP, applied_broker_id=self.broker_id,
            register_check_code=f"{self.address};1700000000000"))
        assert applied.code == CODE.SUCCESS, applied.remark
        registered = await call(self.client, leader, RC.CONTROLLER_REGISTER_BROKER,
                                h.RegisterBrokerToControllerRequestHeader(
                                    cluster_name=CLUSTER, broker_name=GROUP, broker_id=self.broker_id,
                                    broker_address=self.address))
        assert registered.code == CODE.SUCCESS, registered.remark
        return registered

    def start_heartbeats(self, max_offset: int = 0) -> None:
        async def beat() -> None:
            while True:
                header = h.BrokerHeartbeatRequestHeader(
                    cluster_name=CLUSTER, broker_addr=self.address, broker_name=GROUP, broker_id=self.broker_id,
                    epoch=0, max_offset=max_offset, confirm_offset=0, heartbeat_timeout_mills=1500,
                    election_priority=0)
                for controller in self.controllers:  # every controller, as RocketMQ brokers do
                    with contextlib.suppress(Exception):
                        await self.client.oneway(controller, make_request(RC.BROKER_HEARTBEAT, 0,
                                                                          header.to_ext_fields()))
                await asyncio.sleep(0.2)
        self.beating = asyncio.get_running_loop().create_task(beat())

    async def stop_heartbeats(self) -> None:
        if self.beating is not None:
            self.beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.beating


async def replica_info(client: RemotingClient, controllers: list[str]) -> tuple[RemotingCommand, bodies.SyncStateSet]:
    leader = await leader_of(client, controllers)
    answer = await call(client, leader, RC.CONTROLLER_GET_REPLICA_INFO, h.GetReplicaInfoRequestHeader(broker_name=GROUP))
    assert answer.code == CODE.SUCCESS, answer.remark
    return answer, bodies.SyncStateSet.decode(answer.body)


async def until(predicate, what: str, timeout: float = 20.0):  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


def test_two_remoting_brokers_register_elect_alter_and_fail_over(controllers: ControllerCluster) -> None:
    addresses = [n.address for n in controllers.nodes]

    async def scenario() -> None:
        admin = RemotingClient(timeout_s=5)
        a, b = RemotingBroker(addresses, "10.0.0.1:10911"), RemotingBroker(addresses, "10.0.0.2:10911")
        try:
            first = await a.register()
            assert first.ext_fields.get("masterBrokerId") is None  # no master yet
            assert bodies.SyncStateSet.decode(first.body) == bodies.SyncStateSet(frozenset(), 0)
            a.start_heartbeats(max_offset=100)
            leader = await leader_of(admin, addresses)
            elected = await until(lambda: call(admin, leader, RC.CONTROLLER_ELECT_MASTER, h.ElectMasterRequestHeader(
                cluster_name=CLUSTER, broker_name=GROUP, broker_id=a.broker_id)), "the first election")
            assert elected.code == CODE.SUCCESS, elected.remark
            assert elected.ext_fields["masterBrokerId"] == str(a.broker_id) and elected.ext_fields["masterEpoch"] == "1"
            body = bodies.ElectMasterResponseBody.decode(elected.body)
            assert body.sync_state_set == {a.broker_id} and body.broker_member_group is not None
            assert dict(body.broker_member_group.broker_addrs) == {a.broker_id: a.address}
            assert b'"brokerAddrs":{1:"10.0.0.1:10911"}' in elected.body  # fastjson's bare Long keys

            second = await b.register()
            assert second.ext_fields["masterBrokerId"] == str(a.broker_id)
            b.start_heartbeats(max_offset=100)

            # The master expands its SyncStateSet; a stale masterEpoch or set epoch is fenced.
            async def alter(master_epoch: int, set_epoch: int) -> RemotingCommand:
                return await call(admin, await leader_of(admin, addresses), RC.CONTROLLER_ALTER_SYNC_STATE_SET,
                                  h.AlterSyncStateSetRequestHeader(broker_name=GROUP, master_broker_id=a.broker_id,
                                                                   master_epoch=master_epoch),
                                  bodies.SyncStateSet(frozenset({a.broker_id, b.broker_id}), set_epoch).encode())
            assert (await alter(0, 1)).code == CODE.CONTROLLER_FENCED_MASTER_EPOCH
            assert (await alter(1, 0)).code == CODE.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
            altered = await alter(1, 1)
            assert altered.code == CODE.SUCCESS, altered.remark
            assert altered.ext_fields["newSyncStateSetEpoch"] == "2"
            assert bodies.SyncStateSet.decode(altered.body) == bodies.SyncStateSet(
                frozenset({a.broker_id, b.broker_id}), 2)

            # The master's heartbeats stop (its connections stay open): the in-sync slave takes over.
            await a.stop_heartbeats()

            async def failed_over() -> bool:
                info, members = await replica_info(admin, addresses)
                return info.ext_fields.get("masterBrokerId") == str(b.broker_id) and members.sync_state_set == {
                    b.broker_id}
            await until(failed_over, "the failover to the slave")
            info, _ = await replica_info(admin, addresses)
            assert info.ext_fields["masterEpoch"] == "2"
            data = await call(admin, await leader_of(admin, addresses), RC.CONTROLLER_GET_SYNC_STATE_DATA,
                              body=bodies.encode_broker_names([GROUP]))
            table = bodies.BrokerReplicasInfo.decode(data.body).replicas_info_table
            assert table[GROUP].master_broker_id == b.broker_id
            alive = {r.broker_id: r.alive for r in table[GROUP].in_sync_replicas + table[GROUP].not_in_sync_replicas}
            assert alive == {a.broker_id: False, b.broker_id: True}

            # When the new master's connections close, it is gone at once: nobody is left to elect.
            await b.stop_heartbeats()
            await b.client.close()

            async def no_master() -> bool:
                info, _ = await replica_info(admin, addresses)
                return "masterBrokerId" not in info.ext_fields
            await until(no_master, "the closed master to be dropped", timeout=5)
        finally:
            for broker in (a, b):
                await broker.stop_heartbeats()
                await broker.client.close()
            await admin.close()

    asyncio.run(scenario())


def test_followers_unknown_codes_and_bad_headers(controllers: ControllerCluster) -> None:
    addresses = [n.address for n in controllers.nodes]

    async def scenario() -> None:
        client = RemotingClient(timeout_s=5)
        try:
            leader = await leader_of(client, addresses)
            follower = next(a for a in addresses if a != leader)
            meta = await call(client, follower, RC.CONTROLLER_GET_METADATA_INFO)
            assert meta.ext_fields["isLeader"] == "false" and meta.ext_fields["controllerLeaderAddress"] == leader
            # DLedgerController's form: "n0:host:port;" for every peer
            assert meta.ext_fields["peers"] == "".join(f"n{i}:{a};" for i, a in enumerate(addresses))
            refused = await call(client, follower, RC.CONTROLLER_GET_REPLICA_INFO,
                                 h.GetReplicaInfoRequestHeader(broker_name=GROUP))
            assert refused.code == CODE.CONTROLLER_NOT_LEADER
            unknown = await call(client, leader, 12345)
            assert unknown.code == CODE.REQUEST_CODE_NOT_SUPPORTED
            bad = await client.call(leader, make_request(RC.CONTROLLER_ELECT_MASTER, 0, {
                "clusterName": CLUSTER, "brokerName": GROUP, "brokerId": "one", "designateElect": "false"}))
            assert bad.code == CODE.INVALID_PARAMETER and "brokerId" in str(bad.remark)
            missing = await call(client, leader, RC.CONTROLLER_GET_REPLICA_INFO, h.GetReplicaInfoRequestHeader(
                broker_name="no-such-group"))
            assert missing.code == CODE.CONTROLLER_BROKER_METADATA_NOT_EXIST
        finally:
            await client.close()

    asyncio.run(scenario())
