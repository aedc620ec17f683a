"""Finding a message by its key across a failover: messages sent with keys to a group of three are found by
mqctl queryMsgByKey (QUERY_MESSAGE, 12, answered from the master's key index); the master is SIGKILLed and
the new master, which indexed the messages as a slave, finds them; the old master comes back (its last
index file was not closed cleanly, so it indexes that part of its log again) and finds them too. Then mqctl
deleteTopic deletes the topic: no replica finds the messages any more, nor holds the topic, and after a SIGKILL
of the master the next one neither (the deletion is a mark in the replicated log)."""

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
from services.remoting.command import make_request
from services.remoting.message import decode_pulled
from tests.integration.conftest import poll
from tests.integration.test_broker import sync_state, wait_role
from tests.integration.test_replication import group  # noqa: F401  (the fixture: 3 replicas of broker-a)
from tests.rocketmq import probe

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

TOPIC, KEY = "KeyedTopic", "order-7"


def query(controllers: ControllerCluster) -> list[dict[str, object]]:
    """mqctl queryMsgByKey's messages; none while the brokers do not find the key yet."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQCTL_")}
    done = subprocess.run([sys.executable, "-m", "mqctl", "--timeout", "10", "queryMsgByKey", "-n",
                           controllers.addresses, "-t", TOPIC, "-k", KEY, "--format", "json"], capture_output=True,
                          text=True, timeout=90, env=env, check=False)
    if done.returncode == 4 and "has the key" in done.stderr:
        return []
    assert done.returncode == 0, done.stderr
    found: list[dict[str, object]] = json.loads(done.stdout)
    return found


def bodies_found_at(address: str) -> list[bytes]:
    """What one broker answers to QUERY_MESSAGE for the key, asked directly."""
    async def ask() -> list[bytes]:
        client = RemotingClient(timeout_s=3.0)
        try:
            header = bh.QueryMessageRequestHeader(topic=TOPIC, key=KEY, max_num=64, begin_timestamp=0,
                                                  end_timestamp=2**62)
            answer = await client.call(address, make_request(bh.QUERY_MESSAGE, 0, header.to_ext_fields()))
        finally:
            await client.close()
        return [m.body for m in decode_pulled(answer.body)] if answer.code == ResponseCode.SUCCESS else []
    return asyncio.run(ask())


def test_messages_are_found_by_key_on_the_new_master_and_on_the_old_one_after_a_sigkill(
        controllers: ControllerCluster, group: list[BrokerNode]) -> None:  # noqa: F811
    master = group[0]
    poll(lambda: len(sync_state(controllers, "broker-a")["inSyncReplicas"]) == 3, 60, "all three in sync")
    subprocess.run([sys.executable, "-m", "mqctl", "--timeout", "10", "sendMessage", "-a", controllers.addresses, "-b",
                    "broker-a", "-t", TOPIC, "-p", "m", "-k", f"{KEY} batch-1", "--count", "5"], check=True,
                   capture_output=True, timeout=90)
    first = poll(lambda: len(found := query(controllers)) == 5 and found, 30, "the five messages found by key")
    ids = sorted(str(m["msgId"]) for m in first)

    master.kill()
    new = poll(lambda: (ss := sync_state(controllers, "broker-a"))["masterAddress"] not in (None, master.address)
               and ss["masterAddress"], 60, "a new master")
    wait_role(next(n for n in group if n.address == new), "MASTER")
    after = poll(lambda: len(found := query(controllers)) == 5 and found, 30, "the five found on the new master")
    assert sorted(str(m["msgId"]) for m in after) == ids

    master.start()
    wait_role(master, "SLAVE")
    assert poll(lambda: len(b := bodies_found_at(master.address)) == 5 and b, 30, "the old master's index") == [
        f"m #{i}".encode() for i in range(5)]

    deleted = subprocess.run([sys.executable, "-m", "mqctl", "--timeout", "10", "deleteTopic", "-n",
                              controllers.addresses, "-c", "DefaultCluster", "-t", TOPIC], capture_output=True, text=True,
                             timeout=90, check=False)
    assert deleted.returncode == 0, deleted.stderr
    for address in [n.address for n in group]:
        poll(lambda a=address: gone_from(a) or None, 30, f"the topic gone from {address}")
    current = next(n for n in group if n.address == new)
    current.kill()
    newest = poll(lambda: (ss := sync_state(controllers, "broker-a"))["masterAddress"] not in (None, new)
                  and ss["masterAddress"], 60, "the next master")
    wait_role(next(n for n in group if n.address == newest), "MASTER")
    assert gone_from(newest)


def gone_from(address: str) -> bool:
    """Whether the broker neither finds the topic's messages by key nor lists the topic."""
    return not bodies_found_at(address) and TOPIC not in probe.topic_configs(address)
