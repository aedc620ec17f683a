"""Replication protocol rules without I/O (ha/protocol.py).

- decide_truncation: the consistent point (RIP-44 "Truncation example analysis" (1)-(6), RocketMQ's
  EpochFileCacheTest findConsistentPoint samples 1-4 (rocketmq-controller.md §7.6)) and the cases that
  cannot be reconciled.
- slave_step: offset continuity, epoch never going back (empty frames excepted), epoch announcements,
  confirmOffset = min(master's confirmOffset, the slave's new max) (§6.3).
- transfer_start, epoch_index_for, check_ack (§6.4).
"""

from __future__ import annotations

import pytest

from services.broker.epoch_file import MAX_OFFSET, EpochEntry
from services.broker.ha.frames import MasterHandshake, ProtocolError, Transfer
from services.broker.ha.protocol import (
    Unreconcilable,
    check_ack,
    decide_truncation,
    entries_with_end,
    epoch_index_for,
    slave_step,
    transfer_start,
)


def local(*pairs: tuple[int, int]) -> list[EpochEntry]:
    """A slave's epoch entries as its EpochFileCache returns them (ends rebuilt, the last one open)."""
    return entries_with_end(list(pairs), MAX_OFFSET).entries()


def master(max_offset: int, *pairs: tuple[int, int]) -> MasterHandshake:
    return MasterHandshake(max_offset, pairs[-1][0] if pairs else -1, tuple(pairs))


def point(slave_pairs: list[tuple[int, int]], slave_max: int, master_pairs: list[tuple[int, int]],
          master_max: int, slave_min: int = 0) -> int:
    return decide_truncation(local(*slave_pairs), slave_min, slave_max, master(master_max, *master_pairs))


# ====================================================================================== decide_truncation


class TestRip44TruncationExamples:
    """RIP-44 "Truncation example analysis" (1)-(6). The figures are not available, so each case is a
    concrete (slave epochs + max offset, master epochs + max offset) pair consistent with the text."""

    def test_1_epoch0_truncated_to_min_900(self) -> None:
        # Slave A was master in epoch 0 and wrote [0, 1000); B became master in epoch 1 at 900.
        # Only the messages within 900 are committed: A cuts [900, 1000).
        assert point([(0, 0)], 1000, [(0, 0), (1, 900)], 1500) == 900

    def test_2_lost_tail_after_async_flush_needs_no_cut(self) -> None:
        # A lost 900-1000 of epoch 0 (async flush); B has epoch 0 up to 1000, then epoch 1.
        # min(900, 1000) = 900 == A's end: nothing is cut, A just continues copying from B.
        slave_max = 900
        assert point([(0, 0)], slave_max, [(0, 0), (1, 1000)], 1400) == 900 == slave_max

    def test_3_epoch1_truncated_to_min_1200_which_cuts_nothing(self) -> None:
        # The slave has epoch 1 up to 1200; the master's epoch 1 ends at 1200 (epoch 2 starts there).
        assert point([(0, 0), (1, 900)], 1200, [(0, 0), (1, 900), (2, 1200)], 1600) == 1200

    def test_4_epoch0_truncated_to_min_900(self) -> None:
        # A wrote epoch 0 up to 1000; epoch 1 started at 900 on another broker, then epoch 2 at 1100.
        assert point([(0, 0)], 1000, [(0, 0), (1, 900), (2, 1100)], 1300) == 900

    def test_5_b_and_c_both_truncated_to_800_of_epoch1(self) -> None:
        # Epoch 1 (master B) started at 500. A followed up to 800 and became master in epoch 2 at 800.
        # B (epoch 1 up to 1000) and C (epoch 1 up to 900) both cut back to 800.
        a = [(0, 0), (1, 500), (2, 800)]
        assert point([(0, 0), (1, 500)], 1000, a, 1200) == 800  # B
        assert point([(0, 0), (1, 500)], 900, a, 1200) == 800   # C

    def test_6_epoch0_truncated_to_min_1000(self) -> None:
        # The slave became master in epoch 1 at 1200 (its epoch 0 reached 1200); the master knows
        # nothing of that epoch 1: it was elected in epoch 2 with epoch 0 up to 1000.
        # Epoch 1 is skipped (unknown to the master), epoch 0 gives min(1200, 1000) = 1000.
        assert point([(0, 0), (1, 1200)], 1500, [(0, 0), (2, 1000)], 1400) == 1000


class TestFindConsistentPointSamples:
    """EpochFileCacheTest samples 1-4 through decide_truncation; cache1 = (1,100), (2,300), (3,500)."""

    CACHE1 = ((1, 100), (2, 300), (3, 500))

    def test_sample1(self) -> None:
        # Epoch 3 starts differ, so epoch 2 matches: min(500, 450).
        assert point(self.CACHE1, 700, [(1, 100), (2, 300), (3, 450)], 600) == 450

    def test_sample2(self) -> None:
        assert point(self.CACHE1, 700, [(1, 100), (2, 300), (3, 500)], 600) == 600

    def test_sample3_no_common_epoch(self) -> None:
        with pytest.raises(Unreconcilable):
            point(self.CACHE1, 700, [(1, 200), (2, 500)], 600)

    def test_sample4(self) -> None:
        # cache2.findConsistentPoint(cache1): epoch 4 is missing in cache1, epoch 3 gives min(800, 700).
        assert point([(1, 100), (2, 300), (3, 500), (4, 800)], 900, self.CACHE1, 700) == 700


class TestDecideTruncation:
    def test_new_empty_replica_starts_at_zero(self) -> None:
        assert decide_truncation([], 0, 0, master(5000, (1, 0), (2, 3000))) == 0

    def test_new_empty_replica_even_if_master_has_no_epochs(self) -> None:
        assert decide_truncation([], 0, 0, master(0)) == 0

    def test_identical_logs_cut_nothing(self) -> None:
        assert point([(1, 0), (2, 500)], 900, [(1, 0), (2, 500)], 900) == 900

    def test_slave_behind_cuts_nothing(self) -> None:
        assert point([(1, 0), (2, 500)], 700, [(1, 0), (2, 500), (3, 800)], 1000) == 700

    def test_slave_ahead_in_the_same_epoch_is_cut_to_the_master_end(self) -> None:
        assert point([(1, 0)], 1000, [(1, 0)], 600) == 600

    def test_re_elected_master_same_start_offsets(self) -> None:
        # Epochs 1 and 2 start at the same offset (re-election with no new data).
        assert point([(1, 0)], 0, [(1, 0), (2, 0)], 800) == 0
        assert point([(1, 0), (2, 0)], 300, [(1, 0), (2, 0), (3, 300)], 800) == 300
        assert point([(1, 0), (2, 400)], 400, [(1, 0), (2, 400), (3, 400)], 900) == 400

    def test_newest_common_epoch_wins(self) -> None:
        # Epoch 3 is the slave's own (unknown to the master); epoch 2 matches: min(600, 650).
        assert point([(1, 0), (2, 300), (3, 600)], 900, [(1, 0), (2, 300), (4, 650)], 1000) == 600

    def test_same_epoch_different_start_is_not_common(self) -> None:
        assert point([(1, 0), (2, 400)], 900, [(1, 0), (2, 300)], 1000) == 300

    def test_no_common_epoch_is_unreconcilable(self) -> None:
        with pytest.raises(Unreconcilable, match="no epoch in common"):
            point([(1, 0), (2, 300)], 500, [(3, 0), (4, 200)], 700)

    def test_local_data_but_no_epochs_is_unreconcilable(self) -> None:
        with pytest.raises(Unreconcilable, match="no epoch entries"):
            decide_truncation([], 0, 1000, master(2000, (1, 0)))

    def test_local_data_mid_log_but_no_epochs_is_unreconcilable(self) -> None:
        with pytest.raises(Unreconcilable):
            decide_truncation([], 4096, 5000, master(9000, (1, 0)))

    def test_master_without_epochs_is_unreconcilable(self) -> None:
        with pytest.raises(Unreconcilable):
            decide_truncation(local((1, 0)), 0, 500, master(500))

    def test_point_below_master_first_epoch_start_is_unreconcilable(self) -> None:
        # With well-ordered entries the matching epoch always starts at or after the master's first
        # epoch, so only a master whose entries are out of order can produce this: its epoch 2 (the
        # first entry) starts at 600, the common epoch 1 gives 400.
        hs = MasterHandshake(900, 2, ((2, 600), (1, 100)))
        with pytest.raises(Unreconcilable, match="below the master's oldest data"):
            decide_truncation(local((1, 100)), 100, 400, hs)

    def test_log_entirely_before_the_masters_oldest_epoch_is_kept_for_a_start_over(self) -> None:
        # Retention on the master dropped epoch 1 (and its data): the slave's log ends at or before the
        # master's first epoch, so nothing is cut here and the master streams from its oldest data.
        assert decide_truncation(local((1, 0)), 0, 2165, master(15_000, (2, 2165))) == 2165
        assert decide_truncation(local((1, 0)), 0, 2000, master(15_000, (3, 4096))) == 2000
        with pytest.raises(Unreconcilable, match="no epoch in common"):  # past it: a divergent log
            decide_truncation(local((1, 0)), 0, 2166, master(15_000, (2, 2165)))

    def test_error_mentions_the_way_out(self) -> None:
        with pytest.raises(Unreconcilable, match="move its store directory aside"):
            point([(1, 0)], 500, [(2, 0)], 700)

    def test_new_empty_replica_mid_log(self) -> None:
        # An empty store whose (empty) log starts at a segment boundary, with no epochs.
        assert decide_truncation([], 8192, 8192, master(9000, (1, 0))) == 8192

    def test_point_never_exceeds_local_max_when_log_has_data(self) -> None:
        for slave_max in (300, 450, 500, 700, 900):
            p = point([(1, 0), (2, 300)], slave_max, [(1, 0), (2, 300)], 700)
            assert p == min(slave_max, 700)

    def test_empty_log_with_announced_mid_log_epoch_cuts_nothing(self) -> None:
        # A new replica synced from the master's last file was told "epoch 2 started at 4096" but has
        # not received a byte yet (its commitlog is still empty at 0), then reconnects.
        p = decide_truncation(local((2, 4096)), 0, 0, master(9000, (2, 4096)))
        assert p <= 0

    def test_point_below_local_min_is_unreconcilable(self) -> None:
        # The replica's old segments were deleted (log [4096, 6000)); it was master in epoch 3 at 5000
        # (its epoch 1 reached 5000). The new master's epoch 1 ended at 2000: the point 2000 lies in
        # data this replica no longer has, so it cannot be reached by truncation.
        with pytest.raises(Unreconcilable):
            decide_truncation(local((1, 0), (3, 5000)), 4096, 6000, master(7000, (1, 0), (2, 2000)))


# ====================================================================================== slave_step


class TestSlaveStepContinuity:
    def test_frame_at_local_end_is_applied(self) -> None:
        step = slave_step(Transfer(1000, 1, 0, 1000, b"x" * 100), 0, 1000, 1)
        assert step.append == b"x" * 100
        assert step.new_epoch is None

    @pytest.mark.parametrize("offset", [0, 999, 1001, 2000])
    def test_discontinuity_is_a_protocol_error(self, offset: int) -> None:
        with pytest.raises(ProtocolError, match="discontinuity"):
            slave_step(Transfer(offset, 1, 0, 0, b"x"), 0, 1000, 1)

    def test_discontinuous_heartbeat_is_also_rejected(self) -> None:
        with pytest.raises(ProtocolError):
            slave_step(Transfer(900, 1, 0, 0), 0, 1000, 1)

    def test_rocketmqs_heartbeat_before_streaming_carries_only_a_confirm_offset(self) -> None:
        """RocketMQ's master beats with offset -1 and its first epoch until it has something to stream."""
        step = slave_step(Transfer(-1, 1, 0, 700), 0, 1000, 3)
        assert (step.append, step.new_epoch, step.confirm_offset) == (b"", None, 700)
        with pytest.raises(ProtocolError, match="discontinuity"):
            slave_step(Transfer(-1, 1, 0, 700, b"x"), 0, 1000, 3)  # never with data

    @pytest.mark.parametrize("offset", [0, 4096, 8192])
    def test_empty_log_accepts_any_start(self, offset: int) -> None:
        step = slave_step(Transfer(offset, 1, 0, offset + 10, b"abc"), 0, 0, -1)
        assert step.append == b"abc"
        assert step.new_epoch == (1, 0)
        assert step.confirm_offset == offset + 3

    def test_empty_log_mid_log_accepts_any_start(self) -> None:
        step = slave_step(Transfer(12288, 1, 0, 0, b"ab"), 8192, 8192, -1)
        assert step.append == b"ab"


class TestSlaveStepEpochs:
    def test_first_announcement_on_a_new_replica(self) -> None:
        step = slave_step(Transfer(0, 1, 0, 0), 0, 0, -1)
        assert step.new_epoch == (1, 0)
        assert step.append == b""

    def test_announcement_of_a_new_epoch_with_no_data(self) -> None:
        step = slave_step(Transfer(500, 3, 500, 500), 0, 500, 2)
        assert step.new_epoch == (3, 500)
        assert step.append == b""

    def test_new_epoch_with_data(self) -> None:
        step = slave_step(Transfer(500, 3, 500, 500, b"data"), 0, 500, 2)
        assert step.new_epoch == (3, 500)
        assert step.append == b"data"

    def test_new_epoch_starting_before_the_frame_is_accepted(self) -> None:
        # A replica joining mid-epoch (e.g. synced from the last file) is told the epoch's real start.
        step = slave_step(Transfer(8192, 2, 1000, 8192, b"x"), 0, 0, -1)
        assert step.new_epoch == (2, 1000)

    def test_new_epoch_starting_after_the_frame_is_rejected(self) -> None:
        with pytest.raises(ProtocolError, match="starts at"):
            slave_step(Transfer(500, 3, 600, 500, b"x"), 0, 500, 2)
        with pytest.raises(ProtocolError):
            slave_step(Transfer(500, 3, 501, 500), 0, 500, 2)

    def test_same_epoch_records_nothing(self) -> None:
        step = slave_step(Transfer(700, 2, 300, 700, b"y"), 0, 700, 2)
        assert step.new_epoch is None

    def test_same_epoch_heartbeat(self) -> None:
        step = slave_step(Transfer(700, 2, 300, 650), 0, 700, 2)
        assert step.new_epoch is None and step.append == b"" and step.confirm_offset == 650

    def test_epoch_going_back_with_data_is_rejected(self) -> None:
        with pytest.raises(ProtocolError, match="epoch went back"):
            slave_step(Transfer(700, 1, 0, 700, b"z"), 0, 700, 2)

    def test_older_epoch_empty_frame_is_ignored(self) -> None:
        step = slave_step(Transfer(700, 1, 0, 600), 0, 700, 2)
        assert step.new_epoch is None
        assert step.append == b""
        assert step.confirm_offset == 600

    def test_epochs_may_share_a_start_offset(self) -> None:
        # A master re-elected without new data: epoch 2 starts where epoch 1 does.
        step = slave_step(Transfer(0, 2, 0, 0), 0, 0, 1)
        assert step.new_epoch == (2, 0)


class TestSlaveStepConfirm:
    def test_master_confirm_above_new_max_is_capped(self) -> None:
        step = slave_step(Transfer(1000, 1, 0, 5000, b"x" * 100), 0, 1000, 1)
        assert step.confirm_offset == 1100

    def test_master_confirm_below_new_max_is_kept(self) -> None:
        step = slave_step(Transfer(1000, 1, 0, 900, b"x" * 100), 0, 1000, 1)
        assert step.confirm_offset == 900

    def test_master_confirm_equal_to_new_max(self) -> None:
        step = slave_step(Transfer(1000, 1, 0, 1100, b"x" * 100), 0, 1000, 1)
        assert step.confirm_offset == 1100

    def test_heartbeat_caps_at_local_max(self) -> None:
        assert slave_step(Transfer(1000, 1, 0, 9999), 0, 1000, 1).confirm_offset == 1000
        assert slave_step(Transfer(1000, 1, 0, 10), 0, 1000, 1).confirm_offset == 10

    def test_empty_log_mid_log_heartbeat(self) -> None:
        # Announcement before the first byte of a mid-log replica: nothing to confirm yet.
        assert slave_step(Transfer(8192, 1, 0, 9000), 0, 0, -1).confirm_offset == 0


# ====================================================================================== master side


class TestTransferStart:
    SEG = 4096

    def test_slave_offset_beyond_master_end(self) -> None:
        with pytest.raises(ProtocolError, match="beyond"):
            transfer_start(10_001, 0, 10_000, self.SEG, False)

    def test_new_slave_starts_at_master_min(self) -> None:
        assert transfer_start(0, 0, 10_000, self.SEG, False) == 0
        assert transfer_start(0, 8192, 10_000, self.SEG, False) == 8192

    def test_new_slave_sync_from_last_file(self) -> None:
        assert transfer_start(0, 0, 10_000, self.SEG, True) == 8192
        assert transfer_start(0, 0, 4095, self.SEG, True) == 0
        assert transfer_start(0, 0, 0, self.SEG, True) == 0

    def test_sync_from_last_file_at_a_segment_boundary(self) -> None:
        # RocketMQ's maxOffset - maxOffset % mappedFileSize.
        assert transfer_start(0, 0, 8192, self.SEG, True) == 8192

    def test_resume_from_the_slave_offset(self) -> None:
        assert transfer_start(5000, 0, 10_000, self.SEG, False) == 5000
        assert transfer_start(5000, 0, 10_000, self.SEG, True) == 5000  # flag only matters for a new slave
        assert transfer_start(10_000, 0, 10_000, self.SEG, False) == 10_000

    def test_slave_offset_below_master_min_starts_it_over_at_the_oldest_data(self) -> None:
        # Retention deleted what the slave needs: it is streamed the master's oldest data (and starts over).
        assert transfer_start(100, 4096, 10_000, self.SEG, False) == 4096
        assert transfer_start(100, 4096, 10_000, self.SEG, True) == 4096

    def test_slave_offset_at_master_min(self) -> None:
        assert transfer_start(4096, 4096, 10_000, self.SEG, False) == 4096


class TestEpochIndexFor:
    ENTRIES = local((1, 0), (2, 100), (3, 300))

    @pytest.mark.parametrize("offset,idx", [(0, 0), (50, 0), (99, 0), (100, 1), (250, 1), (299, 1),
                                            (300, 2), (5000, 2)])
    def test_epoch_containing_offset(self, offset: int, idx: int) -> None:
        assert epoch_index_for(self.ENTRIES, offset) == idx

    def test_empty_epoch_at_offset_counts(self) -> None:
        entries = local((1, 0), (2, 500), (3, 500), (4, 800))
        assert epoch_index_for(entries, 500) == 1  # the empty epoch 2 is announced first
        assert epoch_index_for(entries, 499) == 0
        assert epoch_index_for(entries, 501) == 2

    def test_all_epochs_empty_at_zero(self) -> None:
        assert epoch_index_for(local((1, 0), (2, 0)), 0) == 0

    def test_offset_before_the_first_epoch(self) -> None:
        assert epoch_index_for(local((3, 1000)), 0) == 0

    def test_closed_last_entry(self) -> None:
        entries = entries_with_end([(1, 0), (2, 100)], 200).entries()
        assert epoch_index_for(entries, 150) == 1
        assert epoch_index_for(entries, 200) == 1
        assert epoch_index_for(entries, 999) == 1

    def test_no_entries(self) -> None:
        assert epoch_index_for([], 100) == 0


class TestCheckAck:
    def test_at_or_below_master_max(self) -> None:
        check_ack(0, 1000)
        check_ack(999, 1000)
        check_ack(1000, 1000)

    def test_beyond_master_max(self) -> None:
        with pytest.raises(ProtocolError, match="beyond"):
            check_ack(1001, 1000)


def test_entries_with_end_sets_last_end() -> None:
    cache = entries_with_end([(1, 0), (2, 100)], 250)
    assert cache.entries() == [EpochEntry(1, 0, 100), EpochEntry(2, 100, 250)]
    # Also accepts EpochEntry objects; a last end below the last start is ignored.
    cache = entries_with_end([EpochEntry(1, 0), EpochEntry(2, 100)], 50)
    assert cache.entries()[-1] == EpochEntry(2, 100, MAX_OFFSET)
