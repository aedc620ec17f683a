"""Which half messages are resolved and which need a check-back, pure: time is passed in, nothing is read or
written here.

The half queue is read in order from its **watermark**: every entry below it is resolved (an op record names
it or its transaction), checked (a copy stored further on carries the check) or discarded. The op queue has a
watermark too: every op record below it only resolves entries the half watermark has passed. Those two numbers
are the check progress kept on disk and copied to the slaves (progress.py), as RocketMQ keeps the consume
offsets of its half and op queues.

Op records read past the op watermark wait in ``OpIndex`` until the half watermark passes every half entry that
existed when they were read (so every copy of their transaction, the checker never copying a resolved one). At
most ``window`` of them are held: with more to read, the walk moves only over resolved entries and checks
nothing, so that no message is checked for want of reading the op record that resolves it.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from services.broker.transaction.half import REAL_TOPIC, CheckRules

__all__ = ["DEFAULT_WINDOW", "HalfEntry", "OpIndex", "Step", "Verdict", "plan", "verdict"]

DEFAULT_WINDOW = 100_000
_STORED_HERE = -1  # an op record this master stored, not read back yet


class Verdict(enum.Enum):
    RESOLVED = "resolved"  # committed or rolled back: nothing to do
    WAIT = "wait"  # too young to check (or op records still unread): the walk stops here until a later turn
    CHECK = "check"  # store a copy with the count one higher and ask the producer group
    DISCARD = "discard"  # checked transactionCheckMax times, or older than the log kept: given up
    SKIP = "skip"  # unreadable, or names no real topic: nothing to ask about


@dataclass(frozen=True)
class HalfEntry:
    """What the walk reads of one half queue entry (properties None: the entry cannot be read)."""

    offset: int
    transaction_id: str
    properties: dict[str, str] | None
    born_ms: int


@dataclass(frozen=True)
class Step:
    offset: int
    verdict: Verdict
    check_times: int = 0


@dataclass
class OpIndex:
    """The op records read past the op watermark, and what they resolve."""

    watermark: int
    window: int = DEFAULT_WINDOW
    scanned: int = -1
    _by_id: dict[str, int] = field(default_factory=dict)  # transaction id -> op offset
    _by_offset: dict[int, int] = field(default_factory=dict)  # half offset -> op offset
    _pending: deque[tuple[int, int, str, tuple[int, ...]]] = field(default_factory=deque)

    def __post_init__(self) -> None:
        self.scanned = max(self.scanned, self.watermark)

    def room(self) -> int:
        return max(0, self.window - len(self._pending))

    def read(self, op_offset: int, tid: str, half_offsets: Iterable[int], half_end: int) -> None:
        """The op record at ``op_offset`` (the next to read, or past it when older ones are gone) resolves
        ``half_offsets`` (and transaction ``tid``, "" if it names none); ``half_end`` is where the half queue
        ended when it was read."""
        if op_offset < self.scanned:
            raise ValueError(f"op record {op_offset} read again (next to read is {self.scanned})")
        if not self._pending:
            self.watermark = op_offset
        self.scanned = op_offset + 1
        offsets = tuple(half_offsets)
        until = max([half_end, *(o + 1 for o in offsets)])
        self._pending.append((op_offset, until, tid, offsets))
        if tid:
            self._by_id[tid] = op_offset
        for offset in offsets:
            self._by_offset[offset] = op_offset

    def skip_to(self, op_offset: int) -> None:
        """The op records below ``op_offset`` are gone (retention deleted them)."""
        if op_offset > self.scanned:
            self.scanned = op_offset
            if not self._pending:
                self.watermark = op_offset

    def note(self, tid: str) -> None:
        """This master stored an op record for ``tid``: known resolved before it is read back (best effort:
        not past the window)."""
        if tid and tid not in self._by_id and len(self._by_id) < 2 * self.window:
            self._by_id[tid] = _STORED_HERE

    def resolved(self, offset: int, tid: str) -> bool:
        return offset in self._by_offset or (bool(tid) and tid in self._by_id)

    def advance(self, half_watermark: int) -> bool:
        """Forget the op records whose transactions the half watermark has passed; True if the op watermark
        moved."""
        before = self.watermark
        while self._pending and self._pending[0][1] <= half_watermark:
            op_offset, _, tid, offsets = self._pending.popleft()
            if tid and self._by_id.get(tid) == op_offset:
                del self._by_id[tid]
            for offset in offsets:
                if self._by_offset.get(offset) == op_offset:
                    del self._by_offset[offset]
        self.watermark = self._pending[0][0] if self._pending else self.scanned
        return self.watermark != before


def verdict(rules: CheckRules, entry: HalfEntry, now_ms: int, index: OpIndex, caught_up: bool) -> Step:
    """What to do with one half entry at ``now_ms``; ``caught_up``: every op record stored has been read."""
    if index.resolved(entry.offset, entry.transaction_id):
        return Step(entry.offset, Verdict.RESOLVED)
    props = entry.properties
    if props is None or not props.get(REAL_TOPIC):
        return Step(entry.offset, Verdict.SKIP)
    age = now_ms - entry.born_ms
    times = rules.next_check(props)
    if times is None or age > rules.reserved_ms:
        return Step(entry.offset, Verdict.DISCARD)
    if 0 <= age <= rules.immunity_ms(props) or not caught_up:
        return Step(entry.offset, Verdict.WAIT)
    return Step(entry.offset, Verdict.CHECK, times)


def plan(rules: CheckRules, entries: Iterable[HalfEntry], now_ms: int, index: OpIndex, caught_up: bool,
         max_checks: int) -> list[Step]:
    """The steps of one walk over ``entries`` (contiguous from the half watermark), up to the first that must
    wait, or ``max_checks`` checks and discards: the half watermark may move past every step returned."""
    steps: list[Step] = []
    writes = 0
    for entry in entries:
        step = verdict(rules, entry, now_ms, index, caught_up)
        if step.verdict is Verdict.WAIT:
            break
        if step.verdict in (Verdict.CHECK, Verdict.DISCARD):
            if writes == max_checks:
                break
            writes += 1
        steps.append(step)
    return steps
