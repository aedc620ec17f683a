"""mqctl's admin commands against servers that speak only RocketMQ's remoting protocol and answer as its
Java code does (tests/support/rocketmq_standin.py: frames and fastjson bodies written independently of
our codec). No flag tells mqctl: it finds the protocol on first contact.

The cluster: a controller leader that is also the name server (RocketMQ's enableControllerInNamesrv), a
follower controller, a separate name server, and two brokers of broker-a (master, and slave id 2).
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from services.remoting.javaorder import hash_map_order
from tests.support.rocketmq_standin import Reply, Request, StandIn, java_long_map

pytestmark = [pytest.mark.component, pytest.mark.timeout(120)]

NOT_LEADER = Reply(2007, "The controller is not in leader state")


@dataclass
class Cluster:
    leader: StandIn
    follower: StandIn
    namesrv: StandIn
    master: StandIn
    slave: StandIn


def _replicas_info(c: Cluster) -> bytes:
    def identity(broker_id: int, address: str, alive: bool) -> str:
        return (f'{{"alive":{"true" if alive else "false"},"brokerAddress":"{address}","brokerId":{broker_id},'
                f'"brokerName":"broker-a"}}')
    table = (f'{{"inSyncReplicas":[{identity(1, c.master.address, True)},{identity(2, c.slave.address, True)}],'
             f'"masterAddress":"{c.master.address}","masterBrokerId":1,"masterEpoch":2,'
             f'"notInSyncReplicas":[{identity(3, "127.0.0.1:1", False)}],"syncStateSetEpoch":3}}')
    return f'{{"replicasInfoTable":{{"broker-a":{table}}}}}'.encode()


def _cluster_info(c: Cluster) -> bytes:
    addrs = java_long_map({0: c.master.address, 2: c.slave.address})
    return (f'{{"brokerAddrTable":{{"broker-a":{{"brokerAddrs":{addrs},"brokerName":"broker-a",'
            f'"cluster":"DefaultCluster","enableActingMaster":false}}}},'
            f'"clusterAddrTable":{{"DefaultCluster":["broker-a"]}}}}').encode()


def _elect(c: Cluster) -> object:
    def answer(request: Request) -> Reply:
        if request.ext_fields.get("brokerId") == "1":
            return Reply(2011, "The old master 1 is still alive, not need to elect new master for broker broker-a")
        members = java_long_map({1: c.master.address, 2: c.slave.address})
        return Reply(0, None, f'{{"masterAddress":"{c.slave.address}","masterBrokerId":"2","masterEpoch":"3",'
                              f'"syncStateSetEpoch":"4"}}',
                     f'{{"brokerMemberGroup":{{"brokerAddrs":{members},"brokerName":"broker-a",'
                     f'"cluster":"DefaultCluster"}},"syncStateSet":[2]}}'.encode())
    return answer


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    servers = [StandIn({}) for _ in range(5)]
    c = Cluster(*servers)
    peers = f"n0:{c.leader.address};n1:{c.follower.address};"
    for node, leads in ((c.leader, True), (c.follower, False)):
        node.answers[1005] = Reply(0, None, f'{{"controllerLeaderAddress":"{c.leader.address}",'
                                            f'"controllerLeaderId":"n0","group":"group1",'
                                            f'"isLeader":"{"true" if leads else "false"}","peers":"{peers}"}}')
    c.leader.answers.update({
        1006: Reply(0, None, "{}", _replicas_info(c)), 1002: _elect(c), 1011: Reply(0),
        1010: Reply(0, None, "{}", b"controllerDLegerGroup=group1\ncontrollerDLegerSelfId=n0\n"
                                   b"enableElectUncleanMaster=false\n"),
        1009: lambda r: (Reply(0) if not r.body.startswith(b"configBlackList")
                         else Reply(16, "Can not update config in black list.")),
        106: Reply(0, None, "{}", _cluster_info(c))})
    c.follower.answers.update({1006: NOT_LEADER, 1002: NOT_LEADER, 1011: NOT_LEADER})
    c.namesrv.answers[106] = Reply(0, None, "{}", _cluster_info(c))
    epochs = ('{{"brokerId":{id},"brokerName":"broker-a","clusterName":"DefaultCluster","epochList":['
              '{{"endOffset":1000,"epoch":1,"startOffset":0}},'
              '{{"endOffset":9223372036854775807,"epoch":2,"startOffset":1000}}],"maxOffset":{max}}}')
    c.master.answers[1007] = Reply(0, None, "{}", epochs.format(id=0, max=2500).encode())
    c.slave.answers[1007] = Reply(0, None, "{}", epochs.format(id=2, max=2400).encode())
    c.master.answers[907] = Reply(0, None, "{}", (
        b'{"haClientRuntimeInfo":{"lastReadTimestamp":0,"lastWriteTimestamp":0,"masterFlushOffset":0,'
        b'"maxOffset":0,"transferredByteInSecond":0},"haConnectionInfo":[{"addr":"127.0.0.1:40001",'
        b'"diff":100,"inSync":true,"slaveAckOffset":2400,"transferFromWhere":2300,'
        b'"transferredByteInSecond":2048}],"inSyncSlaveNums":1,"master":true,"masterCommitLogMaxOffset":2500}'
    ))
    c.master.answers[310] = Reply(0, None, '{"msgId":"7F00000100002A9F00000000000009C4","queueId":"1",'
                                           '"queueOffset":"17","transactionId":null}')
    c.slave.answers[310] = Reply(14, "service not available now. It may be caused by one of the following reasons: "
                                     "the broker's disk is full, messages are put to the slave, message store has "
                                     "been shut down, etc.")
    c.master.answers[21] = Reply(0, None, "{}", (
        b'{"dataVersion":{"counter":3,"stateVersion":0,"timestamp":1700000000000},"topicConfigTable":{'
        b'"TBW102":{"attributes":{},"order":false,"perm":7,"readQueueNums":8,"topicFilterType":"SINGLE_TAG",'
        b'"topicName":"TBW102","topicSysFlag":0,"writeQueueNums":8}}}'))
    c.master.answers[17] = Reply(0)
    yield c
    for server in servers:
        server.close()


def mqctl(*args: str, timeout: str = "5") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQCTL_")}
    return subprocess.run([sys.executable, "-m", "mqctl", "--timeout", timeout, *args], capture_output=True,
                          text=True, timeout=300, env=env, check=False)


def ok(*args: str) -> str:
    result = mqctl(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_get_controller_metadata(cluster: Cluster) -> None:
    out = ok("getControllerMetaData", "-a", cluster.leader.address, "--format", "mqadmin")
    assert out == (f"\n#ControllerGroup\tgroup1\n#ControllerLeaderId\tn0\n#ControllerLeaderAddress\t"
                   f"{cluster.leader.address}\n#Peer:\tn0:{cluster.leader.address}\n"
                   f"#Peer:\tn1:{cluster.follower.address}\n")
    assert cluster.leader.http_connections == 1  # asked over HTTP first, closed without an answer
    assert [r.code for r in cluster.leader.requests] == [1005]


def test_get_sync_state_set_follows_the_leader(cluster: Cluster) -> None:
    out = ok("getSyncStateSet", "-a", cluster.follower.address, "-b", "broker-a", "--format", "mqadmin")
    m, s = cluster.master.address, cluster.slave.address
    assert out == (f"\n#brokerName\tbroker-a\n#MasterBrokerId\t1\n#MasterAddr\t{m}\n#MasterEpoch\t2\n"
                   f"#SyncStateSetEpoch\t3\n#SyncStateSetNums\t2\n"
                   f"\nInSyncReplica:\tReplicaIdentity{{brokerName='broker-a', brokerId=1, brokerAddress='{m}', "
                   f"alive=true}}\n"
                   f"\nInSyncReplica:\tReplicaIdentity{{brokerName='broker-a', brokerId=2, brokerAddress='{s}', "
                   f"alive=true}}\n"
                   f"\nNotInSyncReplica:\tReplicaIdentity{{brokerName='broker-a', brokerId=3, "
                   f"brokerAddress='127.0.0.1:1', alive=false}}\n")
    assert [r.code for r in cluster.follower.requests] == [1006, 1005]
    assert [r.body for r in cluster.leader.requests if r.code == 1006] == [b'["broker-a"]']


def test_get_sync_state_set_of_a_cluster_through_the_name_server(cluster: Cluster) -> None:
    out = ok("getSyncStateSet", "-a", cluster.leader.address, "-n", cluster.namesrv.address, "-c", "DefaultCluster",
             "--format", "json")
    assert '"brokerName": "broker-a"' in out and '"masterBrokerId": 1' in out
    assert [r.code for r in cluster.namesrv.requests] == [106]
    # the controller that is also a name server answers -c alone
    out = ok("getSyncStateSet", "-a", cluster.leader.address, "-c", "DefaultCluster", "--format", "json")
    assert '"clusterName": "DefaultCluster"' in out


def test_elect_master(cluster: Cluster) -> None:
    out = ok("electMaster", "-a", cluster.follower.address, "-c", "DefaultCluster", "-bn", "broker-a", "-b", "2",
             "--format", "mqadmin")
    assert out.startswith(f"\n#ClusterName\tDefaultCluster\n#BrokerName\tbroker-a\n#BrokerMasterAddr\t"
                          f"{cluster.slave.address}\n#MasterEpoch\t3\n#SyncStateSetEpoch\t4\n")
    (elect,) = [r for r in cluster.leader.requests if r.code == 1002]
    assert {k: elect.ext_fields[k] for k in ("clusterName", "brokerName", "brokerId", "designateElect")} == {
        "clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": "2", "designateElect": "true"}


def test_elect_master_refused(cluster: Cluster) -> None:
    result = mqctl("electMaster", "-a", cluster.leader.address, "-c", "DefaultCluster", "-bn", "broker-a", "-b", "1")
    assert result.returncode == 4, result.stderr
    assert result.stderr.strip() == ("Error: The old master 1 is still alive, not need to elect new master for broker "
                                     "broker-a [CONTROLLER_MASTER_STILL_EXIST]")


def test_clean_broker_metadata(cluster: Cluster) -> None:
    out = ok("cleanBrokerMetadata", "-a", cluster.leader.address, "-c", "DefaultCluster", "-bn", "broker-a",
             "-b", "3", "--format", "mqadmin")
    assert out == "clear broker broker-a metadata from controller success! \n"
    (clean,) = [r for r in cluster.leader.requests if r.code == 1011]
    assert clean.ext_fields["brokerControllerIdsToClean"] == "3"
    assert clean.ext_fields["isCleanLivingBroker"] == "false"


def test_controller_config(cluster: Cluster) -> None:
    out = ok("getControllerConfig", "-a", cluster.leader.address, "--format", "mqadmin")
    assert out == (f"============{cluster.leader.address}============\n"
                   f"{'controllerDLegerGroup':<50}=  group1\n{'controllerDLegerSelfId':<50}=  n0\n"
                   f"{'enableElectUncleanMaster':<50}=  false\n")
    out = ok("updateControllerConfig", "-a", cluster.leader.address, "-k", "enableElectUncleanMaster", "-v", "true",
             "--format", "mqadmin")
    assert out == f"update controller config success![{cluster.leader.address}]\nenableElectUncleanMaster : true\n"
    assert [r.body for r in cluster.leader.requests if r.code == 1009] == [b"enableElectUncleanMaster=true\n"]
    refused = mqctl("updateControllerConfig", "-a", cluster.leader.address, "-k", "configBlackList", "-v", "x")
    assert refused.returncode == 4 and "Can not update config in black list. [NO_PERMISSION]" in refused.stderr


def test_get_broker_epoch_through_the_name_server(cluster: Cluster) -> None:
    out = ok("getBrokerEpoch", "-n", cluster.namesrv.address, "-b", "broker-a", "--format", "mqadmin")
    blocks = {cluster.master.address: (f"\n#clusterName\tDefaultCluster\n#brokerName\tbroker-a\n#brokerAddr\t"
                                       f"{cluster.master.address}\n#brokerId\t0\n#Epoch: EpochEntry{{epoch=1, "
                                       f"startOffset=0, endOffset=1000}}\n#Epoch: EpochEntry{{epoch=2, "
                                       f"startOffset=1000, endOffset=2500}}\n"),
              cluster.slave.address: (f"\n#clusterName\tDefaultCluster\n#brokerName\tbroker-a\n#brokerAddr\t"
                                      f"{cluster.slave.address}\n#brokerId\t2\n#Epoch: EpochEntry{{epoch=1, "
                                      f"startOffset=0, endOffset=1000}}\n#Epoch: EpochEntry{{epoch=2, "
                                      f"startOffset=1000, endOffset=2400}}\n")}
    # in the order mqadmin's HashSet of the addresses iterates (the ports are free ones: either order)
    assert out == "".join(blocks[a] for a in hash_map_order([cluster.master.address, cluster.slave.address]))
    assert [r.code for r in cluster.namesrv.requests] == [106]


def test_ha_status_through_the_name_server(cluster: Cluster) -> None:
    result = mqctl("haStatus", "-n", cluster.namesrv.address, "-b", "broker-a", "--format", "mqadmin")
    assert result.stdout.startswith(
        f"\n#MasterAddr\t{cluster.master.address}\n#MasterCommitLogMaxOffset\t2500\n#SlaveNum\t1\n"
        f"#InSyncSlaveNum\t1\n")
    assert "%-32s  %-16d %16d %16.2f %16s %16d\n" % ("127.0.0.1:40001", 2400, 100, 2.0, "OK", 2300) in result.stdout
    # the slave stand-in serves no 907: nothing on stdout for it (as mqadmin); the error says why, exit 3
    assert result.returncode == 3
    assert "request type 907 not supported" in result.stderr


def test_send_message_to_a_rocketmq_broker(cluster: Cluster) -> None:
    out = ok("sendMessage", "--brokerAddr", cluster.master.address, "-t", "TopicTest", "-p", "hello", "-k", "k1",
             "--tags", "t1", "--format", "json")
    assert '"msgId": "7F00000100002A9F00000000000009C4"' in out and '"queueOffset": 17' in out
    (send,) = [r for r in cluster.master.requests if r.code == 310]
    assert send.body == b"hello"
    assert send.ext_fields["b"] == "TopicTest" and send.ext_fields["c"] == "TBW102"
    assert "KEYS\x01k1\x02" in send.ext_fields["i"] and "TAGS\x01t1\x02" in send.ext_fields["i"]
    refused = mqctl("sendMessage", "--brokerAddr", cluster.slave.address, "-t", "TopicTest", "-p", "x")
    assert refused.returncode == 4 and "[SERVICE_NOT_AVAILABLE]" in refused.stderr


def test_what_rocketmq_cannot_answer_is_said_clearly(cluster: Cluster) -> None:
    result = mqctl("getSyncStateSet", "-a", cluster.namesrv.address, "-b", "broker-a")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "request type 1006 not supported" in result.stderr


def test_update_topic_on_a_rocketmq_broker(cluster: Cluster) -> None:
    out = ok("updateTopic", "-t", "TopicTest", "-b", cluster.master.address, "--format", "mqadmin")
    assert out == (f"create topic to {cluster.master.address} success.\n"
                   "TopicConfig [topicName=TopicTest, readQueueNums=8, writeQueueNums=8, perm=RW-, "
                   "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false, attributes={}]\n")
    (create,) = [r for r in cluster.master.requests if r.code == 17]
    assert create.ext_fields == {"topic": "TopicTest", "defaultTopic": "TBW102", "readQueueNums": "8",
                                 "writeQueueNums": "8", "perm": "6", "topicFilterType": "SINGLE_TAG",
                                 "topicSysFlag": "0", "order": "false", "force": "false"}


@pytest.mark.parametrize("answer", [
    struct.pack(">i", 0x7FFFFFFF),  # a frame longer than any answer: refused before it is read
    struct.pack(">ii", 8, 0x01000004) + b"\xff" * 4,  # a binary header that ends inside its first field
    struct.pack(">ii", 12, 8) + b'{"code":', # a JSON header cut short
])
def test_a_hostile_answer_is_a_clear_error(answer: bytes) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = f"127.0.0.1:{server.getsockname()[1]}"

        def serve() -> None:
            for _ in range(2):  # the HTTP probe, then the remoting request
                conn, _ = server.accept()
                with conn:
                    first = conn.recv(4096)
                    if not first.startswith(b"GET "):
                        conn.sendall(answer)
                        conn.recv(1)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        result = mqctl("getControllerMetaData", "-a", address)
    assert result.returncode in (3, 4), result.stderr
    assert "Traceback" not in result.stderr and result.stderr.startswith("Error: ")


def test_update_topic_on_a_rocketmq_cluster_goes_to_its_masters(cluster: Cluster) -> None:
    out = ok("updateTopic", "-t", "TopicTest", "-c", "DefaultCluster", "-n", cluster.namesrv.address,
             "--format", "mqadmin")
    assert out.startswith(f"create topic to {cluster.master.address} success.\nTopicConfig [topicName=TopicTest")
    assert [r.code for r in cluster.master.requests if r.code == 17] == [17]
    assert not [r for r in cluster.slave.requests if r.code == 17]  # a RocketMQ slave copies its master's
