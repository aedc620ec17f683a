"""Delayed and timed messages and consume failures, pure (services/broker/schedule/): the delay levels, the
rewrite of a send into a schedule topic and back, what of a schedule queue is due when, the delivery progress
as written and copied, and what a failed message becomes."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.broker.remoting_messages import WIRE, WireFields
from services.broker.schedule.delay_offsets import DelayOffsetFile, DelayOffsetsDamaged, DelayProgress
from services.broker.schedule.due_queue import DueQueue
from services.broker.schedule.levels import (
    SCHEDULE_TOPIC,
    TIMER_TOPIC,
    DelayRules,
    NotSchedulable,
    parse_levels,
    real_message,
)
from services.broker.schedule.retry import dead_letter, send_back
from services.broker.store import Message
from services.remoting.errors import BodyError

NOW = 1_700_000_000_000
RULES = DelayRules()


def message(**props: str) -> Message:
    return Message("Orders", b"body", "k1", "tagA", 2, {"UNIQ_KEY": "U1", **props})


def test_the_default_levels_are_rocketmqs() -> None:
    levels = parse_levels("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h")
    assert RULES.levels == levels and len(levels) == 18
    assert (levels[0], levels[2], levels[4], levels[-1]) == (1000, 10_000, 60_000, 7_200_000)
    assert parse_levels("500s 1d") == (500_000, 86_400_000)


@pytest.mark.parametrize("text", ["", "1x", "s", "1s 2", "1.5s", " ".join(["1s"] * 65)])
def test_bad_levels_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="messageDelayLevel"):
        parse_levels(text)


def test_a_delayed_message_is_held_in_its_levels_queue_with_its_real_topic_and_queue() -> None:
    held = RULES.schedule(message(DELAY="3", TIMER_DELAY_SEC="9"), NOW)
    assert (held.topic, held.queue_id, held.body, held.keys, held.tags) == (SCHEDULE_TOPIC, 2, b"body", "k1", "tagA")
    assert held.properties == {"UNIQ_KEY": "U1", "DELAY": "3", "REAL_TOPIC": "Orders", "REAL_QID": "2"}
    assert RULES.schedule(message(DELAY="99"), NOW).queue_id == 17  # above the last level: the last
    for plain in (message(), message(DELAY="0"), message(DELAY="-1"), message(TIMER_DELIVER_MS=str(NOW))):
        assert RULES.schedule(plain, NOW) is plain  # neither delayed nor timed (or due already): as sent


@pytest.mark.parametrize(("props", "due"), [
    ({"TIMER_DELAY_SEC": "10"}, NOW + 10_000), ({"TIMER_DELAY_MS": "1500"}, NOW + 1500),
    ({"TIMER_DELIVER_MS": str(NOW + 777)}, NOW + 777)])
def test_a_timed_message_is_held_in_the_timer_queue_until_its_time(props: dict[str, str], due: int) -> None:
    held = RULES.schedule(message(**props), NOW)
    assert (held.topic, held.queue_id) == (TIMER_TOPIC, 0)
    assert (held.properties["TIMER_OUT_MS"], held.properties["REAL_TOPIC"]) == (str(due), "Orders")
    assert RULES.due_ms(TIMER_TOPIC, 0, NOW, held.properties, NOW) == due


@pytest.mark.parametrize(("props", "remark"), [
    ({"DELAY": "two"}, "is not a delay level"), ({"TIMER_DELAY_MS": "soon"}, "is not a number"),
    ({"TIMER_DELAY_SEC": str(3 * 86400 + 1)}, r"more than timerMaxDelaySec \(259200 s\)")])
def test_malformed_or_too_distant_ones_are_refused(props: dict[str, str], remark: str) -> None:
    with pytest.raises(NotSchedulable, match=remark):
        RULES.schedule(message(**props), NOW)


def test_a_level_is_due_its_wait_after_its_store_time_and_never_further_than_that_from_now() -> None:
    assert RULES.due_ms(SCHEDULE_TOPIC, 1, NOW, {}, NOW) == NOW + 5000
    assert RULES.due_ms(SCHEDULE_TOPIC, 1, NOW - 9000, {}, NOW) == NOW - 4000
    # stored by a clock an hour ahead (a failover to a broker whose clock is behind): due now, not in an hour
    assert RULES.due_ms(SCHEDULE_TOPIC, 1, NOW + 3_600_000, {}, NOW) == NOW


def test_a_held_message_becomes_its_real_message_when_due() -> None:
    held = RULES.schedule(message(DELAY="2", color="red"), NOW)
    real = real_message(SCHEDULE_TOPIC, held.keys, held.tags, held.properties, held.body, 4)
    assert real == Message("Orders", b"body", "k1", "tagA", 2,
                           {"UNIQ_KEY": "U1", "color": "red", "REAL_TOPIC": "Orders", "REAL_QID": "2"})
    timed = RULES.schedule(message(TIMER_DELAY_MS="5"), NOW)
    real = real_message(TIMER_TOPIC, timed.keys, timed.tags, timed.properties, timed.body, 4)
    assert real is not None and real.properties == {"UNIQ_KEY": "U1"} and real.queue_id == 2
    assert real_message(SCHEDULE_TOPIC, "", "", {"REAL_QID": "0"}, b"x", 4) is None  # no real topic: skipped
    loop = real_message(SCHEDULE_TOPIC, "", "", {"REAL_TOPIC": SCHEDULE_TOPIC}, b"x", 4)
    assert loop is None  # never back into a schedule topic
    stray = real_message(SCHEDULE_TOPIC, "", "", {"REAL_TOPIC": "T", "REAL_QID": "9"}, b"x", 4)
    assert stray is not None and stray.queue_id is None  # a queue out of range: the store chooses


# ------------------------------------------------------------------------------------------- due queue


def test_a_levels_queue_is_delivered_in_order_and_its_watermark_follows() -> None:
    queue = DueQueue(watermark=10)
    for offset in range(10, 14):
        queue.read(offset, NOW + offset)
    assert queue.due(NOW + 9, 32) == [] and queue.wake_at() == NOW + 10
    assert queue.due(NOW + 11, 32) == [10, 11]
    assert queue.delivered([10, 11]) and queue.watermark == 12
    assert queue.due(NOW + 100, 1) == [12]
    assert not queue.delivered([]) and queue.watermark == 12


def test_the_timer_queue_delivers_out_of_order_and_keeps_its_watermark_at_the_oldest_undelivered() -> None:
    queue = DueQueue(watermark=0)
    for offset, due in enumerate([NOW + 50, NOW + 10, NOW + 30]):
        queue.read(offset, due)
    assert queue.due(NOW + 35, 32) == [1, 2]
    assert not queue.delivered([1, 2]) and queue.watermark == 0  # entry 0 still waits
    assert queue.delivered(queue.due(NOW + 50, 32)) and queue.watermark == 3
    # a restart from the watermark 0 (had 1 and 2 been delivered but not 0) would deliver 1 and 2 again:
    # at least once, nothing skipped


def test_unreadable_entries_are_skipped_and_the_window_bounds_what_is_held() -> None:
    queue = DueQueue(watermark=0, window=3)
    queue.read(0, None)
    assert queue.watermark == 1
    queue.read(1, NOW + 1000)
    queue.read(2, NOW)
    queue.read(3, NOW)
    assert queue.room() == 0  # three held past the watermark: the fourth waits
    with pytest.raises(ValueError):
        queue.read(2, NOW)
    queue.skip_to(3)  # retention took entries 1 and 2
    assert (queue.watermark, queue.pending) == (3, {3: NOW})


# ------------------------------------------------------------------------------------------- progress


def test_the_progress_round_trips_and_a_damaged_one_is_refused(tmp_path: Path) -> None:
    progress = DelayProgress({1: 5, 3: 40}, 7, 81_920)
    raw = progress.encode()
    assert DelayProgress.decode(raw) == progress
    assert b'"offsetTable":{"1":5,"3":40}' in raw  # RocketMQ's field, as delayOffset.json has it
    far_level = b'{"offsetTable":{"99":1},"timerOffset":0,"logOffset":0,"crc":0}'
    for bad in (raw.replace(b"40", b"41"), b"[]", b"{", far_level, b" " * 20_000):
        with pytest.raises(BodyError):
            DelayProgress.decode(bad)
    file = DelayOffsetFile(tmp_path / "config" / "delayOffset.json")
    assert file.load() == DelayProgress()
    file.save(progress)
    assert DelayOffsetFile(file.path).load() == progress
    file.path.write_bytes(raw[:-3])
    with pytest.raises(DelayOffsetsDamaged, match="delayOffset.json is damaged"):
        DelayOffsetFile(file.path).load()


# ------------------------------------------------------------------------------------------- retries


def failed(reconsumes: int, **props: str) -> dict[str, str]:
    return {"UNIQ_KEY": "U1", WIRE: WireFields(7, 0, 123, reconsume_times=reconsumes).encode(), **props}


def test_a_failed_message_is_retried_with_rocketmqs_backoff_and_keeps_its_first_topic_and_id() -> None:
    retry = send_back("Orders", "k", "t", failed(0), b"x", NOW, "cg", 0, None, "MSGID0")
    assert (retry.topic, retry.queue_id, retry.keys, retry.tags) == ("%RETRY%cg", 0, "k", "t")
    assert retry.properties["DELAY"] == "3" and retry.properties["RETRY_TOPIC"] == "Orders"
    assert retry.properties["ORIGIN_MESSAGE_ID"] == "MSGID0"
    assert WireFields.decode(retry.properties[WIRE], 0) == WireFields(7, 0, 123, reconsume_times=1)
    held = RULES.schedule(retry, NOW)
    assert (held.topic, held.queue_id, held.properties["REAL_TOPIC"]) == (SCHEDULE_TOPIC, 2, "%RETRY%cg")
    again = send_back("%RETRY%cg", "k", "t", retry.properties, b"x", NOW, "cg", 0, None, "MSGID1")
    assert again.properties["DELAY"] == "4" and again.properties["RETRY_TOPIC"] == "Orders"
    assert again.properties["ORIGIN_MESSAGE_ID"] == "MSGID0"
    assert send_back("Orders", "", "", failed(0), b"x", NOW, "cg", 7, None, "M").properties["DELAY"] == "7"


def test_after_max_reconsume_times_it_goes_to_the_dead_letter_queue() -> None:
    assert send_back("%RETRY%cg", "", "", failed(15), b"x", NOW, "cg", 0, None, "M").topic == "%RETRY%cg"
    dlq = send_back("%RETRY%cg", "", "", failed(16, DELAY="18"), b"x", NOW, "cg", 0, None, "M")
    assert (dlq.topic, dlq.queue_id, "DELAY" in dlq.properties) == ("%DLQ%cg", 0, False)
    assert send_back("Orders", "", "", failed(2), b"x", NOW, "cg", 0, 2, "M").topic == "%DLQ%cg"  # the header's
    assert send_back("Orders", "", "", failed(0), b"x", NOW, "cg", -1, None, "M").topic == "%DLQ%cg"  # asked


def test_the_clients_fallback_send_to_the_retry_topic_goes_to_the_dlq_past_the_limit() -> None:
    fallback = Message("%RETRY%cg", b"x", "", "", 0, {"DELAY": "5"})
    assert dead_letter(fallback, 2, 2) is fallback
    dlq = dead_letter(fallback, 3, 2)
    assert (dlq.topic, dlq.properties) == ("%DLQ%cg", {})
    assert dead_letter(fallback, 17, None).topic == "%DLQ%cg"
    plain = Message("Orders", b"x")
    assert dead_letter(plain, 99, 1) is plain
