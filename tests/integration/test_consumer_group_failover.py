"""A consumer group's committed offsets survive a failover: the group consumes half a queue on the master,
the master is SIGKILLed, and the same group goes on at the new master where it stopped: no message
skipped, none read twice (the command commits only after reading, so at most the batch in flight when a
crash hits is read again; here nothing is in flight)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

from mqctl.cluster import BrokerNode, ControllerCluster
from services.common.codes import ResponseCode
from services.common.remoting_client import RemotingClient
from services.remoting import broker_headers as bh
from services.remoting.command import RequestCode, make_request
from services.remoting.namesrv_bodies import TopicConfigSerializeWrapper
from tests.integration.conftest import poll
from tests.integration.test_broker import sync_state, wait_role
from tests.integration.test_replication import group  # noqa: F401  (the fixture: 3 replicas of broker-a)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

TOPIC, GROUP = "GroupTopic", "orders-service"


def mqctl(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQCTL_")}
    result = subprocess.run([sys.executable, "-m", "mqctl", "--timeout", "10", *args], capture_output=True,
                            text=True, timeout=90, env=env, check=False)
    assert result.returncode == 0, f"{args}: {result.stderr}"
    return result.stdout


def committed(address: str) -> int | None:
    async def ask() -> int | None:
        client = RemotingClient(timeout_s=3.0)
        try:
            header = bh.QueryConsumerOffsetRequestHeader(consumer_group=GROUP, topic=TOPIC, queue_id=0,
                                                         set_zero_if_not_found=False)
            answer = await client.call(address, make_request(RequestCode.QUERY_CONSUMER_OFFSET, 0,
                                                             header.to_ext_fields()))
        finally:
            await client.close()
        if answer.code != ResponseCode.SUCCESS:
            return None
        return bh.QueryConsumerOffsetResponseHeader.from_ext_fields(answer.ext_fields).offset
    return asyncio.run(ask())


def consume(controllers: ControllerCluster, count: int) -> list[str]:
    out = mqctl("consumeMessage", "-a", controllers.addresses, "-b", "broker-a", "-t", TOPIC, "-q", "0",
                "-g", GROUP, "-n", str(count), "--format", "json")
    return [m["body"] for m in json.loads(out)["messages"]]


def test_a_group_goes_on_where_it_stopped_after_the_master_is_killed(controllers: ControllerCluster,
                                                                      group: list[BrokerNode]) -> None:  # noqa: F811
    master = group[0]
    poll(lambda: len(sync_state(controllers, "broker-a")["inSyncReplicas"]) == 3, 60, "all three in sync")
    mqctl("sendMessage", "-a", controllers.addresses, "-b", "broker-a", "-t", TOPIC, "-q", "0", "-p", "m",
          "--count", "20")
    first = consume(controllers, 10)
    assert first == [f"m #{i}" for i in range(10)]
    assert committed(master.address) == 10
    # the slaves copy the master's offsets (every few seconds), as RocketMQ's SlaveSynchronize does
    for slave in group[1:]:
        poll(lambda s=slave: committed(s.address) == 10, 30, f"{slave.address} to have the group's offset")

    master.kill()
    new = poll(lambda: (ss := sync_state(controllers, "broker-a"))["masterAddress"] not in (None, master.address)
               and ss["masterAddress"], 60, "a new master")
    wait_role(next(n for n in group if n.address == new), "MASTER")
    rest = consume(controllers, 100)
    assert rest == [f"m #{i}" for i in range(10, 20)]
    assert committed(new) == 20


def topics_of(address: str) -> set[str]:
    async def ask() -> set[str]:
        client = RemotingClient(timeout_s=3.0)
        try:
            answer = await client.call(address, make_request(bh.GET_ALL_TOPIC_CONFIG, 0))
        finally:
            await client.close()
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        return set(TopicConfigSerializeWrapper.decode(answer.body).topic_config_table)
    return asyncio.run(ask())


def test_a_topic_created_on_the_master_alone_reaches_the_slaves_and_the_next_master(
        controllers: ControllerCluster, group: list[BrokerNode]) -> None:  # noqa: F811
    """As mqadmin's updateTopic with -n does (masters only): the slaves copy the topic from their master,
    so it is still there when one of them takes over."""
    master = group[0]
    mqctl("updateTopic", "-t", "OnlyOnTheMaster", "-b", master.address)
    assert "OnlyOnTheMaster" in topics_of(master.address)
    for slave in group[1:]:
        poll(lambda s=slave: "OnlyOnTheMaster" in topics_of(s.address), 30, f"{slave.address} to copy the topic")
    master.kill()
    new = poll(lambda: (ss := sync_state(controllers, "broker-a"))["masterAddress"] not in (None, master.address)
               and ss["masterAddress"], 60, "a new master")
    assert "OnlyOnTheMaster" in topics_of(new)


def test_reset_master_flush_offset_on_a_slave_shows_in_its_ha_status(
        controllers: ControllerCluster, group: list[BrokerNode]) -> None:  # noqa: F811
    slave = group[1]
    wait_role(slave, "SLAVE")
    out = mqctl("resetMasterFlushOffset", "-b", slave.address, "-o", "12345", "--format", "mqadmin")
    assert out == "reset master flush offset to 12345 success\n"
    status = mqctl("haStatus", "--brokerAddr", slave.address, "--format", "mqadmin")
    assert "#MasterFlushOffset\t12345\n" in status and "#TransferSpeed(KB/s)\t" in status
    assert mqctl("resetMasterFlushOffset", "-b", group[0].address, "-o", "1") == \
        "reset master flush offset to 1 success\n"  # a master answers success and ignores it
