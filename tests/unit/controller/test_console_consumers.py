"""The console's consumer-groups view without a network: a group's lag, its rates from two samples, the bounded
history, the view's shape and bounds, and the questions to a master (RocketMQ's 28, 201 and 208) answered by a
fake broker, well and in every bad way."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from services.common.errors import UnreachableError
from services.common.remoting_client import RemotingTimeout
from services.controller import console, console_brokers
from services.controller.console_brokers import BrokerAsker, ConsumerWatch, Master, parse_tps
from services.controller.console_consumers import (
    BAD_ANSWER,
    MAX_GROUPS,
    MAX_POINTS,
    MAX_QUEUE_ROWS,
    NOT_AVAILABLE,
    OK,
    BrokerAnswer,
    ConsumerGroups,
    GroupAnswer,
    History,
    Point,
    QueueLag,
    Totals,
    is_system_group,
    rate,
    total_lag,
)
from services.remoting import admin_bodies as ab
from services.remoting import admin_headers as ah
from services.remoting import broker_bodies as bb
from services.remoting import broker_headers as bh
from services.remoting.bodies import KVTable
from services.remoting.broker_bodies import MessageQueue
from services.remoting.command import RemotingCommand, make_response
from services.remoting.subscription_bodies import SubscriptionGroupConfig, SubscriptionGroupWrapper
from tests.unit.controller.test_console import manager


def q(queue_id: int, broker: int, consumer: int, topic: str = "T", stamp: int = 0) -> QueueLag:
    return QueueLag(topic, "broker-a", queue_id, broker, consumer, stamp)


# ---------------------------------------------------------------------------------------------- lag and rates
def test_lag_is_the_sum_over_queues_of_broker_less_consumer_offset_never_negative() -> None:
    assert q(0, 10, 4).lag == 6 and q(1, 3, 7).lag == 0  # a consumer offset ahead (a reset) is no lag
    assert total_lag([q(0, 10, 4), q(1, 3, 7), q(2, 5, 5), q(3, 9, 0)]) == 15
    assert total_lag([]) == 0


def test_a_rate_is_the_offsets_moved_between_two_samples_of_the_same_queues_per_second() -> None:
    before = Totals.of(1_000, [q(0, 100, 40), q(1, 50, 50)])
    after = Totals.of(3_000, [q(0, 130, 60), q(1, 60, 52)])
    assert rate(before, after, "consumer_offset") == pytest.approx(11.0)  # 22 messages in 2 s
    assert rate(before, after, "broker_offset") == pytest.approx(20.0)  # 40 in 2 s
    assert rate(None, after, "consumer_offset") is None  # the first sample
    other_queues = Totals.of(3_000, [q(0, 130, 60), q(1, 60, 52), q(2, 1, 1)])
    assert rate(before, other_queues, "consumer_offset") is None  # a sum over other queues: no rate
    assert rate(before, Totals.of(1_000, [q(0, 130, 60), q(1, 60, 52)]), "consumer_offset") is None  # no time
    reset = Totals.of(2_000, [q(0, 100, 0), q(1, 50, 0)])
    assert rate(before, reset, "consumer_offset") == 0.0  # moved back: no progress, never negative
    late = Totals.of(1_000 + 61_000, [q(0, 130, 60), q(1, 60, 52)])
    assert rate(before, late, "consumer_offset") is None  # the feed paused: no average over the pause


def test_runtime_rates_are_read_from_their_first_figure_and_checked() -> None:
    assert parse_tps("12.5 11.0 9.8") == 12.5 and parse_tps("1.0E7") == 1e7 and parse_tps("0.0") == 0.0
    for bad in (None, "", " ", "NaN 1 2", "Infinity", "-1.0", "1e13", "abc", "1" * 5000):
        assert parse_tps(bad) is None, bad


def test_rocketmqs_own_groups_are_left_out() -> None:
    assert is_system_group("TOOLS_CONSUMER") and is_system_group("CID_RMQ_SYS_TRANS")
    assert is_system_group("CID_ONS-HTTP-PROXY") and not is_system_group("orders-consumer")


# ---------------------------------------------------------------------------------------------- history
def test_the_history_is_a_bounded_ring_of_the_last_minutes_for_a_bounded_number_of_groups() -> None:
    history = History(max_groups=3, max_points=5, window_ms=10_000)
    for t in range(8):
        history.add("g", Point(t * 1000, t, None, None))
    assert [p.lag for p in history.points("g")] == [3, 4, 5, 6, 7]  # the ring keeps its newest points
    history.keep(["g"], now_ms=15_500)
    assert [p.at_ms for p in history.points("g")] == [6000, 7000]  # and only the window's
    for name in ("a", "b", "c"):
        history.add(name, Point(0, 0, None, None))
    assert len(history) == 3 and history.points("c") == ()  # full: a new group waits for room
    history.keep(["c", "x", "y", "z"], now_ms=0)  # only the view's groups, at most max_groups of them
    assert len(history) == 0
    history.add("c", Point(0, 1, 2.0, 3.0))
    assert history.points("c") == (Point(0, 1, 2.0, 3.0),)
    assert Point(1_000, 5, 2.0, None).to_json(now_ms=4_400) == [-3, 5, 2.0, None]  # seconds before the view's time


# ---------------------------------------------------------------------------------------------- the view
def answer(name: str, *groups: GroupAnswer, **kwargs: Any) -> BrokerAnswer:
    return BrokerAnswer("DefaultCluster", name, f"127.0.0.1:{10911 if name == 'broker-a' else 10921}", groups=groups,
                        groups_listed=len(groups), **kwargs)


def stats(group: str, at_ms: int, *queues: QueueLag, tps: float = 0.0) -> GroupAnswer:
    return GroupAnswer(group, at_ms, queues, tps)


def test_a_group_is_summed_over_broker_groups_and_gets_rates_from_the_round_before() -> None:
    groups = ConsumerGroups(3.0, {"maxGroups": MAX_GROUPS})
    b = QueueLag("T", "broker-b", 0, 20, 20, 1_700_000_000_000)
    first = groups.update([answer("broker-a", stats("g1", 1_000, q(0, 10, 4, stamp=1_600_000_000_000)), put_tps=2.5),
                           answer("broker-b", stats("g1", 1_000, b, tps=1.5))], now_ms=1_000)
    row = first.groups[0]
    assert (row.group, row.lag, row.consume_tps, row.brokers) == ("g1", 6, 1.5, ("broker-a", "broker-b"))
    assert row.consume_rate is None and row.send_rate is None  # one sample: no rate yet
    assert row.last_consumed_ms == 1_700_000_000_000 and row.queues_total == 2 and row.queues[0].lag == 6
    second = groups.update([answer("broker-a", stats("g1", 4_000, q(0, 16, 10))),
                            answer("broker-b", stats("g1", 4_000, QueueLag("T", "broker-b", 0, 23, 23)))], now_ms=4_000)
    row = second.groups[0]
    assert row.lag == 6 and row.consume_rate == pytest.approx(3.0) and row.send_rate == pytest.approx(3.0)
    assert row.history == (Point(1_000, 6, None, None), Point(4_000, 6, 3.0, 3.0))
    # A broker group that lists the group but did not give its stats is named; the rate is over the others.
    third = groups.update([answer("broker-a", stats("g1", 7_000, q(0, 16, 13))),
                           answer("broker-b", failed_groups=("g1",), remark="1 of 1 groups' stats not answered")],
                          now_ms=7_000)
    row = third.groups[0]
    assert row.missing == ("broker-b",) and row.lag == 3 and row.consume_rate == pytest.approx(1.0)
    # A group whose stats no broker group gave is still shown, its lag unknown (no point in its history).
    fourth = groups.update([answer("broker-a", failed_groups=("g1",))], now_ms=10_000)
    row = fourth.groups[0]
    assert (row.lag, row.brokers, row.missing, row.queues) == (None, (), ("broker-a",), ())
    assert fourth.to_json()["groups"][0]["lag"] is None and len(row.history) == 3


def test_the_snapshot_part_has_its_documented_shape() -> None:
    view = ConsumerGroups(3.0, {"maxGroups": MAX_GROUPS}).update(
        [answer("broker-a", stats("g1", 1_000, q(0, 10, 4)), put_tps=1.0, get_tps=0.5),
         BrokerAnswer("DefaultCluster", "broker-c", None, NOT_AVAILABLE, "no master")], now_ms=1_000)
    data = json.loads(json.dumps(view.to_json()))  # plain JSON, as the page gets it
    assert set(data) == {"at", "intervalS", "windowMs", "brokers", "groups", "groupsTotal", "limits"}
    assert data["at"] == 1_000 and data["intervalS"] == 3.0 and data["groupsTotal"] == 1
    assert data["brokers"] == [
        {"clusterName": "DefaultCluster", "brokerName": "broker-a", "address": "127.0.0.1:10911", "status": OK,
         "remark": "", "groupsListed": 1, "groupsAsked": 1, "putTps": 1.0, "getTps": 0.5},
        {"clusterName": "DefaultCluster", "brokerName": "broker-c", "address": None, "status": NOT_AVAILABLE,
         "remark": "no master", "groupsListed": 0, "groupsAsked": 0, "putTps": None, "getTps": None}]
    assert data["groups"] == [{
        "group": "g1", "lag": 6, "consumeTps": 0.0, "consumeRate": None, "sendRate": None, "lastConsumed": None,
        "brokers": ["broker-a"], "missing": [], "queuesTotal": 1,
        "queues": [{"topic": "T", "brokerName": "broker-a", "queueId": 0, "brokerOffset": 10, "consumerOffset": 4,
                    "lag": 6, "lastTimestamp": 0}],
        "history": [[0, 6, None, None]]}]


def test_the_view_is_bounded_the_groups_furthest_behind_and_their_queues_furthest_behind() -> None:
    groups = ConsumerGroups(3.0)
    many = [stats(f"g{i:03}", 1_000, *(q(n, i + n, 0) for n in range(20))) for i in range(MAX_GROUPS + 50)]
    view = groups.update([answer("broker-a", *many)], now_ms=1_000)
    assert view.groups_total == MAX_GROUPS + 50 and len(view.groups) == MAX_GROUPS
    assert {g.group for g in view.groups} == {f"g{i:03}" for i in range(50, MAX_GROUPS + 50)}  # most lag kept
    assert [g.group for g in view.groups] == sorted(g.group for g in view.groups)  # shown by name
    assert all(len(g.queues) == MAX_QUEUE_ROWS and g.queues_total == 20 for g in view.groups)
    assert view.groups[0].queues[0].queue_id == 19  # the queue furthest behind first
    assert len(groups.history) == MAX_GROUPS
    for t in range(2, 100):
        view = groups.update([answer("broker-a", *many)], now_ms=t * 3_000)
    assert len(view.groups[0].history) == 99
    assert len(json.dumps(view.to_json(), separators=(",", ":"))) < 1_500_000  # the worst case, every 3 s


def test_a_groups_history_is_at_most_a_ring_of_max_points() -> None:
    groups = ConsumerGroups(1.0)
    for t in range(1, 400):  # more rounds than the ring holds, all within the window
        view = groups.update([answer("broker-a", stats("g", t * 500, q(0, t, 0)))], now_ms=t * 500)
    assert len(view.groups[0].history) == MAX_POINTS and view.groups[0].history[-1].lag == 399


# ---------------------------------------------------------------------------------------------- asking a master
class FakeBroker:
    """Answers the console's requests as a broker would, or as told; counts what it was asked."""

    def __init__(self, groups: tuple[str, ...] = ("orders", "TOOLS_CONSUMER", "audit"),
                 committing: tuple[str, ...] = ()) -> None:
        self.asked: list[int] = []
        self.committing = committing
        self.runtime: Callable[[RemotingCommand], RemotingCommand] = lambda r: make_response(
            r, 0, body=KVTable({"putTps": "4.0 3.0 2.0", "getTransferredTps": "2.5 1.0 0.0"}).encode())
        self.groups = groups
        self.stats: dict[str, Callable[[RemotingCommand], RemotingCommand]] = {}

    async def call(self, address: str, request: RemotingCommand) -> RemotingCommand:
        self.asked.append(request.code)
        if request.code == ah.GET_BROKER_RUNTIME_INFO:
            return self.runtime(request)
        if request.code == ah.GET_ALL_SUBSCRIPTIONGROUP_CONFIG:
            table = {g: SubscriptionGroupConfig(g) for g in self.groups}
            return make_response(request, 0, body=SubscriptionGroupWrapper(table).encode())
        if request.code == bh.GET_ALL_CONSUMER_OFFSET:
            offsets = {f"T@{g}": {0: 1} for g in self.committing}
            return make_response(request, 0, body=bb.ConsumerOffsetSerializeWrapper(offsets).encode())
        group = request.ext_fields["consumerGroup"]
        if group in self.stats:
            return self.stats[group](request)
        table = {MessageQueue("T", "broker-a", i): ab.OffsetWrapper(10 + i, 4, 4, 1_700_000_000_000) for i in range(2)}
        return make_response(request, 0, body=ab.ConsumeStats(table, 1.25).encode())


def ask(broker: FakeBroker | Callable[[str, RemotingCommand], Awaitable[RemotingCommand]],
        asker: BrokerAsker | None = None) -> BrokerAnswer:
    call = broker.call if isinstance(broker, FakeBroker) else broker
    found: BrokerAnswer = asyncio.run((asker or BrokerAsker(call, clock=lambda: 5.0)).ask(
        Master("DefaultCluster", "broker-a", "127.0.0.1:10911")))
    return found


def test_a_master_is_asked_its_runtime_info_its_groups_and_each_groups_consume_stats() -> None:
    broker = FakeBroker()
    found = ask(broker)
    assert (found.status, found.remark, found.put_tps, found.get_tps) == (OK, "", 4.0, 2.5)
    assert found.groups_listed == 2 and [g.group for g in found.groups] == ["audit", "orders"]  # TOOLS_CONSUMER not
    assert broker.asked == [ah.GET_BROKER_RUNTIME_INFO, ah.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, bh.GET_ALL_CONSUMER_OFFSET,
                            ah.GET_CONSUME_STATS, ah.GET_CONSUME_STATS]
    orders = found.groups[1]
    assert orders.at_ms == 5_000 and orders.consume_tps == 1.25
    assert [(x.queue_id, x.broker_offset, x.consumer_offset, x.lag) for x in orders.queues] == [(0, 10, 4, 6),
                                                                                                (1, 11, 4, 7)]


def test_a_group_that_only_commits_offsets_is_listed_too() -> None:
    """A consumer group with no settings (201) of its own shows once it has committed an offset (43)."""
    found = ask(FakeBroker(("orders",), committing=("billing", "orders")))
    assert found.groups_listed == 2 and [g.group for g in found.groups] == ["billing", "orders"]


def test_the_group_list_is_asked_again_only_after_its_interval_and_at_most_n_groups_are_asked() -> None:
    broker = FakeBroker(tuple(f"g{i:03}" for i in range(console_brokers.MAX_GROUPS_PER_BROKER + 20)))
    now = [0.0]
    asker = BrokerAsker(broker.call, clock=lambda: 1.0, monotonic=lambda: now[0])
    first = ask(broker, asker)
    assert first.groups_listed == console_brokers.MAX_GROUPS_PER_BROKER + 20
    assert len(first.groups) == console_brokers.MAX_GROUPS_PER_BROKER and first.groups[0].group == "g000"
    broker.asked.clear()
    now[0] = console_brokers.GROUP_LIST_INTERVAL_S - 0.5
    ask(broker, asker)
    assert ah.GET_ALL_SUBSCRIPTIONGROUP_CONFIG not in broker.asked
    now[0] = console_brokers.GROUP_LIST_INTERVAL_S + 0.5
    ask(broker, asker)
    assert broker.asked.count(ah.GET_ALL_SUBSCRIPTIONGROUP_CONFIG) == 1


def consume_stats_body(text: bytes) -> Callable[[RemotingCommand], RemotingCommand]:
    return lambda r: make_response(r, 0, body=text)


WRONG_STATS = {
    "garbage": consume_stats_body(b"\x00\xff{not json"),
    "refused": lambda r: make_response(r, 206, "not online"),
    "not-a-number-tps": consume_stats_body(b'{"consumeTps":"fast","offsetTable":{}}'),
    "negative-tps": consume_stats_body(b'{"consumeTps":-3.0,"offsetTable":{}}'),
    "huge-tps": consume_stats_body(b'{"consumeTps":1e300,"offsetTable":{}}'),
    "long-topic": lambda r: make_response(r, 0, body=ab.ConsumeStats(
        {MessageQueue("T" * 600, "broker-a", 0): ab.OffsetWrapper(1, 0, 0, 0)}).encode()),
    "offset-beyond-long": consume_stats_body(
        b'{"consumeTps":0.0,"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":'
        + str(2**70).encode() + b'}}}'),
    "too-deep": consume_stats_body(b'{"consumeTps":0.0,"offsetTable":' + b"[" * 200 + b"]" * 200 + b"}"),
}


@pytest.mark.parametrize("how", list(WRONG_STATS))
def test_a_bad_consume_stats_answer_is_that_group_not_answered_and_the_rest_goes_on(how: str) -> None:
    broker = FakeBroker()
    broker.stats["audit"] = WRONG_STATS[how]
    found = ask(broker)
    assert found.status == OK and found.failed_groups == ("audit",) and [g.group for g in found.groups] == ["orders"]
    assert found.remark == "1 of 2 groups' stats not answered"


def test_too_many_queues_in_one_groups_stats_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console_brokers, "MAX_QUEUES_PER_GROUP", 1)
    found = ask(FakeBroker())
    assert found.groups == () and found.failed_groups == ("audit", "orders")


def unreachable(address: str, request: RemotingCommand) -> Awaitable[RemotingCommand]:
    raise UnreachableError(f"{address} is unreachable: Connection refused")


async def silent(address: str, request: RemotingCommand) -> RemotingCommand:
    await asyncio.sleep(3600)
    raise AssertionError("unreachable")


async def timing_out(address: str, request: RemotingCommand) -> RemotingCommand:
    raise RemotingTimeout(f"{address} did not answer request {request.code} within 1.0 s")


def test_a_master_that_does_not_answer_over_remoting_is_not_available(monkeypatch: pytest.MonkeyPatch) -> None:
    found = ask(unreachable)  # e.g. a server that speaks HTTP only, or none at all
    assert found.status == NOT_AVAILABLE and "no answer over RocketMQ's remoting protocol" in found.remark
    assert ask(timing_out).status == NOT_AVAILABLE
    monkeypatch.setattr(console_brokers, "BROKER_DEADLINE_S", 0.05)
    found = ask(silent)
    assert found.status == NOT_AVAILABLE and found.remark == "no answer within 0.05 s"
    assert asyncio.run(BrokerAsker(silent).ask(Master("c", "b", None))).remark == "no master"


def test_a_bad_group_list_is_a_bad_answer_and_a_bad_runtime_info_only_loses_the_rates() -> None:
    broker = FakeBroker(("orders",))
    broker.runtime = lambda r: make_response(r, 0, body=KVTable({"putTps": "NaN", "getTransferredTps": "-2"}).encode())
    found = ask(broker)
    assert found.status == OK and found.put_tps is None and found.get_tps is None and len(found.groups) == 1
    broker.runtime = lambda r: make_response(r, 0, body=b"[1, 2")
    assert ask(broker).status == OK
    bad_list = FakeBroker()
    original = bad_list.call

    async def call(address: str, request: RemotingCommand) -> RemotingCommand:
        if request.code == ah.GET_ALL_SUBSCRIPTIONGROUP_CONFIG:
            return make_response(request, 0, body=b'{"subscriptionGroupTable":{"x":{"groupName":"y"}}}')
        return await original(address, request)
    found = ask(call)
    assert found.status == BAD_ANSWER and found.remark.startswith("malformed group list")
    refused = FakeBroker()

    async def refusing(address: str, request: RemotingCommand) -> RemotingCommand:
        if request.code == ah.GET_ALL_SUBSCRIPTIONGROUP_CONFIG:
            return make_response(request, 16, "no permission")
        return await refused.call(address, request)
    assert ask(refusing).remark == "group list refused with code 16"


# ---------------------------------------------------------------------------------------------- in the feed
def test_the_feeds_snapshot_carries_the_consumer_groups_view(tmp_path: Path) -> None:
    from tests.unit.controller.test_console import snapshot
    m = manager(tmp_path)
    empty = snapshot(m)["consumers"]
    assert empty["at"] is None and empty["groups"] == [] and empty["limits"]["maxGroups"] == MAX_GROUPS
    feed = console.ConsoleFeed(m, clock=lambda: 10.0)
    masters = feed._masters()
    assert masters and all(isinstance(x, Master) for x in masters)
    asyncio.run(feed.consumers.round(BrokerAsker(FakeBroker().call, clock=lambda: 10.0), masters))
    view = feed.consumers.view
    assert view["at"] == 10_000 and {g["group"] for g in view["groups"]} == {"audit", "orders"}
    assert all(b["status"] == OK for b in view["brokers"]) and len(view["brokers"]) == len(masters)
    assert math.isclose(view["groups"][1]["consumeTps"], 1.25 * len(masters))


def test_the_watch_asks_each_round_until_no_page_is_open_and_outlives_a_failed_round() -> None:
    broker = FakeBroker(("orders",))
    rounds = [0]

    def running() -> bool:
        rounds[0] += 1
        return rounds[0] <= 2

    def masters() -> list[Master]:
        if rounds[0] == 1:
            raise RuntimeError("the state could not be read")  # one failed round: logged, the next goes on
        return [Master("c", "broker-a", "127.0.0.1:1")]

    async def run() -> None:
        watch = ConsumerWatch(clock=lambda: 1.0, interval_s=0.01)
        await watch.run(masters, running, call=broker.call)
        assert watch.view["groups"][0]["group"] == "orders"
    asyncio.run(run())
    assert broker.asked.count(ah.GET_BROKER_RUNTIME_INFO) == 1
