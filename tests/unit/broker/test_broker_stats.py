"""The broker's counters and its runtime table (services/broker/stats.py, runtime_info.py), pure: lazy
sampling gives what a once-a-second sampler gives, RocketMQ's TPS windows, the day totals, and every key
RocketMQ 5.3's broker reports, with the documented constants."""

from __future__ import annotations

import dataclasses
import random
import time

import pytest

from services.broker.runtime_info import RuntimeFacts, human_bytes, runtime_table, version_desc
from services.broker.stats import BrokerStats, Sampled, java_double

START = 1_700_000_000_000

#: The keys of RocketMQ 5.3.3's runtime info for a broker without delay levels, with the commitlog at /s/cl
#: (StoreStatsService, DefaultMessageStore and AdminBrokerProcessor.prepareRuntimeInfo, read from its source).
ROCKETMQ_KEYS = {
    "bootTimestamp", "runtime", "putMessageEntireTimeMax", "putMessageTimesTotal", "putMessageFailedTimes",
    "putMessageSizeTotal", "putMessageDistributeTime", "putMessageAverageSize", "dispatchMaxBuffer",
    "getMessageEntireTimeMax", "putTps", "getFoundTps", "getMissTps", "getTotalTps", "getTransferredTps",
    "putLatency99", "putLatency999", "commitLogDiskRatio_/s/cl", "commitLogDiskRatio", "consumeQueueDiskRatio",
    "commitLogMinOffset", "commitLogMaxOffset", "brokerActive", "brokerVersionDesc", "brokerVersion",
    "msgPutTotalYesterdayMorning", "msgPutTotalTodayMorning", "msgPutTotalTodayNow", "msgGetTotalYesterdayMorning",
    "msgGetTotalTodayMorning", "msgGetTotalTodayNow", "dispatchBehindBytes", "pageCacheLockTimeMills",
    "earliestMessageTimeStamp", "startAcceptSendRequestTimeStamp", "timerReadBehind", "timerOffsetBehind",
    "timerCongestNum", "timerEnqueueTps", "timerDequeueTps", "remainTransientStoreBufferNumbs",
    "remainHowManyDataToFlush", "commitLogDirCapacity", "sendThreadPoolQueueSize", "sendThreadPoolQueueCapacity",
    "pullThreadPoolQueueSize", "pullThreadPoolQueueCapacity", "litePullThreadPoolQueueSize",
    "litePullThreadPoolQueueCapacity", "queryThreadPoolQueueSize", "queryThreadPoolQueueCapacity",
    "ackThreadPoolQueueSize", "ackThreadPoolQueueCapacity", "sendThreadPoolQueueHeadWaitTimeMills",
    "pullThreadPoolQueueHeadWaitTimeMills", "queryThreadPoolQueueHeadWaitTimeMills",
    "litePullThreadPoolQueueHeadWaitTimeMills", "ackThreadPoolQueueHeadWaitTimeMills", "EndTransactionQueueSize",
    "EndTransactionThreadPoolQueueCapacity"}


def test_lazy_samples_are_those_of_a_sampler_running_every_second() -> None:
    rng = random.Random(7)
    lazy, eager = Sampled(START), Sampled(START)
    now = START
    for _ in range(3000):
        step = rng.choice([0, 1, 10, 300, 999, 1000, 1001, 4000])
        for second in range(now // 1000 + 1, (now + step) // 1000 + 1):  # the eager one ticks every second
            eager.tick(min(second * 1000 + START % 1000, now + step))
        now += step
        count = rng.randint(1, 5)
        lazy.add(now, count)
        eager.add(now, count)
    assert [lazy.rate(w, now) for w in (10, 60, 600)] == [eager.rate(w, now) for w in (10, 60, 600)]


def test_tps_over_rocketmqs_windows_appears_once_there_are_enough_samples() -> None:
    counter = Sampled(START)
    for second in range(1, 12):
        counter.add(START + second * 1000 - 1, 5)  # five in each second
    assert counter.tps_triple(START + 11_000) == "5.0  "  # 10 s known; 60 and 600 s not yet
    assert counter.rate(600, START + 600_000) == pytest.approx(55 / 600)
    assert counter.tps_triple(START + 10_000_000) == "0.0 0.0 0.0"  # a long idle gap keeps only the window


def test_day_totals_are_the_totals_at_the_last_two_midnights() -> None:
    lt = time.localtime(START / 1000)
    midnight = int(time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday + 1, 0, 0, 0, 0, 0, -1)) * 1000)
    stats = BrokerStats(midnight - 3_600_000)
    stats.on_put(midnight - 1000, {"T": 3}, 300, 1, True)
    stats.on_get(midnight - 1000, "g", "T", 2, 1)
    assert stats.day_totals(midnight - 500)["msgPutTotalTodayMorning"] == 0
    stats.on_put(midnight + 1000, {"T": 4}, 400, 1, True)
    assert stats.day_totals(midnight + 2000) == {
        "msgPutTotalYesterdayMorning": 0, "msgPutTotalTodayMorning": 3, "msgPutTotalTodayNow": 7,
        "msgGetTotalYesterdayMorning": 0, "msgGetTotalTodayMorning": 2, "msgGetTotalTodayNow": 2}
    later = stats.day_totals(midnight + 3 * 86_400_000)  # idle for days: both mornings are the total
    assert (later["msgPutTotalYesterdayMorning"], later["msgPutTotalTodayMorning"]) == (7, 7)


def facts(**changes: object) -> RuntimeFacts:
    base = RuntimeFacts(now_ms=START + 90_061_000, version=479, master=True, commitlog_dir="/s/cl", store_dir="/s",
                        min_offset=0, max_offset=4096, flushed_offset=1024, dispatched_offset=4096,
                        earliest_message_ms=START + 5, commitlog_disk_ratio=0.43, consume_queue_disk_ratio=0.43,
                        store_capacity=(10 * 2**30, 3 * 2**29))
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_the_runtime_table_has_rocketmqs_keys_and_values_in_its_layout() -> None:
    stats = BrokerStats(START)
    stats.on_put(START + 500, {"T": 2}, 400, 12, True)
    stats.on_put(START + 600, {}, 0, 1, False)
    table = runtime_table(stats, facts())
    assert set(table) == ROCKETMQ_KEYS
    assert {k: table[k] for k in ("runtime", "putMessageTimesTotal", "putMessageFailedTimes", "putMessageSizeTotal",
                                  "putMessageAverageSize", "commitLogDiskRatio", "brokerVersionDesc",
                                  "brokerVersion", "brokerActive", "remainHowManyDataToFlush",
                                  "commitLogDirCapacity", "pageCacheLockTimeMills", "timerEnqueueTps",
                                  "remainTransientStoreBufferNumbs", "earliestMessageTimeStamp")} == {
        "runtime": "[ 1 days, 1 hours, 1 minutes, 1 seconds ]", "putMessageTimesTotal": "2",
        "putMessageFailedTimes": "1", "putMessageSizeTotal": "400", "putMessageAverageSize": "200.0",
        "commitLogDiskRatio": "0.43", "brokerVersionDesc": "V5_3_3", "brokerVersion": "479", "brokerActive": "true",
        "remainHowManyDataToFlush": "3.0 KiB", "commitLogDirCapacity": "Total : 10.0 GiB, Free : 1.5 GiB.",
        "pageCacheLockTimeMills": "0", "timerEnqueueTps": "0.0", "remainTransientStoreBufferNumbs": "2147483647",
        "earliestMessageTimeStamp": str(START + 5)}
    assert table["putMessageDistributeTime"].startswith("[<=0ms]:0 [0~10ms]:0 [10~50ms]:0 ")  # the last whole minute
    assert runtime_table(stats, facts(master=False))["brokerActive"] == "false"


@pytest.mark.parametrize(("ordinal", "desc"), [(479, "V5_3_3"), (478, "V5_3_3_SNAPSHOT"), (212, "V4_0_0_SNAPSHOT"),
                                               (401, "V4_9_4"), (611, "V5_9_9"), (612, "HIGHER_VERSION")])
def test_version_descriptions_are_mqversions(ordinal: int, desc: str) -> None:
    assert version_desc(ordinal) == desc


def test_java_number_and_byte_texts() -> None:
    assert [java_double(v) for v in (0.0, 12.5, 1e7, 1e-4, 0.001)] == ["0.0", "12.5", "1.0E7", "1.0E-4", "0.001"]
    assert [human_bytes(n) for n in (0, 1023, 1024, 1536, 5 * 2**40)] == ["0 B", "1023 B", "1.0 KiB", "1.5 KiB",
                                                                          "5.0 TiB"]
