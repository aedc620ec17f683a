"""Real mqadmin administers our cluster as it administers RocketMQ's: the same questions, and the same
scripted scenario (tests/interop/scenario.py), asked of our controllers (also our name server) and brokers
and of RocketMQ's, for each tested version, give the same output once what must differ between two
clusters is made equal (tests/interop/normalise.py says what and why, and each test below names the rules
it applies).

RocketMQ's side of the scenario is the output of the tool that ran each step there (mqadmin, or mqctl
where the scenario has mqctl make the change: test_mqadmin_writes.py holds it to mqadmin's text).
"""

from __future__ import annotations

import pytest

from services.common.rocketmq_properties import CONTROLLER_PROPERTIES
from tests.interop import normalise as n
from tests.interop import scenario
from tests.interop.admin_sides import Side
from tests.interop.conftest import Answers
from tests.interop.normalise import Addresses, Rule, applied
from tests.interop.scenario import STEP, STEPS, Transcript
from tests.rocketmq import probe

pytestmark = pytest.mark.timeout(900)

Transcripts = tuple[Transcript, Transcript]

#: The rules each question of conftest.QUESTIONS needs besides the addresses (normalise.py: why).
QUESTION_RULES: dict[str, tuple[Rule, ...]] = {
    "getControllerMetaData": (n.leader,),
    "getSyncStateSet -b": (n.sync_state_set_epoch,), "getSyncStateSet -c": (n.sync_state_set_epoch,),
    "getBrokerEpoch -b": (n.commit_log_offsets, n.blocks_sorted),
    "getBrokerEpoch -c": (n.commit_log_offsets, n.blocks_sorted),
    "haStatus master": (n.live_figures, n.commit_log_offsets),
    "haStatus slave": (n.live_figures, n.commit_log_offsets),
    "haStatus -c": (n.live_figures, n.commit_log_offsets),
}


#: The rules each step of the scenario needs besides the addresses.
STEP_RULES: dict[str, tuple[Rule, ...]] = {
    "sendMessage by mqadmin": (n.message_ids,), "sendMessage by mqctl": (n.message_ids,),
    "consumeMessage -g": (n.message_ids, n.times, n.commit_log_offsets),
    "consumeMessage -i -o": (n.message_ids, n.times, n.commit_log_offsets),
    "consumeMessage -i -c": (n.message_ids, n.times, n.commit_log_offsets),
    "queryMsgByKey": (n.message_ids, n.index_keys), "queryMsgByKey on broker 2 as master": (n.message_ids, n.index_keys),
    "haStatus of the reset slave": (n.live_figures, n.commit_log_offsets),
    "getBrokerEpoch after the sends": (n.commit_log_offsets, n.blocks_sorted),
    "getSyncStateSet after the cleaning": (n.sync_state_set_epoch,),
    "electMaster to 2": (n.sync_state_set_epoch,), "electMaster back to 1": (n.sync_state_set_epoch,),
}
COMPARED_STEPS = [s.name for s in STEPS if s.ours and s.name != "getControllerConfig after the update"]


def both(sides: tuple[Side, Side], theirs: str, ours: str, rules: tuple[Rule, ...]) -> tuple[str, str]:
    return (applied(theirs, (Addresses(sides[0]), *rules)), applied(ours, (Addresses(sides[1]), *rules)))


@pytest.mark.parametrize("question", list(QUESTION_RULES))
def test_the_questions(answers: Answers, ours_answers: dict[str, str], sides: tuple[Side, Side],
                       question: str) -> None:
    theirs, ours = both(sides, answers.theirs[question], ours_answers[question], QUESTION_RULES[question])
    assert ours == theirs


def test_each_side_names_its_leader_among_its_peers(answers: Answers, ours_answers: dict[str, str]) -> None:
    """The leader's id and address are normalised above; each must still be one of the peers listed."""
    for text in (answers.theirs["getControllerMetaData"], ours_answers["getControllerMetaData"]):
        fields = dict(line[1:].split("\t", 1) for line in text.splitlines() if line.startswith("#Controller"))
        assert f"#Peer:\t{fields['ControllerLeaderId']}:{fields['ControllerLeaderAddress']}" in text


def test_each_side_counts_every_join_in_its_sync_state_set_epoch(answers: Answers,
                                                                ours_answers: dict[str, str]) -> None:
    """The SyncStateSet epochs are normalised above (their count of changes depends on timing); on each side
    the steady group of three shows one change at least for its first master and each of two joins."""
    for text in (answers.theirs["getSyncStateSet -b"], ours_answers["getSyncStateSet -b"]):
        [epoch] = n.sync_state_set_epochs(text)
        assert epoch >= 3, text


@pytest.mark.parametrize("step", COMPARED_STEPS)
def test_the_scenario(transcripts: Transcripts, sides: tuple[Side, Side], step: str) -> None:
    rocketmq, ours = transcripts
    shown = rocketmq.outputs[step]
    theirs = shown.get("mqadmin", shown.get("mqctl", ""))
    if step == "electMaster back to 1" and STEP[step].mqadmin_fails(rocketmq.side.version):
        # mqctl made this election on RocketMQ's side, and mqadmin of this version fails on reading the
        # answer (scenario.UNREADABLE_ELECTION): its failure on ours must be the one it had on RocketMQ's
        # for the election before, but for the new SyncStateSet
        theirs = rocketmq.outputs["electMaster to 2"]["mqadmin"].replace('"syncStateSet":[2]', '"syncStateSet":[1]')
    theirs, mine = both(sides, theirs, ours.outputs[step]["mqadmin"], STEP_RULES.get(step, ()))
    assert mine == theirs


def test_update_topic_with_its_options_on_ours(transcripts: Transcripts) -> None:
    """mqadmin's updateTopic -r 4 -w 2 -p 4 gives our master (broker 1 then) the topic as asked, as it gives
    RocketMQ's."""
    topics = probe.topic_configs(transcripts[1].side.broker(1))
    options = topics[scenario.TOPIC_WITH_OPTIONS]
    assert (options.read_queue_nums, options.write_queue_nums, options.perm) == (4, 2, 4)


def test_the_elections_left_broker_1_master_on_ours(transcripts: Transcripts) -> None:
    """mqadmin's two elections on our side took effect (whatever mqadmin could read of their answers)."""
    side = transcripts[1].side
    before = transcripts[1].contexts["electMaster to 2"]["before"]
    between = transcripts[1].contexts["electMaster back to 1"]["before"]
    assert (between.master_broker_id, between.master_epoch) == (2, before.master_epoch + 1)
    state = side.in_sync(1)
    assert (state.master_broker_id, state.master_epoch) == (1, before.master_epoch + 2)


# ---------------------------------------------------------------------------------- getControllerConfig
#: What only our controllers define (RocketMQ's ignore them): Raft, TLS, HTTP limits, auth, logging; and the
#: name server's settings our controllers act on as the name servers (orderMessageEnable, enableAllTopicList).
ONLY_OURS = frozenset({
    "acceptLegacySignatures", "authToken", "consoleReportDir", "enableAllTopicList", "orderMessageEnable", "controllerRaftPassword", "controllerRaftPasswordFile",
    "controllerRaftPort", "controllerRequestTimeoutMillis", "httpAllowedHosts", "httpBodyTimeoutMillis",
    "httpHeaderTimeoutMillis", "httpMaxConnections", "listenAddress", "logLevel", "maxHeartbeatTimeoutMillis",
    "raftElectionTimeoutMaxMillis", "raftElectionTimeoutMinMillis", "raftHeartbeatIntervalMillis",
    "raftLeaderFallbackTimeoutMillis", "raftLogCompactionMinEntries", "raftLogCompactionMinTimeSecs", "strictConfig",
    "tlsClientAuthServer", "tlsClientCertPath", "tlsClientKeyPassword", "tlsClientKeyPath", "tlsClientTrustCertPath",
    "tlsConfigFile", "tlsEnable", "tlsMode", "tlsServerAuthClient", "tlsServerCertPath", "tlsServerKeyPassword",
    "tlsServerKeyPath", "tlsServerNeedClientAuth", "tlsServerTrustCertPath"})
#: What only RocketMQ's controller shows: its Netty server's, DLedger's, metrics' and the name server's
#: settings (our controllers accept each of them in a config file, with a warning: controller-config.md).
ONLY_ROCKETMQ = frozenset({
    "bindAddress", "configBlackList", "controllerRequestThreadPoolQueueCapacity", "controllerThreadPoolNums",
    "controllerType", "enableShutdownGracefully", "isProcessReadEvent", "jraftConfig", "listenPort", "mappedFileSize",
    "metricGrpcExporterIntervalInMills", "metricGrpcExporterTimeOutInMills", "metricLoggingExporterIntervalInMills",
    "metricsExporterType", "metricsGrpcExporterHeader", "metricsGrpcExporterTarget", "metricsInDelta", "metricsLabel",
    "metricsPromExporterHost", "metricsPromExporterPort", "rocketmqHome", "serverAsyncSemaphoreValue",
    "serverCallbackExecutorThreads", "serverChannelMaxIdleTimeSeconds", "serverNettyWorkerGroupEnable",
    "serverOnewaySemaphoreValue", "serverPooledByteBufAllocatorEnable", "serverSelectorThreads", "serverSocketBacklog",
    "serverSocketRcvBufSize", "serverSocketSndBufSize", "serverWorkerThreads", "shutdownWaitTimeSeconds",
    "useEpollNativeSelector", "writeBufferHighWaterMark", "writeBufferLowWaterMark"})
#: Where each side keeps its files: wherever its test put them.
PATHS = frozenset({"controllerStorePath", "configStorePath"})


def nodes(text: str, addresses: Addresses) -> dict[str, dict[str, str]]:
    """Each node's properties, by the node's role; every line in mqadmin's layout (key padded to 50, "=  ")."""
    found: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("============") and line.endswith("============"):
            current = found.setdefault(addresses(line.strip("=")), {})
            continue
        key, value = line[:50].rstrip(), line[53:]
        assert line[50:53] == "=  " and key and " " not in key, f"not in mqadmin's layout: {line!r}"
        current[key] = "<path>" if key in PATHS and value else addresses(value)
    return found


@pytest.mark.parametrize("when", ["question", "after the update"])
def test_get_controller_config(answers: Answers, ours_answers: dict[str, str], transcripts: Transcripts,
                               sides: tuple[Side, Side], when: str) -> None:
    """The same layout, the same nodes, and the same values of every property both define (addresses and
    paths normalised); the properties only one side has are the ones listed above."""
    if when == "question":
        texts = answers.theirs["getControllerConfig"], ours_answers["getControllerConfig"]
    else:
        step = "getControllerConfig after the update"
        texts = transcripts[0].outputs[step]["mqadmin"], transcripts[1].outputs[step]["mqadmin"]
    theirs, ours = nodes(texts[0], Addresses(sides[0])), nodes(texts[1], Addresses(sides[1]))
    assert sorted(ours) == sorted(theirs) == ["<controller n0>", "<controller n1>", "<controller n2>"]
    for node in theirs:
        shared = theirs[node].keys() & ours[node].keys()
        assert {k: ours[node][k] for k in shared} == {k: theirs[node][k] for k in shared}
        assert (theirs[node].keys() - ours[node].keys(), ours[node].keys() - theirs[node].keys()) == (
            ONLY_ROCKETMQ, ONLY_OURS)
    assert ONLY_ROCKETMQ <= CONTROLLER_PROPERTIES
