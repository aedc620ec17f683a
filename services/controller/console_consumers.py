"""The console's consumer-groups view (docs/console.md), without I/O: what the masters answered, turned into
each consumer group's lag, rates and recent history.

Theory of operation. While a console page is open, console_brokers.py asks each broker group's master, every
few seconds, for its consumer groups and each group's consume stats (RocketMQ's 201 and 208) and for its
runtime info (28), and hands the answers of one round here as ``BrokerAnswer`` values. ``ConsumerGroups``
keeps what it needs between rounds and nothing more:

* per (broker group, consumer group), the sums of the last sample's broker and consumer offsets and which
  queues they were summed over (``Totals``): the next sample of the same queues gives the rates at which
  messages arrived and were consumed, in messages per second. A sample over other queues (a topic added,
  a broker that did not answer last time) gives no rate rather than a wrong one, and an offset moved back
  (a reset) counts as no progress rather than a negative rate;
* per consumer group, the last ``WINDOW_MS`` of lag and rates, one point per round, at most ``MAX_POINTS``
  points, for at most ``MAX_GROUPS`` groups (``History``), so that a page opened now draws the last minutes
  at once.

A group's lag is the sum over its queues of broker offset less consumer offset, each never below zero. The
view (``ConsumersView``) is bounded too: at most ``MAX_GROUPS`` groups (those furthest behind when there are
more) and, per group, the ``MAX_QUEUE_ROWS`` queues furthest behind.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["MAX_GROUPS", "MAX_POINTS", "MAX_QUEUE_ROWS", "WINDOW_MS", "BrokerAnswer", "ConsumerGroups",
           "ConsumersView", "GroupAnswer", "GroupRow", "History", "Point", "QueueLag", "Totals", "is_system_group",
           "rate", "total_lag"]

#: The most consumer groups in the view and in the history.
MAX_GROUPS = 200
#: The most points kept per group (one per round: 100 over WINDOW_MS at a round every 3 s).
MAX_POINTS = 300
#: How far back the history goes.
WINDOW_MS = 5 * 60_000
#: The queues shown per group (those furthest behind); the lag counts every queue.
MAX_QUEUE_ROWS = 16
#: Two samples further apart than this give no rate (the feed paused while no page was open).
MAX_RATE_GAP_MS = 60_000
#: RocketMQ's own consumer groups (MixAll), which its brokers create at start and nothing of ours consumes as.
SYSTEM_GROUPS = frozenset({"TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "SCHEDULE_CONSUMER",
                           "__MONITOR_CONSUMER", "CID_ONS-HTTP-PROXY", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER",
                           "CID_ONSAPI_PULL", "CID_SYS_RMQ_TRANS"})
SYSTEM_PREFIX = "CID_RMQ_SYS_"
#: What a broker group's status says: answered; not asked or no answer over remoting; an answer refused here.
OK, NOT_AVAILABLE, BAD_ANSWER = "ok", "n/a", "bad answer"


def is_system_group(name: str) -> bool:
    return name in SYSTEM_GROUPS or name.startswith(SYSTEM_PREFIX)


@dataclass(frozen=True, order=True)
class QueueLag:
    """One queue as a consumer group sees it (admin/OffsetWrapper, with its MessageQueue)."""

    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    last_timestamp: int = 0  # store time of the last message consumed (0: none)

    @property
    def lag(self) -> int:
        return max(0, self.broker_offset - self.consumer_offset)

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "brokerName": self.broker_name, "queueId": self.queue_id,
                "brokerOffset": self.broker_offset, "consumerOffset": self.consumer_offset, "lag": self.lag,
                "lastTimestamp": self.last_timestamp}


def total_lag(queues: Iterable[QueueLag]) -> int:
    return sum(q.lag for q in queues)


@dataclass(frozen=True)
class Totals:
    """One sample of a group's queues on one broker group, summed: what two samples give rates from."""

    at_ms: int
    queue_keys: int  # which queues were summed (a hash of their names)
    broker_offset: int
    consumer_offset: int

    @classmethod
    def of(cls, at_ms: int, queues: Sequence[QueueLag]) -> Totals:
        keys = hash(frozenset((q.topic, q.broker_name, q.queue_id) for q in queues))
        return cls(at_ms, keys, sum(q.broker_offset for q in queues), sum(q.consumer_offset for q in queues))


def rate(before: Totals | None, after: Totals, offset: str) -> float | None:
    """Messages per second between two samples of the same queues, by ``offset`` ("broker_offset": arrived,
    "consumer_offset": consumed); None when the samples cannot be compared (other queues, or too far apart)."""
    if before is None or before.queue_keys != after.queue_keys or \
            not 0 < after.at_ms - before.at_ms <= MAX_RATE_GAP_MS:
        return None
    moved = max(0, getattr(after, offset) - getattr(before, offset))
    return float(moved) * 1000.0 / (after.at_ms - before.at_ms)


@dataclass(frozen=True)
class GroupAnswer:
    """One consumer group's consume stats (208) as one master answered them."""

    group: str
    at_ms: int
    queues: tuple[QueueLag, ...]
    consume_tps: float


@dataclass(frozen=True)
class BrokerAnswer:
    """What one broker group's master answered in one round; ``status`` OK, NOT_AVAILABLE or BAD_ANSWER, with
    a short ``remark`` saying why when not OK (or which groups' stats did not come)."""

    cluster_name: str
    broker_name: str
    address: str | None
    status: str = OK
    remark: str = ""
    groups_listed: int = 0
    groups: tuple[GroupAnswer, ...] = ()
    failed_groups: tuple[str, ...] = ()
    put_tps: float | None = None
    get_tps: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"clusterName": self.cluster_name, "brokerName": self.broker_name, "address": self.address,
                "status": self.status, "remark": self.remark, "groupsListed": self.groups_listed,
                "groupsAsked": len(self.groups) + len(self.failed_groups), "putTps": _round(self.put_tps),
                "getTps": _round(self.get_tps)}


@dataclass(frozen=True)
class Point:
    """One round of one group in its history."""

    at_ms: int
    lag: int
    consume_rate: float | None
    send_rate: float | None

    def to_json(self, now_ms: int) -> list[Any]:
        """``[seconds before now_ms (<= 0), lag, consume rate, send rate]``: short, as there are many."""
        return [round((self.at_ms - now_ms) / 1000), self.lag, _round(self.consume_rate), _round(self.send_rate)]


class History:
    """Each group's recent points: a ring of at most ``max_points``, none older than ``window_ms`` before the
    newest round, for at most ``max_groups`` groups."""

    def __init__(self, max_groups: int = MAX_GROUPS, max_points: int = MAX_POINTS,
                 window_ms: int = WINDOW_MS) -> None:
        self.max_groups, self.max_points, self.window_ms = max_groups, max_points, window_ms
        self._rings: dict[str, deque[Point]] = {}

    def add(self, group: str, point: Point) -> None:
        ring = self._rings.get(group)
        if ring is None:
            if len(self._rings) >= self.max_groups:
                return  # full: keep() first makes room for the groups of the view
            ring = self._rings[group] = deque(maxlen=self.max_points)
        ring.append(point)

    def points(self, group: str) -> tuple[Point, ...]:
        return tuple(self._rings.get(group, ()))

    def keep(self, groups: Iterable[str], now_ms: int) -> None:
        """Only these groups' rings (at most ``max_groups`` of them), and only their points of the window."""
        wanted = set(list(groups)[:self.max_groups])
        for name in [g for g in self._rings if g not in wanted]:
            del self._rings[name]
        for ring in self._rings.values():
            while ring and ring[0].at_ms < now_ms - self.window_ms:
                ring.popleft()

    def __len__(self) -> int:
        return len(self._rings)


@dataclass(frozen=True)
class GroupRow:
    """One consumer group in the view, over every broker group that answered for it."""

    group: str
    lag: int | None  # None: no broker group gave its stats this round
    consume_tps: float
    consume_rate: float | None
    send_rate: float | None
    last_consumed_ms: int
    brokers: tuple[str, ...]
    missing: tuple[str, ...]  # broker groups that list the group but did not give its stats this round
    queues_total: int
    queues: tuple[QueueLag, ...]
    history: tuple[Point, ...] = ()

    def to_json(self, now_ms: int) -> dict[str, Any]:
        return {"group": self.group, "lag": self.lag, "consumeTps": _round(self.consume_tps),
                "consumeRate": _round(self.consume_rate), "sendRate": _round(self.send_rate),
                "lastConsumed": self.last_consumed_ms or None, "brokers": list(self.brokers),
                "missing": list(self.missing), "queuesTotal": self.queues_total,
                "queues": [q.to_json() for q in self.queues], "history": [p.to_json(now_ms) for p in self.history]}


@dataclass(frozen=True)
class ConsumersView:
    """The consumer-groups part of the console's snapshot."""

    at_ms: int | None = None  # the last round's end (None: no round yet)
    interval_s: float = 0.0
    window_ms: int = WINDOW_MS
    brokers: tuple[BrokerAnswer, ...] = ()
    groups: tuple[GroupRow, ...] = ()
    groups_total: int = 0  # groups answered for, before the MAX_GROUPS cut
    limits: dict[str, int] = field(default_factory=dict)  # the bounds, for the page to say (documented in to_json)

    def to_json(self) -> dict[str, Any]:
        # The page reads this as JSON: a plain dict, built here once per round.
        return {"at": self.at_ms, "intervalS": self.interval_s, "windowMs": self.window_ms,
                "brokers": [b.to_json() for b in self.brokers],
                "groups": [g.to_json(self.at_ms or 0) for g in self.groups],
                "groupsTotal": self.groups_total, "limits": dict(self.limits)}


class ConsumerGroups:
    """The view between rounds: ``update`` takes one round's answers and gives the new view."""

    def __init__(self, interval_s: float, limits: dict[str, int] | None = None,
                 history: History | None = None) -> None:
        self.interval_s, self.limits = interval_s, dict(limits or {})
        self.history = history or History()
        self._totals: dict[tuple[str, str], Totals] = {}

    def update(self, answers: Sequence[BrokerAnswer], now_ms: int) -> ConsumersView:
        by_group: dict[str, list[tuple[str, GroupAnswer]]] = {}
        missing: dict[str, list[str]] = {}
        for broker in answers:
            for answer in broker.groups:
                by_group.setdefault(answer.group, []).append((broker.broker_name, answer))
            for name in broker.failed_groups:
                missing.setdefault(name, []).append(broker.broker_name)
        totals = {(b, a.group): Totals.of(a.at_ms, a.queues) for a_list in by_group.values() for b, a in a_list}
        rows = [self._row(name, by_group.get(name, []), missing.get(name, []), totals)
                for name in by_group.keys() | missing.keys()]
        self._totals = totals
        kept = sorted(rows, key=lambda r: (-(r.lag or 0), r.group))[:MAX_GROUPS]
        self.history.keep((r.group for r in kept), now_ms)
        for row in kept:
            if row.lag is not None:
                self.history.add(row.group, Point(now_ms, row.lag, row.consume_rate, row.send_rate))
        shown = tuple(sorted((_with_history(r, self.history.points(r.group)) for r in kept), key=lambda r: r.group))
        return ConsumersView(now_ms, self.interval_s, WINDOW_MS, tuple(answers), shown, len(rows), self.limits)

    def _row(self, name: str, found: list[tuple[str, GroupAnswer]], missing: list[str],
             totals: dict[tuple[str, str], Totals]) -> GroupRow:
        queues = sorted((q for _, a in found for q in a.queues), key=lambda q: (-q.lag, q))
        consumed = [rate(self._totals.get((b, a.group)), totals[(b, a.group)], "consumer_offset") for b, a in found]
        sent = [rate(self._totals.get((b, a.group)), totals[(b, a.group)], "broker_offset") for b, a in found]
        return GroupRow(name, total_lag(queues) if found else None, sum(a.consume_tps for _, a in found),
                        _sum_known(consumed), _sum_known(sent), max((q.last_timestamp for q in queues), default=0),
                        tuple(sorted(b for b, _ in found)), tuple(sorted(missing)), len(queues),
                        tuple(queues[:MAX_QUEUE_ROWS]))


def _with_history(row: GroupRow, points: tuple[Point, ...]) -> GroupRow:
    return replace(row, history=points)


def _sum_known(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _round(value: float | None) -> float | None:
    """Two decimals for the page; None for nothing known (or a value that is no number)."""
    if value is None or not math.isfinite(value):
        return None
    return round(value, 2)
