"""ReplicasInfoManager: RocketMQ's ReplicasInfoManagerTest (§7.1), the network-free parts of
DLedgerControllerTest / ControllerManagerTest (§7.2, §7.3) and the detailed rules of §3."""

from __future__ import annotations

import json
import pickle

import pytest

from services.common.clock import FakeClock
from services.common.codes import ResponseCode
from services.controller import state_machine as sm_module
from services.controller.elect_policy import DefaultElectPolicy
from services.controller.events import (
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    CleanBrokerDataEvent,
    ElectMasterEvent,
    UpdateBrokerAddressEvent,
    stamp,
)
from services.controller.heartbeat import BrokerHeartbeatManager, Heartbeat
from services.controller.state_machine import ControllerResult, ElectMasterRequest, ReplicasInfoManager
from tests.unit.controller.helpers import (
    BROKER,
    CLUSTER,
    IPS,
    MOCKS,
    all_alive,
    all_but,
    alter_new_in_sync_set,
    broker_elect_master,
    check_code,
    live,
    mock_meta_data,
    mock_policy,
    none_alive,
    only_alive,
    register_new_broker,
    replica_info,
    run,
    state_of,
    sync_state_data,
)

RC = ResponseCode


def controller_trigger(name: str = BROKER) -> ElectMasterRequest:
    return ElectMasterRequest("", name, None)


def broker_trigger(broker_id: int, name: str = BROKER) -> ElectMasterRequest:
    return ElectMasterRequest(CLUSTER, name, broker_id)


def admin_trigger(broker_id: int, name: str = BROKER) -> ElectMasterRequest:
    return ElectMasterRequest(CLUSTER, name, broker_id, designateElect=True)


def elect(m: ReplicasInfoManager, request: ElectMasterRequest, alive=all_alive, enable_unclean: bool = False,
          policy: DefaultElectPolicy | None = None) -> ControllerResult:
    policy = policy if policy is not None else DefaultElectPolicy(alive, None)
    return run(m, lambda mm: mm.elect_master(request, policy, enable_unclean, alive))


def register_three(m: ReplicasInfoManager) -> None:
    for i in (1, 2, 3):
        register_new_broker(m, CLUSTER, BROKER, IPS[i - 1], i, None)


# =====================================================================================================
# §7.1 ReplicasInfoManagerTest
# =====================================================================================================
class TestReplicasInfoManagerTest:
    def test_register_broker_success(self, meta: ReplicasInfoManager) -> None:
        info = sync_state_data(meta)
        assert info["masterBrokerId"] == 1
        assert info["masterAddress"] == IPS[0]
        assert info["masterEpoch"] == 1
        assert info["syncStateSetEpoch"] == 2
        assert [r["brokerId"] for r in info["inSyncReplicas"]] == [1, 2, 3]
        assert [r["brokerAddress"] for r in info["inSyncReplicas"]] == list(IPS)
        assert all(r["alive"] and r["brokerName"] == BROKER for r in info["inSyncReplicas"])
        assert info["notInSyncReplicas"] == []

    def test_register_with_master_exist_resp(self, manager: ReplicasInfoManager) -> None:
        m = manager
        register_new_broker(m, CLUSTER, BROKER, IPS[0], 1, None)
        register_new_broker(m, CLUSTER, BROKER, IPS[1], 2, None)
        broker_elect_master(m, CLUSTER, 1, BROKER, IPS[0], True, True)
        broker_elect_master(m, CLUSTER, 2, BROKER, IPS[1], False, False)
        register_new_broker(m, CLUSTER, BROKER, IPS[2], 3, 1)  # the live master is reported
        broker_elect_master(m, CLUSTER, 3, BROKER, IPS[2], False, False)

        info = sync_state_data(m)
        assert info["masterBrokerId"] == 1
        assert info["masterAddress"] == IPS[0]
        assert info["masterEpoch"] == 1
        assert info["syncStateSetEpoch"] == 1
        assert [r["brokerId"] for r in info["inSyncReplicas"]] == [1]
        assert [r["brokerId"] for r in info["notInSyncReplicas"]] == [2, 3]

    def test_register_with_old_master_inactive(self, meta: ReplicasInfoManager) -> None:
        result = broker_elect_master(meta, CLUSTER, 3, BROKER, IPS[2], False, True, alive=only_alive(3))
        assert result.code == RC.SUCCESS
        assert result.data is not None and result.data["electReason"] == "FAILOVER"

        info = sync_state_data(meta)
        assert info["masterBrokerId"] == 3
        assert info["masterAddress"] == IPS[2]
        assert info["masterEpoch"] == 2
        assert info["syncStateSetEpoch"] == 3
        assert [r["brokerId"] for r in info["inSyncReplicas"]] == [3]
        assert [r["brokerId"] for r in info["notInSyncReplicas"]] == [1, 2]

    def test_elect_master_old_master_still_alive(self, meta: ReplicasInfoManager) -> None:
        policy, alive = mock_policy(MOCKS["MasterStillAlive"])
        before = state_of(meta)
        result = elect(meta, controller_trigger(), alive, policy=policy)
        assert result.code == RC.CONTROLLER_MASTER_STILL_EXIST
        assert result.remark == ("The old master 1 is still alive, not need to elect new master "
                                 "for broker broker-set-a")
        assert result.events == ()
        assert result.data is not None
        assert result.data["masterBrokerId"] == 1
        assert result.data["masterAddress"] == IPS[0]
        assert result.data["masterEpoch"] == 1
        assert result.data["syncStateSetEpoch"] == 2
        assert result.data["syncStateSet"] == [1, 2, 3]
        assert state_of(meta) == before

    def test_elect_master_prefer_higher_epoch(self, meta: ReplicasInfoManager) -> None:
        policy, alive = mock_policy(MOCKS["HigherEpoch"])
        result = elect(meta, controller_trigger(), alive, policy=policy)
        assert result.code == RC.SUCCESS
        assert result.data is not None
        assert result.data["masterBrokerId"] == 2
        assert result.data["masterAddress"] == IPS[1]
        assert result.data["masterEpoch"] == 2
        info = replica_info(meta)
        assert (info["masterBrokerId"], info["masterAddress"], info["masterEpoch"]) == (2, IPS[1], 2)

    def test_elect_master_prefer_higher_offset_when_epoch_equals(self, meta: ReplicasInfoManager) -> None:
        policy, alive = mock_policy(MOCKS["HigherOffset"])
        result = elect(meta, controller_trigger(), alive, policy=policy)
        assert result.code == RC.SUCCESS
        assert result.data is not None
        assert (result.data["masterBrokerId"], result.data["masterAddress"], result.data["masterEpoch"]) == (
            3, IPS[2], 2)
        info = replica_info(meta)
        assert (info["masterBrokerId"], info["masterAddress"], info["masterEpoch"]) == (3, IPS[2], 2)

    def test_elect_master_prefer_higher_priority_when_epoch_and_offset_equals(
            self, meta: ReplicasInfoManager) -> None:
        policy, alive = mock_policy(MOCKS["HigherPriority"])
        # ``new ElectMasterRequestHeader(brokerName)``: brokerId stays -1, a controller trigger
        result = elect(meta, ElectMasterRequest("", BROKER, -1), alive, policy=policy)
        assert result.code == RC.SUCCESS
        assert result.data is not None
        assert (result.data["masterBrokerId"], result.data["masterAddress"], result.data["masterEpoch"]) == (
            3, IPS[2], 2)
        assert replica_info(meta)["masterBrokerId"] == 3

    def test_elect_master(self, meta: ReplicasInfoManager) -> None:
        m = meta
        # 1. controller trigger with 1 dead, no live-info getter: the lowest live id of the set wins
        result = elect(m, controller_trigger(), all_but(1))
        assert result.code == RC.SUCCESS
        assert result.data is not None
        assert result.data["masterEpoch"] == 2
        assert result.data["masterBrokerId"] != 1 and result.data["masterAddress"] != IPS[0]
        assert result.data["masterBrokerId"] == 2  # deterministic: lower broker id
        assert result.data["electReason"] == "FAILOVER"
        # 2. (applied by ``elect``) then alter to {1,2,3}
        info = replica_info(m)
        assert (info["masterBrokerId"], info["masterEpoch"], info["syncStateSetEpoch"]) == (2, 2, 3)
        alter_new_in_sync_set(m, BROKER, 2, 2, {1, 2, 3}, 3)
        assert replica_info(m)["syncStateSetEpoch"] == 4
        # 3. admin designates the dead broker 1: no fallback, failure, no event
        before = state_of(m)
        result = elect(m, admin_trigger(1), all_but(1))
        assert result.code == RC.CONTROLLER_ELECT_MASTER_FAILED
        assert result.remark == "Failed to elect a new master"
        assert result.events == ()
        assert state_of(m) == before
        # 4. admin designates the current (alive) master
        result = elect(m, admin_trigger(2), all_alive)
        assert result.code == RC.CONTROLLER_MASTER_STILL_EXIST
        assert result.events == ()
        assert state_of(m) == before
        # 5. admin designates 1 while the current master 2 is dead
        result = elect(m, admin_trigger(1), all_but(2))
        assert result.code == RC.SUCCESS
        assert result.data is not None
        assert (result.data["masterBrokerId"], result.data["masterAddress"], result.data["masterEpoch"]) == (
            1, IPS[0], 3)
        assert result.data["electReason"] == "ADMIN"
        info = replica_info(m)
        assert (info["masterBrokerId"], info["masterAddress"], info["masterEpoch"]) == (1, IPS[0], 3)
        assert info["syncStateSet"] == [1]

    def test_all_replicas_shutdown_and_restart(self, meta: ReplicasInfoManager) -> None:
        m = meta
        alter_new_in_sync_set(m, BROKER, 1, 1, {1}, 2)
        assert replica_info(m)["syncStateSetEpoch"] == 3
        policy = DefaultElectPolicy(all_but(1), None)
        result = m.elect_master(controller_trigger(), policy, False, all_but(1))
        assert result.code == RC.CONTROLLER_MASTER_NOT_AVAILABLE
        assert result.remark == "Old master has down and failed to elect a new broker master"
        assert len(result.events) == 1
        [event] = result.events
        assert isinstance(event, ElectMasterEvent)
        assert event.newMasterElected is False
        assert event.newMasterBrokerId is None
        assert result.data is not None
        assert result.data["masterBrokerId"] is None and result.data["masterAddress"] is None
        assert result.data["masterEpoch"] is None and result.data["syncStateSetEpoch"] is None

        m.apply_event(event)
        info = replica_info(m)
        assert info["masterAddress"] is None
        assert info["masterBrokerId"] is None
        assert info["masterEpoch"] == 2
        # the SyncStateSet and its epoch are kept
        assert info["syncStateSet"] == [1]
        assert info["syncStateSetEpoch"] == 3

    def test_clean_broker_data(self, meta: ReplicasInfoManager) -> None:
        m = meta
        before = state_of(m)
        code_2009 = RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
        # 1. ids "1", all alive
        r = m.clean_broker_data(CLUSTER, BROKER, "1", False, all_alive)
        assert r.code == code_2009
        assert r.remark == "Broker [broker-set-a,  1] is still alive, clean up failure"
        assert r.events == ()
        # 2. no ids, master exists
        r = m.clean_broker_data(CLUSTER, BROKER, None, False, all_alive)
        assert r.code == code_2009
        assert r.remark == "Broker broker-set-a is still alive, clean up failure"
        assert r.events == ()
        # 3. ids "1", none alive
        r = m.clean_broker_data(CLUSTER, BROKER, "1", False, none_alive)
        assert r.code == RC.SUCCESS
        assert r.events == (CleanBrokerDataEvent(BROKER, (1,), CLUSTER),)
        # 4. ids "1;2;3", none alive
        r = m.clean_broker_data(CLUSTER, BROKER, "1;2;3", False, none_alive)
        assert r.code == RC.SUCCESS
        assert r.events == (CleanBrokerDataEvent(BROKER, (1, 2, 3), CLUSTER),)
        # 5. unknown broker-set, clean living
        r = m.clean_broker_data(CLUSTER, "broker12", "1;2;3", True, all_alive)
        assert r.code == code_2009
        assert r.remark == "Broker broker12 is not existed,clean broker data failure."
        assert r.events == ()
        # 6. null cluster, unknown broker-set, clean living
        r = m.clean_broker_data(None, "broker12", "1;2;3", True, all_alive)
        assert r.code == code_2009
        assert r.remark == "Broker broker12 is not existed,clean broker data failure."
        # 7. null cluster, known broker-set, clean living: our choice 3 keeps the ids
        r = m.clean_broker_data(None, BROKER, "1;2;3", True, all_alive)
        assert r.code == RC.SUCCESS
        assert r.events == (CleanBrokerDataEvent(BROKER, (1, 2, 3), CLUSTER),)
        # results were not applied: nothing changed
        assert state_of(m) == before

    def test_serialize(self, meta: ReplicasInfoManager) -> None:
        restored = pickle.loads(pickle.dumps(meta))
        assert isinstance(restored, ReplicasInfoManager)
        assert restored.broker_sets.keys() == meta.broker_sets.keys()
        assert restored.broker_sets == meta.broker_sets
        assert restored.to_dict() == meta.to_dict()


# =====================================================================================================
# §7.2 / §7.3 scenarios that need no network
# =====================================================================================================
class TestControllerScenarios:
    def test_dledger_elect_master(self, meta: ReplicasInfoManager) -> None:
        result = elect(meta, controller_trigger(), all_but(1))
        assert result.code == RC.SUCCESS
        info = replica_info(meta)
        assert info["masterEpoch"] == 2
        assert info["masterBrokerId"] != 1 and info["masterAddress"] != IPS[0]

    def test_all_replicas_shutdown_and_restart_without_unclean(self, meta: ReplicasInfoManager) -> None:
        m = meta
        alter_new_in_sync_set(m, BROKER, 1, 1, {1}, 2)
        result = elect(m, controller_trigger(), all_but(1))
        assert result.code == RC.CONTROLLER_MASTER_NOT_AVAILABLE
        info = replica_info(m)
        assert info["syncStateSet"] == [1]
        assert info["masterAddress"] is None
        assert info["masterEpoch"] == 2

        # broker 2 (not in the set) tries while 1 is still dead
        result = elect(m, broker_trigger(2), all_but(1))
        assert result.code == RC.CONTROLLER_ELECT_MASTER_FAILED
        assert result.events == ()
        assert result.data is not None
        assert result.data["masterBrokerId"] is None and result.data["masterAddress"] is None
        assert replica_info(m)["masterEpoch"] == 2

        # everybody is back: broker 1 elects itself, masterEpoch 3
        result = elect(m, broker_trigger(1), all_alive)
        assert result.code == RC.SUCCESS
        assert result.data is not None
        assert (result.data["masterBrokerId"], result.data["masterAddress"], result.data["masterEpoch"]) == (
            1, IPS[0], 3)
        assert result.data["electReason"] == "FAILOVER"
        info = replica_info(m)
        assert (info["masterBrokerId"], info["masterAddress"], info["masterEpoch"]) == (1, IPS[0], 3)
        assert info["syncStateSet"] == [1]
        assert info["syncStateSetEpoch"] == 4

    def test_enable_elect_unclean_master(self, meta: ReplicasInfoManager) -> None:
        m = meta
        alter_new_in_sync_set(m, BROKER, 1, 1, {1}, 2)
        result = elect(m, controller_trigger(), all_but(1), enable_unclean=True)
        assert result.code == RC.SUCCESS
        assert result.data is not None
        new_master = result.data["masterBrokerId"]
        assert new_master != 1 and result.data["masterAddress"] != IPS[0]
        assert new_master == 2  # lower id among the live non-members
        assert result.data["electReason"] == "UNCLEAN"
        [event] = result.events
        assert event == ElectMasterEvent(BROKER, True, 2, "UNCLEAN", CLUSTER)
        info = replica_info(m)
        assert info["masterEpoch"] == 2
        assert info["syncStateSet"] == [new_master]
        assert info["syncStateSetEpoch"] == 4

    def test_unclean_disabled_does_not_pick_outside_the_set(self, meta: ReplicasInfoManager) -> None:
        alter_new_in_sync_set(meta, BROKER, 1, 1, {1}, 2)
        result = elect(meta, controller_trigger(), all_but(1), enable_unclean=False)
        assert result.code == RC.CONTROLLER_MASTER_NOT_AVAILABLE
        assert replica_info(meta)["masterBrokerId"] is None

    def test_controller_manager_some_api_with_fake_clock(self, manager: ReplicasInfoManager) -> None:
        """§7.3 testSomeApi without the network: heartbeats expire on a fake clock, the inactive-master
        scan finds the broker-set and an unclean election picks broker 2."""
        m = manager
        clock = FakeClock()
        hb = BrokerHeartbeatManager(clock)

        def alive(cluster: str, name: str, broker_id: int) -> bool:
            return hb.is_active(name, broker_id)

        policy = DefaultElectPolicy(alive, lambda c, n, i: hb.find(n, i))
        addrs = {1: "127.0.0.1:8000", 2: "127.0.0.1:8001"}
        for i, addr in addrs.items():
            register_new_broker(m, "cluster1", "broker1", addr, i, None)
            hb.on_heartbeat(Heartbeat("cluster1", "broker1", addr, i, heartbeatTimeoutMills=3000))

        r = run(m, lambda mm: mm.elect_master(ElectMasterRequest("cluster1", "broker1", 1), policy, True, alive))
        assert r.code == RC.SUCCESS
        assert r.data is not None
        assert (r.data["masterBrokerId"], r.data["masterAddress"], r.data["masterEpoch"],
                r.data["syncStateSetEpoch"]) == (1, addrs[1], 1, 1)
        r = run(m, lambda mm: mm.elect_master(ElectMasterRequest("cluster1", "broker1", 2), policy, True, alive))
        assert r.code == RC.CONTROLLER_MASTER_STILL_EXIST
        assert r.data is not None
        assert (r.data["masterBrokerId"], r.data["masterAddress"], r.data["masterEpoch"],
                r.data["syncStateSetEpoch"]) == (1, addrs[1], 1, 1)

        # only broker 2 keeps heartbeating
        assert m.scan_need_reelect(alive, policy, True) == []
        for _ in range(4):
            clock.advance(1000)
            hb.on_heartbeat(Heartbeat("cluster1", "broker1", addrs[2], 2, heartbeatTimeoutMills=3000))
        expired = hb.scan_expired()
        assert [(e.brokerName, e.brokerId) for e in expired] == [("broker1", 1)]
        assert m.scan_need_reelect(alive, policy, True) == ["broker1"]

        r = run(m, lambda mm: mm.elect_master(ElectMasterRequest("", "broker1", None), policy, True, alive))
        assert r.code == RC.SUCCESS
        assert replica_info(m, "broker1")["masterBrokerId"] == 2
        assert replica_info(m, "broker1")["masterEpoch"] == 2
        assert m.scan_need_reelect(alive, policy, True) == []


# =====================================================================================================
# §3.7 electMaster details
# =====================================================================================================
class TestElectMaster:
    def test_unknown_broker_set(self, manager: ReplicasInfoManager) -> None:
        for request in (broker_trigger(1), controller_trigger(), admin_trigger(1)):
            r = elect(manager, request)
            assert r.code == RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
            assert r.remark == "Broker hasn't been registered"
            assert r.events == ()

    def test_first_election_elects_the_registered_live_requester(self, manager: ReplicasInfoManager) -> None:
        register_three(manager)
        # broker 3 asks first: it wins, even though 1 and 2 are alive and lower
        r = elect(manager, broker_trigger(3))
        assert r.code == RC.SUCCESS
        assert r.events == (ElectMasterEvent(BROKER, True, 3, "INITIAL", CLUSTER),)
        assert r.data is not None
        assert r.data["electReason"] == "INITIAL"
        assert r.data == {
            "clusterName": CLUSTER, "brokerName": BROKER, "masterBrokerId": 3, "masterAddress": IPS[2],
            "masterEpoch": 1, "syncStateSetEpoch": 1, "syncStateSet": [3], "electReason": "INITIAL",
            "brokers": [{"brokerId": i, "brokerAddress": IPS[i - 1]} for i in (1, 2, 3)],
        }
        info = replica_info(manager)
        assert (info["masterBrokerId"], info["masterEpoch"], info["syncStateSet"], info["syncStateSetEpoch"]) == (
            3, 1, [3], 1)

    def test_first_election_unregistered_requester_fails(self, manager: ReplicasInfoManager) -> None:
        register_three(manager)
        before = state_of(manager)
        r = elect(manager, broker_trigger(7))
        assert r.code == RC.CONTROLLER_ELECT_MASTER_FAILED
        assert r.remark == "Failed to elect a new master"
        assert r.events == ()
        assert r.data is not None
        assert r.data["masterBrokerId"] is None and r.data["masterAddress"] is None
        assert state_of(manager) == before

    def test_first_election_dead_requester_fails(self, manager: ReplicasInfoManager) -> None:
        register_three(manager)
        before = state_of(manager)
        r = elect(manager, broker_trigger(1), all_but(1))
        assert r.code == RC.CONTROLLER_ELECT_MASTER_FAILED
        assert r.events == ()
        assert state_of(manager) == before
        assert replica_info(manager)["masterEpoch"] == 0

    def test_first_election_by_admin_has_reason_admin(self, manager: ReplicasInfoManager) -> None:
        register_three(manager)
        r = elect(manager, admin_trigger(2))
        assert r.code == RC.SUCCESS
        assert r.events == (ElectMasterEvent(BROKER, True, 2, "ADMIN", CLUSTER),)
        assert replica_info(manager)["masterEpoch"] == 1

    def test_broker_trigger_elects_policy_choice_not_requester(self, meta: ReplicasInfoManager) -> None:
        # master 1 dead; broker 3 asks, but the policy picks the lowest live member (2)
        r = elect(meta, broker_trigger(3), all_but(1))
        assert r.code == RC.SUCCESS
        assert r.data is not None and r.data["masterBrokerId"] == 2
        assert r.data["electReason"] == "FAILOVER"

    def test_broker_trigger_outside_set_fails_without_event(self, meta: ReplicasInfoManager) -> None:
        alter_new_in_sync_set(meta, BROKER, 1, 1, {1}, 2)
        before = state_of(meta)
        r = elect(meta, broker_trigger(2), all_but(1))
        assert r.code == RC.CONTROLLER_ELECT_MASTER_FAILED
        assert r.events == ()
        assert state_of(meta) == before

    def test_broker_trigger_outside_set_with_unclean(self, meta: ReplicasInfoManager) -> None:
        alter_new_in_sync_set(meta, BROKER, 1, 1, {1}, 2)
        r = broker_elect_master(meta, CLUSTER, 2, BROKER, IPS[1], False, True, alive=all_but(1),
                                enable_unclean=True)
        assert r.code == RC.SUCCESS
        assert r.data is not None and r.data["electReason"] == "UNCLEAN"

    def test_admin_designate_outside_set_is_unclean(self, meta: ReplicasInfoManager) -> None:
        alter_new_in_sync_set(meta, BROKER, 1, 1, {1}, 2)
        r = elect(meta, admin_trigger(3), all_but(1), enable_unclean=True)
        assert r.code == RC.SUCCESS
        assert r.events == (ElectMasterEvent(BROKER, True, 3, "UNCLEAN", CLUSTER),)
        # without unclean, a designated non-member is refused
        m2 = ReplicasInfoManager()
        mock_meta_data(m2)
        alter_new_in_sync_set(m2, BROKER, 1, 1, {1}, 2)
        r = elect(m2, admin_trigger(3), all_but(1), enable_unclean=False)
        assert r.code == RC.CONTROLLER_ELECT_MASTER_FAILED

    def test_admin_designate_other_live_member_replaces_live_master(self, meta: ReplicasInfoManager) -> None:
        r = elect(meta, admin_trigger(3), all_alive)
        assert r.code == RC.SUCCESS
        assert r.events == (ElectMasterEvent(BROKER, True, 3, "ADMIN", CLUSTER),)
        info = replica_info(meta)
        assert (info["masterBrokerId"], info["masterEpoch"], info["syncStateSet"], info["syncStateSetEpoch"]) == (
            3, 2, [3], 3)

    def test_controller_trigger_with_live_master_is_still_exist(self, meta: ReplicasInfoManager) -> None:
        before = state_of(meta)
        r = elect(meta, controller_trigger(), all_alive)
        assert r.code == RC.CONTROLLER_MASTER_STILL_EXIST
        assert r.events == ()
        assert state_of(meta) == before

    def test_failed_controller_trigger_without_master_emits_nothing(self, meta: ReplicasInfoManager) -> None:
        alter_new_in_sync_set(meta, BROKER, 1, 1, {1}, 2)
        first = elect(meta, controller_trigger(), all_but(1))
        assert first.code == RC.CONTROLLER_MASTER_NOT_AVAILABLE
        assert len(first.events) == 1
        assert replica_info(meta)["masterEpoch"] == 2
        history_len = len(meta.history)

        # master already cleared: same answer, no event, no epoch churn
        before = state_of(meta)
        second = elect(meta, controller_trigger(), all_but(1))
        assert second.code == RC.CONTROLLER_MASTER_NOT_AVAILABLE
        assert second.remark == "Old master has down and failed to elect a new broker master"
        assert second.events == ()
        assert state_of(meta) == before
        assert replica_info(meta)["masterEpoch"] == 2
        assert len(meta.history) == history_len

    def test_broker_trigger_after_failed_controller_election_elects_with_epoch_3(
            self, meta: ReplicasInfoManager) -> None:
        elect(meta, controller_trigger(), none_alive)
        info = replica_info(meta)
        assert (info["masterBrokerId"], info["masterEpoch"], info["syncStateSetEpoch"]) == (None, 2, 2)
        r = elect(meta, broker_trigger(2), all_alive)
        assert r.code == RC.SUCCESS
        assert r.data is not None
        # old master None: policy picks lowest id of {1,2,3}
        assert (r.data["masterBrokerId"], r.data["masterEpoch"], r.data["syncStateSetEpoch"]) == (1, 3, 3)
        assert r.data["electReason"] == "FAILOVER"

    def test_async_learner_is_never_elected_by_policy(self, meta: ReplicasInfoManager) -> None:
        table = dict(MOCKS["HigherOffset"])
        from dataclasses import replace
        table[3] = replace(table[3], asyncLearner=True)
        policy, alive = mock_policy(table)
        r = elect(meta, controller_trigger(), alive, policy=policy)
        assert r.code == RC.SUCCESS
        assert r.data is not None and r.data["masterBrokerId"] == 2


class TestRestartedMaster:
    """A master whose process restarted asks for an election (the broker does, when the controller still
    names it master). Its log may have lost an unflushed tail its slaves hold, so it keeps the role only
    on merit: ranked like any live member, winning only ties. RocketMQ hands the role back whatever its
    log holds (docs/compatibility.md)."""

    def test_a_slave_with_more_data_takes_over(self, meta: ReplicasInfoManager) -> None:
        policy, alive = mock_policy({1: live(1, True, 1, 50), 2: live(2, True, 1, 80), 3: live(3, True, 1, 60)})
        r = elect(meta, broker_trigger(1), alive, policy=policy)
        assert r.code == RC.SUCCESS and r.data is not None
        assert (r.data["masterBrokerId"], r.data["masterEpoch"]) == (2, 2)

    def test_a_tie_keeps_the_restarted_master_whatever_the_priorities(self, meta: ReplicasInfoManager) -> None:
        policy, alive = mock_policy({1: live(1, True, 1, 80, priority=9), 2: live(2, True, 1, 80, priority=1),
                                     3: live(3, True, 1, 80, priority=1)})
        r = elect(meta, broker_trigger(1), alive, policy=policy)
        assert r.code == RC.CONTROLLER_MASTER_STILL_EXIST and r.data is not None
        assert (r.data["masterBrokerId"], r.data["masterEpoch"]) == (1, 1)
        assert r.events == ()

    def test_progress_not_yet_reported_ranks_last(self, meta: ReplicasInfoManager) -> None:
        # Registered again, heartbeat not in yet: the controller knows nothing of its log (-1).
        policy, alive = mock_policy({1: live(1, True, -1, -1), 2: live(2, True, 1, 10), 3: live(3, False, 1, 90)})
        r = elect(meta, broker_trigger(1), alive, policy=policy)
        assert r.code == RC.SUCCESS and r.data is not None and r.data["masterBrokerId"] == 2

    def test_alone_and_alive_it_keeps_the_role(self, meta: ReplicasInfoManager) -> None:
        policy, alive = mock_policy({1: live(1, True, 1, 5), 2: live(2, False, 1, 90), 3: live(3, False, 1, 90)})
        r = elect(meta, broker_trigger(1), alive, policy=policy)
        assert r.code == RC.CONTROLLER_MASTER_STILL_EXIST and r.data is not None and r.data["masterBrokerId"] == 1

    def test_with_no_live_candidate_the_election_fails_as_in_rocketmq(self, meta: ReplicasInfoManager) -> None:
        r = elect(meta, broker_trigger(1), none_alive)
        assert r.code == RC.CONTROLLER_ELECT_MASTER_FAILED and r.events == ()
        assert replica_info(meta)["masterBrokerId"] == 1  # a broker's failed request changes nothing


# =====================================================================================================
# Epoch arithmetic (§3.7 table)
# =====================================================================================================
def test_epoch_arithmetic(meta: ReplicasInfoManager) -> None:
    m = meta

    def epochs() -> tuple[int | None, int, list[int], int]:
        info = replica_info(m)
        return info["masterBrokerId"], info["masterEpoch"], info["syncStateSet"], info["syncStateSetEpoch"]

    assert epochs() == (1, 1, [1, 2, 3], 2)
    # successful alter: masterEpoch unchanged, ssEpoch +1, set replaced
    alter_new_in_sync_set(m, BROKER, 1, 1, {1, 2}, 2)
    assert epochs() == (1, 1, [1, 2], 3)
    # failed controller-triggered election: masterEpoch +1, set and ssEpoch unchanged, master cleared
    assert elect(m, controller_trigger(), none_alive).code == RC.CONTROLLER_MASTER_NOT_AVAILABLE
    assert epochs() == (None, 2, [1, 2], 3)
    # failed broker-triggered election: nothing changes
    assert elect(m, broker_trigger(3), only_alive(3)).code == RC.CONTROLLER_ELECT_MASTER_FAILED
    assert epochs() == (None, 2, [1, 2], 3)
    # successful election: masterEpoch +1, ssEpoch +1, set = {new}
    assert elect(m, broker_trigger(2), only_alive(2)).code == RC.SUCCESS
    assert epochs() == (2, 3, [2], 4)
    # MASTER_STILL_EXIST: nothing changes
    assert elect(m, broker_trigger(1), all_alive).code == RC.CONTROLLER_MASTER_STILL_EXIST
    assert epochs() == (2, 3, [2], 4)
    # failed alter: nothing changes
    assert run(m, lambda mm: mm.alter_sync_state_set(BROKER, 2, 2, [1, 2], 4, all_alive)).code != RC.SUCCESS
    assert epochs() == (2, 3, [2], 4)
    alter_new_in_sync_set(m, BROKER, 2, 3, {1, 2, 3}, 4)
    assert epochs() == (2, 3, [1, 2, 3], 5)


# =====================================================================================================
# §3.9 alterSyncStateSet: every code, in check order
# =====================================================================================================
class TestAlterSyncStateSet:
    @staticmethod
    def alter(m: ReplicasInfoManager, new_set, master_id: int = 1, master_epoch: int = 1, ss_epoch: int = 2,
              alive=all_alive, name: str = BROKER) -> ControllerResult:
        before = state_of(m)
        r = m.alter_sync_state_set(name, master_id, master_epoch, new_set, ss_epoch, alive)
        assert state_of(m) == before
        if r.code != RC.SUCCESS:
            assert r.events == ()
        return r

    def test_success(self, meta: ReplicasInfoManager) -> None:
        r = self.alter(meta, [2, 1])
        assert r.code == RC.SUCCESS
        assert r.data == {"newSyncStateSetEpoch": 3, "syncStateSet": [1, 2]}
        assert r.events == (AlterSyncStateSetEvent(BROKER, (1, 2), CLUSTER),)
        for e in r.events:
            meta.apply_event(e)
        info = replica_info(meta)
        assert (info["syncStateSet"], info["syncStateSetEpoch"], info["masterEpoch"]) == ([1, 2], 3, 1)

    def test_1_unknown_broker_set_beats_everything(self, meta: ReplicasInfoManager) -> None:
        r = self.alter(meta, [1, 2, 3], master_id=9, master_epoch=9, ss_epoch=9, alive=none_alive,
                       name="nope")
        assert r.code == RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
        assert r.remark == "Broker metadata is not existed"

    def test_2_equal_set_beats_wrong_master_and_epochs(self, meta: ReplicasInfoManager) -> None:
        r = self.alter(meta, [3, 2, 1], master_id=9, master_epoch=9, ss_epoch=9, alive=none_alive)
        assert r.code == RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
        assert r.remark == ("The newSyncStateSet is equal with oldSyncStateSet, "
                            "no needed to update syncStateSet")

    def test_3_wrong_master_beats_epochs(self, meta: ReplicasInfoManager) -> None:
        r = self.alter(meta, [2, 3], master_id=2, master_epoch=9, ss_epoch=9, alive=none_alive)
        assert r.code == RC.CONTROLLER_INVALID_MASTER

    def test_3_no_master_is_invalid_master(self, meta: ReplicasInfoManager) -> None:
        elect(meta, controller_trigger(), none_alive)
        assert replica_info(meta)["masterBrokerId"] is None
        r = self.alter(meta, [1, 2], master_id=1, master_epoch=2, ss_epoch=2)
        assert r.code == RC.CONTROLLER_INVALID_MASTER
        assert r.remark == "Rejecting alter syncStateSet request because the current leader is:{null}, not {1}"

    def test_4_master_epoch_beats_ss_epoch(self, meta: ReplicasInfoManager) -> None:
        for stale in (0, 2):
            r = self.alter(meta, [1, 9], master_epoch=stale, ss_epoch=9, alive=none_alive)
            assert r.code == RC.CONTROLLER_FENCED_MASTER_EPOCH
            assert r.remark == ("Rejecting alter syncStateSet request because the current master epoch is:{1}, "
                                f"not {{{stale}}}")

    def test_5_ss_epoch_beats_member_checks(self, meta: ReplicasInfoManager) -> None:
        for stale in (1, 3):
            r = self.alter(meta, [1, 9], ss_epoch=stale, alive=none_alive)
            assert r.code == RC.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
            assert r.remark == ("Rejecting alter syncStateSet request because the current syncStateSet epoch is:{2}, "
                                f"not {{{stale}}}")

    def test_6_unregistered_member(self, meta: ReplicasInfoManager) -> None:
        r = self.alter(meta, [1, 9])
        assert r.code == RC.CONTROLLER_INVALID_REPLICAS
        assert r.remark == "Rejecting alter syncStateSet request because the replicas {9} don't exist"

    def test_6_dead_member(self, meta: ReplicasInfoManager) -> None:
        r = self.alter(meta, [1, 2], alive=all_but(2))
        assert r.code == RC.CONTROLLER_BROKER_NOT_ALIVE
        assert r.remark == "Rejecting alter syncStateSet request because the replicas {2} don't alive"

    def test_6_members_checked_in_ascending_order(self, meta: ReplicasInfoManager) -> None:
        # 2 is dead and comes before the unregistered 9
        assert self.alter(meta, [9, 1, 2], alive=all_but(2)).code == RC.CONTROLLER_BROKER_NOT_ALIVE
        # the unregistered 0 comes before the dead 3
        assert self.alter(meta, [3, 1, 0], alive=all_but(3)).code == RC.CONTROLLER_INVALID_REPLICAS

    def test_6_member_checks_beat_missing_master(self, meta: ReplicasInfoManager) -> None:
        assert self.alter(meta, [2, 9]).code == RC.CONTROLLER_INVALID_REPLICAS
        assert self.alter(meta, [2, 3], alive=all_but(3)).code == RC.CONTROLLER_BROKER_NOT_ALIVE

    def test_6_dead_master_in_the_new_set(self, meta: ReplicasInfoManager) -> None:
        assert self.alter(meta, [1, 2], alive=all_but(1)).code == RC.CONTROLLER_BROKER_NOT_ALIVE

    def test_7_new_set_without_master(self, meta: ReplicasInfoManager) -> None:
        r = self.alter(meta, [2, 3])
        assert r.code == RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
        assert r.remark == ("Rejecting alter syncStateSet request because the newSyncStateSet don't contains "
                            "origin leader {1}")  # RocketMQ's text, braces included

    def test_stale_request_after_success_is_fenced(self, meta: ReplicasInfoManager) -> None:
        alter_new_in_sync_set(meta, BROKER, 1, 1, {1, 2}, 2)
        r = self.alter(meta, [1, 3], ss_epoch=2)
        assert r.code == RC.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
        assert self.alter(meta, [1, 3], ss_epoch=3).code == RC.SUCCESS


# =====================================================================================================
# §3.4 / §3.5 getNextBrokerId, applyBrokerId
# =====================================================================================================
class TestApplyBrokerId:
    def test_next_broker_id_of_unknown_broker_set_is_1(self, manager: ReplicasInfoManager) -> None:
        r = manager.get_next_broker_id(CLUSTER, "nope")
        assert r.code == RC.SUCCESS
        assert r.data == {"clusterName": CLUSTER, "brokerName": "nope", "nextBrokerId": 1}

    def test_first_id_of_unknown_broker_set(self, manager: ReplicasInfoManager) -> None:
        r = run(manager, lambda m: m.apply_broker_id(CLUSTER, BROKER, 1, check_code(IPS[0])))
        assert r.code == RC.SUCCESS
        assert r.data == {"clusterName": CLUSTER, "brokerName": BROKER}
        assert r.events == (ApplyBrokerIdEvent(CLUSTER, BROKER, IPS[0], 1, check_code(IPS[0])),)
        bs = manager.broker_sets[BROKER]
        assert bs.clusterName == CLUSTER
        assert bs.brokers[1].address == IPS[0]  # text before the first ';'
        assert bs.brokers[1].registerCheckCode == check_code(IPS[0])
        assert bs.nextAssignBrokerId == 2
        # an empty sync-state record: epochs 0, no master
        info = replica_info(manager)
        assert (info["masterBrokerId"], info["masterEpoch"], info["syncStateSet"], info["syncStateSetEpoch"]) == (
            None, 0, [], 0)

    def test_address_is_text_before_first_semicolon(self, manager: ReplicasInfoManager) -> None:
        r = manager.apply_broker_id(CLUSTER, BROKER, 1, "10.0.0.1:10911;123;extra")
        assert isinstance(r.events[0], ApplyBrokerIdEvent)
        assert r.events[0].brokerAddress == "10.0.0.1:10911"

    def test_other_id_of_unknown_broker_set_is_refused(self, manager: ReplicasInfoManager) -> None:
        r = run(manager, lambda m: m.apply_broker_id(CLUSTER, BROKER, 2, check_code(IPS[0])))
        assert r.code == RC.CONTROLLER_BROKER_ID_INVALID
        assert r.remark == ("Broker-set: broker-set-a hasn't been registered in controller, "
                            "but broker try to apply brokerId: 2")
        assert r.events == ()
        assert BROKER not in manager.broker_sets

    def test_free_id_is_accepted_and_taken_id_refused(self, manager: ReplicasInfoManager) -> None:
        run(manager, lambda m: m.apply_broker_id(CLUSTER, BROKER, 1, check_code(IPS[0])))
        r = run(manager, lambda m: m.apply_broker_id(CLUSTER, BROKER, 2, check_code(IPS[1])))
        assert r.code == RC.SUCCESS
        r = run(manager, lambda m: m.apply_broker_id(CLUSTER, BROKER, 1, check_code(IPS[2])))
        assert r.code == RC.CONTROLLER_BROKER_ID_INVALID
        assert r.remark == "Fail to apply brokerId: 1 in broker-set: broker-set-a"
        assert r.events == ()
        assert manager.broker_sets[BROKER].brokers[1].address == IPS[0]

    def test_applying_5_as_second_broker_makes_next_id_3(self, manager: ReplicasInfoManager) -> None:
        run(manager, lambda m: m.apply_broker_id(CLUSTER, BROKER, 1, check_code(IPS[0])))
        r = run(manager, lambda m: m.apply_broker_id(CLUSTER, BROKER, 5, check_code(IPS[1])))
        assert r.code == RC.SUCCESS
        assert manager.get_next_broker_id(CLUSTER, BROKER).data["nextBrokerId"] == 3  # type: ignore[index]
        assert sorted(manager.broker_sets[BROKER].brokers) == [1, 5]

    def test_idempotent_reapply_with_same_check_code(self, manager: ReplicasInfoManager) -> None:
        code = check_code(IPS[0])
        run(manager, lambda m: m.apply_broker_id(CLUSTER, BROKER, 1, code))
        before = state_of(manager)
        r = manager.apply_broker_id(CLUSTER, BROKER, 1, code)
        assert r.code == RC.SUCCESS
        assert r.events == (ApplyBrokerIdEvent(CLUSTER, BROKER, IPS[0], 1, code),)
        for e in r.events:
            manager.apply_event(e)
        after = state_of(manager)
        # apply did nothing (not even the counter bump) except recording the event in the history
        assert after["brokerSets"] == before["brokerSets"]
        assert manager.broker_sets[BROKER].nextAssignBrokerId == 2
        assert len(after["history"]) == len(before["history"]) + 1

    def test_reapply_event_with_other_check_code_does_not_overwrite(self, manager: ReplicasInfoManager) -> None:
        run(manager, lambda m: m.apply_broker_id(CLUSTER, BROKER, 1, check_code(IPS[0])))
        manager.apply_event(ApplyBrokerIdEvent(CLUSTER, BROKER, IPS[1], 1, check_code(IPS[1])))
        assert manager.broker_sets[BROKER].brokers[1].address == IPS[0]
        assert manager.broker_sets[BROKER].brokers[1].registerCheckCode == check_code(IPS[0])
        assert manager.broker_sets[BROKER].nextAssignBrokerId == 2

    def test_next_id_is_one_plus_ids_ever_added(self, meta: ReplicasInfoManager) -> None:
        assert meta.get_next_broker_id(CLUSTER, BROKER).data["nextBrokerId"] == 4  # type: ignore[index]
        run(meta, lambda m: m.clean_broker_data(CLUSTER, BROKER, "3", True, all_alive))
        assert sorted(meta.broker_sets[BROKER].brokers) == [1, 2]
        # removals never lower the counter
        assert meta.get_next_broker_id(CLUSTER, BROKER).data["nextBrokerId"] == 4  # type: ignore[index]
        # deleting the broker-set resets it
        run(meta, lambda m: m.clean_broker_data(CLUSTER, BROKER, None, True, all_alive))
        assert meta.get_next_broker_id(CLUSTER, BROKER).data["nextBrokerId"] == 1  # type: ignore[index]


# =====================================================================================================
# §3.6 registerBroker
# =====================================================================================================
class TestRegisterBroker:
    def test_unknown_broker_set(self, manager: ReplicasInfoManager) -> None:
        r = manager.register_broker(CLUSTER, BROKER, 1, IPS[0], all_alive)
        assert r.code == RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
        assert r.remark == "Broker-set: broker-set-a hasn't been registered in controller"
        assert r.events == ()

    def test_unknown_id(self, meta: ReplicasInfoManager) -> None:
        r = meta.register_broker(CLUSTER, BROKER, 4, IPS[0], all_alive)
        assert r.code == RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
        assert r.remark == "BrokerId: 4 hasn't been registered in broker-set: broker-set-a"
        assert r.events == ()

    def test_live_master_is_reported(self, meta: ReplicasInfoManager) -> None:
        r = meta.register_broker(CLUSTER, BROKER, 2, IPS[1], all_alive)
        assert r.code == RC.SUCCESS
        assert r.events == ()
        assert r.data == {
            "clusterName": CLUSTER, "brokerName": BROKER, "masterBrokerId": 1, "masterAddress": IPS[0],
            "masterEpoch": 1, "syncStateSetEpoch": 2, "syncStateSet": [1, 2, 3],
        }

    def test_dead_master_is_not_reported(self, meta: ReplicasInfoManager) -> None:
        r = meta.register_broker(CLUSTER, BROKER, 2, IPS[1], all_but(1))
        assert r.code == RC.SUCCESS
        assert r.data is not None
        assert r.data["clusterName"] == CLUSTER and r.data["brokerName"] == BROKER
        assert r.data["masterBrokerId"] is None
        assert r.data["masterAddress"] is None
        assert r.data["masterEpoch"] is None
        assert r.data["syncStateSet"] == [1, 2, 3]

    def test_no_master_yet(self, manager: ReplicasInfoManager) -> None:
        register_three(manager)
        r = manager.register_broker(CLUSTER, BROKER, 1, IPS[0], all_alive)
        assert r.code == RC.SUCCESS
        assert r.data is not None and r.data["masterBrokerId"] is None and r.data["syncStateSet"] == []

    def test_address_change_emits_update_event(self, meta: ReplicasInfoManager) -> None:
        new_addr = "127.0.0.1:9999"
        r = run(meta, lambda m: m.register_broker(CLUSTER, BROKER, 2, new_addr, all_alive))
        assert r.code == RC.SUCCESS
        assert r.events == (UpdateBrokerAddressEvent(CLUSTER, BROKER, new_addr, 2),)
        entry = meta.broker_sets[BROKER].brokers[2]
        assert entry.address == new_addr
        assert entry.registerCheckCode == check_code(IPS[1])  # check code is kept
        assert sync_state_data(meta)["inSyncReplicas"][1]["brokerAddress"] == new_addr
        # the master address follows the update
        run(meta, lambda m: m.register_broker(CLUSTER, BROKER, 1, new_addr + "1", all_alive))
        assert replica_info(meta)["masterAddress"] == new_addr + "1"

    def test_update_address_event_for_unknown_id_is_ignored(self, meta: ReplicasInfoManager) -> None:
        before = state_of(meta)["brokerSets"]
        meta.apply_event(UpdateBrokerAddressEvent(CLUSTER, BROKER, "x:1", 9))
        meta.apply_event(UpdateBrokerAddressEvent(CLUSTER, "nope", "x:1", 1))
        assert state_of(meta)["brokerSets"] == before


# =====================================================================================================
# §3.10 / §3.11 reads
# =====================================================================================================
class TestReads:
    def test_get_replica_info_unknown(self, manager: ReplicasInfoManager) -> None:
        r = manager.get_replica_info("nope")
        assert r.code == RC.CONTROLLER_BROKER_METADATA_NOT_EXIST
        assert r.remark == "Broker metadata is not existed"

    def test_get_replica_info(self, meta: ReplicasInfoManager) -> None:
        r = meta.get_replica_info(BROKER)
        assert r.code == RC.SUCCESS and r.events == ()
        assert r.data == {
            "clusterName": CLUSTER, "brokerName": BROKER, "masterBrokerId": 1, "masterAddress": IPS[0],
            "masterEpoch": 1, "syncStateSet": [1, 2, 3], "syncStateSetEpoch": 2,
        }

    def test_get_sync_state_data_skips_unknown_names_and_uses_predicate(self, meta: ReplicasInfoManager) -> None:
        alter_new_in_sync_set(meta, BROKER, 1, 1, {1, 3}, 2)
        register_new_broker(meta, CLUSTER, "other", "127.0.0.1:7000", 1, None)
        r = meta.get_sync_state_data(["nope", BROKER, "other"], all_but(3))
        assert r.code == RC.SUCCESS and r.events == ()
        assert r.data is not None
        a, other = r.data["brokers"]
        assert a == {
            "clusterName": CLUSTER, "brokerName": BROKER, "masterBrokerId": 1, "masterAddress": IPS[0],
            "masterEpoch": 1, "syncStateSetEpoch": 3,
            "inSyncReplicas": [
                {"brokerName": BROKER, "brokerId": 1, "brokerAddress": IPS[0], "alive": True},
                {"brokerName": BROKER, "brokerId": 3, "brokerAddress": IPS[2], "alive": False},
            ],
            "notInSyncReplicas": [
                {"brokerName": BROKER, "brokerId": 2, "brokerAddress": IPS[1], "alive": True},
            ],
        }
        assert other["brokerName"] == "other" and other["masterBrokerId"] is None
        assert [x["brokerId"] for x in other["notInSyncReplicas"]] == [1]

    def test_get_sync_state_data_empty(self, meta: ReplicasInfoManager) -> None:
        assert meta.get_sync_state_data([], all_alive).data == {"brokers": []}
        assert meta.get_sync_state_data(["nope"], all_alive).data == {"brokers": []}

    def test_broker_names_of_cluster(self, meta: ReplicasInfoManager) -> None:
        register_new_broker(meta, "cluster-b", "b", "127.0.0.1:7000", 1, None)
        assert meta.broker_names_of_cluster(CLUSTER) == [BROKER]
        assert meta.broker_names_of_cluster("cluster-b") == ["b"]
        assert meta.broker_names_of_cluster("zzz") == []


# =====================================================================================================
# §3.12 cleanBrokerData, applied (our choices 3 and 4)
# =====================================================================================================
class TestCleanBrokerData:
    def test_invalid_id_format(self, meta: ReplicasInfoManager) -> None:
        for clean_living in (False, True):
            r = meta.clean_broker_data(CLUSTER, BROKER, "1;x", clean_living, none_alive)
            assert r.code == RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
            assert r.remark == ("Please set the option <brokerControllerIdsToClean> according to the format, "
                                'exception: java.lang.NumberFormatException: For input string: "x"')
            assert r.events == ()

    def test_clean_living_with_ids_cleans_only_those_ids(self, meta: ReplicasInfoManager) -> None:
        r = run(meta, lambda m: m.clean_broker_data(CLUSTER, BROKER, "2;3", True, all_alive))
        assert r.code == RC.SUCCESS
        assert r.events == (CleanBrokerDataEvent(BROKER, (2, 3), CLUSTER),)
        bs = meta.broker_sets[BROKER]
        assert sorted(bs.brokers) == [1]
        info = replica_info(meta)
        # set members removed without an epoch bump; the master is untouched
        assert (info["masterBrokerId"], info["masterEpoch"], info["syncStateSet"], info["syncStateSetEpoch"]) == (
            1, 1, [1], 2)

    def test_clean_living_without_ids_deletes_the_broker_set(self, meta: ReplicasInfoManager) -> None:
        for ids in (None, "", "   "):
            m = ReplicasInfoManager()
            mock_meta_data(m)
            r = run(m, lambda mm, ids=ids: mm.clean_broker_data(CLUSTER, BROKER, ids, True, all_alive))
            assert r.code == RC.SUCCESS
            assert r.events == (CleanBrokerDataEvent(BROKER, None, CLUSTER),)
            assert BROKER not in m.broker_sets
            assert m.get_replica_info(BROKER).code == RC.CONTROLLER_BROKER_METADATA_NOT_EXIST

    def test_dead_broker_set_without_master_can_be_deleted(self, meta: ReplicasInfoManager) -> None:
        elect(meta, controller_trigger(), none_alive)  # master cleared
        r = run(meta, lambda m: m.clean_broker_data(CLUSTER, BROKER, None, False, none_alive))
        assert r.code == RC.SUCCESS
        assert BROKER not in meta.broker_sets

    def test_cleaning_the_master_clears_it_and_bumps_master_epoch(self, meta: ReplicasInfoManager) -> None:
        r = run(meta, lambda m: m.clean_broker_data(CLUSTER, BROKER, "1", False, all_but(1)))
        assert r.code == RC.SUCCESS
        info = replica_info(meta)
        assert info["masterBrokerId"] is None
        assert info["masterAddress"] is None
        assert info["masterEpoch"] == 2
        assert info["syncStateSet"] == [2, 3]
        assert info["syncStateSetEpoch"] == 2
        assert sorted(meta.broker_sets[BROKER].brokers) == [2, 3]
        # the next election continues from the bumped epoch
        r = elect(meta, controller_trigger(), all_alive)
        assert r.code == RC.SUCCESS
        assert r.data is not None and (r.data["masterBrokerId"], r.data["masterEpoch"]) == (2, 3)

    def test_cleaning_a_slave_keeps_master_epoch(self, meta: ReplicasInfoManager) -> None:
        run(meta, lambda m: m.clean_broker_data(CLUSTER, BROKER, "2", False, all_but(2)))
        info = replica_info(meta)
        assert (info["masterBrokerId"], info["masterEpoch"], info["syncStateSet"], info["syncStateSetEpoch"]) == (
            1, 1, [1, 3], 2)

    def test_cleaning_every_id_deletes_the_broker_set(self, meta: ReplicasInfoManager) -> None:
        r = run(meta, lambda m: m.clean_broker_data(CLUSTER, BROKER, "1;2;3", False, none_alive))
        assert r.code == RC.SUCCESS
        assert BROKER not in meta.broker_sets
        assert meta.get_next_broker_id(CLUSTER, BROKER).data["nextBrokerId"] == 1  # type: ignore[index]

    def test_unknown_ids_are_harmless(self, meta: ReplicasInfoManager) -> None:
        before = state_of(meta)["brokerSets"]
        r = run(meta, lambda m: m.clean_broker_data(CLUSTER, BROKER, "7;8", False, none_alive))
        assert r.code == RC.SUCCESS
        assert state_of(meta)["brokerSets"] == before

    def test_unknown_broker_set_without_clean_living(self, manager: ReplicasInfoManager) -> None:
        r = manager.clean_broker_data(CLUSTER, "nope", None, False, none_alive)
        assert r.code == RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
        assert r.remark == "Broker nope is not existed,clean broker data failure."
        # a live id is reported before the broker-set is found missing
        r = manager.clean_broker_data(CLUSTER, "nope", "1", False, all_alive)
        assert r.remark == "Broker [nope,  1] is still alive, clean up failure"

    def test_ids_are_checked_for_liveness_in_ascending_order(self, meta: ReplicasInfoManager) -> None:
        r = meta.clean_broker_data(CLUSTER, BROKER, "3;2", False, all_alive)
        assert r.remark == "Broker [broker-set-a,  2] is still alive, clean up failure"

    def test_separator_only_ids_are_treated_like_no_ids(self, meta: ReplicasInfoManager) -> None:
        r = meta.clean_broker_data(CLUSTER, BROKER, ";", False, all_alive)
        assert r.code == RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
        assert r.remark == "Broker broker-set-a is still alive, clean up failure"
        assert r.events == ()


# =====================================================================================================
# scan_need_reelect (our choice 8)
# =====================================================================================================
class TestScanNeedReelect:
    def test_never_elected_broker_set_is_skipped(self, manager: ReplicasInfoManager) -> None:
        register_three(manager)
        assert manager.scan_need_reelect(all_alive, DefaultElectPolicy(all_alive), True) == []

    def test_live_master_is_skipped(self, meta: ReplicasInfoManager) -> None:
        assert meta.scan_need_reelect(all_alive, DefaultElectPolicy(all_alive), False) == []

    def test_dead_master_is_always_included(self, meta: ReplicasInfoManager) -> None:
        assert meta.scan_need_reelect(all_but(1), DefaultElectPolicy(all_but(1)), False) == [BROKER]
        # even when no candidate is alive
        assert meta.scan_need_reelect(none_alive, DefaultElectPolicy(none_alive), False) == [BROKER]

    def test_absent_master_included_only_with_a_live_candidate(self, meta: ReplicasInfoManager) -> None:
        alter_new_in_sync_set(meta, BROKER, 1, 1, {1}, 2)
        elect(meta, controller_trigger(), all_but(1))
        assert replica_info(meta)["masterBrokerId"] is None
        policy = DefaultElectPolicy(all_but(1))
        assert meta.scan_need_reelect(all_but(1), policy, False) == []  # only 1 is in the set
        assert meta.scan_need_reelect(all_but(1), policy, True) == [BROKER]  # unclean finds 2
        assert meta.scan_need_reelect(all_alive, DefaultElectPolicy(all_alive), False) == [BROKER]
        assert meta.scan_need_reelect(none_alive, DefaultElectPolicy(none_alive), True) == []

    def test_several_broker_sets(self, meta: ReplicasInfoManager) -> None:
        register_new_broker(meta, CLUSTER, "b2", "127.0.0.1:7000", 1, None)
        broker_elect_master(meta, CLUSTER, 1, "b2", "127.0.0.1:7000", True, True)

        def alive(c: str, n: str, i: int) -> bool:
            return n == "b2"

        assert meta.scan_need_reelect(alive, DefaultElectPolicy(alive), False) == [BROKER]


# =====================================================================================================
# apply_event, history, events_page (our choice 9)
# =====================================================================================================
class TestHistory:
    def test_history_after_mock_meta_data(self, meta: ReplicasInfoManager) -> None:
        h = meta.history
        assert [r["index"] for r in h] == [0, 1, 2, 3, 4]
        assert meta.next_event_index == 5
        assert [r["eventType"] for r in h] == [
            "APPLY_BROKER_ID", "APPLY_BROKER_ID", "APPLY_BROKER_ID", "ELECT_MASTER", "ALTER_SYNC_STATE_SET"]
        assert [(r["brokerId"], r["brokerAddress"]) for r in h[:3]] == list(zip((1, 2, 3), IPS))
        assert all(r["clusterName"] == CLUSTER and r["brokerName"] == BROKER for r in h)
        assert (h[0]["masterBrokerId"], h[0]["masterEpoch"], h[0]["syncStateSet"], h[0]["syncStateSetEpoch"]) == (
            None, 0, [], 0)
        elected = h[3]
        assert (elected["elected"], elected["electReason"]) == (True, "INITIAL")
        assert (elected["masterBrokerId"], elected["masterEpoch"], elected["syncStateSet"],
                elected["syncStateSetEpoch"]) == (1, 1, [1], 1)
        altered = h[4]
        assert (altered["masterBrokerId"], altered["masterEpoch"], altered["syncStateSet"],
                altered["syncStateSetEpoch"]) == (1, 1, [1, 2, 3], 2)
        assert altered["elected"] is None and altered["electReason"] is None

    def test_timestamp_comes_from_the_event(self, meta: ReplicasInfoManager) -> None:
        r = meta.elect_master(controller_trigger(), DefaultElectPolicy(all_but(1)), False, all_but(1))
        [event] = r.events
        meta.apply_event(stamp(event, 1_234_567))
        rec = meta.history[-1]
        assert rec["timestamp"] == 1_234_567
        assert rec["index"] == 5
        assert (rec["eventType"], rec["elected"], rec["electReason"]) == ("ELECT_MASTER", True, "FAILOVER")
        assert (rec["masterBrokerId"], rec["masterEpoch"], rec["syncStateSet"], rec["syncStateSetEpoch"]) == (
            2, 2, [2], 3)

    def test_failed_election_and_clean_records(self, meta: ReplicasInfoManager) -> None:
        elect(meta, controller_trigger(), none_alive)
        rec = meta.history[-1]
        assert (rec["eventType"], rec["elected"], rec["electReason"]) == ("ELECT_MASTER", False, None)
        assert (rec["masterBrokerId"], rec["masterEpoch"], rec["syncStateSet"], rec["syncStateSetEpoch"]) == (
            None, 2, [1, 2, 3], 2)
        run(meta, lambda m: m.clean_broker_data(CLUSTER, BROKER, "3", True, all_alive))
        rec = meta.history[-1]
        assert rec["eventType"] == "CLEAN_BROKER_DATA" and rec["brokerIds"] == [3]
        assert rec["syncStateSet"] == [1, 2]
        run(meta, lambda m: m.clean_broker_data(CLUSTER, BROKER, None, True, all_alive))
        rec = meta.history[-1]
        assert rec["brokerIds"] is None
        assert rec["clusterName"] == CLUSTER and rec["brokerName"] == BROKER
        assert (rec["masterBrokerId"], rec["masterEpoch"], rec["syncStateSet"], rec["syncStateSetEpoch"]) == (
            None, None, None, None)

    def test_update_address_record(self, meta: ReplicasInfoManager) -> None:
        run(meta, lambda m: m.register_broker(CLUSTER, BROKER, 2, "h:1", all_alive))
        rec = meta.history[-1]
        assert (rec["eventType"], rec["brokerId"], rec["brokerAddress"]) == ("UPDATE_BROKER_ADDRESS", 2, "h:1")

    def test_records_read_back_as_written_and_are_copies(self, meta: ReplicasInfoManager) -> None:
        run(meta, lambda m: m.clean_broker_data(CLUSTER, BROKER, "3", True, all_alive))
        clean, alter = meta.history[-1], meta.history[4]
        assert set(clean) == set(sm_module.HISTORY_FIELDS)
        assert set(alter) == set(sm_module.HISTORY_FIELDS) - {"brokerIds"}  # only CLEAN_BROKER_DATA has it
        alter["syncStateSet"].append(99)
        assert meta.history[4]["syncStateSet"] == [1, 2, 3]
        assert meta.events_page(4, 1) == [meta.history[4]]

    def test_history_adds_no_objects_for_the_collector_to_scan(self) -> None:
        """A busy leader keeps up to HISTORY_MAX_EVENTS records; as dicts they made every full garbage
        collection slower (100+ ms at 50,000 records), so records must not stay tracked."""
        import gc

        m = ReplicasInfoManager()
        mock_meta_data(m)
        gc.collect()
        before = len(gc.get_objects())
        for i in range(2000):
            m.apply_event(stamp(AlterSyncStateSetEvent(BROKER, (1, 2) if i % 2 else (1, 2, 3)), i))
        gc.collect()
        assert len(m.history) > 2000
        assert len(gc.get_objects()) - before < 1000  # as dicts with a list: 4,000 more

    def test_apply_event_never_raises_and_records_noops(self, meta: ReplicasInfoManager) -> None:
        before = state_of(meta)["brokerSets"]
        n = len(meta.history)
        for event in (
            ElectMasterEvent("nope", True, 1),
            ElectMasterEvent("nope", False),
            AlterSyncStateSetEvent("nope", (1,)),
            CleanBrokerDataEvent("nope", (1,)),
            CleanBrokerDataEvent("nope"),
            UpdateBrokerAddressEvent(CLUSTER, "nope", "a:1", 1),
        ):
            meta.apply_event(event)
        assert state_of(meta)["brokerSets"] == before
        assert len(meta.history) == n + 6
        rec = meta.history[-1]
        assert rec["brokerName"] == "nope" and rec["masterEpoch"] is None
        # something that is not an event at all
        meta.apply_event(object())  # type: ignore[arg-type]
        meta.apply_event(None)  # type: ignore[arg-type]
        assert state_of(meta)["brokerSets"] == before

    def test_events_page(self, meta: ReplicasInfoManager) -> None:
        assert ReplicasInfoManager().events_page(0, 10) == []
        assert [r["index"] for r in meta.events_page(0, 10)] == [0, 1, 2, 3, 4]
        assert [r["index"] for r in meta.events_page(2, 2)] == [2, 3]
        assert [r["index"] for r in meta.events_page(4, 10)] == [4]
        assert meta.events_page(5, 10) == []
        assert meta.events_page(0, 0) == []
        page = meta.events_page(0, 1)
        page[0]["eventType"] = "MUTATED"
        assert meta.history[0]["eventType"] == "APPLY_BROKER_ID"

    def test_history_is_bounded(self, monkeypatch: pytest.MonkeyPatch, manager: ReplicasInfoManager) -> None:
        monkeypatch.setattr(sm_module, "HISTORY_MAX_EVENTS", 3)
        mock_meta_data(manager)
        assert [r["index"] for r in manager.history] == [2, 3, 4]
        assert manager.next_event_index == 5
        assert [r["index"] for r in manager.events_page(0, 10)] == [2, 3, 4]
        assert [r["index"] for r in manager.events_page(3, 1)] == [3]


# =====================================================================================================
# snapshots (our choice 10), request de-duplication
# =====================================================================================================
class TestSnapshot:
    def build(self) -> ReplicasInfoManager:
        m = ReplicasInfoManager()
        mock_meta_data(m)
        register_new_broker(m, "cluster-b", "b", "127.0.0.1:7000", 1, None)
        run(m, lambda mm: mm.apply_broker_id("cluster-b", "b", 5, check_code("127.0.0.1:7005", 42)))
        elect(m, controller_trigger(), none_alive)  # master cleared, masterEpoch 2
        for e in m.elect_master(controller_trigger(), DefaultElectPolicy(all_but(1)), False, all_but(1)).events:
            m.apply_event(stamp(e, 99))
        m.remember_request("req-1")
        m.remember_request("req-2")
        return m

    def test_pickle_round_trip_preserves_everything(self) -> None:
        m = self.build()
        restored = pickle.loads(pickle.dumps(m))
        assert restored.broker_sets == m.broker_sets
        assert restored.history == m.history
        assert restored.next_event_index == m.next_event_index
        assert list(restored.applied_requests) == ["req-1", "req-2"]
        assert restored.seen_request("req-1") and not restored.seen_request("req-3")
        assert restored.to_dict() == m.to_dict()
        b = restored.broker_sets["b"]
        assert b.nextAssignBrokerId == 3
        assert b.brokers[5].registerCheckCode == "127.0.0.1:7005;42"
        assert isinstance(restored.broker_sets[BROKER].syncStateSet, set)
        assert restored.history[-1]["timestamp"] == 99

    def test_restored_manager_behaves_the_same(self) -> None:
        m = self.build()
        restored = pickle.loads(pickle.dumps(m))
        for mm in (m, restored):
            r = elect(mm, admin_trigger(1), all_but(2), enable_unclean=True)
            assert r.code == RC.SUCCESS
            assert r.events == (ElectMasterEvent(BROKER, True, 1, "UNCLEAN", CLUSTER),)
            assert mm.get_next_broker_id("cluster-b", "b").data["nextBrokerId"] == 3  # type: ignore[index]
        assert restored.to_dict() == m.to_dict()

    def test_json_round_trip_of_to_dict(self) -> None:
        m = self.build()
        copy = ReplicasInfoManager()
        copy.load_dict(json.loads(json.dumps(m.to_dict())))
        assert copy.broker_sets == m.broker_sets
        assert copy.to_dict() == m.to_dict()

    def test_empty_manager_round_trip(self, manager: ReplicasInfoManager) -> None:
        restored = pickle.loads(pickle.dumps(manager))
        assert restored.to_dict() == manager.to_dict()
        assert restored.broker_sets == {} and len(restored.history) == 0 and restored.next_event_index == 0

    def test_format_1_snapshot_with_dict_records_is_read(self) -> None:
        m = self.build()
        state = m.to_dict()
        assert state["v"] == 2
        old = {**state, "v": 1, "history": list(m.history)}  # format 1: the records as dicts
        copy = ReplicasInfoManager()
        copy.load_dict(json.loads(json.dumps(old)))
        assert list(copy.history) == list(m.history)
        assert copy.to_dict() == state

    def test_unknown_version_is_refused(self, manager: ReplicasInfoManager) -> None:
        state = manager.to_dict()
        state["v"] = 999
        with pytest.raises(ValueError):
            ReplicasInfoManager().load_dict(state)

    def test_request_ids_are_bounded_oldest_first(self, monkeypatch: pytest.MonkeyPatch,
                                                   manager: ReplicasInfoManager) -> None:
        monkeypatch.setattr(sm_module, "REQUEST_IDS_MAX", 2)
        for rid in ("a", "b", "c"):
            manager.remember_request(rid)
        assert not manager.seen_request("a")
        assert manager.seen_request("b") and manager.seen_request("c")


def test_controller_result_ok() -> None:
    assert ControllerResult().ok
    assert ControllerResult().code == 0 and ControllerResult().events == ()
    assert not ControllerResult(code=int(RC.CONTROLLER_ELECT_MASTER_FAILED)).ok


def test_elect_master_request_trigger_kind() -> None:
    assert ElectMasterRequest("", BROKER).controller_triggered
    assert ElectMasterRequest("", BROKER, -1).controller_triggered
    assert not ElectMasterRequest(CLUSTER, BROKER, 1).controller_triggered
    assert not ElectMasterRequest(CLUSTER, BROKER, 1, True).controller_triggered


def test_async_learner_cannot_win_the_first_election(manager: ReplicasInfoManager) -> None:
    # RocketMQ issue #10013: a learner elected master while the group starts
    register_three(manager)
    table = {1: live(1, True, 1, 10, async_learner=True), 2: live(2, True, 1, 10)}
    policy, alive = mock_policy(table)
    result = manager.elect_master(broker_trigger(1), policy, False, alive)
    assert result.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    assert manager.elect_master(broker_trigger(2), policy, False, alive).ok


def test_register_answer_always_carries_the_sync_state_set_epoch(manager: ReplicasInfoManager) -> None:
    register_three(manager)
    result = manager.register_broker(CLUSTER, BROKER, 2, "127.0.0.1:9001", all_alive)
    assert result.data is not None
    assert result.data["masterBrokerId"] is None and result.data["syncStateSetEpoch"] == 0

