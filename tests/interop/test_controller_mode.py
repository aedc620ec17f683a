"""Real RocketMQ in controller mode, started by the kit for each tested version: the DLedger controllers
elect a master for broker-a and every replica joins its SyncStateSet, as real mqadmin shows (what mqctl
prints for the same cluster: test_mqadmin_differential.py)."""

from __future__ import annotations

import pytest

from tests.interop.conftest import Answers, follower
from tests.rocketmq import RocketMQCluster

pytestmark = pytest.mark.timeout(300)


def values(text: str, key: str) -> list[str]:
    """The values of mqadmin's ``#key<TAB>value`` lines."""
    return [line.split("\t", 1)[1] for line in text.splitlines() if line.startswith(f"#{key}\t")]


def test_the_controllers_have_a_leader_as_mqadmin_shows(rocketmq: RocketMQCluster, answers: Answers) -> None:
    meta = answers.theirs["getControllerMetaData"]
    assert values(meta, "ControllerGroup") == ["group1"]
    assert values(meta, "ControllerLeaderAddress") == [rocketmq.leader()] != [follower(rocketmq)]
    assert [line for line in meta.splitlines() if line.startswith("#Peer:")] == [
        f"#Peer:\tn{i}:{address}" for i, address in enumerate(rocketmq.controller_addrs.split(";"))]


def test_a_master_is_elected_and_every_replica_is_in_sync(rocketmq: RocketMQCluster, answers: Answers) -> None:
    sss = answers.theirs["getSyncStateSet -b"]
    assert values(sss, "brokerName") == [rocketmq.group]
    assert values(sss, "MasterAddr") == [rocketmq.sync_state().master_address]
    assert values(sss, "MasterAddr")[0] in [broker.address for broker in rocketmq.brokers]
    assert int(values(sss, "MasterEpoch")[0]) >= 1
    assert values(sss, "SyncStateSetNums") == ["3"]
    in_sync = [line for line in sss.splitlines() if line.startswith("InSyncReplica:")]
    assert len(in_sync) == 3 and all("alive=true" in line for line in in_sync), sss
