"""Real broker processes against a real 3-node controller group."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqctl.cluster import BrokerNode, ControllerCluster, make_broker
from services.broker import contract as bc
from services.common.broker_client import BrokerClient
from services.common.codes import ResponseCode as RC
from services.controller import contract
from tests.integration.conftest import FAST_BROKER_PROPS, poll, run_cli

pytestmark = pytest.mark.integration

FAST_BROKER = FAST_BROKER_PROPS


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[list[BrokerNode]]:
    started: list[BrokerNode] = []
    yield started
    for node in started:
        node.kill()


def sync_state(controllers: ControllerCluster, name: str) -> dict:
    with controllers.client() as client:
        return client.call("GET", contract.SYNC_STATE_DATA, params={"brokerName": name}).data["brokers"][0]


def runtime(node: BrokerNode) -> dict:
    with BrokerClient(2.0) as client:
        return client.request(node.address, "GET", bc.RUNTIME_INFO).data


def wait_role(node: BrokerNode, role: str, timeout: float = 30) -> dict:
    return poll(lambda: (info := runtime(node))["role"] == role and info, timeout, f"{node.address} to be {role}")


def pull_all(node: BrokerNode, topic: str, queues: int = 4) -> list[dict]:
    out = []
    with BrokerClient(5.0) as client:
        for qid in range(queues):
            offset = 0
            while True:
                data = client.request(node.address, "GET", bc.PULL_MESSAGE, params={
                    "topic": topic, "queueId": qid, "queueOffset": offset, "maxNums": 1024}).data
                out.extend(data["messages"])
                if data["status"] != "FOUND":
                    break
                offset = data["nextBeginOffset"]
    return out


def test_broker_registers_keeps_data_and_id_across_sigkill(controllers: ControllerCluster, brokers: list,
                                                           tmp_path: Path) -> None:
    b1 = make_broker(tmp_path, "broker-a", 1, controllers.addresses, **FAST_BROKER)
    brokers.append(b1)
    b1.start()
    info = wait_role(b1, "MASTER")
    assert (info["brokerId"], info["masterEpoch"]) == (1, 1)
    bs = sync_state(controllers, "broker-a")
    assert (bs["masterBrokerId"], bs["masterEpoch"], bs["masterAddress"]) == (1, 1, b1.address)

    sent = []
    with BrokerClient(10.0) as client:
        for batch in range(9):
            msgs = [{"topic": "TopicTest", "body": f"m-{batch * 100 + i}", "keys": f"k{batch * 100 + i}"}
                    for i in range(100)]
            env = client.request(b1.address, "POST", bc.SEND_MESSAGES, json={"messages": msgs})
            assert env.data["status"] == "PUT_OK"
            sent.extend(m["body"] for m in msgs)
        for i in range(900, 1000):
            env = client.request(b1.address, "POST", bc.SEND_MESSAGE,
                                 json={"topic": "TopicTest", "body": f"m-{i}", "keys": f"k{i}", "queueId": i % 4})
            assert env.data["status"] == "PUT_OK"
            sent.append(f"m-{i}")
    before = pull_all(b1, "TopicTest")
    assert sorted(m["body"] for m in before) == sorted(sent)

    b1.kill()  # SIGKILL: no flush, no goodbye
    b1.start()
    info = wait_role(b1, "MASTER", timeout=40)
    assert info["brokerId"] == 1
    assert (b1.store_dir / "brokerIdentity").read_text() == "DefaultCluster#broker-a#1"
    after = pull_all(b1, "TopicTest")
    assert [(m["queueId"], m["queueOffset"], m["body"]) for m in after] == \
        [(m["queueId"], m["queueOffset"], m["body"]) for m in before]
    for qid in range(4):
        offsets = [m["queueOffset"] for m in after if m["queueId"] == qid]
        assert offsets == list(range(len(offsets)))

    epochs = run_cli("getBrokerEpoch", "-a", controllers.addresses, "-b", "broker-a", "--format", "json")
    assert epochs.returncode == 0, epochs.stderr
    [row] = json.loads(epochs.stdout)["brokers"]
    assert row["brokerId"] == 1 and row["role"] == "MASTER" and row["reachable"]
    assert row["epochEntries"][0]["epoch"] == 1 and row["epochEntries"][0]["startOffset"] == 0
    assert row["epochEntries"][-1]["epoch"] == sync_state(controllers, "broker-a")["masterEpoch"]
    assert row["epochEntries"][-1]["endOffset"] == row["maxOffset"] > 0

    # A second broker of the group registers as id 2 and becomes a slave that refuses writes.
    b2 = make_broker(tmp_path, "broker-a", 2, controllers.addresses, **FAST_BROKER)
    brokers.append(b2)
    b2.start()
    info2 = wait_role(b2, "SLAVE")
    assert info2["brokerId"] == 2 and info2["masterAddress"] == b1.address
    with BrokerClient(5.0) as client:
        refused = client.request(b2.address, "POST", bc.SEND_MESSAGE,
                                 json={"topic": "TopicTest", "body": "x"}, accept=(RC.SERVICE_NOT_AVAILABLE,))
    assert refused.code == RC.SERVICE_NOT_AVAILABLE
    assert refused.data["status"] == "SERVICE_NOT_AVAILABLE" and refused.data["masterAddress"] == b1.address
    # The CLI follows the redirect to the master.
    cli = run_cli("sendMessage", "-a", controllers.addresses, "-t", "TopicTest", "-p", "via-cli", "-b", "broker-a",
                  "--format", "json")
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["status"] == "PUT_OK"
    consumed = run_cli("consumeMessage", "-a", controllers.addresses, "-t", "TopicTest", "-b", "broker-a",
                       "-n", "2000", "--format", "json")
    assert consumed.returncode == 0, consumed.stderr
    assert len(json.loads(consumed.stdout)["messages"]) == 1001
    text = run_cli("getBrokerEpoch", "-a", controllers.addresses, "-b", "broker-a", "--format", "mqadmin")
    assert f"#brokerAddr\t{b1.address}\n#brokerId\t0\n#Epoch: EpochEntry{{epoch=1, startOffset=0, endOffset=" \
        in text.stdout
    assert f"#brokerAddr\t{b2.address}\n#brokerId\t2\n" in text.stdout


@pytest.mark.parametrize("fault", ["after_temp_file", "after_apply_broker_id", "after_identity_file"])
def test_sigkill_at_each_registration_step_ends_with_one_agreed_id(controllers: ControllerCluster, brokers: list,
                                                                   tmp_path: Path, fault: str) -> None:
    name = f"broker-{fault.replace('_', '-')}"
    node = make_broker(tmp_path, name, 1, controllers.addresses, **FAST_BROKER)
    node.env = {"MQCTL_FAULT_INJECT": fault}
    brokers.append(node)
    node.start()
    assert node.process is not None
    assert node.process.wait(timeout=60) == -9  # it killed itself at the step
    node.env = {}
    node.start()
    info = wait_role(node, "MASTER", timeout=40)
    assert info["brokerId"] == 1
    assert (node.store_dir / "brokerIdentity").read_text() == f"DefaultCluster#{name}#1"
    assert not (node.store_dir / "brokerIdentity-temp").exists()
    bs = sync_state(controllers, name)
    ids = [r["brokerId"] for r in bs["inSyncReplicas"] + bs["notInSyncReplicas"]]
    assert ids == [1]
    assert bs["inSyncReplicas"][0]["brokerAddress"] == node.address


def test_sigterm_stops_a_broker_cleanly(controllers: ControllerCluster, brokers: list, tmp_path: Path) -> None:
    node = make_broker(tmp_path, "broker-t", 1, controllers.addresses, **FAST_BROKER)
    brokers.append(node)
    node.start()
    wait_role(node, "MASTER")
    node.stop()
    assert node.process is not None and node.process.returncode == 0
    assert "broker broker-t stopped" in node.log_file.read_text()


def test_rocketmqs_quick_start_broker_file_starts_a_broker(controllers: ControllerCluster, brokers: list,
                                                          tmp_path: Path) -> None:
    """distribution/conf/controller/quick-start/broker-n0.conf's properties (written here), with this test's
    ports and paths: the broker starts, replicates on listenPort + 1, keeps its commitlog where
    storePathCommitLog says, and becomes master."""
    node = make_broker(tmp_path, "broker-a", 1, controllers.addresses)
    node.directory.mkdir(parents=True)
    node.conf_file.write_text(
        "brokerClusterName = DefaultCluster\nbrokerName = broker-a\nbrokerId = -1\nbrokerRole = SLAVE\n"
        "deleteWhen = 04\nfileReservedTime = 48\nenableControllerMode = true\n"
        f"controllerAddr = {controllers.addresses}\nnamesrvAddr = 127.0.0.1:9876\nallAckInSyncStateSet=true\n"
        f"listenPort={node.port}\nstorePathRootDir={node.store_dir}\nstorePathCommitLog={tmp_path / 'log-disk'}\n")
    brokers.append(node)
    node.start()
    info = wait_role(node, "MASTER")
    assert info["haAddress"] == f"127.0.0.1:{node.port + 1}"
    sent = run_cli("sendMessage", "-a", controllers.addresses, "-b", "broker-a", "-t", "QuickStart", "-p", "hello")
    assert sent.returncode == 0, sent.stderr
    assert any((tmp_path / "log-disk").iterdir()) and not (node.store_dir / "commitlog").exists()
    out = node.log_file.read_text() + (node.store_dir / "logs" / "broker.log").read_text()
    assert "brokerRole=SLAVE is IGNORED in controller mode" in out
    assert "deleteWhen" not in out  # retention honours it (and fileReservedTime): no warning
