"""The name-server commands beside real mqadmin, for each tested version: mqctl ``--format mqadmin`` prints
the same bytes as mqadmin against RocketMQ's name server (topicList, getNamesrvConfig), and real mqadmin's
KV and topic-list requests get from one of our controllers what they get from RocketMQ's name server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqctl.cluster import ControllerCluster
from tests.interop.conftest import mqadmin_ok, mqctl
from tests.rocketmq import RocketMQCluster

pytestmark = pytest.mark.timeout(300)

NS, KEY, VALUE = "ORDER_TOPIC_CONFIG", "TopicNamesrvDiff", "broker-a:4"


@pytest.fixture
def ours(tmp_path: Path) -> Iterator[str]:
    """One of our controllers (a name server too); its address."""
    cluster = ControllerCluster(tmp_path / "ours", size=1, extra={"notifyBrokerRoleChanged": "false"})
    cluster.configure()
    cluster.start()
    try:
        yield cluster.leader(timeout=60).address
    finally:
        cluster.kill_all()


def ok(*args: str) -> str:
    done = mqctl(*args)
    assert done.returncode == 0, f"mqctl {args}: {done.stderr}"
    return done.stdout


def test_topic_list_is_mqadmins_text(rocketmq: RocketMQCluster) -> None:
    """Every topic, in the order of the HashSet mqadmin reads them into."""
    theirs = mqadmin_ok(rocketmq, "topicList", "-n", rocketmq.namesrv_addr)
    assert ok("topicList", "-n", rocketmq.namesrv_addr, "--format", "mqadmin") == theirs


def test_get_namesrv_config_is_mqadmins_text(rocketmq: RocketMQCluster) -> None:
    """Each property in the order of a java.util.Properties, under mqadmin's header line."""
    theirs = mqadmin_ok(rocketmq, "getNamesrvConfig", "-n", rocketmq.namesrv_addr)
    assert ok("getNamesrvConfig", "-n", rocketmq.namesrv_addr, "--format", "mqadmin") == theirs


def test_mqadmins_kv_writes_and_topic_list_on_ours_and_theirs(rocketmq: RocketMQCluster, ours: str) -> None:
    for address in (rocketmq.namesrv_addr, ours):
        out = mqadmin_ok(rocketmq, "updateKvConfig", "-n", address, "-s", NS, "-k", KEY, "-v", VALUE)
        assert out == "create or update kv config to namespace success.\n"
        shown = json.loads(ok("getKvConfig", "-n", address, "-s", NS, "-k", KEY, "--format", "json"))
        assert shown == {"namespace": NS, "table": {KEY: VALUE}}
        out = mqadmin_ok(rocketmq, "deleteKvConfig", "-n", address, "-s", NS, "-k", KEY)
        assert out == "delete kv config from namespace success.\n"
    assert mqadmin_ok(rocketmq, "topicList", "-n", ours) == ok("topicList", "-n", ours, "--format", "mqadmin")
