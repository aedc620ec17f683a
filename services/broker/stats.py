"""What the broker counts for its runtime info (GET_BROKER_RUNTIME_INFO, 28) and its per-topic and per-group
rates: RocketMQ's StoreStatsService, BrokerStats and the minute figures of BrokerStatsManager, pure (time
passed in, no task, no I/O).

Theory of operation. RocketMQ samples each counter once a second on a thread and keeps the last 601
samples, so that "TPS over 10, 60 and 600 seconds" is the difference between the newest sample and the one
10, 60 or 600 places before it, divided by the time between them (nothing, an empty string, until there
are that many samples). Here a counter is sampled lazily instead: before it changes and before it is read,
one sample is appended for every whole second that has passed since the last one, with the value the
counter had then (it has not changed since, or it would have been sampled). The samples are those a
sampling thread would have taken, without the thread. A gap longer than the window only appends the
samples the window can hold.

The per-topic put and per-group get rates (``topicPutTps`` of 202, ``consumeTps`` of 208) are RocketMQ's
minute figures: a sample every 10 seconds, the rate over the last minute (over what there is before
that). Their keys are bounded (``MAX_KEYS``): a key beyond the bound is not counted.

The day totals (``msgPutTotalTodayMorning`` and the rest) are the totals at the last local midnight and
the one before, as RocketMQ's BrokerStats records them at midnight; a broker started today has 0 for both
until its first midnight.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from decimal import Decimal

__all__ = ["LATENCY_BUCKETS_MS", "LATENCY_DESC", "MAX_KEYS", "BrokerStats", "MinuteRates", "Sampled", "java_double"]

#: The most topics (or topic@group keys) whose minute rates are kept.
MAX_KEYS = 10_000
#: StoreStatsService's put-latency buckets (upper bounds, ms) and their names in putMessageDistributeTime.
LATENCY_BUCKETS_MS = (0, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000)
LATENCY_DESC = ("[<=0ms]", "[0~10ms]", "[10~50ms]", "[50~100ms]", "[100~200ms]", "[200~500ms]", "[500ms~1s]",
                "[1~2s]", "[2~3s]", "[3~4s]", "[4~5s]", "[5~10s]", "[10s~]")
#: The windows of a TPS triple, in samples of one second.
TPS_WINDOWS = (10, 60, 600)


def java_double(value: float) -> str:
    """Double.toString: the shortest digits that read back, in Java's layout (``0.0``, ``12.5``, ``1.0E7``,
    ``1.0E-4``)."""
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value))
    return _scientific(value)


def _scientific(value: float) -> str:
    sign, digits, exponent = Decimal(repr(float(value))).normalize().as_tuple()
    text = "".join(map(str, digits))
    power = len(text) - 1 + int(exponent)
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{power}"


class Sampled:
    """One counter and its samples, one every ``period_ms``, the last ``keep`` of them."""

    def __init__(self, now_ms: int, keep: int = 601, period_ms: int = 1000) -> None:
        self.total = 0
        self.keep, self.period_ms = keep, period_ms
        self._samples: deque[tuple[int, int]] = deque([(now_ms, 0)], maxlen=keep)
        self._next_ms = now_ms + period_ms

    def tick(self, now_ms: int) -> None:
        """Append the samples due by ``now_ms`` (the counter has not changed since the last one)."""
        if now_ms < self._next_ms:
            return
        due = (now_ms - self._next_ms) // self.period_ms + 1
        if due > self.keep:
            self._next_ms += (due - self.keep) * self.period_ms
            due = self.keep
        for _ in range(due):
            self._samples.append((self._next_ms, self.total))
            self._next_ms += self.period_ms

    def add(self, now_ms: int, count: int = 1) -> None:
        self.tick(now_ms)
        self.total += count

    def rate(self, window: int, now_ms: int, partial: bool = False) -> float | None:
        """Per second over the last ``window`` samples; None if there are not that many (with ``partial``:
        over the samples there are, 0.0 with fewer than two)."""
        self.tick(now_ms)
        samples = self._samples
        if len(samples) <= window:
            if not partial or len(samples) < 2:
                return 0.0 if partial else None
            window = len(samples) - 1
        (t0, v0), (t1, v1) = samples[-(window + 1)], samples[-1]
        return (v1 - v0) * 1000 / (t1 - t0) if t1 > t0 else 0.0

    def tps_triple(self, now_ms: int) -> str:
        """RocketMQ's ``putTps`` text: the rates over 10, 60 and 600 s, space-separated (empty until known)."""
        parts = [self.rate(w, now_ms) for w in TPS_WINDOWS]
        return " ".join("" if r is None else java_double(r) for r in parts)


class MinuteRates:
    """Per-key counters sampled every 10 s: the rate over the last minute (BrokerStatsManager's minute
    figures), for at most MAX_KEYS keys."""

    def __init__(self) -> None:
        self._counters: dict[str, Sampled] = {}

    def add(self, key: str, now_ms: int, count: int = 1) -> None:
        counter = self._counters.get(key)
        if counter is None:
            if len(self._counters) >= MAX_KEYS:
                return
            counter = self._counters[key] = Sampled(now_ms, keep=7, period_ms=10_000)
        counter.add(now_ms, count)

    def rate(self, key: str, now_ms: int) -> float:
        counter = self._counters.get(key)
        return 0.0 if counter is None else counter.rate(6, now_ms, partial=True) or 0.0

    def total(self, key: str) -> int:
        counter = self._counters.get(key)
        return 0 if counter is None else counter.total


@dataclass
class _Days:
    """The totals at the last two local midnights (BrokerStats), rolled lazily."""

    day: int
    yesterday_morning: int = 0
    today_morning: int = 0

    def roll(self, day: int, total: int) -> None:
        if day == self.day:
            return
        self.yesterday_morning = self.today_morning if day == self.day + 1 else total
        self.today_morning = total
        self.day = day


def _local_day(now_ms: int) -> int:
    """Days since the epoch of the local calendar date at ``now_ms``."""
    lt = time.localtime(now_ms / 1000)
    return int((time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday, 12, 0, 0, 0, 0, -1))) // 86400)


class BrokerStats:
    """Every figure the runtime info reports that the broker counts (see the module's docstring)."""

    def __init__(self, now_ms: int) -> None:
        self.boot_ms = now_ms
        self.put_times = Sampled(now_ms)
        self.get_found = Sampled(now_ms)
        self.get_miss = Sampled(now_ms)
        self.transferred = Sampled(now_ms)
        self.put_failed = 0
        self.put_size_total = 0
        self.put_time_max_ms = 0
        self.get_time_max_ms = 0
        self.topic_puts = MinuteRates()
        self.group_gets = MinuteRates()
        day = _local_day(now_ms)
        self._put_days, self._get_days = _Days(day), _Days(day)
        self._minute = now_ms // 60_000
        self._latency = [0] * len(LATENCY_DESC)
        self._last_latency = [0] * len(LATENCY_DESC)

    # ------------------------------------------------------------------ counting
    def on_put(self, now_ms: int, topic_counts: dict[str, int], size: int, elapsed_ms: int, ok: bool) -> None:
        """A put request answered: its messages per topic, their stored size, how long it took."""
        self._roll(now_ms)
        if not ok:
            self.put_failed += 1
            return
        count = sum(topic_counts.values())
        self.put_times.add(now_ms, count)
        self.put_size_total += size
        for topic, n in topic_counts.items():
            self.topic_puts.add(topic, now_ms, n)
        self.put_time_max_ms = max(self.put_time_max_ms, elapsed_ms)
        self._latency[_bucket(elapsed_ms)] += 1

    def on_get(self, now_ms: int, group: str, topic: str, found: int, elapsed_ms: int) -> None:
        """A pull answered with ``found`` messages (0: nothing found)."""
        self._roll(now_ms)
        (self.get_found if found else self.get_miss).add(now_ms)
        if found:
            self.transferred.add(now_ms, found)
            self.group_gets.add(f"{topic}@{group}", now_ms, found)
        self.get_time_max_ms = max(self.get_time_max_ms, elapsed_ms)

    def _roll(self, now_ms: int) -> None:
        """At the first count of a new minute: the latency minute, and the day when a local midnight passed
        (one always falls on a minute's start: time zones are whole quarter hours)."""
        minute = now_ms // 60_000
        if minute == self._minute:
            return
        day = _local_day(now_ms)
        self._put_days.roll(day, self.put_times.total)
        self._get_days.roll(day, self.transferred.total)
        self._last_latency = self._latency if minute == self._minute + 1 else [0] * len(LATENCY_DESC)
        self._latency = [0] * len(LATENCY_DESC)
        self._minute = minute

    # ------------------------------------------------------------------ reading
    def day_totals(self, now_ms: int) -> dict[str, int]:
        self._roll(now_ms)
        return {"msgPutTotalYesterdayMorning": self._put_days.yesterday_morning,
                "msgPutTotalTodayMorning": self._put_days.today_morning,
                "msgPutTotalTodayNow": self.put_times.total,
                "msgGetTotalYesterdayMorning": self._get_days.yesterday_morning,
                "msgGetTotalTodayMorning": self._get_days.today_morning,
                "msgGetTotalTodayNow": self.transferred.total}

    def last_minute_latency(self, now_ms: int) -> list[int]:
        """The put-latency counts of the last whole minute, per LATENCY_DESC bucket."""
        self._roll(now_ms)
        return list(self._last_latency)

    def latency_percentile(self, fraction: float, now_ms: int) -> float:
        """The put latency (ms) below which ``fraction`` of the last minute's puts fall, interpolated within
        its bucket as StoreStatsService interpolates (the open last bucket counts as 10 s more)."""
        counts = self.last_minute_latency(now_ms)
        bounds = (*LATENCY_BUCKETS_MS, LATENCY_BUCKETS_MS[-1] * 2)
        target, passed = int(sum(counts) * fraction), 0
        for index, count in enumerate(counts):
            if target <= passed + count:
                low = 0 if index == 0 else bounds[index - 1]
                return low + ((bounds[index] - low) * (target - passed) / count if count else 0.0)
            passed += count
        return 0.0


def _bucket(elapsed_ms: int) -> int:
    for index, bound in enumerate(LATENCY_BUCKETS_MS):
        if elapsed_ms <= bound:
            return index
    return len(LATENCY_BUCKETS_MS)
