"""SEARCH_OFFSET_BY_TIMESTAMP's search (services/broker/time_search.py): RocketMQ's boundary rules over a
queue's store times, checked case by case and against a plain scan for every time and boundary."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.broker.time_search import offset_by_time

#: Offsets 10..17 stored at these times (a queue whose first 10 messages are gone).
TIMES = {10: 100, 11: 100, 12: 200, 13: 300, 14: 300, 15: 300, 16: 400, 17: 500}


def search(timestamp: int, upper: bool = False, times: dict[int, int] = TIMES) -> int:
    low, high = (min(times), max(times) + 1) if times else (0, 0)
    return offset_by_time(low, high, times.get, timestamp, upper)


@pytest.mark.parametrize(("timestamp", "lower", "upper"), [
    (50, 10, 10),     # before every message: the first, both ways
    (100, 10, 11),    # exactly at the first two: the first of them, the last of them
    (250, 13, 12),    # between 200 and 300: the first after, the last before
    (300, 13, 15),
    (500, 17, 17),
    (501, 18, 17),    # after every message: the next offset, or the last
])
def test_rocketmqs_boundaries(timestamp: int, lower: int, upper: int) -> None:
    assert (search(timestamp), search(timestamp, upper=True)) == (lower, upper)


def test_an_empty_queue_and_an_unreadable_time_give_the_min_offset() -> None:
    assert search(100, times={}) == 0
    assert offset_by_time(5, 9, lambda offset: None if offset == 7 else 100, 100) == 5


@given(st.lists(st.integers(0, 20), min_size=1, max_size=40), st.integers(-1, 22), st.booleans())
def test_the_search_agrees_with_a_scan(gaps: list[int], timestamp: int, upper: bool) -> None:
    times, now = {}, 0
    for offset, gap in enumerate(gaps):
        now += gap
        times[offset] = now
    at_or_after = [o for o, t in times.items() if t >= timestamp]
    at_or_before = [o for o, t in times.items() if t <= timestamp]
    if upper:
        expected = max(at_or_before) if at_or_before else 0
    else:
        expected = min(at_or_after) if at_or_after else len(times)
    assert search(timestamp, upper, times) == expected
