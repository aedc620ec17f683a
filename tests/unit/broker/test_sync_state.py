"""SyncStateTracker (sync_state.py; rocketmq-controller.md §6.6): committed vs proposed sets, shrink and
expand decisions on an injected time. Master id 1; slaves 2, 3, 4."""

from __future__ import annotations

import pytest

from services.broker.sync_state import SyncStateTracker

MASTER = 1
LIMIT = 15_000  # haMaxTimeSlaveNotCatchup
T0 = 1_000_000


def tracker(members: set[int], epoch: int = 1) -> SyncStateTracker:
    t = SyncStateTracker(MASTER)
    t.reset(members, epoch)
    return t


class TestCommittedAndProposed:
    def test_initial_state(self) -> None:
        t = SyncStateTracker(MASTER)
        assert t.local == frozenset() and t.local_epoch == 0 and t.remote is None
        assert not t.synchronizing
        assert t.effective() == frozenset()

    def test_reset(self) -> None:
        t = tracker({1, 2}, 3)
        t.propose({1})
        t.record_caught_up(2, T0)
        t.reset([1, 3], 7)
        assert t.local == {1, 3} and t.local_epoch == 7 and t.remote is None
        assert t.caught_up_ms == {}

    def test_expand_in_flight_counts_the_union(self) -> None:
        """RocketMQ issue #5663: expand {1} -> {1,2} proposed; effective() is {1,2} until committed."""
        t = tracker({1}, 1)
        t.propose({1, 2})
        assert t.synchronizing
        assert t.local == {1}
        assert t.effective() == {1, 2}
        assert t.committed({1, 2}, 2)
        assert not t.synchronizing
        assert t.local == {1, 2} and t.local_epoch == 2
        assert t.effective() == {1, 2}

    def test_expand_in_flight_until_refused(self) -> None:
        t = tracker({1}, 1)
        t.propose({1, 2})
        assert t.effective() == {1, 2}
        t.refused()
        assert not t.synchronizing
        assert t.effective() == {1}
        assert t.local_epoch == 1

    def test_shrink_in_flight_counts_the_union(self) -> None:
        t = tracker({1, 2, 3}, 4)
        t.propose({1, 2})
        assert t.effective() == {1, 2, 3}
        assert t.committed({1, 2}, 5)
        assert t.effective() == {1, 2}

    def test_union_of_disjoint_changes(self) -> None:
        t = tracker({1, 2}, 4)
        t.propose({1, 3})
        assert t.effective() == {1, 2, 3}

    def test_stale_or_equal_epoch_commit_keeps_the_proposal(self) -> None:
        t = tracker({1}, 5)
        t.propose({1, 2})
        assert not t.committed({1, 3}, 4)
        assert not t.committed({1, 3}, 5)
        assert t.local == {1} and t.local_epoch == 5
        assert t.synchronizing and t.effective() == {1, 2}

    def test_committed_ignores_older_epochs(self) -> None:
        t = tracker({1, 2}, 5)
        assert t.committed({1, 2, 3}, 6)
        assert not t.committed({1}, 5)
        assert not t.committed({1}, 2)
        assert t.local == {1, 2, 3} and t.local_epoch == 6

    def test_commit_may_differ_from_the_proposal(self) -> None:
        t = tracker({1, 2, 3}, 1)
        t.propose({1, 2})
        assert t.committed({1, 3}, 3)
        assert t.local == {1, 3} and t.remote is None

    def test_in_sync_nums(self) -> None:
        t = tracker({1, 2}, 1)
        assert t.in_sync_nums() == 2
        t.propose({1, 2, 3})
        assert t.in_sync_nums() == 3   # max(local, remote) while synchronizing
        t.propose({1})
        assert t.in_sync_nums() == 2
        t.refused()
        assert t.in_sync_nums() == 2

    def test_caught_up_times_only_move_forward(self) -> None:
        t = tracker({1, 2})
        t.record_caught_up(2, T0)
        t.record_caught_up(2, T0 - 500)
        assert t.caught_up_ms[2] == T0
        t.record_caught_up(2, T0 + 10)
        assert t.caught_up_ms[2] == T0 + 10


class TestShrink:
    def test_boundary_exactly_at_the_limit_keeps_the_slave(self) -> None:
        t = tracker({1, 2})
        t.record_caught_up(2, T0)
        assert t.shrink_candidate(T0 + LIMIT, [2], LIMIT) is None

    def test_one_ms_past_the_limit_drops_it(self) -> None:
        t = tracker({1, 2})
        t.record_caught_up(2, T0)
        assert t.shrink_candidate(T0 + LIMIT + 1, [2], LIMIT) == frozenset({1})

    def test_caught_up_slave_is_kept(self) -> None:
        t = tracker({1, 2, 3})
        t.record_caught_up(2, T0)
        t.record_caught_up(3, T0 + 100)
        assert t.shrink_candidate(T0 + 200, [2, 3], LIMIT) is None

    def test_disconnected_member_is_dropped(self) -> None:
        t = tracker({1, 2, 3})
        t.record_caught_up(2, T0)
        t.record_caught_up(3, T0)
        assert t.shrink_candidate(T0 + 1, [3], LIMIT) == frozenset({1, 3})

    def test_member_never_caught_up_is_dropped(self) -> None:
        t = tracker({1, 2})
        assert t.shrink_candidate(T0, [2], LIMIT) == frozenset({1})

    def test_two_lagging_slaves_dropped_in_one_proposal(self) -> None:
        """RocketMQ #9897: both laggards leave in one proposal, not one alter per slave."""
        t = tracker({1, 2, 3, 4})
        t.record_caught_up(2, T0)
        t.record_caught_up(3, T0 + 10)
        t.record_caught_up(4, T0 + LIMIT + 500)
        assert t.shrink_candidate(T0 + LIMIT + 11, [2, 3, 4], LIMIT) == frozenset({1, 4})

    def test_lag_and_disconnect_together(self) -> None:
        t = tracker({1, 2, 3})
        t.record_caught_up(2, T0)
        t.record_caught_up(3, T0 + LIMIT)
        assert t.shrink_candidate(T0 + LIMIT + 1, [2], LIMIT) == frozenset({1})

    def test_master_is_always_kept(self) -> None:
        t = tracker({1})
        assert t.shrink_candidate(T0 + 10 * LIMIT, [], LIMIT) is None
        t = tracker({1, 2})
        assert MASTER in (t.shrink_candidate(T0, [], LIMIT) or set())

    def test_non_members_are_not_considered(self) -> None:
        t = tracker({1, 2})
        t.record_caught_up(2, T0)
        t.record_caught_up(3, T0 - 10 * LIMIT)  # 3 lags but is not a member
        assert t.shrink_candidate(T0, [2, 3], LIMIT) is None

    def test_shrink_is_computed_from_the_committed_set(self) -> None:
        t = tracker({1, 2})
        t.record_caught_up(2, T0)
        t.propose({1, 2, 3})  # 3 is only proposed
        assert t.shrink_candidate(T0 + 1, [2], LIMIT) is None

    def test_shrink_does_not_change_the_tracker(self) -> None:
        t = tracker({1, 2})
        assert t.shrink_candidate(T0, [], LIMIT) == frozenset({1})
        assert t.local == {1, 2} and not t.synchronizing


class TestExpand:
    def test_caught_up_slave_joins(self) -> None:
        t = tracker({1})
        assert t.expand_candidate(2, ack=5000, confirm=5000, last_epoch_start=3000, learner=False) == frozenset({1, 2})

    def test_keeps_the_other_members(self) -> None:
        t = tracker({1, 3})
        assert t.expand_candidate(2, 5000, 4000, 0, False) == frozenset({1, 2, 3})

    def test_ack_below_confirm(self) -> None:
        t = tracker({1})
        assert t.expand_candidate(2, 4999, 5000, 0, False) is None

    def test_ack_below_last_epoch_start(self) -> None:
        t = tracker({1})
        assert t.expand_candidate(2, 5000, 100, 5001, False) is None

    def test_boundaries_are_inclusive(self) -> None:
        t = tracker({1})
        assert t.expand_candidate(2, 5000, 5000, 5000, False) == frozenset({1, 2})

    def test_a_slave_that_has_not_caught_up_waits(self) -> None:
        # RocketMQ's lastMasterMaxOffset rule: the ack must hold what the master had at its last transfer,
        # however far confirmOffset lags behind (with allAck, confirmOffset is the slowest member's ack).
        t = tracker({1})
        assert t.expand_candidate(2, 5000, 100, 0, False, caught_up=False) is None
        assert t.expand_candidate(2, 5000, 100, 0, False, caught_up=True) == frozenset({1, 2})

    def test_learners_never_expand(self) -> None:
        t = tracker({1})
        assert t.expand_candidate(2, 10**9, 0, 0, learner=True) is None

    def test_already_a_member(self) -> None:
        t = tracker({1, 2})
        assert t.expand_candidate(2, 5000, 5000, 0, False) is None

    def test_already_proposed(self) -> None:
        t = tracker({1})
        t.propose({1, 2})
        assert t.expand_candidate(2, 5000, 5000, 0, False) is None

    @pytest.mark.parametrize("ack,confirm,start,learner,expected", [
        (100, 100, 100, False, {1, 2}),
        (99, 100, 0, False, None),
        (100, 0, 101, False, None),
        (100, 0, 0, True, None),
    ])
    def test_table(self, ack: int, confirm: int, start: int, learner: bool, expected: set[int] | None) -> None:
        want = None if expected is None else frozenset(expected)
        assert tracker({1}).expand_candidate(2, ack, confirm, start, learner) == want
