"""deleteTopic, and updateTopic with mqadmin's every option, beside real mqadmin, on one RocketMQ broker and one of ours (each group a master alone, each with
its name server: RocketMQ's, or our controller), for each scenario version.

RocketMQ's broker here runs with its timer store on (RocketMQ's default). The kit's shared cluster turns it off
(it costs a broker about a sixth of a core while idle), and with it off RocketMQ's DELETE_TOPIC_IN_BROKER fails
with a NullPointerException after it has deleted the topic, so that mqadmin stops before the name servers
(docs/compatibility.md).

The same steps on each side: mqadmin creates DelTopicA and DelTopicB (8 queues) and sends each three keyed
messages; mqadmin deletes DelTopicA and mqctl deletes DelTopicB with ``--format mqadmin``: each prints mqadmin's
two lines, the same bytes from both tools on both sides. Then on both sides neither topic is in mqadmin's
topicList nor in the broker's topics, and neither has a route; DelTopicA, created again and sent one message,
is read by mqadmin's consumeMessage as that one message only. A key of a deleted message is still found on
RocketMQ's broker (its index is not cleaned), no longer on ours.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Protocol

import pytest

from tests.interop.conftest import mqadmin_ok, mqctl
from tests.interop.test_java_clients import TheirSide, kit_or_skip, our_broker
from tests.rocketmq import SCENARIO_VERSIONS, RocketMQCluster, leftover_pids, probe
from tests.rocketmq.jvm import poll

pytestmark = pytest.mark.timeout(900)

TOPIC_A, TOPIC_B, CLUSTER = "DelTopicA", "DelTopicB", "DefaultCluster"
ORDERED_A, ORDERED_B = "OrderedTopicA", "OrderedTopicB"
ORDERED_OPTIONS = ("-r", "8", "-o", "true", "-a", "+message.type=FIFO", "-u", "true", "-s", "true")
TIMER_ON = {"timerWheelEnable": "true"}
SENT_BEFORE, SENT_AFTER = ("before-1", "before-2", "before-3"), "after-1"


class Namesrv(Protocol):
    @property
    def namesrv(self) -> str: ...

    def master(self) -> str | None: ...


def bodies_read(cluster: RocketMQCluster, namesrv: str, topic: str) -> list[str]:
    """The bodies mqadmin's consumeMessage reads of every queue of ``topic`` (it prints each with ``BODY:``)."""
    out = mqadmin_ok(cluster, "consumeMessage", "-n", namesrv, "-t", topic)
    return sorted(re.findall(r" BODY: (.*)$", out, re.MULTILINE))


def run_steps(cluster: RocketMQCluster, side: Namesrv) -> dict[str, object]:
    """The scenario on one side; what it saw."""
    ns = side.namesrv
    master = poll(side.master, 120.0, "a master")
    for topic in (TOPIC_A, TOPIC_B):
        mqadmin_ok(cluster, "updateTopic", "-n", ns, "-c", CLUSTER, "-t", topic)
        for body in SENT_BEFORE:
            mqadmin_ok(cluster, "sendMessage", "-n", ns, "-t", topic, "-p", body, "-k", f"key-{body}")
    before = bodies_read(cluster, ns, TOPIC_A)
    by_mqadmin = mqadmin_ok(cluster, "deleteTopic", "-n", ns, "-c", CLUSTER, "-t", TOPIC_A)
    done = mqctl("deleteTopic", "-n", ns, "-c", CLUSTER, "-t", TOPIC_B, "--format", "mqadmin")
    assert done.returncode == 0, done.stderr
    listed = mqadmin_ok(cluster, "topicList", "-n", ns).split()
    held = set(probe.topic_configs(master))
    no_route = mqctl("topicRoute", "-n", ns, "-t", TOPIC_A)
    mqadmin_ok(cluster, "updateTopic", "-n", ns, "-c", CLUSTER, "-t", TOPIC_A)
    mqadmin_ok(cluster, "sendMessage", "-n", ns, "-t", TOPIC_A, "-p", SENT_AFTER, "-k", "key-after")
    found_old = mqctl("queryMsgByKey", "-n", ns, "-t", TOPIC_A, "-k", f"key-{SENT_BEFORE[0]}")
    ordered_by_mqadmin = mqadmin_ok(cluster, "updateTopic", "-n", ns, "-c", CLUSTER, "-t", ORDERED_A, *ORDERED_OPTIONS)
    ordered = mqctl("updateTopic", "-n", ns, "-c", CLUSTER, "-t", ORDERED_B, *ORDERED_OPTIONS, "--format", "mqadmin")
    assert ordered.returncode == 0, ordered.stderr
    conf = mqctl("getKvConfig", "-n", ns, "-s", "ORDER_TOPIC_CONFIG", "--format", "json")
    return {"ordered by mqadmin": ordered_by_mqadmin.replace(ORDERED_A, "<topic>"),
            "ordered by mqctl": ordered.stdout.replace(ORDERED_B, "<topic>"),
            "order conf": {k: v for k, v in json.loads(conf.stdout)["table"].items() if k in (ORDERED_A, ORDERED_B)},
            "before": before, "by mqadmin": by_mqadmin, "by mqctl": done.stdout,
            "listed": {TOPIC_A, TOPIC_B} & set(listed), "held": {TOPIC_A, TOPIC_B} & held,
            "route": (no_route.returncode, "TOPIC_NOT_EXIST" in no_route.stderr),
            "after": bodies_read(cluster, ns, TOPIC_A), "old key found": found_old.returncode == 0}


@pytest.fixture(scope="module", params=SCENARIO_VERSIONS)
def theirs_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RocketMQCluster]:
    version: str = request.param
    cluster = RocketMQCluster(tmp_path_factory.mktemp(f"rocketmq-delete-{version}") / "cluster", version, brokers=1,
                              controllers=1, broker_props=TIMER_ON)
    kit_or_skip(cluster.start)
    try:
        yield cluster
    finally:
        cluster.stop()
        left = leftover_pids(cluster.root)
        assert not left, f"processes of RocketMQ {version} outlived the stop: {left}"


@pytest.fixture(scope="module")
def seen(theirs_cluster: RocketMQCluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    theirs = run_steps(theirs_cluster, TheirSide(theirs_cluster))
    with our_broker(tmp_path_factory.mktemp("ours-delete")) as side:
        ours = run_steps(theirs_cluster, side)
    return {"theirs": theirs, "ours": ours}


@pytest.mark.parametrize("side", ["theirs", "ours"])
def test_both_tools_print_mqadmins_lines(seen: dict[str, dict[str, object]], side: str) -> None:
    assert seen[side]["by mqadmin"] == lines_of(TOPIC_A)
    assert seen[side]["by mqctl"] == lines_of(TOPIC_B)


@pytest.mark.parametrize("side", ["theirs", "ours"])
def test_the_topics_are_gone_and_a_new_one_of_the_name_holds_only_its_own_messages(
        seen: dict[str, dict[str, object]], side: str) -> None:
    got = seen[side]
    assert got["before"] == sorted(SENT_BEFORE)
    assert (got["listed"], got["held"], got["route"]) == (set(), set(), (4, True))
    assert got["after"] == [SENT_AFTER]
    # RocketMQ's index keeps the deleted messages' keys, and its QUERY_MESSAGE reads them from the commitlog;
    # ours no longer serves a deleted message in any way
    assert got["old key found"] is (side == "theirs")


@pytest.mark.parametrize("side", ["theirs", "ours"])
def test_an_ordered_fifo_unit_topic_prints_mqadmins_text_and_gets_its_order_conf(
        seen: dict[str, dict[str, object]], side: str) -> None:
    got = seen[side]
    assert got["ordered by mqctl"] == got["ordered by mqadmin"]
    assert str(got["ordered by mqadmin"]).endswith(
        "set cluster orderConf. isOrder=true, orderConf=[broker-a:8]\nTopicConfig [topicName=<topic>, "
        "readQueueNums=8, writeQueueNums=8, perm=RW-, topicFilterType=SINGLE_TAG, topicSysFlag=3, order=true, "
        "attributes={+message.type=FIFO}]\n")
    assert got["order conf"] == {ORDERED_A: "broker-a:8", ORDERED_B: "broker-a:8"}


def lines_of(topic: str) -> str:
    return f"delete topic [{topic}] from cluster [{CLUSTER}] success.\ndelete topic [{topic}] from NameServer success.\n"
