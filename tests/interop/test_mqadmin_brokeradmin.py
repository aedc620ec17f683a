"""The broker status commands beside real mqadmin, for each tested version, on one scenario run on RocketMQ's
cluster and on ours alike: RocketMQ's Java clients create AdminDiffTopic (4 queues), send it 24 messages
(6 a queue) from a producer of adminDiffProducer that then stays connected without sending, and a push
consumer of adminDiffGroup reads them all and commits.

(a) mqctl ``--format mqadmin`` against RocketMQ's cluster prints what real mqadmin prints for the same
command at the same moment, but for the figures that move between the two asks (LIVE below);
(b) real mqadmin against our cluster prints what it prints against RocketMQ's, but for what cannot be equal
between two clusters (CANNOT_BE_EQUAL below: addresses, client ids, times, rates, uptime, disk usage).
Both clusters are a master and two slaves of broker-a.

Subscription groups the same way: updateSubGroup and deleteSubGroup print mqadmin's text, and mqadmin's
updateSubGroup, getConsumerConfig (GET_ALL_SUBSCRIPTIONGROUP_CONFIG, 201) and deleteSubGroup print the same
against both clusters, a group's settings reaching every slave.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from services.common.remoting_client import RemotingClient
from services.remoting.admin_headers import GET_ALL_SUBSCRIPTIONGROUP_CONFIG
from services.remoting.command import make_request
from services.remoting.subscription_bodies import SubscriptionGroupConfig, SubscriptionGroupWrapper
from tests.integration.conftest import group_cluster
from tests.interop.conftest import mqadmin_ok, mqctl
from tests.rocketmq import RocketMQCluster
from tests.rocketmq.javaclients import ClientRun, JavaClients, wait_for
from tests.rocketmq.jvm import poll

pytestmark = pytest.mark.timeout(900)

TOPIC, CONSUMER, PRODUCER = "AdminDiffTopic", "adminDiffGroup", "adminDiffProducer"
MESSAGES = 24

#: The commands compared, each as mqadmin's arguments after ``-n`` (``master`` is the group's master).
QUESTIONS: dict[str, Callable[[str], tuple[str, ...]]] = {
    "clusterList": lambda master: ("clusterList",),
    "clusterList -m": lambda master: ("clusterList", "-m"),
    "brokerStatus": lambda master: ("brokerStatus", "-b", master),
    "topicStatus": lambda master: ("topicStatus", "-t", TOPIC),
    "consumerProgress -g": lambda master: ("consumerProgress", "-g", CONSUMER),
    "consumerProgress": lambda master: ("consumerProgress",),
    "consumerConnection": lambda master: ("consumerConnection", "-g", CONSUMER),
    "producerConnection": lambda master: ("producerConnection", "-g", PRODUCER, "-t", TOPIC),
    "topicRoute": lambda master: ("topicRoute", "-t", TOPIC),
    "topicClusterList": lambda master: ("topicClusterList", "-t", TOPIC),
}


@dataclass(frozen=True)
class Rule:
    """One normalisation, named: what it hides and why it cannot be equal."""

    why: str
    pattern: re.Pattern[str]
    replacement: str

    def apply(self, text: str) -> str:
        return self.pattern.sub(self.replacement, text)


def _rule(why: str, pattern: str, replacement: str) -> Rule:
    return Rule(why, re.compile(pattern, re.MULTILINE), replacement)


#: brokerStatus keys whose values move from one ask to the next on the same broker (rates, latencies, queue
#: waits, free disk, the uptime's seconds).
LIVE_KEYS = ("runtime", "putTps", "getFoundTps", "getMissTps", "getTotalTps", "getTransferredTps", "putLatency99",
             "putLatency999", "pageCacheLockTimeMills", "commitLogDirCapacity", "commitLogDiskRatio[^ ]*",
             "consumeQueueDiskRatio", "dispatchBehindBytes", "remainHowManyDataToFlush", "[a-zA-Z]+HeadWaitTimeMills",
             "timerDequeueTps", "timerEnqueueTps", "putMessageDistributeTime", "getMessageEntireTimeMax",
             "putMessageEntireTimeMax", "sendThreadPoolQueueSize", "pullThreadPoolQueueSize")
LIVE = (
    _rule("brokerStatus: a rate, latency, queue wait, free disk or the uptime of the moment",
          rf"^((?:{'|'.join(LIVE_KEYS)}) *: ).*$", r"\1<live>"),
    _rule("clusterList: in and out TPS of the moment", r"\d+\.\d\d\(\d+,\d+ms(?:\|\d+,\d+ms)?\)", "<tps>"),
    _rule("clusterList: hours since the oldest message and disk ratio of the moment",
          r" +-?\d+\.\d\d +(\d+\.\d{4}) +(true|false)$", r" <hour> \1 \2"),
    _rule("topicStatus and consumerProgress: a topic's or group's TPS of the moment",
          r"^((?:Topic Put|Consume) TPS: ).*$", r"\1<tps>"),
    _rule("consumerProgress's list of groups: a group's TPS of the moment (the column before its diff)",
          r"^(\S+ +\d+ +\S+ +\S+ +\S+ +)\d+( +-?\d+)$", r"\1<tps>\2"),
    _rule("consumerProgress -g: the group's retry queue (nothing to retry, offset 0), listed once the consumer "
          "has committed its offset, which RocketMQ's consumer does on one of its later persists (every 5 s)",
          r"^%RETRY%\S+ +\S+ +\d+ +0 +0 +0 .*\n", ""),
)
#: RocketMQ's cluster is the tier's, shared with the other admin tests (mqadmin's sendMessage and
#: consumeMessage, for one): what they sent, read and created counts in its brokers' totals and lists, and
#: which of them ran first depends on the workers. Ours is this module's own.
SHARED = (
    _rule("brokerStatus: the broker's message totals, which count the other admin tests' sends and reads on "
          "RocketMQ's shared cluster",
          r"^((?:msgPutTotal\w*|msgGetTotal\w*|putMessageTimesTotal) *: ).*$", r"\1<count>"),
    _rule("clusterList -m: the same totals, per broker", r"^(\S+ +\S+) +\d+ +\d+ +\d+ +\d+ *$",
          r"\1 <counts>"),
    _rule("consumerProgress: the groups other admin tests made on RocketMQ's shared cluster (mqadmin's tool "
          "consumer and sendMessage's producer group)", r"^(?:GroupOfMqadmin|TOOLS_CONSUMER|CID_\w+)\b.*\n", ""),
)
CANNOT_BE_EQUAL = (
    *LIVE,
    _rule("a server's or client's address and port", r"\d+\.\d+\.\d+\.\d+:\d+ *", "<addr> "),
    _rule("the broker's version: ours answer as RocketMQ 5.3.3's broker", r"V5_\d_\d", "<version>"),
    _rule("brokerStatus: the brokerVersion key, which 5.3's brokers (and ours) report and 5.5's no longer do",
          r"^brokerVersion +: \d+\n", ""),
    _rule("a client id's process id", r"@(producer|push)-\d+ *", r"@\1-<pid> "),
    _rule("a store time", r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:,\d{3})?", "<time>"),
    _rule("a message's id: its unique key (each send makes its own) or its offset id (store host and offset)",
          r"\b[0-9A-F]{32}\b", "<msgId>"),
    _rule("brokerStatus: the store's path", r"^commitLogDiskRatio_\S*?: ", "commitLogDiskRatio_<path>: "),
    _rule("brokerStatus: boot, first message and accept-send times",
          r"^((?:bootTimestamp|earliestMessageTimeStamp|startAcceptSendRequestTimeStamp) *: ).*$", r"\1<time>"),
    _rule("brokerStatus: the commitlog's size (each message's born and store host addresses differ in length)",
          r"^((?:commitLogMaxOffset|putMessageSizeTotal|putMessageAverageSize) *: ).*$", r"\1<bytes>"),
    _rule("brokerStatus: the used disk's ratio of the moment", r"^((?:commitLogDiskRatio|consumeQueueDiskRatio)\S* *: ).*$",
          r"\1<ratio>"),
    _rule("clusterList -m: the broker's disk ratio of the moment", r"\d+\.\d{4}", "<ratio>"),
    *SHARED,
)


def normalised(text: str, rules: tuple[Rule, ...]) -> str:
    for rule in rules:
        text = rule.apply(text)
    return text


def ok(*args: str) -> str:
    done = mqctl(*args)
    assert done.returncode == 0, f"mqctl {args}: {done.stderr}"
    return done.stdout


@dataclass
class Side:
    """One cluster with the scenario's clients running on it."""

    namesrv: str
    runs: list[ClientRun]

    def master(self) -> str:
        shown = json.loads(ok("clusterList", "-n", self.namesrv, "--format", "json"))
        return str(next(b["address"] for b in shown["brokers"] if b["brokerId"] == 0))


def committed(namesrv: str) -> bool:
    done = mqctl("consumerProgress", "-n", namesrv, "-g", CONSUMER, "--format", "json")
    return done.returncode == 0 and json.loads(done.stdout).get("diffTotal") == 0 and \
        sum(q["consumerOffset"] for q in json.loads(done.stdout)["queues"]) == MESSAGES


@contextmanager
def scenario(clients: JavaClients, namesrv: str, folder: Path) -> Iterator[Side]:
    side = Side(namesrv, [])
    try:
        created = clients.start("create-topic", folder / "create", namesrv=namesrv, topic=TOPIC, queues=4)
        assert created.wait(120) == 0, created.describe()
        side.runs.append(producer := clients.start("produce", folder / "send", namesrv=namesrv, topic=TOPIC,
                                                   modes="sync", group=PRODUCER, rounds=MESSAGES, linger="true",
                                                   deadline_s=900, send_timeout_ms=20000))
        # (every message must be sent: the questions count them. 3 s, the client's default for a send and its
        # retries, ran out on a loaded machine while a JVM broker was slow to answer)
        wait_for(lambda: producer.history().paused, 180, "every message sent", (producer,))
        assert len(producer.history().sent) == MESSAGES, producer.describe()
        side.runs.append(consumer := clients.start("push", folder / "push", namesrv=namesrv, topic=TOPIC,
                                                   group=CONSUMER, deadline_s=900))
        wait_for(lambda: len(consumer.history().consumed) >= MESSAGES, 120, "every message consumed", (consumer,))
        poll(lambda: committed(namesrv) or None, 60, "the group's offsets committed")
        poll(lambda: mqctl("producerConnection", "-n", namesrv, "-g", PRODUCER, "-t", TOPIC).returncode == 0 or None,
             60, "the idle producer connected")
        yield side
    finally:
        for run in side.runs:
            if run.running():
                run.stop()


@pytest.fixture(scope="module")
def clients(rocketmq: RocketMQCluster) -> JavaClients:
    return JavaClients(rocketmq.version).build()


@pytest.fixture(scope="module")
def theirs(rocketmq: RocketMQCluster, clients: JavaClients, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Side]:
    with scenario(clients, rocketmq.namesrv_addr, tmp_path_factory.mktemp("theirs-clients")) as side:
        yield side


@pytest.fixture(scope="module")
def ours(clients: JavaClients, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Side]:
    root = tmp_path_factory.mktemp("ours")
    with group_cluster(root, "broker-a", 3, controllerProtocol="remoting") as (controllers, _):
        poll(lambda: committed_route(controllers.addresses) or None, 90, "the three replicas of broker-a listed")
        with scenario(clients, controllers.addresses, root / "clients") as side:
            yield side


def committed_route(namesrv: str) -> bool:
    done = mqctl("clusterList", "-n", namesrv, "--format", "json")
    return done.returncode == 0 and len(json.loads(done.stdout)["brokers"]) == 3


def ask_both(rocketmq: RocketMQCluster, args: tuple[str, ...]) -> tuple[str, str]:
    with ThreadPoolExecutor(2) as pool:
        theirs = pool.submit(mqadmin_ok, rocketmq, *args)
        return theirs.result(), ok(*args, "--format", "mqadmin")


@pytest.mark.parametrize("question", list(QUESTIONS))
def test_mqctl_prints_what_mqadmin_prints(rocketmq: RocketMQCluster, theirs: Side, question: str) -> None:
    """(a) The same bytes from both tools against RocketMQ's cluster, but for the LIVE figures."""
    args = ("-n", theirs.namesrv, *QUESTIONS[question](theirs.master()))
    real, mine = ask_both(rocketmq, (args[2], *args[:2], *args[3:]))
    assert normalised(mine, LIVE) == normalised(real, LIVE)


@pytest.mark.parametrize("question", list(QUESTIONS))
def test_mqadmin_gets_the_same_answers_from_ours(rocketmq: RocketMQCluster, theirs: Side, ours: Side,
                                                 question: str) -> None:
    """(b) Real mqadmin prints the same against both clusters, but for what CANNOT_BE_EQUAL."""
    answers = []
    for side in (theirs, ours):
        command, *rest = QUESTIONS[question](side.master())
        answers.append(mqadmin_ok(rocketmq, command, "-n", side.namesrv, *rest))
    assert normalised(answers[1], CANNOT_BE_EQUAL) == normalised(answers[0], CANNOT_BE_EQUAL)


# ---------------------------------------------------------------------------------------------- one message
KEY = "key-10"
#: Which queue a message went to is the producer's choice, made afresh on each cluster.
PLACED = (_rule("where the message is: its queue, queue offset and commitlog offset, and its queue's bounds",
                r"^((?:Queue ID|Queue Offset|CommitLog Offset): +).*$", r"\1<where>"),
          _rule("the queue's bounds among the message's properties", r"\b(MIN_OFFSET|MAX_OFFSET)=\d+", r"\1=<n>"))


def a_message(namesrv: str) -> dict[str, str]:
    """Where the scenario's message of KEY is and its ids, as mqctl's queryMsgByKey and queryMsgByOffset find it."""
    by_key = json.loads(ok("queryMsgByKey", "-n", namesrv, "-t", TOPIC, "-k", KEY, "--format", "json"))[0]
    where = {"queue": str(by_key["queueId"]), "offset": str(by_key["queueOffset"])}
    found = json.loads(ok("queryMsgByOffset", "-n", namesrv, "-t", TOPIC, "-b", "broker-a", "-i", where["queue"],
                          "-o", where["offset"], "--format", "json"))[0]
    return {**where, "offset id": found["offsetMsgId"], "unique key": found["msgId"]}


@pytest.fixture(scope="module")
def their_message(theirs: Side) -> dict[str, str]:
    return a_message(theirs.namesrv)


@pytest.fixture(scope="module")
def our_message(ours: Side) -> dict[str, str]:
    return a_message(ours.namesrv)


def query_args(command: str, by: str, found: dict[str, str]) -> tuple[str, ...]:
    if command == "queryMsgByOffset":
        return ("-t", TOPIC, "-b", "broker-a", "-i", found["queue"], "-o", found["offset"])
    return ("-t", TOPIC, "-i", found[by])


QUERIES = [("queryMsgById", "offset id"), ("queryMsgById", "unique key"), ("queryMsgByUniqueKey", "unique key"),
           ("queryMsgByOffset", "queue offset")]


@pytest.mark.parametrize(("command", "by"), QUERIES)
def test_query_msg_prints_what_mqadmin_prints(rocketmq: RocketMQCluster, theirs: Side, their_message: dict[str, str],
                                              command: str, by: str) -> None:
    """(a) A message by its offset id (VIEW_MESSAGE_BY_ID to the broker the id names), by its unique key
    (QUERY_MESSAGE) or by its queue offset (a pull): the same bytes, the consumer group's track included (it
    consumed the message)."""
    args = query_args(command, by, their_message)
    real, mine = ask_both(rocketmq, (command, "-n", theirs.namesrv, *args))
    assert mine == real
    assert f"MessageTrack [consumerGroup={CONSUMER}, trackType=CONSUMED, exceptionDesc=null]" in real


#: RocketMQ versions whose broker lists, among a topic's consumer groups (QUERY_TOPIC_CONSUME_BY_WHO), the topic's own
#: name for every group that subscribes to it (ConsumerManager put the topic into its topic-to-groups table;
#: fixed after 5.3.3 by RocketMQ's issue 9443): mqadmin then tracks a "group" with no retry topic. Ours lists the
#: groups.
TOPIC_AS_GROUP = frozenset({"5.3.3"})
PHANTOM_TRACK = re.compile(rf"MessageTrack \[consumerGroup={TOPIC}, trackType=UNKNOWN, exceptionDesc=.*?\.java:\d+\)\]\n?",
                           re.DOTALL)


@pytest.mark.parametrize(("command", "by"), QUERIES)
def test_mqadmin_finds_a_message_on_ours_as_on_theirs(rocketmq: RocketMQCluster, theirs: Side, ours: Side,
                                                      their_message: dict[str, str], our_message: dict[str, str],
                                                      command: str, by: str) -> None:
    """(b) Real mqadmin finds the message of KEY on both clusters and prints the same, but for what
    CANNOT_BE_EQUAL (its ids among them) and where the producer put it; on ours, mqctl prints the same bytes as
    mqadmin."""
    args = [query_args(command, by, found) for found in (their_message, our_message)]
    answers = [mqadmin_ok(rocketmq, command, "-n", side.namesrv, *a) for side, a in zip((theirs, ours), args)]
    assert ok(command, "-n", ours.namesrv, *args[1], "--format", "mqadmin") == answers[1]  # mqctl's, on ours
    if rocketmq.version in TOPIC_AS_GROUP:
        assert PHANTOM_TRACK.search(answers[0]), answers[0]
        answers[0] = PHANTOM_TRACK.sub("", answers[0])
    rules = (*CANNOT_BE_EQUAL, *PLACED)
    assert normalised(answers[1], rules) == normalised(answers[0], rules)
    assert f"MessageTrack [consumerGroup={CONSUMER}, trackType=CONSUMED, exceptionDesc=null]" in answers[1]


# ---------------------------------------------------------------------------------------------- subscription groups
SUB_GROUP = "adminDiffSubGroup"
#: updateSubGroup's settings: a group that may not consume and is retried 3 times.
SUB_OPTIONS = ("-g", SUB_GROUP, "-r", "3", "-s", "false", "-q", "1")
#: RocketMQ versions whose broker re-creates a subscription group, with the defaults, as it deletes it: 5.5.0's
#: DELETE_SUBSCRIPTIONGROUP asks LiteMetadataUtil.isLiteGroupType, whose findSubscriptionGroupConfig creates a
#: group it does not find (autoCreateSubscriptionGroup, on by default). Ours deletes it.
RECREATED_ON_DELETE = frozenset({"5.5.0"})


def replicas(namesrv: str) -> list[str]:
    shown = json.loads(ok("clusterList", "-n", namesrv, "--format", "json"))
    return [str(b["address"]) for b in shown["brokers"]]


def group_on(address: str) -> dict[str, object] | None:
    """What GET_ALL_SUBSCRIPTIONGROUP_CONFIG of ``address`` holds of SUB_GROUP (None: nothing)."""
    async def ask() -> SubscriptionGroupWrapper:
        client = RemotingClient(timeout_s=5.0)
        try:
            answer = await client.call(address, make_request(GET_ALL_SUBSCRIPTIONGROUP_CONFIG, 0))
            return SubscriptionGroupWrapper.decode(answer.body)
        finally:
            await client.close()
    config = asyncio.run(ask()).table.get(SUB_GROUP)
    return None if config is None else config.to_json()


def copied(slave: str, created: dict[str, object]) -> Callable[[], bool | None]:
    return lambda: group_on(slave) == created or None


@pytest.mark.parametrize("how", ["-b", "-c"])
def test_update_and_delete_sub_group_print_mqadmins_text(rocketmq: RocketMQCluster, theirs: Side, how: str) -> None:
    """(a) updateSubGroup and deleteSubGroup with -b (the master) or -c (the cluster's masters): the same bytes."""
    where = ("-b", theirs.master()) if how == "-b" else ("-c", "DefaultCluster")
    for command, options in (("updateSubGroup", SUB_OPTIONS), ("deleteSubGroup", ("-g", SUB_GROUP))):
        if (command, how) == ("deleteSubGroup", "-c"):
            # mqadmin's -c then deletes the group's retry and dead-letter topics, and RocketMQ's broker fails that
            # (DELETE_TOPIC_IN_BROKER reads the timer store's metrics, which a broker without timer messages
            # lacks): a stack trace on stderr after the lines compared here
            done = rocketmq.mqadmin(command, "-n", theirs.namesrv, *where, *options)
            assert done.returncode == 0 and done.stdout, done.stderr
            real = done.stdout
        else:
            real = mqadmin_ok(rocketmq, command, "-n", theirs.namesrv, *where, *options)
        assert ok(command, "-n", theirs.namesrv, *where, *options, "--format", "mqadmin") == real


def test_mqadmins_sub_group_commands_get_the_same_answers_from_ours(rocketmq: RocketMQCluster, theirs: Side,
                                                                    ours: Side) -> None:
    """(b) mqadmin creates the group, shows it with getConsumerConfig (201), finds it on every slave, deletes it
    and finds it nowhere: the same text from both clusters (but for the addresses)."""
    seen: list[list[str]] = []
    for side in (theirs, ours):
        master = side.master()
        steps = [mqadmin_ok(rocketmq, "updateSubGroup", "-n", side.namesrv, "-b", master, *SUB_OPTIONS),
                 mqadmin_ok(rocketmq, "getConsumerConfig", "-n", side.namesrv, "-g", SUB_GROUP)]
        created = group_on(master)
        assert created is not None and created["retryMaxTimes"] == 3 and created["consumeEnable"] is False
        for slave in (a for a in replicas(side.namesrv) if a != master):
            poll(copied(slave, created), 60, f"the group copied to slave {slave}")
        steps.append(mqadmin_ok(rocketmq, "deleteSubGroup", "-n", side.namesrv, "-b", master, "-g", SUB_GROUP))
        recreated = side is theirs and rocketmq.version in RECREATED_ON_DELETE
        assert group_on(master) == (SubscriptionGroupConfig(SUB_GROUP).to_json() if recreated else None)
        steps.append(mqadmin_ok(rocketmq, "getConsumerConfig", "-n", side.namesrv, "-g", SUB_GROUP))
        seen.append([normalised(step, CANNOT_BE_EQUAL) for step in steps])
    if rocketmq.version in RECREATED_ON_DELETE:  # theirs shows the group it re-created, ours nothing
        assert seen[1][:3] == seen[0][:3] and seen[1][3] == "" and "retryMaxTimes" in seen[0][3]
    else:
        assert seen[1] == seen[0]


# ---------------------------------------------------------------------------------------------- broker config
@pytest.mark.parametrize("how", ["-b", "-c"])
def test_get_broker_config_is_mqadmins_text(rocketmq: RocketMQCluster, theirs: Side, how: str) -> None:
    """(a) Every property of the master (-b), or of every master and slave (-c), in the order of the
    java.util.Properties mqadmin loads them into: the same bytes."""
    where = ("-b", theirs.master()) if how == "-b" else ("-c", "DefaultCluster")
    real, mine = ask_both(rocketmq, ("getBrokerConfig", "-n", theirs.namesrv, *where))
    assert mine == real


def trace_on(side: Side, addresses: list[str]) -> list[str]:
    return [json.loads(ok("getBrokerConfig", "-n", side.namesrv, "-b", address, "--format", "json"))
            ["brokers"][0]["config"]["traceOn"] for address in addresses]


@pytest.mark.parametrize("how", ["-b", "-c -a"])
def test_update_broker_config_prints_mqadmins_text_and_the_brokers_take_it(rocketmq: RocketMQCluster, theirs: Side,
                                                                          how: str) -> None:
    """(a) mqadmin's updateBrokerConfig sets traceOn to false on RocketMQ's master (-b), or on every master and
    slave (-c with -a); mqctl's sets it back to true the same way: the same text, and each broker's
    configuration shows each change."""
    where = ("-b", theirs.master()) if how == "-b" else ("-c", "DefaultCluster", "-a", "true")
    targets = [theirs.master()] if how == "-b" else \
        [b["address"] for b in json.loads(ok("clusterList", "-n", theirs.namesrv, "--format", "json"))["brokers"]]
    real = mqadmin_ok(rocketmq, "updateBrokerConfig", "-n", theirs.namesrv, *where, "-k", "traceOn", "-v", "false")
    assert trace_on(theirs, targets) == ["false"] * len(targets)
    mine = ok("updateBrokerConfig", "-n", theirs.namesrv, *where, "-k", "traceOn", "-v", "true", "--format", "mqadmin")
    assert trace_on(theirs, targets) == ["true"] * len(targets)
    assert mine == real and real.count("update broker config success, ") == len(targets), real


def test_update_broker_config_is_refused_by_ours_with_the_reason(ours: Side) -> None:
    """(b) Our brokers take a configuration change by a restart only: mqctl says so, and changes nothing."""
    master = ours.master()
    done = mqctl("updateBrokerConfig", "-n", ours.namesrv, "-b", master, "-k", "traceOn", "-v", "false")
    assert (done.returncode, done.stdout) == (4, ""), done.stderr
    assert " ".join(done.stderr.split()) == (f"Error: broker {master} does not change its configuration at run time: "
                                             "mqctl's brokers take a change by a restart [REQUEST_CODE_NOT_SUPPORTED]")


def test_mqadmin_reads_our_brokers_config(rocketmq: RocketMQCluster, ours: Side) -> None:
    """(b) mqadmin's getBrokerConfig -c against ours lists every replica's properties (ours, not RocketMQ's:
    their names and values cannot be equal) as mqctl renders the same answers, the auth token masked."""
    real, mine = ask_both(rocketmq, ("getBrokerConfig", "-n", ours.namesrv, "-c", "DefaultCluster"))
    assert mine == real
    assert real.count("brokerName                                        =  broker-a\n") == 3
    assert "authToken                                         =  \n" in real
