"""Retention (services/broker/retention.py): RocketMQ's CleanCommitLogService rules, over real stores with
4 KiB segments, a fake clock, a fake disk gauge and file times set by hand (as RocketMQ, a segment's age is
its file's last-modified time).

The rules checked, as RocketMQ's DefaultMessageStore/MappedFileQueue.deleteExpiredFileByTime have them:
deletion runs only at a ``deleteWhen`` hour or over ``diskMaxUsedSpaceRatio``; it deletes the oldest
expired segments, at most ``deleteFileBatchMax`` a run, never one from the middle and never the one being
written; over ``diskSpaceCleanForciblyRatio`` it deletes young segments too (``cleanFileForciblyEnable``);
over ``diskSpaceWarningLevelRatio`` the disk is full. Ours, on top: nothing at or above the floor
(confirmOffset, the indexed and the flushed offsets, what a connected slave has acknowledged) is deleted.
"""

from __future__ import annotations

import asyncio
import os
import threading
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from services.broker.broker import Broker
from services.broker.config import BrokerConfig, ConfigError
from services.broker.retention import (
    HOUR_MS,
    Policy,
    RetentionService,
    SegmentInfo,
    decide,
    parse_delete_when,
)
from services.broker.store import Message, MessageStore
from services.common.clock import FakeClock

SEG = 4096
TOPIC = "TopicTest"
NOW = 1_700_000_000_000
POLICY = Policy()  # RocketMQ's defaults: 72 h, at 04h, 75 % / 85 % / 90 %, 10 a run


def segs(*ages_h: float, size: int = SEG) -> list[SegmentInfo]:
    """Segments oldest first, each last written ``age`` hours before NOW."""
    return [SegmentInfo(i * size, (i + 1) * size, NOW - int(age * HOUR_MS)) for i, age in enumerate(ages_h)]


FLOOR = 10**12  # nothing held back


# ====================================================================================== the rules


class TestDecide:
    def test_nothing_runs_outside_the_delete_hours_with_room_on_disk(self) -> None:
        d = decide(segs(100, 100, 1), NOW, hour=3, used=0.5, floor=FLOOR, policy=POLICY)
        assert (d.delete, d.disk_full, d.forced) == (0, False, False)

    def test_at_a_delete_hour_the_expired_oldest_go(self) -> None:
        d = decide(segs(100, 80, 73, 10, 1), NOW, hour=4, used=0.5, floor=FLOOR, policy=POLICY)
        assert d.delete == 3 and "04h" in d.why

    def test_over_max_used_expired_segments_go_at_any_hour(self) -> None:
        assert decide(segs(100, 100, 1), NOW, hour=13, used=0.76, floor=FLOOR, policy=POLICY).delete == 2

    def test_never_from_the_middle(self) -> None:
        # The second segment is young (say, rewritten): the old third one waits behind it.
        assert decide(segs(100, 1, 100, 1), NOW, hour=4, used=0.5, floor=FLOOR, policy=POLICY).delete == 1

    def test_never_the_segment_being_written(self) -> None:
        assert decide(segs(100, 100), NOW, hour=4, used=0.5, floor=FLOOR, policy=POLICY).delete == 1
        assert decide(segs(100), NOW, hour=4, used=0.99, floor=FLOOR, policy=POLICY).delete == 0

    def test_at_most_delete_file_batch_max_a_run(self) -> None:
        assert decide(segs(*[100] * 30), NOW, hour=4, used=0.5, floor=FLOOR, policy=POLICY).delete == 10
        small = replace(POLICY, batch_max=3)
        assert decide(segs(*[100] * 30), NOW, hour=4, used=0.5, floor=FLOOR, policy=small).delete == 3

    def test_exactly_reserved_time_old_is_expired(self) -> None:
        assert decide(segs(72, 1), NOW, hour=4, used=0.5, floor=FLOOR, policy=POLICY).delete == 1
        assert decide(segs(71.99, 1), NOW, hour=4, used=0.5, floor=FLOOR, policy=POLICY).delete == 0

    def test_forced_over_the_clean_forcibly_ratio_young_ones_go_too(self) -> None:
        d = decide(segs(1, 1, 1), NOW, hour=13, used=0.86, floor=FLOOR, policy=POLICY)
        assert (d.delete, d.forced, d.disk_full) == (2, True, False)

    def test_forced_deletion_can_be_turned_off(self) -> None:
        off = replace(POLICY, forcibly_enabled=False)
        d = decide(segs(1, 1, 1), NOW, hour=13, used=0.86, floor=FLOOR, policy=off)
        assert (d.delete, d.forced) == (0, False)

    def test_over_the_warning_ratio_the_disk_is_full(self) -> None:
        d = decide(segs(1, 1), NOW, hour=13, used=0.91, floor=FLOOR, policy=POLICY)
        assert (d.delete, d.disk_full) == (1, True)
        assert decide(segs(1, 1), NOW, hour=13, used=0.90, floor=FLOOR, policy=POLICY).disk_full is False

    @pytest.mark.parametrize("used", [0.5, 0.99])
    def test_the_floor_holds_even_when_forced(self, used: float) -> None:
        # The floor falls inside the second segment: it and everything after it stay.
        d = decide(segs(100, 100, 100, 100), NOW, hour=4, used=used, floor=SEG + 10, policy=POLICY)
        assert d.delete == 1 and "still needed" in d.why

    def test_a_segment_ending_exactly_at_the_floor_may_go(self) -> None:
        assert decide(segs(100, 100, 100), NOW, hour=4, used=0.5, floor=2 * SEG, policy=POLICY).delete == 2


class TestSettings:
    def test_rocketmqs_defaults(self) -> None:
        assert Policy.of(BrokerConfig()) == POLICY

    def test_rocketmqs_clamps(self) -> None:
        cfg = BrokerConfig(diskMaxUsedSpaceRatio=99, diskSpaceCleanForciblyRatio=99, diskSpaceWarningLevelRatio=99)
        p = Policy.of(cfg)
        assert (p.max_used, p.clean_forcibly, p.warning) == (0.95, 0.85, 0.90)
        p = Policy.of(BrokerConfig(diskMaxUsedSpaceRatio=1, diskSpaceCleanForciblyRatio=1,
                                   diskSpaceWarningLevelRatio=1))
        assert (p.max_used, p.clean_forcibly, p.warning) == (0.10, 0.30, 0.35)

    def test_delete_when(self) -> None:
        assert parse_delete_when("04") == {4}
        assert parse_delete_when("03;04; 23") == {3, 4, 23}
        for bad in ("", "4am", "24", "03,04", "-1"):
            with pytest.raises(ValueError, match="deleteWhen must be hours of the day"):
                parse_delete_when(bad)

    @pytest.mark.parametrize("field,value,message", [
        ("deleteWhen", "4am", "deleteWhen must be hours"),
        ("diskMaxUsedSpaceRatio", 0, "percentage of the disk"),
        ("diskSpaceWarningLevelRatio", 101, "percentage of the disk"),
        ("fileReservedTime", 0, "fileReservedTime must be positive"),
        ("deleteFileBatchMax", -1, "deleteFileBatchMax must be positive"),
        ("cleanResourceInterval", 0, "cleanResourceInterval must be positive"),
    ])
    def test_bad_values_are_refused_by_name(self, field: str, value: object, message: str) -> None:
        with pytest.raises(ConfigError, match=message):
            replace(BrokerConfig(), **{field: value}).validate()


# ====================================================================================== over a real store


@dataclass
class Disk:
    used: float = 0.5

    def __call__(self, path: Path) -> float:
        return self.used


def open_store(root: Path) -> MessageStore:
    store = MessageStore(root, "127.0.0.1:10911", segment_size=SEG, queue_nums=2, max_message_size=2000)
    store.open()
    return store


def fill(store: MessageStore, n: int, first: int = 0) -> None:
    for i in range(first, first + n):
        store.append(Message(TOPIC, f"m{i:04d}-".encode() + bytes(150), queue_id=i % 2, tags="t"), NOW + i)
    store.set_confirm_offset(store.max_offset)
    store.flush()


def age(store: MessageStore, hours: float, upto: int | None = None) -> None:
    """Set the last-modified time of every segment (the first ``upto``) to ``hours`` before NOW."""
    when = (NOW - hours * HOUR_MS) / 1000
    for seg in store.commitlog.segments[:upto]:
        os.utime(seg.path, (when, when))


def service(store: MessageStore, disk: Disk, slave_floor: int | None = None, hour: int = 4,
            **settings: object) -> RetentionService:
    cfg = replace(BrokerConfig(), **settings)  # type: ignore[arg-type]
    return RetentionService(cfg, store, FakeClock(NOW), threading.Lock(), lambda: slave_floor, used=disk,
                            hour_of=lambda ms: hour)


def bodies(store: MessageStore, queue_id: int) -> list[bytes]:
    cq = store.queues.queue(TOPIC, queue_id)
    assert cq is not None
    got = store.get_messages(TOPIC, queue_id, cq.min_offset, 10_000)
    return [r.body[:6] for r in got.records]


@pytest.fixture
def store(tmp_path: Path) -> MessageStore:
    s = open_store(tmp_path / "store")
    fill(s, 120)
    assert len(s.commitlog.segments) >= 5
    return s


class TestOverAStore:
    def test_expired_segments_go_and_the_queues_follow(self, store: MessageStore, tmp_path: Path) -> None:
        segments = len(store.commitlog.segments)
        before = [bodies(store, q) for q in (0, 1)]
        store.epochs.append(1, 0)
        store.epochs.append(2, 2 * SEG + 10)  # epoch 1 ends inside the third segment
        age(store, 100, upto=3)
        deleted = asyncio.run(service(store, Disk()).run_once())
        assert deleted == 3 and len(store.commitlog.segments) == segments - 3
        assert store.min_offset == 3 * SEG
        assert min(p.name for p in (tmp_path / "store" / "commitlog").iterdir()) == f"{3 * SEG:020d}"
        # Each queue now starts at its first message in the kept log; the rest read as before.
        for q in (0, 1):
            cq = store.queues.queue(TOPIC, q)
            assert cq is not None and cq.min_offset > 0
            entry = cq.get(cq.min_offset)
            assert entry is not None and entry[0] >= store.min_offset
            assert bodies(store, q) == before[q][cq.min_offset:]
            got = store.get_messages(TOPIC, q, 0, 10)  # below the start: told where it is now
            assert (got.status, got.next_begin_offset, got.min_offset) == ("OFFSET_TOO_SMALL", cq.min_offset,
                                                                          cq.min_offset)
        assert [row["minOffset"] for row in store.topics()[0]["queues"]] == [  # type: ignore[index]
            store.queues.queue(TOPIC, q).min_offset for q in (0, 1)]  # type: ignore[union-attr]
        # RocketMQ's truncateEpochFilePrefix(minOffset - 1): epoch 1 ended inside the deleted part.
        assert [e.epoch for e in store.epochs.entries()] == [2]

    def test_the_state_survives_a_restart_without_re_indexing(self, store: MessageStore, tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
        before = [bodies(store, q) for q in (0, 1)]
        age(store, 100, upto=2)
        assert asyncio.run(service(store, Disk()).run_once()) == 2
        mins = [store.queues.queue(TOPIC, q).min_offset for q in (0, 1)]  # type: ignore[union-attr]
        store.close()
        again = open_store(tmp_path / "store")
        try:
            assert again.min_offset == 2 * SEG
            assert [again.queues.queue(TOPIC, q).min_offset for q in (0, 1)] == mins  # type: ignore[union-attr]
            assert [bodies(again, q) for q in (0, 1)] == [before[q][mins[q]:] for q in (0, 1)]
            assert "indexing them again" not in caplog.text
            fill(again, 5, first=120)  # queue offsets go on where they were
            assert again.queues.queue(TOPIC, 0).count == 60 + 3  # type: ignore[union-attr]
        finally:
            again.close()

    def test_the_queue_files_give_their_blocks_back(self, store: MessageStore) -> None:
        fill(store, 1500, first=120)  # queue files of ~15 KiB each
        cq = store.queues.queue(TOPIC, 0)
        assert cq is not None
        age(store, 100)
        assert asyncio.run(service(store, Disk(), deleteFileBatchMax=1000).run_once()) > 0
        assert len(store.commitlog.segments) == 1
        assert cq.min_offset > 4096 // 20
        raw = os.pread(cq.fd, 4096, 0)
        assert raw == bytes(4096)  # entries below the min offset read as zero: their blocks went back
        assert os.fstat(cq.fd).st_size == cq.count * 20  # the file keeps its length

    def test_a_crash_between_the_log_and_the_queues_is_repaired_at_open(self, store: MessageStore,
                                                                       tmp_path: Path) -> None:
        before = [bodies(store, q) for q in (0, 1)]
        store.epochs.append(1, 0)
        store.epochs.append(2, 2 * SEG + 10)
        store.commitlog.delete_head(3)  # the files went; the queues and epochs were not told
        store.close()
        again = open_store(tmp_path / "store")
        try:
            assert again.min_offset == 3 * SEG
            for q in (0, 1):
                cq = again.queues.queue(TOPIC, q)
                assert cq is not None and bodies(again, q) == before[q][cq.min_offset:]
            assert [e.epoch for e in again.epochs.entries()] == [2]
        finally:
            again.close()

    def test_nothing_above_confirm_offset_goes(self, tmp_path: Path) -> None:
        s = open_store(tmp_path / "s")
        try:
            fill(s, 120)
            s._confirm_offset = SEG + 100  # as if a SyncStateSet member had acknowledged no more
            age(s, 100)
            asyncio.run(service(s, Disk(used=0.99)).run_once())
            assert s.min_offset == SEG  # forced, yet only the segment wholly below confirmOffset went
        finally:
            s.close()

    def test_what_a_connected_slave_still_needs_stays(self, store: MessageStore) -> None:
        age(store, 100)
        assert asyncio.run(service(store, Disk(), slave_floor=2 * SEG + 1).run_once()) == 2
        assert store.min_offset == 2 * SEG

    def test_young_segments_wait_for_their_time_then_go(self, store: MessageStore) -> None:
        age(store, 70)
        svc = service(store, Disk())
        assert asyncio.run(svc.run_once()) == 0
        svc.clock = FakeClock(NOW + 3 * HOUR_MS)  # now 73 hours old
        assert asyncio.run(svc.run_once()) > 0

    def test_a_full_disk_is_flagged_then_cleared(self, store: MessageStore) -> None:
        disk = Disk(used=0.95)
        svc = service(store, disk, hour=12)
        asyncio.run(svc.run_once())
        assert svc.disk_full and store.min_offset > 0  # forced: young segments went too
        disk.used = 0.6
        asyncio.run(svc.run_once())
        assert not svc.disk_full

    def test_a_run_waits_for_the_io_lock(self, store: MessageStore) -> None:
        age(store, 100)
        svc = service(store, Disk())

        async def scenario() -> int:
            svc.io_lock.acquire()  # a flush is running
            run = asyncio.create_task(svc.run_once())
            for _ in range(5):
                await asyncio.sleep(0)
            assert not run.done() and store.min_offset == 0
            svc.io_lock.release()
            return await run

        assert asyncio.run(scenario()) > 0


def test_a_master_refuses_writes_while_the_disk_is_full(tmp_path: Path) -> None:
    broker = Broker(BrokerConfig(storePathRootDir=str(tmp_path / "store")))
    broker.retention.disk_full = True
    outcome = asyncio.run(broker.put([Message(TOPIC, b"x")]))
    assert outcome.status == "SERVICE_NOT_AVAILABLE"
    assert "diskSpaceWarningLevelRatio (90% used)" in outcome.remark and "retention frees space" in outcome.remark
    assert broker.store.max_offset == 0
