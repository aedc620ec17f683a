"""A stranger on the controllers' name-server codes, default configuration (no auth token), against three
controller processes and a replicated group of our brokers registered with them.

The attack (tests/chaos/route_attack.py): unregister (104) every real broker address, then register (103)
the stranger's own address as id 0 of the real group under another cluster, again with a data version of
2^62, and with the master's own address spoofed, keeping those connections open. Every controller's route
for the group's topic and for TBW102 must still name exactly the controller's master as 0 and its slave,
every registration must be refused, and the master's own next registration must still be taken.
"""

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
from tests.chaos.route_attack import AUTO_CREATE_TOPIC, attack, poisoned, route_of
from tests.integration.conftest import poll
from tests.integration.test_broker import sync_state, wait_role
from tests.integration.test_namesrv import CLUSTER, GROUP, TOPIC
from tests.integration.test_replication import HA

pytestmark = pytest.mark.integration


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


def send(master: BrokerNode, topic: str) -> str:
    with BrokerClient(5.0) as client:
        return str(client.request(master.address, "POST", bc.SEND_MESSAGE, json={"topic": topic, "body": "x"})
                   .data["status"])


def test_a_stranger_cannot_move_a_managed_groups_route(controllers: ControllerCluster,
                                                       group: list[BrokerNode]) -> None:
    master, slave = group
    poll(lambda: len(sync_state(controllers, GROUP)["inSyncReplicas"]) == 2, 40, "both brokers in sync")
    assert send(master, TOPIC) == "PUT_OK"
    addresses = [n.address for n in controllers.nodes]
    expected = {0: master.address, 2: slave.address}
    for address in addresses:
        poll(lambda a=address: asyncio.run(route_of(a, TOPIC)) == expected, 20, f"the route from {address}")

    async def run() -> None:
        client = RemotingClient(timeout_s=3.0)  # the stranger's connections stay open while routes are read
        try:
            answers = await attack(client, addresses, GROUP, CLUSTER, TOPIC, master.address,
                                   [master.address, slave.address])
            for address in addresses:
                for topic in (TOPIC, AUTO_CREATE_TOPIC):
                    shown = await route_of(address, topic)
                    assert poisoned(shown, master.address, set(expected.values())) is None, \
                        f"{address} routes {topic} to {shown} after the attack"
            codes = [a.code for a in answers]  # per controller: two unregisters, then three registrations
            assert codes == ([ResponseCode.SUCCESS] * 2 + [ResponseCode.NO_PERMISSION] * 3) * len(addresses), \
                [(a.code, a.remark) for a in answers]
            await asyncio.to_thread(reregistered, master, addresses, expected)
        finally:
            await client.close()

    asyncio.run(run())


def reregistered(master: BrokerNode, controllers: list[str], expected: dict[int, str]) -> None:
    """The master's next registration is taken by every controller: a new topic is registered at once."""
    assert send(master, "AfterTheAttack") == "PUT_OK"
    for address in controllers:
        poll(lambda a=address: asyncio.run(route_of(a, "AfterTheAttack")) == expected, 20,
             f"the new topic's route from {address}")

