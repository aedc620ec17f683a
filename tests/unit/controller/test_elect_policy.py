"""DefaultElectPolicy (§3.8, plus our deterministic tie-break and async-learner rule)."""

from __future__ import annotations

import pytest

from services.controller.elect_policy import DefaultElectPolicy, ElectionOutcome
from services.controller.heartbeat import BrokerLiveInfo
from tests.unit.controller.helpers import (
    BROKER,
    CLUSTER,
    MOCKS,
    all_alive,
    all_but,
    live,
    mock_policy,
    none_alive,
)

C, N = CLUSTER, BROKER


def info(broker_id: int, epoch: int = 1, max_offset: int = 100, priority: int = 0,
         async_learner: bool = False) -> BrokerLiveInfo:
    return BrokerLiveInfo(C, N, f"127.0.0.1:{9000 + broker_id}", broker_id, 0, epoch=epoch, maxOffset=max_offset,
                          electionPriority=priority, asyncLearner=async_learner)


def policy_with(table: dict[int, BrokerLiveInfo], alive=all_alive) -> DefaultElectPolicy:
    return DefaultElectPolicy(alive, lambda c, n, i: table.get(i))


class TestWithoutLiveInfo:
    def test_no_predicate_no_getter_picks_lowest_id(self) -> None:
        p = DefaultElectPolicy()
        assert p.elect(C, N, [3, 2, 5], None, None, None) == ElectionOutcome(2, False)

    def test_dead_brokers_are_not_candidates(self) -> None:
        p = DefaultElectPolicy(all_but(1, 2))
        assert p.elect(C, N, [1, 2, 3], None, None, None) == ElectionOutcome(3)
        assert DefaultElectPolicy(none_alive).elect(C, N, [1, 2, 3], None, None, None) == ElectionOutcome(None)

    def test_empty_set(self) -> None:
        assert DefaultElectPolicy(all_alive).elect(C, N, [], None, None, None) == ElectionOutcome(None)
        assert DefaultElectPolicy(all_alive).elect(C, N, [], [], None, None) == ElectionOutcome(None)

    def test_predicate_receives_cluster_name_and_id(self) -> None:
        calls: list[tuple[str, str, int]] = []

        def alive(c: str, n: str, i: int) -> bool:
            calls.append((c, n, i))
            return True

        DefaultElectPolicy(alive).elect(C, N, [1, 2], None, None, None)
        assert sorted(calls) == [(C, N, 1), (C, N, 2)]


class TestOldMasterAndPrefer:
    def test_live_old_master_wins(self) -> None:
        p = DefaultElectPolicy(all_alive)
        assert p.elect(C, N, [1, 2, 3], None, 3, None) == ElectionOutcome(3)
        assert p.elect(C, N, [1, 2, 3], None, 3, 3) == ElectionOutcome(3)

    def test_live_old_master_wins_over_better_ranked(self) -> None:
        table = {1: info(1, epoch=1, max_offset=1), 2: info(2, epoch=5, max_offset=999)}
        assert policy_with(table).elect(C, N, [1, 2], None, 1, None) == ElectionOutcome(1)

    def test_dead_old_master_is_replaced(self) -> None:
        p = DefaultElectPolicy(all_but(1))
        assert p.elect(C, N, [1, 2, 3], None, 1, None) == ElectionOutcome(2)

    def test_old_master_outside_candidates_is_not_returned(self) -> None:
        p = DefaultElectPolicy(all_alive)
        assert p.elect(C, N, [2, 3], None, 1, None) == ElectionOutcome(2)

    def test_prefer_other_than_live_old_master(self) -> None:
        p = DefaultElectPolicy(all_alive)
        assert p.elect(C, N, [1, 2, 3], None, 1, 3) == ElectionOutcome(3)

    def test_prefer_beats_ranking(self) -> None:
        table = {1: info(1, epoch=9), 2: info(2, epoch=1)}
        assert policy_with(table).elect(C, N, [1, 2], None, None, 2) == ElectionOutcome(2)

    def test_prefer_never_falls_back(self) -> None:
        assert DefaultElectPolicy(all_but(3)).elect(C, N, [1, 2, 3], None, None, 3) == ElectionOutcome(None)
        assert DefaultElectPolicy(all_alive).elect(C, N, [1, 2], None, None, 7) == ElectionOutcome(None)
        # not even with unclean election, if it is not a replica at all
        assert DefaultElectPolicy(all_alive).elect(C, N, [1, 2], [1, 2, 3], None, 7) == ElectionOutcome(None)

    def test_prefer_outside_set_via_unclean(self) -> None:
        p = DefaultElectPolicy(all_alive)
        assert p.elect(C, N, [1], [1, 2, 3], 1, 3) == ElectionOutcome(3, unclean=True)
        assert p.elect(C, N, [1], None, 1, 3) == ElectionOutcome(None)


class TestUnclean:
    def test_set_first_then_all_replicas(self) -> None:
        p = DefaultElectPolicy(all_but(1))
        assert p.elect(C, N, [1], None, 1, None) == ElectionOutcome(None)
        assert p.elect(C, N, [1], [1, 2, 3], 1, None) == ElectionOutcome(2, unclean=True)

    def test_clean_member_preferred_over_better_non_member(self) -> None:
        table = {1: info(1, epoch=1), 2: info(2, epoch=1, max_offset=1), 3: info(3, epoch=9, max_offset=9999)}
        outcome = policy_with(table).elect(C, N, [1, 2], [1, 2, 3], None, None)
        assert outcome == ElectionOutcome(1, unclean=False)

    def test_no_live_replica_at_all(self) -> None:
        assert DefaultElectPolicy(none_alive).elect(C, N, [1], [1, 2, 3], 1, None) == ElectionOutcome(None)

    def test_unclean_uses_ranking(self) -> None:
        table = {1: info(1), 2: info(2, epoch=1, max_offset=5), 3: info(3, epoch=1, max_offset=50)}
        outcome = policy_with(table, all_but(1)).elect(C, N, [1], [1, 2, 3], 1, None)
        assert outcome == ElectionOutcome(3, unclean=True)


class TestRanking:
    """The §7.1 heartbeat mocks, straight against the policy."""

    @pytest.mark.parametrize(("mock", "expected"), [
        ("MasterStillAlive", 1),  # the live old master
        ("HigherEpoch", 2),
        ("HigherOffset", 3),
        ("HigherPriority", 3),
    ])
    def test_mocks(self, mock: str, expected: int) -> None:
        policy, _ = mock_policy(MOCKS[mock])
        assert policy.elect(C, N, [1, 2, 3], None, 1, None) == ElectionOutcome(expected)

    def test_higher_epoch_beats_higher_offset(self) -> None:
        table = {1: info(1, epoch=2, max_offset=1), 2: info(2, epoch=1, max_offset=10**12)}
        assert policy_with(table).elect(C, N, [1, 2], None, None, None).broker_id == 1

    def test_higher_offset_beats_priority(self) -> None:
        table = {1: info(1, max_offset=1, priority=0), 2: info(2, max_offset=2, priority=100)}
        assert policy_with(table).elect(C, N, [1, 2], None, None, None).broker_id == 2

    def test_lower_priority_value_wins(self) -> None:
        table = {1: info(1, priority=5), 2: info(2, priority=3), 3: info(3, priority=4)}
        assert policy_with(table).elect(C, N, [1, 2, 3], None, None, None).broker_id == 2

    def test_full_tie_goes_to_lower_broker_id(self) -> None:
        table = {i: info(i) for i in (2, 5, 3)}
        assert policy_with(table).elect(C, N, [5, 3, 2], None, None, None).broker_id == 2
        assert policy_with(table).elect(C, N, [5, 3], None, None, None).broker_id == 3

    def test_no_overflow_on_large_offset_gaps(self) -> None:
        # Java's (int)(o2.maxOffset - o1.maxOffset) overflows for gaps above 2^31
        big = 2**32 + 5
        for small in (0, 1, 5):
            table = {1: info(1, max_offset=small), 2: info(2, max_offset=big)}
            assert policy_with(table).elect(C, N, [1, 2], None, None, None).broker_id == 2
            table = {1: info(1, max_offset=big), 2: info(2, max_offset=small)}
            assert policy_with(table).elect(C, N, [1, 2], None, None, None).broker_id == 1
        table = {1: info(1, max_offset=2**31), 2: info(2, max_offset=2**63 - 1), 3: info(3, max_offset=-1)}
        assert policy_with(table).elect(C, N, [1, 2, 3], None, None, None).broker_id == 2

    def test_broker_without_live_info_ranks_last(self) -> None:
        table = {3: info(3, epoch=-1, max_offset=-1, priority=2**31 - 1)}
        assert policy_with(table).elect(C, N, [1, 2, 3], None, None, None).broker_id == 3
        assert policy_with({}).elect(C, N, [2, 1], None, None, None).broker_id == 1

    def test_dead_best_ranked_broker_is_skipped(self) -> None:
        table = {1: info(1, epoch=9), 2: info(2, epoch=1)}
        assert policy_with(table, all_but(1)).elect(C, N, [1, 2], None, None, None).broker_id == 2


class TestAsyncLearner:
    def test_async_learner_never_elected(self) -> None:
        table = {1: info(1, epoch=1), 2: info(2, epoch=9, async_learner=True)}
        p = policy_with(table)
        assert p.elect(C, N, [1, 2], None, None, None) == ElectionOutcome(1)
        # not as the old master, not when designated, not through unclean election
        assert p.elect(C, N, [1, 2], None, 2, None) == ElectionOutcome(1)
        assert p.elect(C, N, [1, 2], None, None, 2) == ElectionOutcome(None)
        assert p.elect(C, N, [1], [1, 2], None, 2) == ElectionOutcome(None)
        assert policy_with(table, all_but(1)).elect(C, N, [1], [1, 2], 1, None) == ElectionOutcome(None)

    def test_only_async_learners_left(self) -> None:
        table = {i: info(i, async_learner=True) for i in (1, 2)}
        assert policy_with(table).elect(C, N, [1, 2], [1, 2], None, None) == ElectionOutcome(None)

    def test_live_info_mock_helper(self) -> None:
        assert live(1, True, 1, 1).is_alive(0)
        assert not live(1, False, 1, 1).is_alive(0)
