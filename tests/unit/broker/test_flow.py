"""Bytes per second on a replication link (services/broker/ha/flow.py): the last whole second's count."""

from __future__ import annotations

from services.broker.ha.flow import FlowMonitor


def test_the_rate_is_the_last_whole_second() -> None:
    flow = FlowMonitor()
    assert flow.per_second(500) == 0
    flow.add(100, 1_000)
    flow.add(50, 1_999)
    assert flow.per_second(1_500) == 0  # the second being counted is not over
    assert flow.per_second(2_000) == 150
    flow.add(10, 2_100)
    assert flow.per_second(2_500) == 150
    assert flow.per_second(3_000) == 10
    assert flow.per_second(4_000) == 0  # nothing moved in the second before


def test_an_idle_gap_forgets_what_came_before() -> None:
    flow = FlowMonitor()
    flow.add(100, 1_000)
    flow.add(7, 5_000)
    assert flow.per_second(5_200) == 0 and flow.per_second(6_000) == 7
