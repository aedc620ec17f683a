"""The controllers as the cluster's name servers: two of our brokers (one group) register with three
controller processes over remoting (103), and every controller answers 106 and 105 for them; after the
master's SIGKILL and the failover, every route lists the new master as id 0."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqctl.cluster import BrokerNode, ControllerCluster, make_broker
from services.broker import contract as bc
from services.common.broker_client import BrokerClient
from services.common.codes import ResponseCode
from services.common.remoting_client import RemotingClient
from services.remoting import bodies
from services.remoting import headers as h
from services.remoting.command import RemotingCommand, RequestCode, make_request
from tests.integration.conftest import poll
from tests.integration.test_broker import sync_state, wait_role
from tests.integration.test_replication import HA

pytestmark = pytest.mark.integration

GROUP, CLUSTER, TOPIC = "broker-a", "DefaultCluster", "NamesrvTopic"


@pytest.fixture
def group(tmp_path: Path, controllers: ControllerCluster) -> Iterator[list[BrokerNode]]:
    nodes = [make_broker(tmp_path, GROUP, i, controllers.addresses, **HA) for i in (1, 2)]
    try:
        nodes[0].start()
        wait_role(nodes[0], "MASTER")
        nodes[1].start()
        wait_role(nodes[1], "SLAVE")
        yield nodes
    finally:
        for node in nodes:
            node.kill()


async def ask(address: str, code: int, ext: dict[str, str] | None = None) -> RemotingCommand:
    client = RemotingClient(timeout_s=3.0)
    try:
        return await client.call(address, make_request(code, 0, ext))
    finally:
        await client.close()


def route_addrs(address: str, topic: str = TOPIC) -> dict[int, str] | None:
    """The topic's broker addresses as this controller's name server gives them (None: no route)."""
    answer = asyncio.run(ask(address, RequestCode.GET_ROUTEINFO_BY_TOPIC,
                             h.GetRouteInfoRequestHeader(topic=topic).to_ext_fields()))
    if answer.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    route = bodies.TopicRouteData.decode(answer.body)
    assert [b.broker_name for b in route.broker_datas] == [GROUP]
    assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums) for q in route.queue_datas] == [(GROUP, 4, 4)]
    return dict(route.broker_datas[0].broker_addrs)


def cluster_info(address: str) -> bodies.ClusterInfo:
    answer = asyncio.run(ask(address, RequestCode.GET_BROKER_CLUSTER_INFO))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return bodies.ClusterInfo.decode(answer.body)


@pytest.mark.smoke
def test_every_controller_routes_to_the_master_as_0_across_a_failover(controllers: ControllerCluster,
                                                                      group: list[BrokerNode]) -> None:
    master, slave = group
    poll(lambda: len(sync_state(controllers, GROUP)["inSyncReplicas"]) == 2, 40, "both brokers in sync")
    assert all(route_addrs(node.address) is None for node in controllers.nodes)
    with BrokerClient(5.0) as client:
        env = client.request(master.address, "POST", bc.SEND_MESSAGE, json={"topic": TOPIC, "body": "x"})
    assert env.data["status"] == "PUT_OK"

    before = {0: master.address, 2: slave.address}
    for node in controllers.nodes:  # a new topic is registered at once, not at the next 30 s round
        poll(lambda a=node.address: route_addrs(a) == before, 10, f"the route from {node.address}")
        info = cluster_info(node.address)
        assert info.cluster_addr_table == {CLUSTER: frozenset({GROUP})}
        assert info.broker_addr_table[GROUP] == bodies.BrokerData(CLUSTER, GROUP, before)
        assert route_addrs(node.address, "TBW102") == before

    master.kill()
    bs = poll(lambda: (s := sync_state(controllers, GROUP))["masterBrokerId"] == 2 and s, 40, "the failover")
    assert bs["masterAddress"] == slave.address
    for node in controllers.nodes:
        poll(lambda a=node.address: route_addrs(a) == {0: slave.address}, 20, f"the new route from {node.address}")
        assert cluster_info(node.address).broker_addr_table[GROUP].broker_addrs == {0: slave.address}
