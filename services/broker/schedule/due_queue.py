"""What of one schedule queue is due, pure: time is passed in, nothing is read or written here.

A schedule queue (a level of SCHEDULE_TOPIC_XXXX, or the timer queue) is read in queue order. Its
delivery progress is one number, the **watermark**: every entry below it has been delivered (or skipped).
That number is what is kept on disk and copied to the slaves (delay_offsets.py), as RocketMQ keeps one
offset per level in ``delayOffset.json``.

Entries read past the watermark wait in ``pending`` with their due time until delivered. For a level,
due times rise with the queue offset, so entries are delivered in order and the watermark follows each
delivery. For the timer queue, due times come in any order: a later entry may be delivered before an earlier
one, and the watermark stays at the earliest entry not yet delivered. So after a restart or a failover,
everything from the watermark is read again and what had been delivered above it is delivered again: at
least once, never lost. RocketMQ's timer wheel keeps its own progress (a timer log and a checkpoint) and
can also deliver twice around a failover.

At most ``window`` entries are held past the watermark: an entry further on waits until the ones before
it are delivered. For a level that costs nothing (the entry at the watermark is due first); in the timer
queue, a message due far ahead holds back the ones ``window`` entries behind it, which is where this
differs from RocketMQ's wheel (docs/compatibility.md).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

__all__ = ["DEFAULT_WINDOW", "DueQueue"]

DEFAULT_WINDOW = 100_000


@dataclass
class DueQueue:
    """One schedule queue's progress: the watermark, how far it has been read, and what is waiting."""

    watermark: int
    window: int = DEFAULT_WINDOW
    scanned: int = -1
    pending: dict[int, int] = field(default_factory=dict)  # queue offset -> due ms
    _heap: list[tuple[int, int]] = field(default_factory=list)  # (due, offset): ``pending`` by due time

    def __post_init__(self) -> None:
        if self.scanned < self.watermark:
            self.scanned = self.watermark

    def room(self) -> int:
        """How many more entries may be read now."""
        return max(0, self.window - (self.scanned - self.watermark))

    def read(self, offset: int, due_ms: int | None) -> None:
        """The entry at ``offset`` was read (the next to read, or one past it when the queue's oldest entries
        are gone): due at ``due_ms``, or None for one that cannot be delivered (skipped as delivered)."""
        if offset < self.scanned:
            raise ValueError(f"entry {offset} read again (next to read is {self.scanned})")
        self.scanned = offset + 1
        if due_ms is None:
            self._advance()
            return
        self.pending[offset] = due_ms
        heapq.heappush(self._heap, (due_ms, offset))

    def skip_to(self, offset: int) -> None:
        """The queue's entries below ``offset`` are gone (retention deleted them): nothing there to deliver."""
        if offset <= self.watermark:
            return
        self.scanned = max(self.scanned, offset)
        self.pending = {o: d for o, d in self.pending.items() if o >= offset}
        self._heap = [(d, o) for o, d in self.pending.items()]
        heapq.heapify(self._heap)
        self.watermark = offset
        self._advance()

    def due(self, now_ms: int, limit: int) -> list[int]:
        """Up to ``limit`` offsets due at ``now_ms``, earliest due first."""
        self._prune()
        if not self._heap or self._heap[0][0] > now_ms:
            return []
        return [o for d, o in heapq.nsmallest(limit, self._heap) if d <= now_ms and o in self.pending]

    def delivered(self, offsets: list[int]) -> bool:
        """``offsets`` are stored in their real topics; True if the watermark moved."""
        for offset in offsets:
            self.pending.pop(offset, None)
        return self._advance()

    def wake_at(self) -> int | None:
        """When the earliest waiting entry is due (None: nothing waits)."""
        self._prune()
        return self._heap[0][0] if self._heap else None

    def _prune(self) -> None:
        """Drop delivered entries from the top of the heap (they leave ``pending`` at once, the heap lazily)."""
        while self._heap and self._heap[0][1] not in self.pending:
            heapq.heappop(self._heap)

    def _advance(self) -> bool:
        """Move the watermark over every entry read and no longer waiting."""
        before = self.watermark
        while self.watermark < self.scanned and self.watermark not in self.pending:
            self.watermark += 1
        return self.watermark != before
