"""Retention: which old commitlog segments to delete, and when (RocketMQ's CleanCommitLogService rules).

Theory of operation
-------------------
Every ``cleanResourceInterval`` ms the broker looks at its disk and its segments and asks :func:`decide`
how many of the oldest segments to delete. A run deletes only when one of these holds, as RocketMQ's:

- it is one of the ``deleteWhen`` hours of the day (local time, ``"04"`` or ``"03;04"``);
- the disk holding the store is more than ``diskMaxUsedSpaceRatio`` percent used;
- the disk is more than ``diskSpaceCleanForciblyRatio`` percent used (at most 85): then, with
  ``cleanFileForciblyEnable``, segments go even if they are younger than ``fileReservedTime``.

It then deletes the oldest segments, up to ``deleteFileBatchMax`` a run, while each is expired (its file
was last written more than ``fileReservedTime`` hours ago) or the deletion is forced, and stops at the
first one that is not: nothing is ever deleted from the middle of the log. The segment being written is
never deleted. Above RocketMQ's rules, and never relaxed, a segment is kept while any byte of it is at or
above the *floor*: the lowest of confirmOffset, the offset up to which the consume queues index the log,
the flushed offset, and what every connected slave has acknowledged (a slave still catching up keeps the
data it needs). Past ``diskSpaceWarningLevelRatio`` (at most 90) the disk counts as full and the master
refuses writes until a run brings it back under, as RocketMQ's does.

This module decides; ``MessageStore.delete_oldest`` deletes (the commitlog files, then the consume-queue
entries and epoch entries that pointed into them), and :class:`RetentionService` runs the loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from services.common.clock import Clock

log = logging.getLogger(__name__)

HOUR_MS = 3_600_000


class RetentionSettings(Protocol):
    """The broker properties retention reads (``BrokerConfig`` has them, with RocketMQ's defaults)."""

    @property
    def fileReservedTime(self) -> int: ...

    @property
    def deleteWhen(self) -> str: ...

    @property
    def diskMaxUsedSpaceRatio(self) -> int: ...

    @property
    def diskSpaceWarningLevelRatio(self) -> int: ...

    @property
    def diskSpaceCleanForciblyRatio(self) -> int: ...

    @property
    def cleanFileForciblyEnable(self) -> bool: ...

    @property
    def deleteFileBatchMax(self) -> int: ...

    @property
    def cleanResourceInterval(self) -> int: ...


def parse_delete_when(text: str) -> frozenset[int]:
    """``"04"`` or ``"03;04"``: hours of the day (0-23). ValueError names what is wrong."""
    hours = set()
    for part in text.split(";"):
        part = part.strip()
        if not part.isdigit() or not 0 <= int(part) <= 23:
            raise ValueError(f"deleteWhen must be hours of the day (0-23) separated by ';', like 04 or 03;04; "
                             f"got {text!r}")
        hours.add(int(part))
    return frozenset(hours)


@dataclass(frozen=True)
class Policy:
    reserved_ms: int = 72 * HOUR_MS
    delete_hours: frozenset[int] = frozenset({4})
    max_used: float = 0.75
    clean_forcibly: float = 0.85
    warning: float = 0.90
    forcibly_enabled: bool = True
    batch_max: int = 10

    @classmethod
    def of(cls, s: RetentionSettings) -> Policy:
        """RocketMQ's reading of the properties, clamps included (diskMaxUsedSpaceRatio to 10-95, the
        forced-clean ratio to 30-85, the warning ratio to 35-90)."""
        return cls(reserved_ms=s.fileReservedTime * HOUR_MS, delete_hours=parse_delete_when(s.deleteWhen),
                   max_used=min(95, max(10, s.diskMaxUsedSpaceRatio)) / 100,
                   clean_forcibly=min(85, max(30, s.diskSpaceCleanForciblyRatio)) / 100,
                   warning=min(90, max(35, s.diskSpaceWarningLevelRatio)) / 100,
                   forcibly_enabled=s.cleanFileForciblyEnable, batch_max=s.deleteFileBatchMax)


@dataclass(frozen=True)
class SegmentInfo:
    start: int
    end: int  # the offset just past its last byte
    modified_ms: int  # when its file was last written


@dataclass(frozen=True)
class Decision:
    delete: int  # how many of the oldest segments to delete
    disk_full: bool  # refuse writes until a later run says otherwise
    forced: bool
    why: str  # for the log: what triggered the run, or what kept a segment


def decide(segments: list[SegmentInfo], now_ms: int, hour: int, used: float, floor: int,
           policy: Policy) -> Decision:
    """How many of the oldest ``segments`` (oldest first) to delete now (module docstring). ``used``: the
    fraction of the disk in use; ``floor``: no segment holding a byte at or above it is deleted."""
    disk_full = used > policy.warning
    forced = policy.forcibly_enabled and used > policy.clean_forcibly
    triggers = [t for t, on in ((f"it is {hour:02d}h, a deleteWhen hour", hour in policy.delete_hours),
                                (f"the disk is {used:.0%} used", used > policy.max_used)) if on]
    if not triggers:
        return Decision(0, disk_full, forced, "")
    count, why = 0, " and ".join(triggers)
    for seg in segments[:-1]:  # never the segment being written
        if seg.end > floor:
            why += f"; segment {seg.start} is still needed (it ends at {seg.end}, above {floor})"
            break
        if not forced and now_ms < seg.modified_ms + policy.reserved_ms:
            break
        count += 1
        if count >= policy.batch_max:
            break
    return Decision(count, disk_full, forced, why)


def disk_used(path: Path) -> float:
    """The fraction of the filesystem holding ``path`` that is in use (what ``df`` shows); 0 if unknown."""
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return 0.0
    return usage.used / usage.total if usage.total else 0.0


class Store(Protocol):
    """What the retention loop needs of the message store (``MessageStore`` is one)."""

    root: Path

    def segment_infos(self) -> list[SegmentInfo]: ...

    def retention_floor(self) -> int: ...

    def delete_oldest(self, count: int) -> int: ...


class RetentionService:
    """Runs :func:`decide` every ``cleanResourceInterval`` ms and deletes what it says, on the event loop
    (so no read of a segment runs while it goes) and under the store's I/O lock (so no flush or replica
    write does). ``slave_floor``: the lowest offset a connected slave still needs (None: none connected)."""

    def __init__(self, settings: RetentionSettings, store: Store, clock: Clock, io_lock: threading.Lock,
                 slave_floor: Callable[[], int | None], paths: list[Path] | None = None,
                 used: Callable[[Path], float] = disk_used,
                 hour_of: Callable[[int], int] = lambda ms: time.localtime(ms / 1000).tm_hour) -> None:
        self.policy = Policy.of(settings)
        self.interval_s = settings.cleanResourceInterval / 1000
        self.store, self.clock, self.io_lock = store, clock, io_lock
        self.slave_floor = slave_floor
        self.paths = paths or [store.root]
        self.disk_usage, self.hour_of = used, hour_of
        self.used = 0.0  # at the last run
        self.disk_full = False
        self.deleted_segments = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="retention")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _run(self) -> None:
        while True:
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("retention run failed; retrying in %.0f s", self.interval_s)
            await asyncio.sleep(self.interval_s)

    async def run_once(self) -> int:
        """One run: returns how many segments it deleted."""
        used = self.used = max(self.disk_usage(p) for p in self.paths)
        # Poll rather than wait in a thread: a cancelled wait would leave a thread holding the lock.
        while not self.io_lock.acquire(blocking=False):  # noqa: ASYNC110 (never block the loop on an fsync)
            await asyncio.sleep(0.005)
        try:
            return self._run_locked(used)
        finally:
            self.io_lock.release()

    def _run_locked(self, used: float) -> int:
        now = self.clock.now_ms()
        floor = self.store.retention_floor()
        slaves = self.slave_floor()
        if slaves is not None:
            floor = min(floor, slaves)
        decision = decide(self.store.segment_infos(), now, self.hour_of(now), used, floor, self.policy)
        if decision.disk_full != self.disk_full:
            self.disk_full = decision.disk_full
            if decision.disk_full:
                log.error("the disk holding %s is %.0f%% used (over diskSpaceWarningLevelRatio): refusing writes "
                          "until retention frees space", self.store.root, used * 100)
            else:
                log.warning("disk space is back under diskSpaceWarningLevelRatio (%.0f%% used): accepting writes",
                            used * 100)
        if decision.delete:
            new_min = self.store.delete_oldest(decision.delete)
            self.deleted_segments += decision.delete
            log.info("retention deleted %d commitlog segment(s)%s (%s); the log now starts at %d",
                     decision.delete, " forcibly" if decision.forced else "", decision.why, new_min)
        elif decision.why and used > self.policy.max_used:
            log.warning("the disk is %.0f%% used but no commitlog segment can be deleted: %s", used * 100,
                        decision.why)
        return decision.delete


def file_modified_ms(fd: int) -> int:
    return os.fstat(fd).st_mtime_ns // 1_000_000
