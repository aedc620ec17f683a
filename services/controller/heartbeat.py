"""The controller's local table of live brokers (not replicated: every controller keeps its own).

Brokers heartbeat every controller. An entry expires when ``now - last > timeout``; the periodic scan
removes expired entries and reports them so the leader can elect a new master. Time is injected.

A broker process that restarts is a new incarnation: what its previous process reported (epoch, maxOffset)
must not be credited to it, since a restarted log may be shorter. Its registration resets its entry (alive
as of the registration, progress unknown until its next heartbeat), and a heartbeat that names another
``incarnation`` than the entry's replaces the entry, on every controller, leader or not.

The timeout is the broker's to choose, but the table never holds one above ``max_timeout_ms`` (the
controller's ``maxHeartbeatTimeoutMillis``), whatever path a heartbeat came by: a huge value would keep a
dead master "alive", and the controller's start-up grace (the largest timeout held) would never end.

Time the controller itself did not run is not counted against brokers. Once ``note_running()`` has been
called (the controller's ticker calls it every ``TICK_MS``), a gap between two notes longer than
``PAUSE_TOLERANCE_MS`` is a pause of this controller (its loop stalled, the process stopped, the machine
starved it): heartbeats sent meanwhile sit unread in its sockets, so every entry's last heartbeat is moved
forward by the pause before anything is judged. Whatever judges first after the pause (the ticker, the
scan, a liveness check) applies it. Without it, a leader waking from a pause longer than a heartbeat
timeout deposes every master it leads at once, before it reads the heartbeats that wait for it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, replace

from services.common.clock import Clock

DEFAULT_BROKER_CHANNEL_EXPIRED_TIME = 10_000
#: The default of ``maxHeartbeatTimeoutMillis``: the longest heartbeat timeout a broker may ask for.
MAX_HEARTBEAT_TIMEOUT_MS = 180_000
MAX_PRIORITY = 2**31 - 1
#: How often the controller notes that it runs (``note_running``).
TICK_MS = 250
#: A gap between two notes longer than this is a pause of the controller, credited to every broker.
PAUSE_TOLERANCE_MS = 1000

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BrokerIdentity:
    clusterName: str
    brokerName: str
    brokerId: int


@dataclass(frozen=True)
class BrokerLiveInfo:
    clusterName: str
    brokerName: str
    brokerAddr: str
    brokerId: int
    lastUpdateMs: int
    heartbeatTimeoutMs: int = DEFAULT_BROKER_CHANNEL_EXPIRED_TIME
    epoch: int = -1
    maxOffset: int = -1
    confirmOffset: int = -1
    electionPriority: int = MAX_PRIORITY
    asyncLearner: bool = False
    incarnation: int = 0  # 0: not known (a RocketMQ broker, or reset by a registration)

    @property
    def identity(self) -> BrokerIdentity:
        return BrokerIdentity(self.clusterName, self.brokerName, self.brokerId)

    def is_alive(self, now_ms: int) -> bool:
        return self.lastUpdateMs + self.heartbeatTimeoutMs >= now_ms


@dataclass(frozen=True)
class Heartbeat:
    clusterName: str
    brokerName: str
    brokerAddr: str
    brokerId: int
    epoch: int = -1
    maxOffset: int = -1
    confirmOffset: int = -1
    heartbeatTimeoutMills: int = DEFAULT_BROKER_CHANNEL_EXPIRED_TIME
    electionPriority: int = MAX_PRIORITY
    asyncLearner: bool = False
    #: Which process of the broker sent it (a number it picks at start); 0 if the broker does not say.
    incarnation: int = 0


class BrokerHeartbeatManager:
    """Thread-safe live table. ``on_heartbeat`` from request handlers, ``scan`` from a timer."""

    def __init__(self, clock: Clock, max_timeout_ms: int = MAX_HEARTBEAT_TIMEOUT_MS) -> None:
        self._clock = clock
        self.max_timeout_ms = max_timeout_ms
        self._lock = threading.Lock()
        self._table: dict[BrokerIdentity, BrokerLiveInfo] = {}
        # (brokerName, brokerId) → the identities holding it, oldest first: lookups by name stay O(1)
        # with thousands of brokers (every election and SyncStateSet check asks).
        self._by_name: dict[tuple[str, int], list[BrokerIdentity]] = {}
        self.started_ms = clock.monotonic_ms()
        self._last_running_ms: int | None = None  # None until the first note_running(): no pause credit
        #: Every pause credited so far (ms), for the metrics and the tests.
        self.paused_ms = 0

    def note_running(self) -> int:
        """The controller runs now: credit a pause since the last note to every entry. Returns the pause (ms)."""
        with self._lock:
            return self._catch_up_locked(self._clock.monotonic_ms())

    def _catch_up_locked(self, now: int) -> int:
        last = self._last_running_ms
        if last is None:
            return 0
        self._last_running_ms = max(last, now)
        gap = now - last
        if gap <= PAUSE_TOLERANCE_MS:
            return 0
        pause = gap - TICK_MS
        for key, info in self._table.items():
            self._table[key] = replace(info, lastUpdateMs=min(now, info.lastUpdateMs + pause))
        self.paused_ms += pause
        log.warning("this controller did not run for %d ms; the brokers' heartbeat deadlines are moved by as much",
                    gap)
        return pause

    def start_noting(self) -> None:
        """Turn the pause credit on (the controller's ticker then calls ``note_running`` every TICK_MS)."""
        with self._lock:
            if self._last_running_ms is None:
                self._last_running_ms = self._clock.monotonic_ms()

    def on_heartbeat(self, hb: Heartbeat) -> None:
        now = self._clock.monotonic_ms()
        key = BrokerIdentity(hb.clusterName, hb.brokerName, hb.brokerId)
        timeout = min(hb.heartbeatTimeoutMills, self.max_timeout_ms)
        with self._lock:
            old = self._table.get(key)
            fresh = BrokerLiveInfo(hb.clusterName, hb.brokerName, hb.brokerAddr, hb.brokerId, now, timeout,
                                   hb.epoch, hb.maxOffset, hb.confirmOffset, hb.electionPriority, hb.asyncLearner,
                                   hb.incarnation)
            if old is None:
                self._by_name.setdefault((hb.brokerName, hb.brokerId), []).append(key)
                self._table[key] = fresh
                return
            if hb.incarnation and old.incarnation and hb.incarnation != old.incarnation:
                self._table[key] = fresh  # another process of this broker: nothing of the old one holds
                return
            info = replace(old, brokerAddr=hb.brokerAddr, lastUpdateMs=now,
                           heartbeatTimeoutMs=timeout, incarnation=hb.incarnation or old.incarnation,
                           electionPriority=hb.electionPriority, asyncLearner=hb.asyncLearner)
            # Progress only moves forward while the entry lives (a late, reordered heartbeat must not
            # make a replica look less up to date than it is).
            if hb.epoch > old.epoch or (hb.epoch == old.epoch and hb.maxOffset > old.maxOffset):
                info = replace(info, epoch=hb.epoch, maxOffset=hb.maxOffset, confirmOffset=hb.confirmOffset)
            self._table[key] = info

    def get(self, cluster: str, broker_name: str, broker_id: int) -> BrokerLiveInfo | None:
        with self._lock:
            return self._table.get(BrokerIdentity(cluster, broker_name, broker_id))

    def find(self, broker_name: str, broker_id: int) -> BrokerLiveInfo | None:
        """Look a broker up by name and id (the controller keys broker-sets by name alone)."""
        with self._lock:
            keys = self._by_name.get((broker_name, broker_id))
            return self._table[keys[0]] if keys else None

    def is_active(self, broker_name: str, broker_id: int) -> bool:
        now = self._clock.monotonic_ms()
        with self._lock:
            self._catch_up_locked(now)
            keys = self._by_name.get((broker_name, broker_id))
            info = self._table[keys[0]] if keys else None
        return info is not None and info.is_alive(now)

    def registered(self, broker_name: str, broker_id: int) -> None:
        """The broker registered (again): a new incarnation. Its entry, if it has one, stays alive as of now
        but forgets what the previous process reported, until the next heartbeat says."""
        now = self._clock.monotonic_ms()
        with self._lock:
            for key in self._by_name.get((broker_name, broker_id), []):
                old = self._table[key]
                self._table[key] = replace(old, lastUpdateMs=now, epoch=-1, maxOffset=-1, confirmOffset=-1,
                                           incarnation=0)

    def remove(self, broker_name: str, broker_id: int) -> None:
        with self._lock:
            for key in self._by_name.pop((broker_name, broker_id), []):
                del self._table[key]

    def scan_expired(self) -> list[BrokerLiveInfo]:
        """Remove and return every entry whose heartbeat timed out."""
        now = self._clock.monotonic_ms()
        with self._lock:
            self._catch_up_locked(now)
            dead = [info for info in self._table.values() if not info.is_alive(now)]
            for info in dead:
                del self._table[info.identity]
                keys = self._by_name[(info.brokerName, info.brokerId)]
                keys.remove(info.identity)
                if not keys:
                    del self._by_name[(info.brokerName, info.brokerId)]
        return dead

    def snapshot(self) -> list[BrokerLiveInfo]:
        with self._lock:
            return list(self._table.values())

    def uptime_ms(self) -> int:
        return self._clock.monotonic_ms() - self.started_ms
