"""Broker commands (getBrokerEpoch, haStatus, sendMessage, consumeMessage) against the fake cluster."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from services.broker import contract as bc
from services.controller import contract
from tests.unit.cli.conftest import (
    DEAD_BROKER,
    DEAD_CONTROLLER,
    EPOCH_CACHE,
    FOLLOWER,
    HA_STATUS,
    LEADER,
    MASTER,
    SLAVE,
    FakeCluster,
    Invoke,
    assert_one_line_error,
    envelope,
    stored_message,
)


def dumped(doc: Any) -> str:
    return json.dumps(doc, indent=2) + "\n"


# ====================================================================== getBrokerEpoch
MASTER_EPOCH_MQADMIN = ("\n#clusterName\tDefaultCluster\n#brokerName\tbroker-a\n#brokerAddr\t127.0.0.1:10911"
                        "\n#brokerId\t0"
                        "\n#Epoch: EpochEntry{epoch=1, startOffset=0, endOffset=1000}"
                        "\n#Epoch: EpochEntry{epoch=3, startOffset=1000, endOffset=2500}"
                        "\n")
SLAVE_EPOCH_MQADMIN = ("\n#clusterName\tDefaultCluster\n#brokerName\tbroker-a\n#brokerAddr\t127.0.0.1:10921"
                       "\n#brokerId\t2"
                       "\n#Epoch: EpochEntry{epoch=1, startOffset=0, endOffset=1000}"
                       "\n#Epoch: EpochEntry{epoch=3, startOffset=1000, endOffset=2400}"
                       "\n")
DEAD_EPOCH_MQADMIN = ""  # as mqadmin: nothing on stdout for a broker that does not answer


def epoch_json_row(address: str) -> dict[str, Any]:
    data = EPOCH_CACHE[address]
    return {"clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerAddr": address,
            "brokerId": data["brokerId"], "role": data["role"], "epochEntries": data["epochEntries"],
            "maxOffset": data["maxOffset"], "confirmOffset": data["confirmOffset"], "reachable": True}


class TestGetBrokerEpoch:
    def test_mqadmin_master_shows_broker_id_0(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("getBrokerEpoch", "-a", LEADER, "-b", "broker-a", "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == MASTER_EPOCH_MQADMIN + SLAVE_EPOCH_MQADMIN
        assert result.stderr == ""
        assert [(r.address, r.path) for r in fake.requests] == [
            (LEADER, contract.SYNC_STATE_DATA), (MASTER, bc.EPOCH_CACHE),
            (SLAVE, bc.EPOCH_CACHE)]

    def test_mqadmin_cluster_with_an_unreachable_broker(self, mqctl: Invoke) -> None:
        result = mqctl("getBrokerEpoch", "-c", "DefaultCluster", "--format", "mqadmin")
        assert result.stdout == MASTER_EPOCH_MQADMIN + SLAVE_EPOCH_MQADMIN + DEAD_EPOCH_MQADMIN
        line = assert_one_line_error(result, 3)  # printed, then failed: like getControllerConfig
        assert line == "Error: no epoch entries from broker 127.0.0.1:10931 (unreachable: connection failed)"

    def test_json(self, mqctl: Invoke) -> None:
        result = mqctl("getBrokerEpoch", "-c", "DefaultCluster", "--format", "json")
        assert_one_line_error(result, 3, "no epoch entries from broker 127.0.0.1:10931")
        assert result.stdout == dumped({"brokers": [
            epoch_json_row(MASTER), epoch_json_row(SLAVE),
            {"clusterName": "DefaultCluster", "brokerName": "broker-b", "brokerAddr": DEAD_BROKER, "brokerId": 1,
             "role": None, "epochEntries": [], "maxOffset": None, "confirmOffset": None, "reachable": False,
             "error": "broker 127.0.0.1:10931 is unreachable: connection failed"}]})

    def test_table(self, mqctl: Invoke) -> None:
        result = mqctl("getBrokerEpoch", "-c", "DefaultCluster")
        assert_one_line_error(result, 3, "no epoch entries from broker 127.0.0.1:10931")
        out = result.stdout
        assert ("DefaultCluster/broker-a broker 1 (127.0.0.1:10911)  MASTER  maxOffset=2500  "
                "confirmOffset=2500\n") in out
        assert ("DefaultCluster/broker-a broker 2 (127.0.0.1:10921)  SLAVE  maxOffset=2400  "
                "confirmOffset=2400\n") in out
        assert "│     3 │         1000 │       2500 │" in out
        assert ("DefaultCluster/broker-b broker 1 (127.0.0.1:10931): unreachable — broker 127.0.0.1:10931 is "
                "unreachable: connection failed\n") in out

    def test_a_follower_leads_to_the_leader(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("get-broker-epoch", "-a", FOLLOWER, "-b", "broker-a", "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == MASTER_EPOCH_MQADMIN + SLAVE_EPOCH_MQADMIN
        assert [r.address for r in fake.hits(path=contract.SYNC_STATE_DATA)] == [FOLLOWER, LEADER]

    def test_a_slave_that_became_master_shows_0(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.epoch_cache[MASTER]["role"] = "SLAVE"
        fake.epoch_cache[SLAVE]["role"] = "MASTER"
        result = mqctl("getBrokerEpoch", "-b", "broker-a", "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert "#brokerAddr\t127.0.0.1:10911\n#brokerId\t1\n" in result.stdout
        assert "#brokerAddr\t127.0.0.1:10921\n#brokerId\t0\n" in result.stdout

    def test_broker_answering_an_error_is_shown(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.override(SLAVE, bc.EPOCH_CACHE, envelope(1, None, "this request only for controllerMode "))
        result = mqctl("getBrokerEpoch", "-b", "broker-a", "--format", "mqadmin")
        assert_one_line_error(result, 3, "no epoch entries from broker 127.0.0.1:10921")
        assert result.stdout == MASTER_EPOCH_MQADMIN
        assert "this request only for controllerMode  [SYSTEM_ERROR]" in result.stderr

    def test_watch_mode(self, mqctl: Invoke) -> None:
        result = mqctl("getBrokerEpoch", "-b", "broker-a", "--format", "mqadmin", "--count", "2", "-i", "0.1")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == (MASTER_EPOCH_MQADMIN + SLAVE_EPOCH_MQADMIN) * 2

    def test_replicas_in_ascending_id_order_whatever_their_sync_state(self, mqctl: Invoke,
                                                                       fake: FakeCluster) -> None:
        bs = fake.sync_state["broker-a"]
        bs["inSyncReplicas"], bs["notInSyncReplicas"] = bs["notInSyncReplicas"], bs["inSyncReplicas"]
        result = mqctl("getBrokerEpoch", "-b", "broker-a", "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == MASTER_EPOCH_MQADMIN + SLAVE_EPOCH_MQADMIN

    def test_unknown_cluster(self, mqctl: Invoke) -> None:
        result = mqctl("getBrokerEpoch", "-c", "NoSuchCluster")
        line = assert_one_line_error(result, 2)
        assert line == "Error: cluster NoSuchCluster is not known to the controller"

    def test_controller_unreachable(self, mqctl: Invoke) -> None:
        result = mqctl("getBrokerEpoch", "-a", DEAD_CONTROLLER, "-b", "broker-a", "--format", "mqadmin",
                       timeout="0.1")
        assert result.stdout == ""
        line = assert_one_line_error(result, 3)
        assert line == "Error: no controller reachable at 127.0.0.1:9858"

    def test_needs_b_or_c(self, mqctl: Invoke) -> None:
        result = mqctl("getBrokerEpoch", "--format", "mqadmin")
        assert result.stdout == ""
        assert_one_line_error(result, 2, "give -b brokerName or -c clusterName")

    def test_unknown_broker_name(self, mqctl: Invoke) -> None:
        result = mqctl("getBrokerEpoch", "-b", "nope")
        assert_one_line_error(result, 2, "broker-set nope is not known to the controller")


# ====================================================================== haStatus
HA_HEADER = ("#SlaveAddr" + " " * 22 + "  " + "#SlaveAckOffset" + " " + " " + " " * 11 + "#Diff" + " "
             + "#TransferSpeed(KB/s)" + " " + " " * 9 + "#Status" + " " + "#TransferFromWhere" + "\n")
#            "%-32s  %-16d %16d %16.2f %16s %16d\n"
HA_ROW = ("127.0.0.1:53422" + " " * 17 + "  " + "2400" + " " * 12 + " " + " " * 13 + "100" + " "
          + " " * 11 + "12.50" + " " + " " * 5 + "Fall Behind" + " " + " " * 15 + "0" + "\n")
MASTER_HA_MQADMIN = ("\n#MasterAddr\t127.0.0.1:10911\n#MasterCommitLogMaxOffset\t2500\n#SlaveNum\t1"
                     "\n#InSyncSlaveNum\t0\n" + HA_HEADER + HA_ROW)
SLAVE_HA_MQADMIN = ("\n#MasterAddr\t127.0.0.1:10912\n#CommitLogMaxOffset\t2400\n#TransferSpeed(KB/s)\t3.50"
                    "\n#LastReadTime\t2023-11-14 22:13:20,123\n#LastWriteTime\t2023-11-14 22:13:20,456"
                    "\n#MasterFlushOffset\t2200\n")


class TestHaStatus:
    def test_mqadmin_master_and_slave(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("haStatus", "-b", "broker-a", "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == MASTER_HA_MQADMIN + SLAVE_HA_MQADMIN
        assert [(r.address, r.path) for r in fake.requests] == [
            (LEADER, contract.SYNC_STATE_DATA), (MASTER, bc.HA_STATUS),
            (SLAVE, bc.HA_STATUS)]

    def test_mqadmin_in_sync_slave_is_ok(self, mqctl: Invoke, fake: FakeCluster) -> None:
        master = fake.ha_status[MASTER]
        master["slaves"][0].update(inSync=True, ackOffset=2500, lag=0, transferFromWhere=1024)
        master.update(syncStateSet=[1, 2], inSyncSlaveNums=1)
        result = mqctl("haStatus", "--brokerAddr", MASTER, "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == (
            "\n#MasterAddr\t127.0.0.1:10911\n#MasterCommitLogMaxOffset\t2500\n#SlaveNum\t1\n#InSyncSlaveNum\t1\n"
            + HA_HEADER
            + "127.0.0.1:53422" + " " * 17 + "  " + "2500" + " " * 12 + " " + " " * 15 + "0" + " "
            + " " * 11 + "12.50" + " " + " " * 14 + "OK" + " " + " " * 12 + "1024" + "\n")
        assert [r.address for r in fake.requests] == [MASTER]  # --brokerAddr needs no controller

    def test_b_with_an_address_is_that_broker_as_in_mqadmin(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("haStatus", "-b", SLAVE, "--format", "mqadmin")
        assert (result.exit_code, result.stdout) == (0, SLAVE_HA_MQADMIN)
        assert [r.address for r in fake.requests] == [SLAVE]

    def test_mqadmin_slave_never_read(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.ha_status[SLAVE].update(lastReadTimestamp=None, lastWriteTimestamp=None, state="READY")
        result = mqctl("haStatus", "--brokerAddr", SLAVE, "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == ("\n#MasterAddr\t127.0.0.1:10912\n#CommitLogMaxOffset\t2400"
                                 "\n#TransferSpeed(KB/s)\t3.50\n#LastReadTime\t1970-01-01 00:00:00,000"
                                 "\n#LastWriteTime\t1970-01-01 00:00:00,000\n#MasterFlushOffset\t2200\n")

    def test_mqadmin_unreachable_broker_prints_nothing_then_fails(self, mqctl: Invoke) -> None:
        result = mqctl("haStatus", "--brokerAddr", "127.0.0.1:10931", "--format", "mqadmin")
        assert result.stdout == ""  # nothing for the dead one, as mqadmin (its error goes to stderr)
        line = assert_one_line_error(result, 3)
        assert line == "Error: no status from broker 127.0.0.1:10931 (unreachable: connection failed)"

    def test_mqadmin_cluster_shows_its_masters_only(self, mqctl: Invoke) -> None:
        """As mqadmin's haStatus -c: each group's master (the dead slave is not asked)."""
        result = mqctl("haStatus", "-c", "DefaultCluster", "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == MASTER_HA_MQADMIN

    def test_json(self, mqctl: Invoke) -> None:
        result = mqctl("haStatus", "-b", "broker-a", "--format", "json")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == dumped({"brokers": [{"reachable": True, **HA_STATUS[MASTER]},
                                                    {"reachable": True, **HA_STATUS[SLAVE]}]})

    def test_table(self, mqctl: Invoke) -> None:
        result = mqctl("haStatus", "-c", "DefaultCluster")
        assert_one_line_error(result, 3, "no status from broker 127.0.0.1:10931")
        out = result.stdout
        assert ("DefaultCluster/broker-a broker 1 (127.0.0.1:10911)  MASTER  masterEpoch=3  maxOffset=2500  "
                "confirmOffset=2400  syncStateSet=[1]\n") in out
        assert "│ 2     │ 127.0.0.1:53422 │ 2400       │ 100         │ no      │ 1.5s ago       │" in out
        assert ("DefaultCluster/broker-a broker 2 (127.0.0.1:10921)  SLAVE  masterEpoch=3  maxOffset=2400  "
                "confirmOffset=2400\n  replicating from 127.0.0.1:10911 (TRANSFER)\n") in out
        assert "127.0.0.1:10931: unreachable — broker 127.0.0.1:10931 is unreachable: connection failed\n" in out

    def test_watch_mode(self, mqctl: Invoke) -> None:
        result = mqctl("ha-status", "--brokerAddr", SLAVE, "--format", "mqadmin", "--count", "2", "-i", "0.1")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == SLAVE_HA_MQADMIN * 2

    def test_closed_port_exits_3(self, mqctl: Invoke) -> None:
        result = mqctl("haStatus", "--brokerAddr", DEAD_BROKER)
        assert result.stdout == "127.0.0.1:10931: unreachable — broker 127.0.0.1:10931 is unreachable: connection failed\n"
        line = assert_one_line_error(result, 3)
        assert line == "Error: no status from broker 127.0.0.1:10931 (unreachable: connection failed)"

    def test_watch_exit_follows_the_last_refresh(self, mqctl: Invoke, fake: FakeCluster) -> None:
        def down_then_up(request: httpx.Request, n: int) -> Any:
            if n == 0:
                return httpx.ConnectError("[Errno 111] Connection refused", request=request)
            return envelope(0, HA_STATUS[SLAVE])

        fake.override(SLAVE, bc.HA_STATUS, down_then_up)
        result = mqctl("haStatus", "--brokerAddr", SLAVE, "--format", "mqadmin", "--count", "2", "-i", "0.1")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == SLAVE_HA_MQADMIN

    def test_watch_ending_unreachable_exits_3(self, mqctl: Invoke) -> None:
        result = mqctl("haStatus", "--brokerAddr", DEAD_BROKER, "--format", "json", "--count", "2", "-i", "0.1")
        assert result.stdout.count('"reachable": false') == 2
        assert_one_line_error(result, 3, "no status from broker 127.0.0.1:10931")

    def test_mqadmin_fenced_broker(self, mqctl: Invoke, fake: FakeCluster) -> None:
        # a fenced broker answers only the common fields; Java's %s of a missing value is "null"
        fake.ha_status[SLAVE] = {"clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": 2,
                                 "brokerAddr": SLAVE, "role": "FENCED", "masterEpoch": 3, "maxOffset": 2400,
                                 "confirmOffset": 2300, "flushedOffset": 2400}
        result = mqctl("haStatus", "--brokerAddr", SLAVE, "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == ("\n#MasterAddr\tnull\n#CommitLogMaxOffset\t2400\n#TransferSpeed(KB/s)\t0.00"
                                 "\n#LastReadTime\t1970-01-01 00:00:00,000\n#LastWriteTime\t1970-01-01 00:00:00,000"
                                 "\n#MasterFlushOffset\t0\n")  # never reset: RocketMQ's 0

    def test_controller_unreachable(self, mqctl: Invoke) -> None:
        result = mqctl("haStatus", "-a", DEAD_CONTROLLER, "-b", "broker-a", "--format", "mqadmin", timeout="0.1")
        assert result.stdout == ""
        assert_one_line_error(result, 3, "no controller reachable at 127.0.0.1:9858")

    def test_needs_a_target(self, mqctl: Invoke) -> None:
        result = mqctl("haStatus", "--format", "mqadmin")
        assert_one_line_error(result, 2, "give -b brokerName or -c clusterName")


# ====================================================================== sendMessage
#: The ids mqctl gives the messages it sends (UNIQ_KEY), made predictable for these tests.
UNIQ = [f"C0A8000100002A9F{n:016X}" for n in range(4)]
SENT_0 = {"brokerName": None, "brokerAddr": MASTER, "status": "PUT_OK",
          "msgId": "7F00000100002A9F00000000000009C4", "uniqKey": UNIQ[0], "queueId": 0, "queueOffset": 7,
          "commitLogOffset": 2500}


@pytest.fixture(autouse=True)
def predictable_uniq_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    ids = iter(UNIQ)
    monkeypatch.setattr("mqctl.commands.broker.new_uniq_id", lambda: next(ids))


class TestSendMessage:
    def test_json_to_a_broker_address(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("sendMessage", "-t", "TopicTest", "-p", "hello", "--brokerAddr", MASTER, "--format", "json")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == ('{\n  "brokerName": null,\n  "brokerAddr": "127.0.0.1:10911",\n'
                                 '  "status": "PUT_OK",\n  "msgId": "7F00000100002A9F00000000000009C4",\n'
                                 f'  "uniqKey": "{UNIQ[0]}",\n'
                                 '  "queueId": 0,\n  "queueOffset": 7,\n  "commitLogOffset": 2500\n}\n')
        [request] = fake.requests
        assert (request.address, request.method, request.path) == (MASTER, "POST", bc.SEND_MESSAGE)
        assert request.body == {"topic": "TopicTest", "body": "hello", "keys": "", "tags": "", "queueId": None,
                                "properties": {"UNIQ_KEY": UNIQ[0]}}

    def test_json_by_broker_name_finds_the_master(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("sendMessage", "-a", FOLLOWER, "-t", "TopicTest", "-p", "hello", "-b", "broker-a",
                       "-k", "order-42", "--tags", "TagA", "-q", "1", "--format", "json")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == dumped({**SENT_0, "brokerName": "broker-a", "queueId": 1})
        [send] = fake.hits(path=bc.SEND_MESSAGE)
        assert send.address == MASTER
        assert send.body == {"topic": "TopicTest", "body": "hello", "keys": "order-42", "tags": "TagA",
                             "queueId": 1, "properties": {"UNIQ_KEY": UNIQ[0]}}

    def test_json_count(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("sendMessage", "-t", "TopicTest", "-p", "hi", "-b", "broker-a", "--count", "2",
                       "--format", "json")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == dumped({"results": [
            {**SENT_0, "brokerName": "broker-a"},
            {"brokerName": "broker-a", "brokerAddr": MASTER, "status": "PUT_OK",
             "msgId": "7F00000100002A9F0000000000000A28", "uniqKey": UNIQ[1], "queueId": 1, "queueOffset": 8,
             "commitLogOffset": 2600}]})
        assert [r.body["body"] for r in fake.hits(path=bc.SEND_MESSAGE)] == ["hi #0", "hi #1"]

    def test_follows_the_slave_to_the_master(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.sync_state["broker-a"]["masterAddress"] = SLAVE  # a stale controller view
        result = mqctl("sendMessage", "-t", "TopicTest", "-p", "hello", "-b", "broker-a", "--format", "json")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == dumped({**SENT_0, "brokerName": "broker-a"})
        assert [r.address for r in fake.hits(path=bc.SEND_MESSAGE)] == [SLAVE, MASTER]

    def test_mqadmin(self, mqctl: Invoke) -> None:
        """As the Java producer's SendResult: SEND_OK, and the id the message was sent with (its UNIQ_KEY)."""
        result = mqctl("sendMessage", "-t", "TopicTest", "-p", "hello", "-b", "broker-a", "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == ("#Broker Name" + " " * 20 + "  #QID  #Send Result" + " " * 8 + "    #MsgId\n"
                                 "broker-a" + " " * 24 + "  0     SEND_OK" + " " * 13 + f"    {UNIQ[0]}\n")

    def test_mqadmin_options_of_mqadmin(self, mqctl: Invoke, fake: FakeCluster) -> None:
        """mqadmin's -i names the queue, as -q does; a cluster's first master is shown by its group's name."""
        result = mqctl("sendMessage", "-t", "TopicTest", "-p", "hello", "-c", "DefaultCluster", "-i", "1",
                       "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert result.stdout.splitlines()[1] == "broker-a" + " " * 24 + "  1     SEND_OK" + " " * 13 + f"    {UNIQ[0]}"
        [send] = fake.hits(path=bc.SEND_MESSAGE)
        assert send.body["queueId"] == 1

    def test_table(self, mqctl: Invoke) -> None:
        result = mqctl("sendMessage", "-t", "TopicTest", "-p", "hello", "--brokerAddr", MASTER)
        assert result.exit_code == 0, result.stderr
        assert result.stdout.startswith("Sent to 127.0.0.1:10911\n")
        row = "│ PUT_OK │ 7F00000100002A9F00000000000009C4 │ 0     │ 7            │ 2500             │"
        assert row in result.stdout

    def test_slave_address_given_directly_is_refused(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("sendMessage", "-t", "TopicTest", "-p", "hello", "--brokerAddr", SLAVE, "--format", "json")
        assert result.stdout == ""
        line = assert_one_line_error(result, 4)
        assert line == ("Error: this broker is a slave; write to the master at 127.0.0.1:10911 "
                        "[SERVICE_NOT_AVAILABLE]")
        assert [r.address for r in fake.requests] == [SLAVE]

    def test_broker_set_without_master(self, mqctl: Invoke) -> None:
        result = mqctl("sendMessage", "-t", "TopicTest", "-p", "hello", "-b", "broker-b", "--format", "json")
        line = assert_one_line_error(result, 4)
        assert line == "Error: broker-b has no master right now [CONTROLLER_MASTER_NOT_AVAILABLE]"

    def test_cluster_picks_the_first_broker_set_with_a_master(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.sync_state["broker-a"].update(masterBrokerId=None, masterAddress=None)
        fake.sync_state["broker-b"].update(masterBrokerId=1, masterAddress=MASTER)
        result = mqctl("sendMessage", "-t", "TopicTest", "-p", "hello", "-c", "DefaultCluster", "--format", "json")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == dumped({**SENT_0, "brokerName": "broker-b"})  # the group whose master it is
        [request] = fake.hits(path=contract.SYNC_STATE_DATA)
        assert request.params == {"clusterName": ["DefaultCluster"]}

    def test_cluster_without_any_master(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.sync_state["broker-a"].update(masterBrokerId=None, masterAddress=None)
        result = mqctl("sendMessage", "-t", "TopicTest", "-p", "hello", "-c", "DefaultCluster")
        line = assert_one_line_error(result, 4)
        assert line == "Error: DefaultCluster has no master right now [CONTROLLER_MASTER_NOT_AVAILABLE]"

    def test_flush_slave_timeout_exits_4(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.override(MASTER, bc.SEND_MESSAGE, envelope(12, {
            "status": "FLUSH_SLAVE_TIMEOUT", "msgId": "7F00000100002A9F00000000000009C4", "queueId": 0,
            "queueOffset": 7, "commitLogOffset": 2500},
            "not enough replicas acknowledged within slaveTimeout (3000 ms)"))
        result = mqctl("sendMessage", "-t", "TopicTest", "-p", "hello", "-b", "broker-a", "--format", "json")
        assert result.stdout == ""
        line = assert_one_line_error(result, 4)
        assert line == ("Error: not enough replicas acknowledged within slaveTimeout (3000 ms) "
                        "[FLUSH_SLAVE_TIMEOUT]")

    def test_unreachable_broker(self, mqctl: Invoke) -> None:
        result = mqctl("sendMessage", "-t", "TopicTest", "-p", "hello", "--brokerAddr", DEAD_BROKER)
        line = assert_one_line_error(result, 3)
        assert line == "Error: broker 127.0.0.1:10931 is unreachable: connection failed"

    def test_broker_timeout(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.override(MASTER, bc.SEND_MESSAGE,
                      lambda request, n: httpx.ReadTimeout("timed out", request=request))
        result = mqctl("sendMessage", "-t", "TopicTest", "-p", "hello", "--brokerAddr", MASTER)
        line = assert_one_line_error(result, 3)
        assert line == "Error: broker 127.0.0.1:10911 timed out"

    def test_broker_answering_non_json(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.override(MASTER, bc.SEND_MESSAGE, httpx.Response(502, text="<html>Bad Gateway</html>"))
        result = mqctl("sendMessage", "-t", "TopicTest", "-p", "hello", "--brokerAddr", MASTER)
        line = assert_one_line_error(result, 4)
        assert line == ("Error: 127.0.0.1:10911 answered HTTP 502 without an envelope; is it a broker? "
                        "[SYSTEM_ERROR]")

    def test_needs_a_target(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("sendMessage", "-t", "TopicTest", "-p", "hello")
        assert_one_line_error(result, 2, "give -b brokerName or -c clusterName")
        assert fake.requests == []

    def test_topic_required(self, mqctl: Invoke) -> None:
        result = mqctl("sendMessage", "-p", "hello", "--brokerAddr", MASTER)
        assert result.exit_code == 2
        assert "Missing option '-t'" in result.stderr


# ====================================================================== consumeMessage
ALL_MESSAGES = [stored_message(0, 0, 0, "hello", "k1", "tagA"), stored_message(0, 1, 200, "world"),
                stored_message(1, 0, 100, "q1-first", "k2")]


class TestConsumeMessage:
    def test_json_every_queue(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("consumeMessage", "-t", "TopicTest", "--brokerAddr", MASTER, "--format", "json")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == dumped({"brokerAddr": MASTER, "messages": ALL_MESSAGES})
        assert result.stdout.startswith('{\n  "brokerAddr": "127.0.0.1:10911",\n  "messages": [\n    {\n'
                                        '      "msgId": "7F00000100002A9F0000000000000000",\n')
        pulls = [(r.params["queueId"], r.params["queueOffset"], r.params["maxNums"])
                 for r in fake.hits(path=bc.PULL_MESSAGE)]
        assert pulls == [(["0"], ["0"], ["32"]), (["0"], ["2"], ["30"]), (["1"], ["0"], ["30"]),
                         (["1"], ["1"], ["29"])]

    def test_json_one_queue_offset_and_count(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("consumeMessage", "-t", "TopicTest", "-q", "0", "-o", "1", "-n", "1", "-b", "broker-a",
                       "--format", "json")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == dumped({"brokerAddr": MASTER, "messages": [ALL_MESSAGES[1]]})
        assert fake.hits(path=bc.TOPICS) == []

    def test_json_from_a_slave(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.override(SLAVE, bc.TOPICS, envelope(0, {"topics": []}))
        fake.override(SLAVE, bc.PULL_MESSAGE, lambda request, n: envelope(0, {
            "status": "FOUND" if n == 0 else "NO_NEW_MSG", "nextBeginOffset": 1, "minOffset": 0, "maxOffset": 1,
            "messages": [ALL_MESSAGES[0]] if n == 0 else []}))
        result = mqctl("consumeMessage", "-t", "TopicTest", "-q", "0", "--brokerAddr", SLAVE, "--format", "json")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == dumped({"brokerAddr": SLAVE, "messages": [ALL_MESSAGES[0]]})

    def test_json_nothing_to_read(self, mqctl: Invoke) -> None:
        result = mqctl("consumeMessage", "-t", "TopicTest", "-q", "1", "-o", "1", "--brokerAddr", MASTER,
                       "--format", "json")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == '{\n  "brokerAddr": "127.0.0.1:10911",\n  "messages": []\n}\n'

    def test_table(self, mqctl: Invoke) -> None:
        result = mqctl("consumeMessage", "-t", "TopicTest", "--brokerAddr", MASTER)
        assert result.exit_code == 0, result.stderr
        assert result.stdout.startswith("3 message(s) from 127.0.0.1:10911\n")
        assert "│ 0     │ 1      │      │      │ world    │" in result.stdout

    def test_unreachable_broker(self, mqctl: Invoke) -> None:
        result = mqctl("consumeMessage", "-t", "TopicTest", "--brokerAddr", DEAD_BROKER, "--format", "json")
        assert result.stdout == ""
        line = assert_one_line_error(result, 3)
        assert line == "Error: broker 127.0.0.1:10931 is unreachable: connection failed"

    def test_broker_set_without_master(self, mqctl: Invoke) -> None:
        result = mqctl("consumeMessage", "-t", "TopicTest", "-b", "broker-b", "--format", "json")
        assert_one_line_error(result, 4, "[CONTROLLER_MASTER_NOT_AVAILABLE]")

    def test_unknown_topic(self, mqctl: Invoke) -> None:
        result = mqctl("consumeMessage", "-t", "NoSuchTopic", "--brokerAddr", MASTER, "--format", "json")
        assert result.stdout == ""
        line = assert_one_line_error(result, 2)
        assert line == "Error: topic NoSuchTopic does not exist on 127.0.0.1:10911"
