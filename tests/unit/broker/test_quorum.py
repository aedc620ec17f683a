"""Quorum-write and confirmOffset rules (quorum.py; rocketmq-controller.md §6.5, §6.7).

Master id 1 throughout; slaves 2, 3, 4.
"""

from __future__ import annotations

import pytest

from services.broker.quorum import ALL_ACK, confirm_offset, need_ack_nums, quorum_offset
from services.broker.sync_state import SyncStateTracker

MASTER = 1
MAX = 10_000


# ====================================================================================== need_ack_nums


class TestNeedAckNums:
    def test_all_ack(self) -> None:
        assert ALL_ACK == -1
        assert need_ack_nums(True, 2) == ALL_ACK
        assert need_ack_nums(True, 3, auto=True, min_in_sync=2, in_sync_now=1) == ALL_ACK

    @pytest.mark.parametrize("isr", [0, 1, 2, 3, 5])
    def test_in_sync_replicas(self, isr: int) -> None:
        assert need_ack_nums(False, isr) == isr

    def test_auto_flag_off_ignores_replicas_in_sync_now(self) -> None:
        assert need_ack_nums(False, 3, auto=False, min_in_sync=1, in_sync_now=1) == 3

    @pytest.mark.parametrize("isr,min_in_sync,now,expected", [
        (3, 1, 1, 1),   # min(3, 1) = 1, max(1, 1) = 1
        (3, 1, 2, 2),   # min(3, 2)
        (3, 1, 3, 3),
        (3, 1, 5, 3),   # never above inSyncReplicas
        (3, 2, 1, 2),   # never below minInSyncReplicas
        (2, 2, 1, 2),
        (2, 3, 5, 3),   # minInSyncReplicas wins over inSyncReplicas too (max is applied last)
        (1, 1, 4, 1),
    ])
    def test_auto_in_sync_replicas(self, isr: int, min_in_sync: int, now: int, expected: int) -> None:
        """RIP-34 calcNeedAckNums: max(min(inSyncReplicas, inSyncNow), minInSyncReplicas)."""
        assert need_ack_nums(False, isr, auto=True, min_in_sync=min_in_sync, in_sync_now=now) == expected


# ====================================================================================== quorum_offset


class TestQuorumAllAck:
    def test_only_master_in_the_set(self) -> None:
        assert quorum_offset(ALL_ACK, {}, {MASTER}, MASTER, MAX) == MAX
        assert quorum_offset(ALL_ACK, {2: 5}, {MASTER}, MASTER, MAX) == MAX  # non-members don't count
        assert quorum_offset(ALL_ACK, {}, set(), MASTER, MAX) == MAX

    def test_smallest_member_ack(self) -> None:
        assert quorum_offset(ALL_ACK, {2: 7000, 3: 9000}, {1, 2, 3}, MASTER, MAX) == 7000

    def test_acks_beyond_master_max_are_capped(self) -> None:
        assert quorum_offset(ALL_ACK, {2: MAX + 50}, {1, 2}, MASTER, MAX) == MAX

    def test_member_without_ack_holds_everything(self) -> None:
        assert quorum_offset(ALL_ACK, {2: 9000}, {1, 2, 3}, MASTER, MAX) == -1
        assert quorum_offset(ALL_ACK, {}, {1, 2}, MASTER, MAX) == -1
        assert quorum_offset(ALL_ACK, {2: 9000}, {1, 2, 3}, MASTER, MAX) < 0  # nothing is acknowledged

    def test_non_member_acks_are_ignored(self) -> None:
        assert quorum_offset(ALL_ACK, {2: 5000, 4: 100}, {1, 2}, MASTER, MAX) == 5000

    def test_union_set_while_an_alter_is_in_flight(self) -> None:
        """RocketMQ issue #5663: while {1} -> {1,2} is proposed, slave 2 must ack too."""
        tracker = SyncStateTracker(MASTER)
        tracker.reset({1}, 1)
        tracker.propose({1, 2})
        assert quorum_offset(ALL_ACK, {}, tracker.effective(), MASTER, MAX) == -1
        assert quorum_offset(ALL_ACK, {2: 6000}, tracker.effective(), MASTER, MAX) == 6000
        # A shrink in flight {1,2,3} -> {1,2}: 3 still counts until the controller commits.
        tracker.reset({1, 2, 3}, 4)
        tracker.propose({1, 2})
        assert quorum_offset(ALL_ACK, {2: 8000, 3: 4000}, tracker.effective(), MASTER, MAX) == 4000
        tracker.committed({1, 2}, 5)
        assert quorum_offset(ALL_ACK, {2: 8000, 3: 4000}, tracker.effective(), MASTER, MAX) == 8000


class TestQuorumCount:
    @pytest.mark.parametrize("need", [0, 1])
    def test_one_or_fewer_never_waits(self, need: int) -> None:
        assert quorum_offset(need, {}, {1, 2, 3}, MASTER, MAX) == MAX
        assert quorum_offset(need, {2: 10}, {1, 2}, MASTER, MAX) == MAX

    def test_need_2_picks_the_largest_ack(self) -> None:
        assert quorum_offset(2, {2: 3000, 3: 8000, 4: 5000}, {1, 2, 3}, MASTER, MAX) == 8000

    def test_need_3_picks_the_second_largest_ack(self) -> None:
        assert quorum_offset(3, {2: 3000, 3: 8000, 4: 5000}, {1, 2, 3}, MASTER, MAX) == 5000

    def test_need_4_picks_the_third_largest_ack(self) -> None:
        assert quorum_offset(4, {2: 3000, 3: 8000, 4: 5000}, {1}, MASTER, MAX) == 3000

    def test_membership_is_not_checked(self) -> None:
        """§6.7: for ackNums > 1, any connection's ack counts (membership is not checked)."""
        assert quorum_offset(2, {4: 7000}, {1, 2}, MASTER, MAX) == 7000

    def test_not_enough_acks(self) -> None:
        assert quorum_offset(3, {2: 9000}, {1, 2, 3}, MASTER, MAX) == -1
        assert quorum_offset(2, {}, {1, 2}, MASTER, MAX) == -1

    def test_ties(self) -> None:
        assert quorum_offset(3, {2: 6000, 3: 6000}, {1, 2, 3}, MASTER, MAX) == 6000

    def test_capped_at_master_max(self) -> None:
        assert quorum_offset(2, {2: MAX + 1}, {1, 2}, MASTER, MAX) == MAX


# ====================================================================================== confirm_offset


class TestConfirmOffset:
    def test_without_all_ack_it_is_the_master_max(self) -> None:
        assert confirm_offset(False, {}, {1, 2, 3}, MASTER, [], MAX) == MAX
        assert confirm_offset(False, {2: 10}, {1, 2}, MASTER, [2], MAX) == MAX

    def test_smallest_ack_over_the_set(self) -> None:
        assert confirm_offset(True, {2: 7000, 3: 9000}, {1, 2, 3}, MASTER, [2, 3], MAX) == 7000

    def test_capped_at_master_max(self) -> None:
        assert confirm_offset(True, {2: MAX + 100}, {1, 2}, MASTER, [2], MAX) == MAX

    def test_only_the_master(self) -> None:
        assert confirm_offset(True, {}, {MASTER}, MASTER, [], MAX) == MAX

    @pytest.mark.parametrize("ack", [0, -1])
    def test_members_with_ack_le_0_are_not_ignored(self, ack: int) -> None:
        # Unlike RocketMQ: a member that holds nothing (ack 0) or has not acked yet (-1) must not let
        # confirmOffset run ahead of it, or consumers could read what a failover to it removes.
        if ack < 0:
            assert confirm_offset(True, {2: ack, 3: 6000}, {1, 2, 3}, MASTER, [2, 3], MAX) is None
        else:
            assert confirm_offset(True, {2: ack, 3: 6000}, {1, 2, 3}, MASTER, [2, 3], MAX) == 0

    def test_connected_member_without_any_ack_keeps_it_unchanged(self) -> None:
        assert confirm_offset(True, {3: 5000}, {1, 2, 3}, MASTER, [2, 3], MAX) is None

    def test_member_without_connection_keeps_it_unchanged(self) -> None:
        """RocketMQ issue #6662: a member with no connection freezes confirmOffset (None = keep)."""
        assert confirm_offset(True, {2: 7000, 3: 9000}, {1, 2, 3}, MASTER, [2], MAX) is None
        assert confirm_offset(True, {2: 7000}, {1, 2}, MASTER, [], MAX) is None

    def test_connections_outside_the_set_do_not_matter(self) -> None:
        assert confirm_offset(True, {2: 7000, 4: 10}, {1, 2}, MASTER, [2, 4], MAX) == 7000

    def test_connected_as_list_tuple_set(self) -> None:
        for connected in ([2, 3], (2, 3), {2, 3}, frozenset({2, 3}), {2: "conn", 3: "conn"}.keys()):
            assert confirm_offset(True, {2: 7000, 3: 8000}, {1, 2, 3}, MASTER, connected, MAX) == 7000

    def test_connected_as_one_shot_iterator(self) -> None:
        assert confirm_offset(True, {2: 7000, 3: 8000}, {1, 2, 3}, MASTER, iter([2, 3]), MAX) == 7000

    def test_union_set_while_an_alter_is_in_flight(self) -> None:
        tracker = SyncStateTracker(MASTER)
        tracker.reset({1}, 1)
        tracker.propose({1, 2})
        # 2 is in the union but not connected: confirmOffset does not move.
        assert confirm_offset(True, {}, tracker.effective(), MASTER, [], MAX) is None
        assert confirm_offset(True, {2: 4000}, tracker.effective(), MASTER, [2], MAX) == 4000
