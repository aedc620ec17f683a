"""Controller admin commands against the fake controller group: exact mqadmin and json output, table
smoke checks, leader following and what each command sends."""

from __future__ import annotations

import json
from typing import Any

from services.controller import contract
from tests.unit.cli.conftest import (
    DEAD_CONTROLLER,
    FOLLOWER,
    LEADER,
    FakeCluster,
    Invoke,
    assert_one_line_error,
    envelope,
)

SYNC_PATH = contract.SYNC_STATE_DATA

METADATA_MQADMIN = ("\n#ControllerGroup\tDefaultControllerGroup"
                    "\n#ControllerLeaderId\tn0"
                    "\n#ControllerLeaderAddress\t127.0.0.1:9878"
                    "\n#Peer:\tn0:127.0.0.1:9878"
                    "\n#Peer:\tn1:127.0.0.1:9868"
                    "\n#Peer:\tn2:127.0.0.1:9858"
                    "\n")

METADATA_JSON = """\
{
  "group": "DefaultControllerGroup",
  "leaderId": "n0",
  "leaderAddress": "127.0.0.1:9878",
  "peers": [
    "n0:127.0.0.1:9878",
    "n1:127.0.0.1:9868",
    "n2:127.0.0.1:9858"
  ]
}
"""

BROKER_A_MQADMIN = (
    "\n#brokerName\tbroker-a\n#MasterBrokerId\t1\n#MasterAddr\t127.0.0.1:10911\n#MasterEpoch\t3"
    "\n#SyncStateSetEpoch\t5\n#SyncStateSetNums\t1\n"
    "\nInSyncReplica:\tReplicaIdentity{brokerName='broker-a', brokerId=1, brokerAddress='127.0.0.1:10911', "
    "alive=true}\n"
    "\nNotInSyncReplica:\tReplicaIdentity{brokerName='broker-a', brokerId=2, brokerAddress='127.0.0.1:10921', "
    "alive=true}\n")

BROKER_B_MQADMIN = (
    "\n#brokerName\tbroker-b\n#MasterBrokerId\tnull\n#MasterAddr\tnull\n#MasterEpoch\t2"
    "\n#SyncStateSetEpoch\t2\n#SyncStateSetNums\t1\n"
    "\nInSyncReplica:\tReplicaIdentity{brokerName='broker-b', brokerId=1, brokerAddress='127.0.0.1:10931', "
    "alive=false}\n")

BROKER_A_JSON: dict[str, Any] = {
    "clusterName": "DefaultCluster", "brokerName": "broker-a", "masterBrokerId": 1,
    "masterAddress": "127.0.0.1:10911", "masterEpoch": 3, "syncStateSetEpoch": 5,
    "inSyncReplicas": [{"brokerId": 1, "brokerAddress": "127.0.0.1:10911", "alive": True}],
    "notInSyncReplicas": [{"brokerId": 2, "brokerAddress": "127.0.0.1:10921", "alive": True}]}

BROKER_B_JSON: dict[str, Any] = {
    "clusterName": "DefaultCluster", "brokerName": "broker-b", "masterBrokerId": None, "masterAddress": None,
    "masterEpoch": 2, "syncStateSetEpoch": 2,
    "inSyncReplicas": [{"brokerId": 1, "brokerAddress": "127.0.0.1:10931", "alive": False}],
    "notInSyncReplicas": []}


def dumped(doc: Any) -> str:
    """The exact text of ``--format json``: 2-space indent, keys in the documented order, final newline."""
    return json.dumps(doc, indent=2) + "\n"


def config_line(key: str, value: str) -> str:
    return f"{key.ljust(50)}=  {value}\n"


# ====================================================================== getControllerMetaData
class TestGetControllerMetaData:
    def test_mqadmin(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("getControllerMetaData", "-a", LEADER, "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == METADATA_MQADMIN
        assert result.stderr == ""
        assert [(r.address, r.method, r.path) for r in fake.requests] == [
            (LEADER, "GET", contract.METADATA)]

    def test_json(self, mqctl: Invoke) -> None:
        result = mqctl("getControllerMetaData", "-a", LEADER, "--format", "json")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == METADATA_JSON

    def test_table(self, mqctl: Invoke) -> None:
        result = mqctl("getControllerMetaData", "-a", LEADER)
        assert result.exit_code == 0, result.stderr
        assert result.stdout == (
            "Controller group DefaultControllerGroup\n"
            "┏━━━━━━┳━━━━━━━━━━━━━━━━┳━━━━━━━━━━┓\n"
            "┃ Peer ┃ Address        ┃ Role     ┃\n"
            "┡━━━━━━╇━━━━━━━━━━━━━━━━╇━━━━━━━━━━┩\n"
            "│ n0   │ 127.0.0.1:9878 │ leader   │\n"
            "│ n1   │ 127.0.0.1:9868 │ follower │\n"
            "│ n2   │ 127.0.0.1:9858 │ follower │\n"
            "└──────┴────────────────┴──────────┘\n")

    def test_any_node_answers_and_a_dead_one_is_skipped(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("getControllerMetaData", "-a", f"{DEAD_CONTROLLER};{FOLLOWER}", "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == METADATA_MQADMIN
        assert [r.address for r in fake.requests] == [DEAD_CONTROLLER, FOLLOWER]

    def test_no_leader_prints_null(self, mqctl: Invoke, fake: FakeCluster) -> None:
        fake.override(LEADER, contract.METADATA, envelope(0, {
            "group": "DefaultControllerGroup", "controllerLeaderId": None, "controllerLeaderAddress": None,
            "isLeader": False, "selfId": "n0", "selfAddress": LEADER, "peers": ["n0:127.0.0.1:9878"]}))
        mq = mqctl("getControllerMetaData", "--format", "mqadmin")
        assert mq.exit_code == 0, mq.stderr
        assert mq.stdout == ("\n#ControllerGroup\tDefaultControllerGroup\n#ControllerLeaderId\tnull"
                             "\n#ControllerLeaderAddress\tnull\n#Peer:\tn0:127.0.0.1:9878\n")
        js = mqctl("getControllerMetaData", "--format", "json")
        assert js.stdout == dumped({"group": "DefaultControllerGroup", "leaderId": None, "leaderAddress": None,
                                    "peers": ["n0:127.0.0.1:9878"]})
        table = mqctl("getControllerMetaData")
        assert table.exit_code == 0
        assert "No leader: the controller group has no majority right now." in table.stdout
        assert "│ n0   │ 127.0.0.1:9878 │ follower │" in table.stdout


# ====================================================================== getSyncStateSet
class TestGetSyncStateSet:
    def test_mqadmin_by_broker_name(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("getSyncStateSet", "-a", LEADER, "-b", "broker-a", "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == BROKER_A_MQADMIN
        assert result.stderr == ""
        [request] = fake.hits(path=SYNC_PATH)
        assert request.address == LEADER
        assert request.params == {"brokerName": ["broker-a"]}

    def test_mqadmin_by_cluster_includes_null_master(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("getSyncStateSet", "-a", LEADER, "-c", "DefaultCluster", "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == BROKER_A_MQADMIN + BROKER_B_MQADMIN
        [request] = fake.hits(path=SYNC_PATH)
        assert request.params == {"clusterName": ["DefaultCluster"]}

    def test_json_by_broker_name(self, mqctl: Invoke) -> None:
        result = mqctl("getSyncStateSet", "-a", LEADER, "-b", "broker-a", "--format", "json")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == dumped({"brokers": [BROKER_A_JSON]})
        # spelled out once, so the field order and indentation are pinned by a literal too
        assert result.stdout.startswith('{\n  "brokers": [\n    {\n      "clusterName": "DefaultCluster",\n'
                                        '      "brokerName": "broker-a",\n      "masterBrokerId": 1,\n')

    def test_json_by_cluster(self, mqctl: Invoke) -> None:
        result = mqctl("getSyncStateSet", "-c", "DefaultCluster", "--format", "json")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == dumped({"brokers": [BROKER_A_JSON, BROKER_B_JSON]})
        assert '"masterBrokerId": null,\n      "masterAddress": null,' in result.stdout

    def test_repeated_brokers_and_precedence_over_cluster(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("getSyncStateSet", "-b", "broker-b", "-b", "broker-a", "-c", "OtherCluster",
                       "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == BROKER_B_MQADMIN + BROKER_A_MQADMIN
        [request] = fake.hits(path=SYNC_PATH)
        assert request.params == {"brokerName": ["broker-b", "broker-a"]}

    def test_table(self, mqctl: Invoke) -> None:
        result = mqctl("getSyncStateSet", "-c", "DefaultCluster")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == (
            "DefaultCluster/broker-a  master=1 (127.0.0.1:10911)  masterEpoch=3  syncStateSetEpoch=5\n"
            "┏━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━┳━━━━━━━━┳━━━━━━━━━━━━━━━━━┳━━━━━━━┓\n"
            "┃ Broker id ┃ Address         ┃ Role   ┃ In SyncStateSet ┃ Alive ┃\n"
            "┡━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━━━━━━━━━╇━━━━━━━┩\n"
            "│ 1         │ 127.0.0.1:10911 │ master │ yes             │ yes   │\n"
            "│ 2         │ 127.0.0.1:10921 │ slave  │ no              │ yes   │\n"
            "└───────────┴─────────────────┴────────┴─────────────────┴───────┘\n"
            "DefaultCluster/broker-b  master=null (null)  masterEpoch=2  syncStateSetEpoch=2\n"
            "┏━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━┳━━━━━━━┳━━━━━━━━━━━━━━━━━┳━━━━━━━┓\n"
            "┃ Broker id ┃ Address         ┃ Role  ┃ In SyncStateSet ┃ Alive ┃\n"
            "┡━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━╇━━━━━━━╇━━━━━━━━━━━━━━━━━╇━━━━━━━┩\n"
            "│ 1         │ 127.0.0.1:10931 │ slave │ yes             │ no    │\n"
            "└───────────┴─────────────────┴───────┴─────────────────┴───────┘\n")

    def test_follower_redirects_to_leader(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("getSyncStateSet", "-a", FOLLOWER, "-b", "broker-a", "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == BROKER_A_MQADMIN
        assert [r.address for r in fake.hits(path=SYNC_PATH)] == [FOLLOWER, LEADER]

    def test_dead_node_then_follower_then_leader(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("getSyncStateSet", "-a", f"{DEAD_CONTROLLER};{FOLLOWER}", "-b", "broker-a",
                       "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == BROKER_A_MQADMIN
        assert [r.address for r in fake.hits(path=SYNC_PATH)] == [DEAD_CONTROLLER, FOLLOWER, LEADER]

    def test_unknown_broker_name_is_a_usage_error_after_printing_the_known(self, mqctl: Invoke) -> None:
        result = mqctl("getSyncStateSet", "-b", "broker-a", "-b", "nope")
        assert "broker-a" in result.stdout
        assert_one_line_error(result, 2, "broker-set nope is not known to the controller")

    def test_only_unknown_broker_name(self, mqctl: Invoke) -> None:
        result = mqctl("getSyncStateSet", "-b", "nope", "--format", "json")
        assert result.stdout == '{\n  "brokers": []\n}\n'
        assert_one_line_error(result, 2, "broker-set nope is not known to the controller")

    def test_unknown_names_print_nothing_in_the_mqadmin_format_as_mqadmin(self, mqctl: Invoke) -> None:
        result = mqctl("getSyncStateSet", "-b", "broker-a", "-b", "nope", "--format", "mqadmin")
        assert (result.exit_code, result.stdout, result.stderr) == (0, BROKER_A_MQADMIN, "")
        result = mqctl("getSyncStateSet", "-b", "nope", "--format", "mqadmin")
        assert (result.exit_code, result.stdout, result.stderr) == (0, "", "")

    def test_unknown_cluster(self, mqctl: Invoke) -> None:
        result = mqctl("getSyncStateSet", "-c", "NoSuchCluster")
        assert_one_line_error(result, 2, "cluster NoSuchCluster has no broker-set registered in the controller")

    def test_missing_b_and_c(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("getSyncStateSet", "-a", LEADER)
        assert result.stdout == ""
        assert_one_line_error(result, 2, "give -b brokerName or -c clusterName")
        assert fake.requests == []

    def test_watch_mode_prints_the_block_each_time(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("getSyncStateSet", "-b", "broker-a", "--format", "mqadmin", "--count", "2", "-i", "0.1")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == BROKER_A_MQADMIN * 2
        assert len(fake.hits(path=SYNC_PATH)) == 2

    def test_watch_mode_json_is_a_stream_of_documents(self, mqctl: Invoke) -> None:
        result = mqctl("getSyncStateSet", "-b", "broker-a", "--format", "json", "--count", "2", "-i", "0.1")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == dumped({"brokers": [BROKER_A_JSON]}) * 2

    def test_watch_mode_stops_at_an_error_with_its_exit_code(self, mqctl: Invoke, fake: FakeCluster) -> None:
        def answer(request: Any, n: int) -> Any:
            if n == 0:
                return envelope(0, {"brokers": [fake.sync_state["broker-a"]]})
            return envelope(29, None, "give brokerName (repeatable) or clusterName")
        fake.override(LEADER, SYNC_PATH, answer)
        result = mqctl("getSyncStateSet", "-b", "broker-a", "--format", "mqadmin", "--count", "5", "-i", "0.1")
        assert result.stdout == BROKER_A_MQADMIN
        assert_one_line_error(result, 4, "give brokerName (repeatable) or clusterName [INVALID_PARAMETER]")

    def test_ctrl_c_in_watch_mode_exits_0(self, mqctl: Invoke, fake: FakeCluster) -> None:
        def answer(request: Any, n: int) -> Any:
            if n == 0:
                return envelope(0, {"brokers": [fake.sync_state["broker-a"]]})
            return KeyboardInterrupt()
        fake.override(LEADER, SYNC_PATH, answer)
        result = mqctl("getSyncStateSet", "-b", "broker-a", "--format", "mqadmin", "--count", "5", "-i", "0.1")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == BROKER_A_MQADMIN


# ====================================================================== electMaster
ELECT_ARGS = ("electMaster", "-a", LEADER, "-c", "DefaultCluster", "-bn", "broker-a", "-b", "2")


class TestElectMaster:
    def test_mqadmin(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl(*ELECT_ARGS, "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == ("\n#ClusterName\tDefaultCluster\n#BrokerName\tbroker-a"
                                 "\n#BrokerMasterAddr\t127.0.0.1:10921\n#MasterEpoch\t4\n#SyncStateSetEpoch\t6\n")
        # no "#Broker" lines: mqadmin reads the member group with the wrong field names, so prints none
        [request] = fake.hits(path=contract.ELECT_MASTER)
        assert request.address == LEADER and request.method == "POST"
        assert request.body == {"clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": 2,
                                "designateElect": True}

    def test_json(self, mqctl: Invoke) -> None:
        result = mqctl(*ELECT_ARGS, "--format", "json")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == dumped({
            "clusterName": "DefaultCluster", "brokerName": "broker-a", "masterBrokerId": 2,
            "masterAddress": "127.0.0.1:10921", "masterEpoch": 4, "syncStateSetEpoch": 6,
            "brokers": [{"brokerId": 1, "brokerAddress": "127.0.0.1:10911"},
                        {"brokerId": 2, "brokerAddress": "127.0.0.1:10921"}]})

    def test_table(self, mqctl: Invoke) -> None:
        result = mqctl(*ELECT_ARGS)
        assert result.exit_code == 0, result.stderr
        assert result.stdout == ("Broker 2 (127.0.0.1:10921) is master of DefaultCluster/broker-a; masterEpoch 4, "
                                 "syncStateSetEpoch 6.\n")

    def test_through_follower(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("elect-master", "-a", FOLLOWER, "-c", "DefaultCluster", "-bn", "broker-a", "-b", "2",
                       "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert "\n#BrokerMasterAddr\t127.0.0.1:10921\n" in result.stdout
        assert [r.address for r in fake.hits(path=contract.ELECT_MASTER)] == [FOLLOWER, LEADER]

    def test_master_still_exist_is_refused(self, mqctl: Invoke) -> None:
        result = mqctl("electMaster", "-a", LEADER, "-c", "DefaultCluster", "-bn", "broker-a", "-b", "1",
                       "--format", "mqadmin")
        assert result.stdout == ""
        line = assert_one_line_error(result, 4, "[CONTROLLER_MASTER_STILL_EXIST]")
        assert line == ("Error: The old master 1 is still alive, not need to elect new master for broker broker-a "
                        "[CONTROLLER_MASTER_STILL_EXIST]")

    def test_unregistered_broker_set_is_refused(self, mqctl: Invoke) -> None:
        result = mqctl("electMaster", "-c", "DefaultCluster", "-bn", "nope", "-b", "1")
        line = assert_one_line_error(result, 4)
        assert line == "Error: Broker hasn't been registered [CONTROLLER_BROKER_NEED_TO_BE_REGISTERED]"

    def test_missing_required_option_is_usage(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("electMaster", "-c", "DefaultCluster", "-b", "2")
        assert result.exit_code == 2
        assert "Missing option '-bn'" in result.stderr
        assert "Traceback" not in result.stderr
        assert fake.requests == []

    def test_broker_id_must_be_positive(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("electMaster", "-c", "DefaultCluster", "-bn", "broker-a", "-b", "0")
        assert result.exit_code == 2
        assert "Invalid value for '-b'" in result.stderr
        assert fake.requests == []


# ====================================================================== cleanBrokerMetadata
class TestCleanBrokerMetadata:
    def test_mqadmin(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("cleanBrokerMetadata", "-a", FOLLOWER, "-c", "DefaultCluster", "-bn", "broker-b",
                       "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == "clear broker broker-b metadata from controller success! \n"
        requests = fake.hits(path=contract.CLEAN_BROKER_DATA)
        assert [r.address for r in requests] == [FOLLOWER, LEADER]
        assert requests[-1].body == {"clusterName": "DefaultCluster", "brokerName": "broker-b",
                                     "isCleanLivingBroker": False}  # fields not given are left out

    def test_json_with_ids(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("cleanBrokerMetadata", "-c", "DefaultCluster", "-bn", "broker-a", "-b", "1;2",
                       "--format", "json")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == ('{\n  "clusterName": "DefaultCluster",\n  "brokerName": "broker-a",\n'
                                 '  "brokerControllerIdsToClean": "1;2",\n  "cleanLivingBroker": false,\n'
                                 '  "success": true\n}\n')
        [request] = fake.hits(path=contract.CLEAN_BROKER_DATA)
        assert request.body["brokerControllerIdsToClean"] == "1;2"

    def test_json_clean_living_without_cluster(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("cleanBrokerMetadata", "-bn", "broker-a", "-l", "--format", "json")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == dumped({"clusterName": None, "brokerName": "broker-a",
                                        "brokerControllerIdsToClean": None, "cleanLivingBroker": True,
                                        "success": True})
        [request] = fake.hits(path=contract.CLEAN_BROKER_DATA)
        assert request.body == {"brokerName": "broker-a", "isCleanLivingBroker": True}

    def test_table(self, mqctl: Invoke) -> None:
        all_ids = mqctl("cleanBrokerMetadata", "-c", "DefaultCluster", "-bn", "broker-b")
        assert all_ids.exit_code == 0, all_ids.stderr
        assert all_ids.stdout == "Cleaned all ids of broker broker-b from the controller.\n"
        some = mqctl("cleanBrokerMetadata", "-c", "DefaultCluster", "-bn", "broker-a", "-b", "2")
        assert some.exit_code == 0, some.stderr
        assert some.stdout == "Cleaned ids 2 of broker broker-a from the controller.\n"

    def test_refused_by_server(self, mqctl: Invoke) -> None:
        result = mqctl("cleanBrokerMetadata", "-c", "DefaultCluster", "-bn", "broker-a", "--format", "mqadmin")
        assert result.stdout == ""
        line = assert_one_line_error(result, 4)
        assert line == ("Error: Broker broker-a is still alive, clean up failure "
                        "[CONTROLLER_INVALID_CLEAN_BROKER_METADATA]")

    def test_remark_with_brackets_is_printed_verbatim(self, mqctl: Invoke, fake: FakeCluster) -> None:
        # RocketMQ's remark for a live id contains "[...]", which must not be eaten as rich markup
        fake.override(LEADER, contract.CLEAN_BROKER_DATA,
                      envelope(2009, None, "Broker [broker-a,  2] is still alive, clean up failure"))
        result = mqctl("cleanBrokerMetadata", "-c", "DefaultCluster", "-bn", "broker-a", "-b", "2")
        line = assert_one_line_error(result, 4)
        assert line == ("Error: Broker [broker-a,  2] is still alive, clean up failure "
                        "[CONTROLLER_INVALID_CLEAN_BROKER_METADATA]")

    def test_cluster_required_without_l(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("cleanBrokerMetadata", "-bn", "broker-b")
        line = assert_one_line_error(result, 2)
        assert line == "Error: cleanLivingBroker option is false, clusterName option can not be empty."
        assert fake.requests == []

    def test_bad_ids_are_usage(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("cleanBrokerMetadata", "-c", "DefaultCluster", "-bn", "broker-b", "-b", "1;x")
        assert_one_line_error(result, 2, "bad broker id 'x' in -b")
        assert fake.requests == []


# ====================================================================== getControllerConfig
def leader_config_mqadmin() -> str:
    """In the order a java.util.Properties loaded with these lines iterates them (as OpenJDK 17 prints)."""
    return ("============127.0.0.1:9878============\n"
            + config_line("controllerStorePath", "/var/lib/mqctl/n0")
            + config_line("controllerDLegerGroup", "DefaultControllerGroup")
            + config_line("logLevel", "INFO")
            + config_line("controllerDLegerSelfId", "n0")
            + config_line("configStorePath", "")
            + config_line("scanNotActiveBrokerInterval", "5000")
            + config_line("enableElectUncleanMaster", "false")
            + config_line("controllerDLegerPeers", "n0-127.0.0.1:9878;n1-127.0.0.1:9868;n2-127.0.0.1:9858"))


def follower_config_mqadmin() -> str:
    """In the order a java.util.Properties loaded with these lines iterates them (as OpenJDK 17 prints)."""
    return ("============127.0.0.1:9868============\n"
            + config_line("controllerStorePath", "/var/lib/mqctl/n1")
            + config_line("controllerDLegerGroup", "DefaultControllerGroup")
            + config_line("logLevel", "INFO")
            + config_line("controllerDLegerSelfId", "n1")
            + config_line("configStorePath", "")
            + config_line("scanNotActiveBrokerInterval", "5000")
            + config_line("enableElectUncleanMaster", "true")
            + config_line("controllerDLegerPeers", "n0-127.0.0.1:9878;n1-127.0.0.1:9868;n2-127.0.0.1:9858"))


class TestGetControllerConfig:
    def test_mqadmin_several_nodes(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("getControllerConfig", "-a", f"{LEADER};{FOLLOWER}", "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        # the nodes in the order of mqadmin's HashMap(4) of their addresses (OpenJDK 17: 9868, then 9878)
        assert result.stdout == follower_config_mqadmin() + leader_config_mqadmin()
        # "%-50s=  %s": the key padded to 50 columns, then "=", two spaces, the value
        assert "\ncontrollerDLegerGroup" + " " * 29 + "=  DefaultControllerGroup\n" in result.stdout
        assert "\nconfigStorePath" + " " * 35 + "=  \n" in result.stdout
        assert [(r.address, r.path) for r in fake.requests] == [(LEADER, contract.CONFIG),
                                                                 (FOLLOWER, contract.CONFIG)]

    def test_json(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("getControllerConfig", "-a", f"{LEADER},{FOLLOWER}", "--format", "json")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == dumped({"controllers": [
            {"address": LEADER, "config": fake.configs[LEADER]},
            {"address": FOLLOWER, "config": fake.configs[FOLLOWER]}]})
        assert '"enableElectUncleanMaster": false,' in result.stdout
        assert '"scanNotActiveBrokerInterval": 5000,' in result.stdout

    def test_table(self, mqctl: Invoke) -> None:
        result = mqctl("getControllerConfig", "-a", f"{LEADER};{FOLLOWER}")
        assert result.exit_code == 0, result.stderr
        assert "Controller 127.0.0.1:9878\n" in result.stdout
        assert "Controller 127.0.0.1:9868\n" in result.stdout
        assert "│ enableElectUncleanMaster    │ false" in result.stdout
        assert "│ enableElectUncleanMaster    │ true" in result.stdout

    def test_unreachable_node_prints_the_others_then_exits_3(self, mqctl: Invoke) -> None:
        result = mqctl("getControllerConfig", "-a", f"{LEADER};{DEAD_CONTROLLER};{FOLLOWER}",
                       "--format", "mqadmin")
        # the nodes in the order of mqadmin's HashMap(4) of their addresses (OpenJDK 17: 9868, then 9878)
        assert result.stdout == follower_config_mqadmin() + leader_config_mqadmin()
        line = assert_one_line_error(result, 3)
        assert line == "Error: controller 127.0.0.1:9858 did not answer"

    def test_default_address(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("getControllerConfig", "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == leader_config_mqadmin()


# ====================================================================== updateControllerConfig
class TestUpdateControllerConfig:
    def test_mqadmin(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("updateControllerConfig", "-a", f"{LEADER};{FOLLOWER}", "-k", "enableElectUncleanMaster",
                       "-v", "true", "--format", "mqadmin")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == ("update controller config success![127.0.0.1:9878, 127.0.0.1:9868]\n"
                                 "enableElectUncleanMaster : true\n")
        posts = [r for r in fake.requests if r.method == "POST"]
        assert [(r.address, r.path, r.body) for r in posts] == [
            (LEADER, contract.CONFIG, {"enableElectUncleanMaster": "true"}),
            (FOLLOWER, contract.CONFIG, {"enableElectUncleanMaster": "true"})]

    def test_json(self, mqctl: Invoke) -> None:
        result = mqctl("updateControllerConfig", "-a", LEADER, "-k", "logLevel", "-v", "DEBUG", "--format", "json")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == ('{\n  "controllers": [\n    "127.0.0.1:9878"\n  ],\n  "key": "logLevel",\n'
                                 '  "value": "DEBUG"\n}\n')

    def test_table(self, mqctl: Invoke) -> None:
        result = mqctl("updateControllerConfig", "-a", f"{LEADER};{FOLLOWER}", "-k", "logLevel", "-v", "DEBUG")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == "Set logLevel=DEBUG on 127.0.0.1:9878, 127.0.0.1:9868.\n"

    def test_black_listed_key_is_refused(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("updateControllerConfig", "-a", f"{LEADER};{FOLLOWER}", "-k", "configStorePath",
                       "-v", "/tmp/x", "--format", "mqadmin")
        assert result.stdout == ""
        line = assert_one_line_error(result, 4)
        assert line == "Error: Can not update config in black list. [NO_PERMISSION]"
        assert [r.address for r in fake.requests] == [LEADER]  # stops at the first refusal

    def test_unreachable_node(self, mqctl: Invoke) -> None:
        result = mqctl("updateControllerConfig", "-a", f"{LEADER};{DEAD_CONTROLLER}", "-k", "logLevel",
                       "-v", "DEBUG", "--format", "mqadmin")
        assert result.stdout == ""
        assert_one_line_error(result, 3, "127.0.0.1:9858")

    def test_key_and_value_required(self, mqctl: Invoke, fake: FakeCluster) -> None:
        result = mqctl("updateControllerConfig", "-k", "logLevel")
        assert result.exit_code == 2
        assert "Missing option '-v'" in result.stderr
        assert fake.requests == []
