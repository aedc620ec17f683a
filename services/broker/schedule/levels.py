"""The rules of delayed and timed messages, pure: the delay levels, how a send is rewritten into a
schedule topic, and how a held message becomes the message delivered to its real topic.

A **delayed** message (``DELAY`` = level n above 0, RocketMQ's ``setDelayTimeLevel``) is stored in
``SCHEDULE_TOPIC_XXXX``, queue n-1, with its real topic and queue in ``REAL_TOPIC`` and ``REAL_QID``, as
RocketMQ's ``HookUtils.transformDelayLevelMessage`` stores it; a level above the last is the last. It is due
``messageDelayLevel[n-1]`` after its store time. Each level's queue is in store order and every entry waits as
long, so a level is delivered in queue order.

A **timed** message (``TIMER_DELIVER_MS``, an absolute time, or ``TIMER_DELAY_SEC`` / ``TIMER_DELAY_MS``
from now, RocketMQ 5's ``setDeliverTimeMs`` / ``setDelayTimeSec`` / ``setDelayTimeMs``) is stored in
``rmq_sys_wheel_timer`` queue 0 with ``TIMER_OUT_MS`` (when it is due) beside ``REAL_TOPIC`` and
``REAL_QID``, as RocketMQ's ``transformTimerMessage`` stores it. RocketMQ then moves it through its timer
wheel (a timer log and a slot file); ours is delivered from that queue by the same loop as the levels (see
due_queue.py for what differs). A time already past is an ordinary message; one further than
``timerMaxDelaySec`` ahead is refused (MESSAGE_ILLEGAL, RocketMQ's WHEEL_TIMER_MSG_ILLEGAL). RocketMQ rounds
a due time down to ``timerPrecisionMs`` (so delivers up to a second early); ours is delivered at or after it.
A message with both a level and a timer property is delayed by its level, the timer properties dropped,
as RocketMQ does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from services.broker.record import MAX_DELAY_LEVELS, SCHEDULE_TOPIC
from services.broker.store import Message

__all__ = ["DEFAULT_LEVELS", "MAX_LEVELS", "SCHEDULE_TOPIC", "TIMER_PROPERTIES", "TIMER_TOPIC", "DelayRules",
           "NotSchedulable", "parse_levels", "real_message"]

TIMER_TOPIC = "rmq_sys_wheel_timer"
DEFAULT_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
#: The most levels messageDelayLevel may name: SCHEDULE_TOPIC_XXXX has one queue each, and a replica checks
#: the queue ids its master sends against this bound (record.queue_bound).
MAX_LEVELS = MAX_DELAY_LEVELS
TIMER_PROPERTIES = ("TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS")
DELAY, REAL_TOPIC, REAL_QID, TIMER_OUT_MS = "DELAY", "REAL_TOPIC", "REAL_QID", "TIMER_OUT_MS"
_UNITS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_LEVEL = re.compile(r"(\d{1,9})([smhd])")
_NUMBER = re.compile(r"-?\d{1,19}")


class NotSchedulable(ValueError):
    """A delayed or timed message the broker refuses (its remark names the property)."""


def parse_levels(text: str) -> tuple[int, ...]:
    """messageDelayLevel (``"1s 5s ... 2h"``: a number and a unit of s, m, h or d each) as milliseconds per
    level; ValueError naming what is wrong."""
    levels = []
    for token in text.split():
        match = _LEVEL.fullmatch(token)
        if match is None:
            raise ValueError(f"messageDelayLevel: {token[:20]!r} is not a number followed by s, m, h or d")
        levels.append(int(match[1]) * _UNITS[match[2]])
    if not 0 < len(levels) <= MAX_LEVELS:
        raise ValueError(f"messageDelayLevel must name 1 to {MAX_LEVELS} levels, got {len(levels)}")
    return tuple(levels)


@dataclass(frozen=True)
class DelayRules:
    """What the broker's configuration says of delayed and timed messages."""

    levels: tuple[int, ...] = parse_levels(DEFAULT_LEVELS)
    timer_max_delay_ms: int = 3 * 86_400_000  # RocketMQ's timerMaxDelaySec default, three days

    def delay_ms(self, level: int) -> int:
        """How long a message of ``level`` (1-based) waits; the last level's wait above it."""
        return self.levels[min(max(level, 1), len(self.levels)) - 1]

    def schedule(self, message: Message, now_ms: int) -> Message:
        """The message as the store holds it: unchanged if it is neither delayed nor timed, else rewritten
        into its schedule topic. Raises NotSchedulable for a malformed DELAY or timer property, or a timer
        beyond timerMaxDelaySec."""
        props = message.properties
        level = _int_property(props, DELAY)
        if level is None and props.get(DELAY, "").strip():
            raise NotSchedulable(f"DELAY={props[DELAY][:24]!r} is not a delay level (a number)")
        if level is not None and level > 0:
            level = min(level, len(self.levels))
            kept = {k: v for k, v in props.items() if k not in TIMER_PROPERTIES}
            return self._held(Message(message.topic, message.body, message.keys, message.tags, message.queue_id,
                                      kept), SCHEDULE_TOPIC, level - 1, {DELAY: str(level)})
        due = self._timer_due(props, now_ms)
        if due is None:
            return message
        return self._held(message, TIMER_TOPIC, 0, {TIMER_OUT_MS: str(due)})

    def _timer_due(self, props: dict[str, str], now_ms: int) -> int | None:
        """When a timed message is due; None if it is not timed (or its time has passed: sent at once)."""
        if props.get(REAL_TOPIC) is not None and TIMER_OUT_MS in props:
            return None  # a message this broker already delivered, sent again as it was
        if "TIMER_DELAY_SEC" in props:
            due = _checked(props, "TIMER_DELAY_SEC") * 1000 + now_ms
        elif "TIMER_DELAY_MS" in props:
            due = _checked(props, "TIMER_DELAY_MS") + now_ms
        elif "TIMER_DELIVER_MS" in props:
            due = _checked(props, "TIMER_DELIVER_MS")
        else:
            return None
        if due <= now_ms:
            return None
        if due - now_ms > self.timer_max_delay_ms:
            raise NotSchedulable(f"timer message illegal: due in {due - now_ms} ms, more than timerMaxDelaySec "
                                 f"({self.timer_max_delay_ms // 1000} s) ahead")
        return due

    @staticmethod
    def _held(message: Message, topic: str, queue_id: int, extra: dict[str, str]) -> Message:
        props = dict(message.properties)
        props.update(extra)
        props[REAL_TOPIC] = message.topic
        props[REAL_QID] = str(message.queue_id if message.queue_id is not None else -1)
        return Message(topic, message.body, message.keys, message.tags, queue_id, props)

    def due_ms(self, topic: str, queue_id: int, store_ms: int, properties: dict[str, str],
               now_ms: int) -> int:
        """When a held message is due. A level's due time is never further than its wait from now (RocketMQ's
        correctDeliverTimestamp: a store time ahead of this clock, after a clock step or a failover to a
        broker whose clock is behind, does not hold a message back longer than its level)."""
        if topic == TIMER_TOPIC:
            value = _int_property(properties, TIMER_OUT_MS)
            return now_ms if value is None else value
        wait = self.delay_ms(queue_id + 1)
        due = store_ms + wait
        return now_ms if due > now_ms + wait else due


def real_message(topic: str, keys: str, tags: str, properties: dict[str, str], body: bytes,
                 queue_nums: int) -> Message | None:
    """The message a held one becomes when due (RocketMQ's messageTimeUp and the timer's convertMessage): its
    real topic and queue, the delay and timer properties dropped; None if it names no real topic (nothing to
    deliver: it is skipped). A real queue out of range is left to the store's choice."""
    props = dict(properties)
    real_topic = props.get(REAL_TOPIC)
    if not real_topic or real_topic in (SCHEDULE_TOPIC, TIMER_TOPIC):
        return None
    qid = _int_property(props, REAL_QID)
    for name in (DELAY, *TIMER_PROPERTIES, TIMER_OUT_MS):
        props.pop(name, None)
    if topic == TIMER_TOPIC:
        props.pop(REAL_TOPIC, None)
        props.pop(REAL_QID, None)
    real_qid = qid if qid is not None and 0 <= qid < queue_nums else None
    return Message(real_topic, body, keys, tags, real_qid, props)


def _int_property(props: dict[str, str], name: str) -> int | None:
    value = props.get(name)
    if value is None or _NUMBER.fullmatch(value.strip()) is None:
        return None
    return int(value.strip())


def _checked(props: dict[str, str], name: str) -> int:
    value = _int_property(props, name)
    if value is None or not -(2**63) <= value < 2**63:
        raise NotSchedulable(f"timer message illegal: {name}={props[name][:24]!r} is not a number")
    return value
