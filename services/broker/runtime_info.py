"""The table a broker answers GET_BROKER_RUNTIME_INFO (28) with: the keys RocketMQ 5.3's broker reports
(its StoreStatsService, DefaultMessageStore and AdminBrokerProcessor.prepareRuntimeInfo), every value a
string, built from ``RuntimeFacts`` (pure: the caller reads the broker and the disks).

Values we count are real (stats.py): the put and get TPS over 10, 60 and 600 s, totals, sizes, latencies,
the day totals mqadmin's ``clusterList -m`` subtracts. The commitlog's offsets, its first message's store
time, the disks' used ratios (rounded up to whole percents, as RocketMQ rounds them) and what is not yet
flushed are read from the store. Keys that have no meaning for this broker carry a documented constant:

==========================================  =========================================================
key                                         constant, and why
==========================================  =========================================================
pageCacheLockTimeMills                      0: appends take no page-cache lock that can be held long
dispatchMaxBuffer                           0: consume queues are written in the append, no buffer
timerReadBehind, timerOffsetBehind,         0, 0, 0, 0.0, 0.0: no timer wheel (RocketMQ's own values
timerCongestNum, timerEnqueueTps,           when timerWheelEnable is false)
timerDequeueTps
remainTransientStoreBufferNumbs             2147483647: no transient store pool (RocketMQ's value then)
*ThreadPoolQueueSize, *HeadWaitTimeMills,   0: requests are served on the event loop, never queued for
EndTransactionQueueSize                     a pool; the capacities are RocketMQ's defaults
startAcceptSendRequestTimeStamp             0: sends are accepted from start (RocketMQ's default)
==========================================  =========================================================

No ``scheduleMessageOffset_*`` key is reported: this broker has no delay levels (as a RocketMQ broker whose
schedule service never ran).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

from services.broker.config import BrokerConfig
from services.broker.stats import LATENCY_DESC, BrokerStats, java_double
from services.broker.store import MessageStore
from services.remoting.command import DEFAULT_VERSION, version_desc

__all__ = ["POOL_CAPACITIES", "RuntimeFacts", "disk_used_ratio", "human_bytes", "runtime_facts", "runtime_table",
           "version_desc"]

#: RocketMQ's BrokerConfig defaults for the pool queues it reports.
POOL_CAPACITIES = {"send": 10000, "pull": 100000, "litePull": 100000, "query": 20000, "ack": 100000}
END_TRANSACTION_CAPACITY = 100000
INT_MAX = 2**31 - 1
@dataclass(frozen=True)
class RuntimeFacts:
    """What the runtime table reads of the broker besides its counters."""

    now_ms: int
    version: int
    master: bool
    commitlog_dir: str
    store_dir: str
    min_offset: int
    max_offset: int
    flushed_offset: int
    dispatched_offset: int
    earliest_message_ms: int
    commitlog_disk_ratio: float
    consume_queue_disk_ratio: float
    store_capacity: tuple[int, int]  # total and free bytes of the store's disk


def human_bytes(count: int) -> str:
    """MixAll.humanReadableByteCount(count, false): ``512 B``, ``1.5 KiB``."""
    if count < 1024:
        return f"{count} B"
    exp = 0
    value = float(count)
    while value >= 1024 and exp < 6:
        value /= 1024
        exp += 1
    return f"{count / 1024**exp:.1f} {'KMGTPE'[exp - 1]}iB"


def disk_used_ratio(path: str) -> float:
    """UtilAll.getDiskPartitionSpaceUsedPercent: used / (used + usable), rounded up to a whole percent; -1.0
    if the path cannot be read."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1.0
    total, free, usable = st.f_blocks * st.f_frsize, st.f_bfree * st.f_frsize, st.f_bavail * st.f_frsize
    used = total - free
    entire = used + usable
    if total <= 0 or entire <= 0:
        return -1.0
    return (used * 100 // entire + (1 if used * 100 % entire else 0)) / 100.0


def _runtime(elapsed_ms: int) -> str:
    """StoreStatsService's ``runtime``: a MessageFormat, so numbers of a thousand or more are grouped."""
    seconds = max(elapsed_ms, 0) // 1000
    days, hours, minutes, secs = seconds // 86400, seconds % 86400 // 3600, seconds % 3600 // 60, seconds % 60
    return f"[ {days:,} days, {hours} hours, {minutes} minutes, {secs} seconds ]"


def _store_stats(stats: BrokerStats, now_ms: int) -> dict[str, str]:
    total = stats.put_times.total or 1  # RocketMQ divides by at least one
    distribution = stats.last_minute_latency(now_ms)
    found, miss = stats.get_found, stats.get_miss
    gets = [(f, m) for f, m in ((found.rate(w, now_ms), miss.rate(w, now_ms)) for w in (10, 60, 600))]
    return {
        "bootTimestamp": str(stats.boot_ms), "runtime": _runtime(now_ms - stats.boot_ms),
        "putMessageEntireTimeMax": str(stats.put_time_max_ms), "putMessageTimesTotal": str(total),
        "putMessageFailedTimes": str(stats.put_failed), "putMessageSizeTotal": str(stats.put_size_total),
        "putMessageDistributeTime": "".join(f"{d}:{n} " for d, n in zip(LATENCY_DESC, distribution, strict=True)),
        "putMessageAverageSize": java_double(stats.put_size_total / total), "dispatchMaxBuffer": "0",
        "getMessageEntireTimeMax": str(stats.get_time_max_ms), "putTps": stats.put_times.tps_triple(now_ms),
        "getFoundTps": found.tps_triple(now_ms), "getMissTps": miss.tps_triple(now_ms),
        "getTotalTps": " ".join("" if f is None or m is None else java_double(f + m) for f, m in gets),
        "getTransferredTps": stats.transferred.tps_triple(now_ms),
        "putLatency99": f"{stats.latency_percentile(0.99, now_ms):.2f}",
        "putLatency999": f"{stats.latency_percentile(0.999, now_ms):.2f}",
    }


def _store(facts: RuntimeFacts) -> dict[str, str]:
    ratio = java_double(facts.commitlog_disk_ratio)
    total, free = facts.store_capacity
    return {
        f"commitLogDiskRatio_{facts.commitlog_dir}": ratio, "commitLogDiskRatio": ratio,
        "consumeQueueDiskRatio": java_double(facts.consume_queue_disk_ratio),
        "commitLogMinOffset": str(facts.min_offset), "commitLogMaxOffset": str(facts.max_offset),
        "dispatchBehindBytes": str(max(facts.max_offset - facts.dispatched_offset, 0)),
        "pageCacheLockTimeMills": "0", "earliestMessageTimeStamp": str(facts.earliest_message_ms),
        "startAcceptSendRequestTimeStamp": "0", "remainTransientStoreBufferNumbs": str(INT_MAX),
        "remainHowManyDataToFlush": human_bytes(max(facts.max_offset - facts.flushed_offset, 0)),
        "commitLogDirCapacity": f"Total : {human_bytes(total)}, Free : {human_bytes(free)}.",
    }


def _pools() -> dict[str, str]:
    table = {"timerReadBehind": "0", "timerOffsetBehind": "0", "timerCongestNum": "0", "timerEnqueueTps": "0.0",
             "timerDequeueTps": "0.0", "EndTransactionQueueSize": "0",
             "EndTransactionThreadPoolQueueCapacity": str(END_TRANSACTION_CAPACITY)}
    for pool, capacity in POOL_CAPACITIES.items():
        table[f"{pool}ThreadPoolQueueSize"] = "0"
        table[f"{pool}ThreadPoolQueueCapacity"] = str(capacity)
        table[f"{pool}ThreadPoolQueueHeadWaitTimeMills"] = "0"
    return table


def runtime_table(stats: BrokerStats, facts: RuntimeFacts) -> dict[str, str]:
    """The whole table (the body of 28 is ``{"table": <this>}``)."""
    table = {**_store_stats(stats, facts.now_ms), **_store(facts), **_pools(),
             "brokerActive": "true" if facts.master else "false",
             "brokerVersionDesc": version_desc(facts.version), "brokerVersion": str(facts.version)}
    table.update({k: str(v) for k, v in stats.day_totals(facts.now_ms).items()})
    return table


def runtime_facts(config: BrokerConfig, store: MessageStore, flushed: int, master: bool, now_ms: int) -> RuntimeFacts:
    """Read the facts of a running broker: its store's offsets and first message, and its disks."""
    first = store.commitlog.check_at(store.min_offset) if store.max_offset > store.min_offset else "empty"
    root = str(config.store_dir)
    try:
        usage = shutil.disk_usage(root)
        capacity = (usage.total, usage.free)
    except OSError:
        capacity = (0, 0)
    return RuntimeFacts(now_ms, DEFAULT_VERSION, master, str(config.commitlog_dir), root, store.min_offset,
                        store.max_offset, flushed, store.reput_offset,
                        -1 if isinstance(first, str) else first.store_timestamp,
                        disk_used_ratio(str(config.commitlog_dir)), disk_used_ratio(root), capacity)
