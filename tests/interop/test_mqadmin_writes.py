"""mqctl's commands that change a real RocketMQ cluster, beside real mqadmin's, for each tested version: the
scenario of tests/interop/scenario.py, run on RocketMQ's cluster.

A write that leaves the same state however often it runs (creating a topic with the same options, a flush
offset, a read) is run by both tools at once, and must print the same bytes. A write that changes the state
runs once with each tool in the same state (an election of broker 2 by mqadmin, and back to broker 1 by
mqctl; a property set by one and set back by the other; one stopped broker id cleaned by each): each output
must be the text both print for that state, and the cluster must then be in the state asked for.
Normalised, and only there: the id of a sent message (each send makes its own) and haStatus's live figures.
"""

from __future__ import annotations

import re

import pytest

from tests.interop import scenario
from tests.interop.admin_sides import CLUSTER, GROUP, Side, mqctl
from tests.interop.normalise import live_figures
from tests.interop.scenario import Transcript
from tests.rocketmq import probe

pytestmark = pytest.mark.timeout(900)

Transcripts = tuple[Transcript, Transcript]

#: Steps both tools ran at once, whose outputs must be the same bytes.
SAME_BYTES = ["updateTopic -c", "updateTopic -b", "updateTopic with its options", "consumeMessage -g",
              "consumeMessage -i -o", "consumeMessage -i -c", "queryMsgByKey", "queryMsgByKey on broker 2 as master",
              "resetMasterFlushOffset", "getBrokerEpoch after the sends", "getControllerConfig after the update",
              "getSyncStateSet after the cleaning"]


@pytest.mark.parametrize("step", SAME_BYTES)
def test_the_same_bytes(transcripts: Transcripts, step: str) -> None:
    outputs = transcripts[0].outputs[step]
    assert outputs["mqctl"] == outputs["mqadmin"]


def test_ha_status_after_a_reset_master_flush_offset(transcripts: Transcripts) -> None:
    """The same bytes but for the live figures; the slave shows the offset both tools set."""
    outputs = transcripts[0].outputs["haStatus of the reset slave"]
    assert live_figures(outputs["mqctl"]) == live_figures(outputs["mqadmin"])
    assert f"\n#MasterFlushOffset\t{scenario.FLUSH_OFFSET}\n" in outputs["mqadmin"]


def test_reset_master_flush_offset_prints_what_mqadmin_prints(transcripts: Transcripts) -> None:
    assert transcripts[0].outputs["resetMasterFlushOffset"]["mqctl"] == (
        f"reset master flush offset to {scenario.FLUSH_OFFSET} success\n")


def test_update_topic_creates_the_topic_on_the_master(transcripts: Transcripts) -> None:
    """The master's topics after the elections (the group need not be whole again: after an election a
    RocketMQ slave may follow the old master for a while, scenario.py)."""
    master = str(transcripts[0].side.sync_state().master_address)
    topics = probe.topic_configs(master)
    assert (topics[scenario.TOPIC].read_queue_nums, topics[scenario.TOPIC].write_queue_nums) == (8, 8)
    options = topics[scenario.TOPIC_WITH_OPTIONS]
    assert (options.read_queue_nums, options.write_queue_nums, options.perm) == (4, 2, 4)
    assert transcripts[0].outputs["updateTopic with its options"]["mqadmin"].endswith(
        f"TopicConfig [topicName={scenario.TOPIC_WITH_OPTIONS}, readQueueNums=4, writeQueueNums=2, perm=R--, "
        "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false, attributes={}]\n")


def sent_id(output: str) -> str:
    return output.splitlines()[1].rsplit(" ", 1)[1]


def test_send_message(transcripts: Transcripts) -> None:
    """The same line but for the message's id (each send makes its own); both ids are those a consumer then
    sees (the messages' UNIQ_KEYs)."""
    by_mqadmin = transcripts[0].outputs["sendMessage by mqadmin"]["mqadmin"]
    by_mqctl = transcripts[0].outputs["sendMessage by mqctl"]["mqctl"]
    assert re.fullmatch(r"[0-9A-F]{32}", sent_id(by_mqctl))
    assert by_mqctl.replace(sent_id(by_mqctl), "<msgId>") == by_mqadmin.replace(sent_id(by_mqadmin), "<msgId>")
    assert by_mqadmin.splitlines()[1].startswith(f"{GROUP:<32}  {scenario.QUEUE:<4}  {'SEND_OK':<20}    ")
    consumed = transcripts[0].outputs["consumeMessage -g"]["mqadmin"]
    assert [line.split()[1] for line in consumed.splitlines() if line.startswith("MSGID: ")] == [
        sent_id(by_mqadmin), sent_id(by_mqctl)]


def elected(side: Side, before_master_epoch: int, target: int, sync_state_set_epoch: int) -> str:
    return (f"\n#ClusterName\t{CLUSTER}\n#BrokerName\t{GROUP}\n#BrokerMasterAddr\t{side.broker(target)}"
            f"\n#MasterEpoch\t{before_master_epoch + 1}\n#SyncStateSetEpoch\t{sync_state_set_epoch}\n")


@pytest.mark.parametrize(("step", "tool", "target"), [("electMaster to 2", "mqadmin", 2),
                                                      ("electMaster back to 1", "mqctl", 1)])
def test_elect_master(transcripts: Transcripts, step: str, tool: str, target: int) -> None:
    """Each tool's output is the text of the election it made: the new master, the next master epoch, and a
    SyncStateSet epoch above the one before (replicas that rejoined in between may have moved it on)."""
    side, before = transcripts[0].side, transcripts[0].contexts[step]["before"]
    output = transcripts[0].outputs[step][tool]
    if tool == "mqadmin" and scenario.STEP[step].mqadmin_fails(side.version):
        # mqadmin of this version cannot read the answer (scenario.UNREADABLE_ELECTION), but the election
        # is made: the state the next step started from has broker 2 master, one master epoch up
        assert output.startswith(scenario.FAILED) and f'"syncStateSet":[{target}]}}' in output, output
        after = transcripts[0].contexts["electMaster back to 1"]["before"]
        assert (after.master_broker_id, after.master_epoch) == (target, before.master_epoch + 1)
        return
    epoch = int(output.rsplit("\t", 1)[1])
    assert before.sync_state_set_epoch < epoch <= side.sync_state().sync_state_set_epoch
    assert output == elected(side, before.master_epoch, target, epoch)


def test_the_elections_left_broker_1_master(transcripts: Transcripts) -> None:
    side = transcripts[0].side
    state = side.in_sync(1)
    before = transcripts[0].contexts["electMaster to 2"]["before"]
    assert (state.master_broker_id, state.master_address, state.master_epoch) == (1, side.broker(1),
                                                                                  before.master_epoch + 2)


@pytest.mark.parametrize(("step", "tool", "value"), [("updateControllerConfig", "mqadmin", scenario.CONFIG_VALUE),
                                                     ("updateControllerConfig back", "mqctl", scenario.CONFIG_BACK)])
def test_update_controller_config(transcripts: Transcripts, step: str, tool: str, value: str) -> None:
    side = transcripts[0].side
    assert transcripts[0].outputs[step][tool] == (
        f"update controller config success![{', '.join(side.controllers)}]\n{scenario.CONFIG_KEY} : {value}\n")


def test_update_controller_config_changes_every_node(transcripts: Transcripts) -> None:
    """mqadmin's change shows on every node; mqctl's change back too."""
    config = transcripts[0].outputs["getControllerConfig after the update"]["mqadmin"]
    assert config.count(f"\n{scenario.CONFIG_KEY:<50}=  {scenario.CONFIG_VALUE}\n") == 3
    now = mqctl("getControllerConfig", "-a", transcripts[0].side.controller_addrs, "--format", "mqadmin")
    assert now.stdout.count(f"\n{scenario.CONFIG_KEY:<50}=  {scenario.CONFIG_BACK}\n") == 3, now.stderr


@pytest.mark.parametrize(("step", "tool"), [("cleanBrokerMetadata by mqadmin", "mqadmin"),
                                            ("cleanBrokerMetadata by mqctl", "mqctl")])
def test_clean_broker_metadata(transcripts: Transcripts, step: str, tool: str) -> None:
    assert transcripts[0].outputs[step][tool] == f"clear broker {GROUP} metadata from controller success! \n"


def test_clean_broker_metadata_removed_the_ids(transcripts: Transcripts) -> None:
    """Both stopped ids were registered (each prepared before its step) and are gone after the cleaning."""
    phantoms = transcripts[0].contexts["cleanBrokerMetadata by mqctl"]["phantoms"]
    assert len(set(phantoms)) == 2
    after = transcripts[0].outputs["getSyncStateSet after the cleaning"]["mqadmin"]
    assert re.findall(r"brokerId=(\d+)", after) == ["1", "2", "3"]


def test_consume_message_of_one_queue(transcripts: Transcripts) -> None:
    """From an offset: the second message sent (mqctl's); cut to a count: mqadmin's note (spelt as it spells
    it), then the first (mqadmin's)."""
    outputs = transcripts[0].outputs
    from_offset = outputs["consumeMessage -i -o"]["mqadmin"]
    cut = outputs["consumeMessage -i -c"]["mqadmin"]
    by_mqadmin = sent_id(outputs["sendMessage by mqadmin"]["mqadmin"])
    by_mqctl = sent_id(outputs["sendMessage by mqctl"]["mqctl"])
    assert [line.split()[1] for line in from_offset.splitlines() if line.startswith("MSGID: ")] == [by_mqctl]
    assert cut.startswith("The oldler 1 message will be provided\nConsume ok\n")
    assert [line.split()[1] for line in cut.splitlines() if line.startswith("MSGID: ")] == [by_mqadmin]
