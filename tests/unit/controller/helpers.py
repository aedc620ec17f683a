"""Shared helpers for the controller unit tests (RocketMQ's ControllerTestBase / ReplicasInfoManagerTest
helpers, adapted to the command/apply split of :class:`ReplicasInfoManager`)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any

from services.common.codes import ResponseCode
from services.controller.elect_policy import DefaultElectPolicy
from services.controller.heartbeat import BrokerLiveInfo
from services.controller.state_machine import ControllerResult, ElectMasterRequest, ReplicasInfoManager

CLUSTER = "cluster-a"
BROKER = "broker-set-a"
IPS = ("127.0.0.1:9000", "127.0.0.1:9001", "127.0.0.1:9002")
CHECK_MILLIS = 1_700_000_000_123

Alive = Callable[[str, str, int], bool]


def all_alive(cluster: str, name: str, broker_id: int) -> bool:
    return True


def none_alive(cluster: str, name: str, broker_id: int) -> bool:
    return False


def only_alive(*ids: int) -> Alive:
    alive_ids = set(ids)
    return lambda cluster, name, broker_id: broker_id in alive_ids


def all_but(*ids: int) -> Alive:
    dead_ids = set(ids)
    return lambda cluster, name, broker_id: broker_id not in dead_ids


def check_code(addr: str, millis: int = CHECK_MILLIS) -> str:
    return f"{addr};{millis}"


def state_of(m: ReplicasInfoManager) -> dict[str, Any]:
    """A deep copy of everything the manager holds (to prove that commands do not mutate)."""
    return copy.deepcopy(m.to_dict())


def run(m: ReplicasInfoManager, command: Callable[[ReplicasInfoManager], ControllerResult]) -> ControllerResult:
    """Run a command, check that it did not mutate anything, then apply its events (as Raft would)."""
    before = state_of(m)
    result = command(m)
    assert state_of(m) == before, "a command mutated the state machine"
    for e in result.events:
        m.apply_event(e)
    return result


def apply(m: ReplicasInfoManager, result: ControllerResult) -> ControllerResult:
    for e in result.events:
        m.apply_event(e)
    return result


def replica_info(m: ReplicasInfoManager, name: str = BROKER) -> dict[str, Any]:
    r = m.get_replica_info(name)
    assert r.code == ResponseCode.SUCCESS, r
    assert r.data is not None
    return r.data


def sync_state_data(m: ReplicasInfoManager, name: str = BROKER, alive: Alive = all_alive) -> dict[str, Any]:
    r = m.get_sync_state_data([name], alive)
    assert r.code == ResponseCode.SUCCESS
    assert r.data is not None
    [info] = r.data["brokers"]
    return info


def register_new_broker(m: ReplicasInfoManager, cluster: str, name: str, addr: str, expect_id: int,
                        expect_master_id: int | None) -> None:
    """RocketMQ's ``registerNewBroker``: getNextBrokerId -> applyBrokerId -> registerBroker."""
    nxt = run(m, lambda mm: mm.get_next_broker_id(cluster, name))
    assert nxt.code == ResponseCode.SUCCESS
    assert nxt.events == ()
    assert nxt.data == {"clusterName": cluster, "brokerName": name, "nextBrokerId": expect_id}

    applied = run(m, lambda mm: mm.apply_broker_id(cluster, name, expect_id, check_code(addr)))
    assert applied.code == ResponseCode.SUCCESS, applied.remark
    assert applied.data == {"clusterName": cluster, "brokerName": name}
    info = sync_state_data(m, name)
    not_in_sync = {r["brokerId"]: r for r in info["notInSyncReplicas"]}
    assert expect_id in not_in_sync
    assert not_in_sync[expect_id]["brokerName"] == name
    assert not_in_sync[expect_id]["brokerAddress"] == addr

    registered = run(m, lambda mm: mm.register_broker(cluster, name, expect_id, addr, all_alive))
    assert registered.code == ResponseCode.SUCCESS, registered.remark
    assert registered.events == ()  # same address: nothing to update
    assert registered.data is not None
    assert registered.data["masterBrokerId"] == expect_master_id


def broker_elect_master(m: ReplicasInfoManager, cluster: str, broker_id: int, name: str, addr: str,
                        first_try: bool, expect_elected: bool, alive: Alive = all_alive,
                        enable_unclean: bool = False) -> ControllerResult:
    """RocketMQ's ``brokerElectMaster`` (``ofBrokerTrigger`` with ``DefaultElectPolicy(alive, null)``)."""
    before = replica_info(m, name)
    policy = DefaultElectPolicy(alive, None)
    request = ElectMasterRequest(cluster, name, broker_id)
    result = run(m, lambda mm: mm.elect_master(request, policy, enable_unclean, alive))
    after = replica_info(m, name)
    assert result.data is not None
    if first_try:
        assert result.code == ResponseCode.SUCCESS, result.remark
        assert result.data["masterEpoch"] == 1
        assert result.data["syncStateSetEpoch"] == 1
        assert result.data["masterAddress"] == addr
        assert result.data["masterBrokerId"] == broker_id
        assert after["masterBrokerId"] == broker_id
        assert after["masterAddress"] == addr
        assert after["masterEpoch"] == 1
        assert after["syncStateSet"] == [broker_id]
        return result
    old_master = before["masterBrokerId"]
    if old_master is not None and alive(cluster, name, old_master):
        assert result.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST
        assert result.events == ()
        assert result.data["masterAddress"] == before["masterAddress"]
        assert result.data["masterEpoch"] == before["masterEpoch"]
        assert result.data["masterBrokerId"] == old_master
        assert after == before
    elif broker_id in before["syncStateSet"] or enable_unclean:
        assert result.code == ResponseCode.SUCCESS, result.remark
        assert result.data["masterEpoch"] == before["masterEpoch"] + 1
        assert after["masterEpoch"] == before["masterEpoch"] + 1
        if expect_elected:
            assert result.data["masterBrokerId"] == broker_id
            assert after["masterBrokerId"] == broker_id
            assert after["masterAddress"] == addr
    else:
        assert result.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
        assert result.events == ()
        assert after == before
    return result


def alter_new_in_sync_set(m: ReplicasInfoManager, name: str, master_id: int, master_epoch: int,
                          new_set: Iterable[int], ss_epoch: int, alive: Alive = all_alive) -> ControllerResult:
    new_set = sorted(new_set)
    result = run(m, lambda mm: mm.alter_sync_state_set(name, master_id, master_epoch, new_set, ss_epoch, alive))
    assert result.code == ResponseCode.SUCCESS, result.remark
    assert result.data == {"newSyncStateSetEpoch": ss_epoch + 1, "syncStateSet": new_set}
    info = replica_info(m, name)
    assert info["syncStateSet"] == new_set
    assert info["syncStateSetEpoch"] == ss_epoch + 1
    return result


def mock_meta_data(m: ReplicasInfoManager) -> None:
    """RocketMQ's ``mockMetaData``: ids 1..3 registered, 1 elected (epoch 1), set {1,2,3} (ssEpoch 2)."""
    register_new_broker(m, CLUSTER, BROKER, IPS[0], 1, None)
    register_new_broker(m, CLUSTER, BROKER, IPS[1], 2, None)
    register_new_broker(m, CLUSTER, BROKER, IPS[2], 3, None)
    broker_elect_master(m, CLUSTER, 1, BROKER, IPS[0], True, True)
    broker_elect_master(m, CLUSTER, 2, BROKER, IPS[1], False, False)
    broker_elect_master(m, CLUSTER, 3, BROKER, IPS[2], False, False)
    alter_new_in_sync_set(m, BROKER, 1, 1, {1, 2, 3}, 1)


# ---------------------------------------------------------------------- heartbeat-table mocks (§7.1)
def live(broker_id: int, alive: bool, epoch: int, max_offset: int, priority: int = 0,
         async_learner: bool = False) -> BrokerLiveInfo:
    return BrokerLiveInfo(CLUSTER, BROKER, IPS[broker_id - 1], broker_id, lastUpdateMs=0,
                          heartbeatTimeoutMs=10_000_000_000 if alive else -10_000, epoch=epoch,
                          maxOffset=max_offset, confirmOffset=-1, electionPriority=priority,
                          asyncLearner=async_learner)


MOCKS: dict[str, dict[int, BrokerLiveInfo]] = {
    "MasterStillAlive": {1: live(1, True, 1, 1), 2: live(2, True, 1, 2), 3: live(3, True, 1, 3)},
    "HigherEpoch": {1: live(1, False, 1, 3), 2: live(2, True, 1, 2), 3: live(3, True, 0, 3)},
    "HigherOffset": {1: live(1, False, 1, 3), 2: live(2, True, 1, 2), 3: live(3, True, 1, 3)},
    "HigherPriority": {1: live(1, False, 1, 3, 3), 2: live(2, True, 1, 3, 2), 3: live(3, True, 1, 3, 1)},
}


def mock_policy(table: dict[int, BrokerLiveInfo]) -> tuple[DefaultElectPolicy, Alive]:
    """An elect policy backed by a fixed live table, plus its alive predicate (evaluated at time 0)."""
    def alive(cluster: str, name: str, broker_id: int) -> bool:
        info = table.get(broker_id)
        return info is not None and info.is_alive(0)

    def getter(cluster: str, name: str, broker_id: int) -> BrokerLiveInfo | None:
        return table.get(broker_id)

    return DefaultElectPolicy(alive, getter), alive
