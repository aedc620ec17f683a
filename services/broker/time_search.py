"""The queue offset of the messages stored at a given time (SEARCH_OFFSET_BY_TIMESTAMP, 29), pure: a binary
search over a queue's store times, read through a function, with RocketMQ's boundary rules (its
ConsumeQueue.getOffsetInQueueByTime, the result kept within the queue's bounds as its ConsumeQueueStore
does).

For a queue holding offsets ``[low, high)`` whose store times do not decrease, and a time ``t``:

===============================  ==============================  ==============================
case                             LOWER (the default)             UPPER
===============================  ==============================  ==============================
empty queue                      ``low``                         ``low``
every message stored before t    ``high`` (the next offset)      ``high - 1`` (the last)
every message stored after t     ``low``                         ``low``
messages stored exactly at t     the first of them               the last of them
none at t, some before and after the first stored after t        the last stored before t
===============================  ==============================  ==============================

So LOWER is where a consumer starts to read what was stored from ``t`` on, and UPPER the last message
stored up to ``t``. A store time that cannot be read (the record gone meanwhile) gives ``low``, as
RocketMQ answers 0 (then raised to the queue's min offset).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["offset_by_time"]


def offset_by_time(low: int, high: int, store_time: Callable[[int], int | None], timestamp: int,
                   upper: bool = False) -> int:
    """The offset the table above gives; ``store_time(offset)`` reads one message's store time."""
    if high <= low:
        return low
    last, first = store_time(high - 1), store_time(low)
    if last is None or first is None:
        return low
    if last < timestamp:
        return high - 1 if upper else high
    if first > timestamp:
        return low
    return _search(low, high, store_time, timestamp, upper)


def _search(low: int, high: int, store_time: Callable[[int], int | None], timestamp: int, upper: bool) -> int:
    """LOWER: the first offset stored at or after ``timestamp``; UPPER: the last stored at or before it."""
    begin, end = low, high  # the answer's offset (UPPER: one past it) is in [begin, end]
    while begin < end:
        middle = (begin + end) // 2
        found = store_time(middle)
        if found is None:
            return low
        if found < timestamp or (upper and found == timestamp):
            begin = middle + 1
        else:
            end = middle
    return begin - 1 if upper else begin
