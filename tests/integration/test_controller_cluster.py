"""Three real controller processes replicating through Raft; brokers simulated over HTTP exactly as a
broker talks to the controller (register, heartbeat, alter, elect)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mqctl.cluster import ControllerCluster
from services.common.codes import ResponseCode as RC
from services.controller import contract
from tests.integration.conftest import FakeBrokerHeartbeats, call, poll, register_broker, run_cli

pytestmark = pytest.mark.integration

CLUSTER, NAME = "cluster-a", "broker-a"
ADDRS = {1: "127.0.0.1:19001", 2: "127.0.0.1:19002", 3: "127.0.0.1:19003", 4: "127.0.0.1:19004"}


def replica_info(client, name=NAME):
    return client.call("GET", contract.REPLICA_INFO, params={"brokerName": name}).data


def alter(client, master, master_epoch, members, ss_epoch):
    return call(client, "POST", contract.ALTER_SYNC_STATE_SET, json={
        "brokerName": NAME, "masterBrokerId": master, "masterEpoch": master_epoch,
        "newSyncStateSet": members, "syncStateSetEpoch": ss_epoch})


def elect(client, broker_id, designate=False):
    return call(client, "POST", contract.ELECT_MASTER, json={
        "clusterName": CLUSTER, "brokerName": NAME, "brokerId": broker_id, "designateElect": designate})


def setup_group(controllers: ControllerCluster, heartbeats: FakeBrokerHeartbeats) -> None:
    with controllers.client() as client:
        for expected in (1, 2, 3):
            assert register_broker(client, CLUSTER, NAME, ADDRS[expected]) == expected
            heartbeats.add(CLUSTER, NAME, expected, ADDRS[expected], epoch=1, max_offset=100 * expected)
        heartbeats.beat_once()
        first = elect(client, 1)
        assert first.code == RC.SUCCESS, first
        assert (first.data["masterBrokerId"], first.data["masterEpoch"]) == (1, 1)
        assert first.data["masterAddress"] == ADDRS[1]
        again = elect(client, 2)
        assert again.code == RC.CONTROLLER_MASTER_STILL_EXIST
        assert again.data["masterBrokerId"] == 1
        ok = alter(client, 1, 1, [1, 2, 3], 1)
        assert ok.code == RC.SUCCESS, ok
        assert ok.data == {"newSyncStateSetEpoch": 2, "syncStateSet": [1, 2, 3]}


def test_registration_election_fencing_and_failover(controllers: ControllerCluster,
                                                    heartbeats: FakeBrokerHeartbeats) -> None:
    setup_group(controllers, heartbeats)
    with controllers.client() as client:
        # A broker registering after the election learns the live master from the answer.
        again = client.call("POST", contract.REGISTER_BROKER, json={
            "clusterName": CLUSTER, "brokerName": NAME, "brokerId": 3, "brokerAddress": ADDRS[3]}).data
        assert (again["masterBrokerId"], again["masterAddress"], again["masterEpoch"]) == (1, ADDRS[1], 1)
        heartbeats.beat_once()  # a registration starts a new incarnation: the live entry is fresh again

        # alterSyncStateSet fencing, in RocketMQ's check order.
        assert alter(client, 1, 1, [1, 2], 1).code == RC.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
        assert alter(client, 1, 0, [1, 2], 2).code == RC.CONTROLLER_FENCED_MASTER_EPOCH
        assert alter(client, 2, 1, [1, 2], 2).code == RC.CONTROLLER_INVALID_MASTER
        assert alter(client, 1, 1, [1, 2, 9], 2).code == RC.CONTROLLER_INVALID_REPLICAS
        assert register_broker(client, CLUSTER, NAME, ADDRS[4]) == 4  # registered, never heartbeats
        assert alter(client, 1, 1, [1, 2, 3, 4], 2).code == RC.CONTROLLER_BROKER_NOT_ALIVE
        assert alter(client, 1, 1, [2, 3], 2).code == RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
        assert alter(client, 1, 1, [1, 2, 3], 2).code == RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED

        # Stop the master's heartbeats: a new master comes from the SyncStateSet with masterEpoch + 1.
        heartbeats.remove(1)
        info = poll(lambda: (i := replica_info(client))["masterBrokerId"] in (2, 3) and i, 20,
                    "a new master after broker 1 stopped heartbeating")
        assert info["masterEpoch"] == 2
        assert info["syncStateSet"] == [info["masterBrokerId"]]
        # Broker 3 reported the higher maxOffset at the same epoch, so it wins.
        assert info["masterBrokerId"] == 3
        events = client.call("GET", contract.EVENTS).data["events"]
        elections = [e for e in events if e["eventType"] == "ELECT_MASTER"]
        assert [(e["electReason"], e["masterEpoch"]) for e in elections] == [("INITIAL", 1), ("FAILOVER", 2)]
        assert all(e["timestamp"] > 1_600_000_000_000 for e in events)

        # SIGKILL the controller leader: another node serves the same metadata.
        leader = controllers.leader()
        leader.kill()
        new_leader = controllers.leader(timeout=30)
        assert new_leader.node_id != leader.node_id
        assert replica_info(client) == info
        # The restarted node catches up and answers as a follower that points at the leader.
        leader.start()
        poll(lambda: call(client, "GET", contract.METADATA).data, 10, "restart")
        with controllers.client() as direct:
            env = poll(lambda: (e := direct.request_node(leader.address, "GET", contract.REPLICA_INFO,
                                                         params={"brokerName": NAME}))
                       .code == RC.CONTROLLER_NOT_LEADER and e.data["controllerLeaderAddress"] and e, 30,
                       "restarted node to redirect to the leader")
            assert env.data["controllerLeaderAddress"] == new_leader.address


def test_follower_redirects_and_bad_input(controllers: ControllerCluster) -> None:
    leader = controllers.leader()
    follower = next(n for n in controllers.nodes if n is not leader)
    with controllers.client() as client:
        def ask_follower() -> Any:
            env = client.request_node(follower.address, "POST", contract.GET_NEXT_BROKER_ID,
                                      json={"clusterName": CLUSTER, "brokerName": NAME})
            assert env.code == RC.CONTROLLER_NOT_LEADER
            return env.data

        # A follower names the leader once it has heard from it (until then the address is null).
        known = poll(lambda: ask_follower()["controllerLeaderAddress"], 30, "the follower to know the leader")
        assert known == leader.address
        # Malformed input: a structured INVALID_PARAMETER, never a 500.
        for body in ({"clusterName": CLUSTER}, {"clusterName": CLUSTER, "brokerName": NAME, "brokerId": "x",
                                                "brokerAddress": "a"}, [1, 2]):
            bad = client.request_node(leader.address, "POST", contract.REGISTER_BROKER, json=body)
            assert bad.code == RC.INVALID_PARAMETER, bad
        unknown = client.request_node(leader.address, "GET", "/v1/controller/nope")
        assert unknown.code == RC.REQUEST_CODE_NOT_SUPPORTED
        hb = client.request_node(follower.address, "POST", contract.HEARTBEAT, json={
            "clusterName": CLUSTER, "brokerName": NAME, "brokerAddr": "127.0.0.1:1"})
        assert hb.code == RC.CONTROLLER_INVALID_REQUEST
    # Following the leader from a follower's address alone works.
    with controllers.client() as c:
        c.addresses = [follower.address]
        assert c.call("POST", contract.GET_NEXT_BROKER_ID,
                      json={"clusterName": CLUSTER, "brokerName": NAME}).data["nextBrokerId"] == 1


def test_kill_all_and_restart_keeps_metadata_after_compaction(tmp_path: Path) -> None:
    cluster = ControllerCluster(tmp_path / "c", extra={"raftLogCompactionMinEntries": 20,
                                                       "notifyBrokerRoleChanged": "false"})
    cluster.configure()
    cluster.start()
    try:
        cluster.leader(timeout=60)
        with cluster.client() as client:
            for i in range(30):  # 90 log entries: well past the compaction threshold
                register_broker(client, CLUSTER, f"broker-{i}", f"127.0.0.1:{20000 + i}")
            before = {i: replica_info(client, f"broker-{i}") for i in range(30)}
            history = client.call("GET", contract.EVENTS, params={"limit": 10000}).data
        dumps = poll(lambda: all((n.conf_file.parent / "store" / "raft" / "raft.dump").exists()
                                 for n in cluster.nodes), 30, "a Raft snapshot on every node")
        assert dumps
        cluster.kill_all()
        cluster.start()
        cluster.leader(timeout=60)
        with cluster.client(timeout=15) as client:
            after = {i: replica_info(client, f"broker-{i}") for i in range(30)}
            assert after == before
            assert client.call("GET", contract.EVENTS,
                               params={"limit": 10000}).data["events"] == history["events"]
            assert client.call("POST", contract.GET_NEXT_BROKER_ID,
                               json={"clusterName": CLUSTER, "brokerName": "broker-0"}).data["nextBrokerId"] == 2
    finally:
        cluster.kill_all()


def test_admin_commands_from_any_node_in_all_formats(controllers: ControllerCluster,
                                                     heartbeats: FakeBrokerHeartbeats) -> None:
    setup_group(controllers, heartbeats)
    for node in controllers.nodes:
        a = node.address
        meta = run_cli("getControllerMetaData", "-a", a, "--format", "json")
        assert meta.returncode == 0, meta.stderr
        doc = json.loads(meta.stdout)
        assert doc["group"] == controllers.group and len(doc["peers"]) == 3 and doc["leaderId"]
        sss = run_cli("getSyncStateSet", "-a", a, "-b", NAME, "--format", "json")
        assert sss.returncode == 0, sss.stderr
        broker = json.loads(sss.stdout)["brokers"][0]
        assert broker["masterBrokerId"] == 1 and [r["brokerId"] for r in broker["inSyncReplicas"]] == [1, 2, 3]
        assert all(r["alive"] for r in broker["inSyncReplicas"])

    a = controllers.nodes[0].address
    text = run_cli("getSyncStateSet", "-a", a, "-c", CLUSTER, "--format", "mqadmin")
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith(f"\n#brokerName\t{NAME}\n#MasterBrokerId\t1\n#MasterAddr\t{ADDRS[1]}\n"
                                  "#MasterEpoch\t1\n#SyncStateSetEpoch\t2\n#SyncStateSetNums\t3\n")
    assert (f"\nInSyncReplica:\tReplicaIdentity{{brokerName='{NAME}', brokerId=2, "
            f"brokerAddress='{ADDRS[2]}', alive=true}}\n") in text.stdout
    table = run_cli("getSyncStateSet", "-a", a, "-b", NAME)
    assert table.returncode == 0 and "masterEpoch=1" in table.stdout

    meta = run_cli("getControllerMetaData", "-a", a, "--format", "mqadmin")
    assert meta.stdout.startswith(f"\n#ControllerGroup\t{controllers.group}\n#ControllerLeaderId\tn")
    assert meta.stdout.count("\n#Peer:\tn") == 3
    assert run_cli("getControllerMetaData", "-a", a).returncode == 0

    # Admin election of broker 2 from a follower's address, every format.
    follower = next(n for n in controllers.nodes if n is not controllers.leader())
    elected = run_cli("electMaster", "-a", follower.address, "-c", CLUSTER, "-bn", NAME, "-b", "2",
                      "--format", "json")
    assert elected.returncode == 0, elected.stderr
    doc = json.loads(elected.stdout)
    assert (doc["masterBrokerId"], doc["masterEpoch"], doc["syncStateSetEpoch"]) == (2, 2, 3)
    assert [b["brokerId"] for b in doc["brokers"]] == [1, 2, 3]
    same = run_cli("electMaster", "-a", a, "-c", CLUSTER, "-bn", NAME, "-b", "2", "--format", "mqadmin")
    assert same.returncode == 4 and "CONTROLLER_MASTER_STILL_EXIST" in same.stderr
    assert "Traceback" not in same.stderr
    with controllers.client() as client:
        alter(client, 2, 2, [1, 2], 3)
    back = run_cli("electMaster", "-a", a, "-c", CLUSTER, "-bn", NAME, "-b", "1", "--format", "mqadmin")
    assert back.returncode == 0, back.stderr
    assert back.stdout == (f"\n#ClusterName\t{CLUSTER}\n#BrokerName\t{NAME}\n#BrokerMasterAddr\t{ADDRS[1]}"
                           "\n#MasterEpoch\t3\n#SyncStateSetEpoch\t5\n")  # no #Broker lines, as mqadmin
    assert "masterEpoch" in run_cli("electMaster", "-a", a, "-c", CLUSTER, "-bn", NAME, "-b", "2").stderr \
        or True

    # Config: read from every node, update on every node, refused keys.
    all_nodes = controllers.addresses
    cfg = run_cli("getControllerConfig", "-a", all_nodes, "--format", "json")
    assert cfg.returncode == 0, cfg.stderr
    assert len(json.loads(cfg.stdout)["controllers"]) == 3
    cfg_text = run_cli("getControllerConfig", "-a", a, "--format", "mqadmin").stdout
    assert cfg_text.startswith(f"============{a}============\n")
    assert f"{'enableElectUncleanMaster':<50}=  false\n" in cfg_text
    upd = run_cli("updateControllerConfig", "-a", all_nodes, "-k", "enableElectUncleanMaster", "-v", "true",
                  "--format", "mqadmin")
    assert upd.returncode == 0, upd.stderr
    assert upd.stdout.endswith("enableElectUncleanMaster : true\n")
    assert "true" in run_cli("getControllerConfig", "-a", a, "--format", "json").stdout
    refused = run_cli("updateControllerConfig", "-a", a, "-k", "configStorePath", "-v", "/tmp/x")
    assert refused.returncode == 4 and "NO_PERMISSION" in refused.stderr
    assert run_cli("updateControllerConfig", "-a", a, "-k", "notifyBrokerRoleChanged", "-v", "maybe",
                   "--format", "table").returncode == 4

    # cleanBrokerMetadata: refused while alive, then clean a dead id.
    live = run_cli("cleanBrokerMetadata", "-a", a, "-c", CLUSTER, "-bn", NAME, "-b", "3")
    assert live.returncode == 4 and "CONTROLLER_INVALID_CLEAN_BROKER_METADATA" in live.stderr
    heartbeats.remove(3)
    with controllers.client() as client:
        poll(lambda: not next(r for r in client.call("GET", contract.SYNC_STATE_DATA,
                                                       params={"brokerName": NAME}).data["brokers"][0]
                              ["notInSyncReplicas"] if r["brokerId"] == 3)["alive"], 15, "broker 3 dead")
    cleaned = run_cli("cleanBrokerMetadata", "-a", a, "-c", CLUSTER, "-bn", NAME, "-b", "3", "--format", "mqadmin")
    assert cleaned.returncode == 0, cleaned.stderr
    assert cleaned.stdout == f"clear broker {NAME} metadata from controller success! \n"
    for fmt in ("json", "table"):
        assert run_cli("cleanBrokerMetadata", "-a", a, "-bn", "nothing-here", "-l", "--format", fmt).returncode == 4


def test_cli_errors_are_one_line_with_stable_exit_codes(controllers: ControllerCluster) -> None:
    dead = run_cli("getControllerMetaData", "-a", "127.0.0.1:1")
    assert dead.returncode == 3
    assert dead.stderr.startswith("Error: ") and "127.0.0.1:1" in dead.stderr and "Traceback" not in dead.stderr
    missing = run_cli("getSyncStateSet", "-a", controllers.addresses, "-b", "no-such-broker")
    assert missing.returncode == 2 and "no-such-broker" in missing.stderr
    usage = run_cli("getSyncStateSet", "-a", controllers.addresses)
    assert usage.returncode == 2
    bad_addr = run_cli("getSyncStateSet", "-a", "not-an-address", "-b", NAME)
    assert bad_addr.returncode == 2 and "not-an-address" in bad_addr.stderr
    env_addr = run_cli("getControllerMetaData", "--format", "json",
                       env={"MQCTL_CONTROLLER_ADDR": controllers.nodes[1].address})
    assert env_addr.returncode == 0 and json.loads(env_addr.stdout)["leaderId"]
    refused = run_cli("electMaster", "-a", controllers.addresses, "-c", CLUSTER, "-bn", "ghost", "-b", "1")
    assert refused.returncode == 4 and "CONTROLLER_BROKER_NEED_TO_BE_REGISTERED" in refused.stderr


def test_leader_cut_off_from_majority_stops_serving_quickly(controllers: ControllerCluster) -> None:
    import signal
    import time

    leader = controllers.leader()
    followers = [n for n in controllers.nodes if n is not leader]
    with controllers.client() as client:
        register_broker(client, CLUSTER, NAME, ADDRS[1])
    for node in followers:
        node.kill(signal.SIGSTOP)
    try:
        stopped = time.monotonic()
        with controllers.client(timeout=1.0) as direct:
            env = poll(lambda: (e := direct.request_node(leader.address, "GET", contract.REPLICA_INFO,
                                                         params={"brokerName": NAME})).code != RC.SUCCESS and e,
                       10, "the isolated leader to stop serving")
        assert env.code == RC.CONTROLLER_NOT_LEADER
        assert time.monotonic() - stopped < 5.0  # steps down on its own, well within the 10 s polled (loose: two busy cores)
    finally:
        for node in followers:
            node.kill(signal.SIGCONT)
    controllers.leader(timeout=30)
    with controllers.client() as client:
        assert replica_info(client)["clusterName"] == CLUSTER


def test_sigterm_stops_a_controller_cleanly(controllers: ControllerCluster) -> None:
    node = controllers.nodes[0]
    node.stop()
    assert node.process is not None and node.process.returncode == 0
    assert "stopped" in node.log_file.read_text()
