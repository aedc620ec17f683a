"""BrokerHeartbeatManager (§4.2, §7.5) on a fake clock."""

from __future__ import annotations

from dataclasses import replace

import pytest

from services.common.clock import FakeClock
from services.controller.heartbeat import (
    DEFAULT_BROKER_CHANNEL_EXPIRED_TIME,
    MAX_PRIORITY,
    PAUSE_TOLERANCE_MS,
    TICK_MS,
    BrokerHeartbeatManager,
    BrokerIdentity,
    BrokerLiveInfo,
    Heartbeat,
)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start_ms=1_000_000)


@pytest.fixture
def hb(clock: FakeClock) -> BrokerHeartbeatManager:
    return BrokerHeartbeatManager(clock)


def beat(broker_id: int = 1, *, addr: str = "127.0.0.1:7000", epoch: int = -1, max_offset: int = -1,
         confirm: int = -1, timeout: int = 3000, priority: int = 0, learner: bool = False,
         cluster: str = "cluster1", name: str = "broker1") -> Heartbeat:
    return Heartbeat(cluster, name, addr, broker_id, epoch, max_offset, confirm, timeout, priority, learner)


class TestLiveness:
    def test_detect_broker_alive(self, hb: BrokerHeartbeatManager, clock: FakeClock) -> None:
        """§7.5 testDetectBrokerAlive: one heartbeat with timeout 3000 expires after 3000 ms."""
        hb.on_heartbeat(beat(1, epoch=1, max_offset=1, confirm=-1, timeout=3000, priority=0))
        assert hb.is_active("broker1", 1)
        assert hb.scan_expired() == []
        clock.advance(3000)
        assert hb.is_active("broker1", 1)  # last + timeout >= now
        assert hb.scan_expired() == []
        clock.advance(1)
        assert not hb.is_active("broker1", 1)
        expired = hb.scan_expired()
        assert [(e.clusterName, e.brokerName, e.brokerAddr, e.brokerId) for e in expired] == [
            ("cluster1", "broker1", "127.0.0.1:7000", 1)]
        # removed: a second scan reports nothing, and the entry is gone
        assert hb.scan_expired() == []
        assert hb.get("cluster1", "broker1", 1) is None
        assert hb.find("broker1", 1) is None
        assert not hb.is_active("broker1", 1)

    def test_lookup_by_name_with_one_name_in_two_clusters(self, hb: BrokerHeartbeatManager,
                                                          clock: FakeClock) -> None:
        """find() answers the first registered holder of (name, id); removing or expiring it falls
        through to the next, and remove() drops all of them."""
        hb.on_heartbeat(beat(1, cluster="c1", addr="a1", timeout=1000))
        clock.advance(500)
        hb.on_heartbeat(beat(1, cluster="c2", addr="a2", timeout=3000))
        info = hb.find("broker1", 1)
        assert info is not None and info.brokerAddr == "a1"
        clock.advance(600)
        assert [e.clusterName for e in hb.scan_expired()] == ["c1"]
        info = hb.find("broker1", 1)
        assert info is not None and info.brokerAddr == "a2"
        hb.on_heartbeat(beat(1, cluster="c1", addr="a1"))
        hb.remove("broker1", 1)
        assert hb.find("broker1", 1) is None and hb.snapshot() == []
        hb.on_heartbeat(beat(1, cluster="c1", addr="a3"))
        info = hb.find("broker1", 1)
        assert info is not None and info.brokerAddr == "a3"

    def test_heartbeat_refreshes(self, hb: BrokerHeartbeatManager, clock: FakeClock) -> None:
        hb.on_heartbeat(beat(1, timeout=3000))
        for _ in range(10):
            clock.advance(2000)
            hb.on_heartbeat(beat(1, timeout=3000))
            assert hb.scan_expired() == []
        assert hb.is_active("broker1", 1)
        info = hb.get("cluster1", "broker1", 1)
        assert info is not None and info.lastUpdateMs == clock.monotonic_ms()

    def test_only_expired_entries_are_scanned_out(self, hb: BrokerHeartbeatManager, clock: FakeClock) -> None:
        hb.on_heartbeat(beat(1, timeout=3000))
        hb.on_heartbeat(beat(2, timeout=10_000))
        clock.advance(5000)
        hb.on_heartbeat(beat(3, timeout=1000))
        expired = hb.scan_expired()
        assert [e.brokerId for e in expired] == [1]
        assert sorted(i.brokerId for i in hb.snapshot()) == [2, 3]
        assert hb.is_active("broker1", 2) and hb.is_active("broker1", 3)

    def test_absent_entry_is_not_active(self, hb: BrokerHeartbeatManager) -> None:
        assert not hb.is_active("broker1", 1)
        assert hb.get("cluster1", "broker1", 1) is None

    def test_timeout_is_refreshed_by_each_heartbeat(self, hb: BrokerHeartbeatManager, clock: FakeClock) -> None:
        hb.on_heartbeat(beat(1, timeout=10_000))
        hb.on_heartbeat(beat(1, timeout=1000))
        clock.advance(1001)
        assert not hb.is_active("broker1", 1)
        assert [e.brokerId for e in hb.scan_expired()] == [1]

    def test_negative_timeout_is_dead_immediately(self, hb: BrokerHeartbeatManager) -> None:
        hb.on_heartbeat(beat(1, timeout=-10_000))
        assert not hb.is_active("broker1", 1)

    def test_broker_live_info_is_alive(self) -> None:
        info = BrokerLiveInfo("c", "n", "a", 1, lastUpdateMs=100, heartbeatTimeoutMs=50)
        assert info.is_alive(150)
        assert not info.is_alive(151)
        assert info.identity == BrokerIdentity("c", "n", 1)

    def test_re_insert_after_expiry(self, hb: BrokerHeartbeatManager, clock: FakeClock) -> None:
        hb.on_heartbeat(beat(1, epoch=5, max_offset=500, timeout=1000))
        clock.advance(2000)
        hb.scan_expired()
        # a fresh entry: progress starts over from what the broker reports now
        hb.on_heartbeat(beat(1, epoch=1, max_offset=10, timeout=1000))
        info = hb.get("cluster1", "broker1", 1)
        assert info is not None and (info.epoch, info.maxOffset) == (1, 10)


class TestProgress:
    def test_first_insert_stores_everything_including_confirm_offset(self, hb: BrokerHeartbeatManager,
                                                                       clock: FakeClock) -> None:
        hb.on_heartbeat(beat(1, addr="h:1", epoch=2, max_offset=200, confirm=150, timeout=4000, priority=7,
                             learner=True))
        info = hb.get("cluster1", "broker1", 1)
        assert info == BrokerLiveInfo("cluster1", "broker1", "h:1", 1, clock.monotonic_ms(), 4000, 2, 200, 150, 7,
                                      True)

    def test_heartbeat_defaults(self, hb: BrokerHeartbeatManager) -> None:
        hb.on_heartbeat(Heartbeat("c", "n", "h:1", 1))
        info = hb.get("c", "n", 1)
        assert info is not None
        assert (info.epoch, info.maxOffset, info.confirmOffset) == (-1, -1, -1)
        assert info.heartbeatTimeoutMs == DEFAULT_BROKER_CHANNEL_EXPIRED_TIME == 10_000
        assert info.electionPriority == MAX_PRIORITY == 2**31 - 1
        assert info.asyncLearner is False

    @pytest.mark.parametrize(("epoch", "offset", "confirm", "expected"), [
        (1, 101, 90, (1, 101, 90)),     # same epoch, higher offset: updated
        (2, 5, 1, (2, 5, 1)),           # higher epoch, lower offset: updated
        (1, 100, 99, (1, 100, 50)),     # same epoch, same offset: kept (confirmOffset too)
        (1, 99, 99, (1, 100, 50)),      # same epoch, lower offset: kept
        (0, 10_000, 99, (1, 100, 50)),  # lower epoch: kept
    ])
    def test_progress_only_moves_forward(self, hb: BrokerHeartbeatManager, epoch: int, offset: int,
                                         confirm: int, expected: tuple[int, int, int]) -> None:
        hb.on_heartbeat(beat(1, epoch=1, max_offset=100, confirm=50))
        hb.on_heartbeat(beat(1, epoch=epoch, max_offset=offset, confirm=confirm))
        info = hb.get("cluster1", "broker1", 1)
        assert info is not None
        assert (info.epoch, info.maxOffset, info.confirmOffset) == expected

    def test_address_priority_timeout_and_learner_always_refreshed(self, hb: BrokerHeartbeatManager,
                                                                    clock: FakeClock) -> None:
        hb.on_heartbeat(beat(1, addr="old:1", epoch=3, max_offset=30, priority=1, timeout=3000))
        clock.advance(10)
        hb.on_heartbeat(beat(1, addr="new:1", epoch=1, max_offset=1, priority=9, timeout=5000, learner=True))
        info = hb.get("cluster1", "broker1", 1)
        assert info is not None
        assert (info.brokerAddr, info.electionPriority, info.heartbeatTimeoutMs, info.asyncLearner) == (
            "new:1", 9, 5000, True)
        assert info.lastUpdateMs == clock.monotonic_ms()
        assert (info.epoch, info.maxOffset) == (3, 30)


class TestLookup:
    def test_entries_are_keyed_by_cluster_name_and_id(self, hb: BrokerHeartbeatManager) -> None:
        hb.on_heartbeat(beat(1, cluster="c1", name="b", addr="a:1"))
        hb.on_heartbeat(beat(1, cluster="c2", name="b", addr="a:2"))
        hb.on_heartbeat(beat(2, cluster="c1", name="b", addr="a:3"))
        assert len(hb.snapshot()) == 3
        assert hb.get("c1", "b", 1).brokerAddr == "a:1"  # type: ignore[union-attr]
        assert hb.get("c2", "b", 1).brokerAddr == "a:2"  # type: ignore[union-attr]
        assert hb.get("c3", "b", 1) is None

    def test_find_ignores_the_cluster(self, hb: BrokerHeartbeatManager) -> None:
        hb.on_heartbeat(beat(2, cluster="whatever", name="b", addr="a:2"))
        found = hb.find("b", 2)
        assert found is not None and found.brokerAddr == "a:2"
        assert hb.is_active("b", 2)
        assert hb.find("b", 1) is None and hb.find("x", 2) is None

    def test_remove(self, hb: BrokerHeartbeatManager) -> None:
        hb.on_heartbeat(beat(1, cluster="c1"))
        hb.on_heartbeat(beat(1, cluster="c2"))
        hb.on_heartbeat(beat(2, cluster="c1"))
        hb.remove("broker1", 1)
        assert [i.brokerId for i in hb.snapshot()] == [2]
        hb.remove("broker1", 9)  # unknown: no error
        assert len(hb.snapshot()) == 1

    def test_snapshot_is_a_copy(self, hb: BrokerHeartbeatManager) -> None:
        hb.on_heartbeat(beat(1))
        snap = hb.snapshot()
        snap.clear()
        assert len(hb.snapshot()) == 1

    def test_uptime(self, clock: FakeClock) -> None:
        hb = BrokerHeartbeatManager(clock)
        assert hb.uptime_ms() == 0
        clock.advance(1234)
        assert hb.uptime_ms() == 1234


def test_fake_clock() -> None:
    c = FakeClock(5)
    assert c.now_ms() == c.monotonic_ms() == 5
    c.advance(10)
    assert c.now_ms() == c.monotonic_ms() == 15


class TestIncarnations:
    """A restarted broker process is a new incarnation: what the old one reported is not credited to it."""

    def test_a_registration_keeps_the_broker_alive_but_forgets_its_progress(
            self, hb: BrokerHeartbeatManager, clock: FakeClock) -> None:
        hb.on_heartbeat(replace(beat(1, epoch=3, max_offset=900, timeout=3000), incarnation=11))
        clock.advance(2500)
        hb.registered("broker1", 1)
        clock.advance(2500)  # past the old heartbeat's timeout, not the registration's
        info = hb.find("broker1", 1)
        assert info is not None and hb.is_active("broker1", 1) and hb.scan_expired() == []
        assert (info.epoch, info.maxOffset, info.confirmOffset, info.incarnation) == (-1, -1, -1, 0)
        hb.on_heartbeat(replace(beat(1, epoch=3, max_offset=400), incarnation=12))  # the shorter log
        info = hb.find("broker1", 1)
        assert info is not None and (info.maxOffset, info.incarnation) == (400, 12)

    def test_a_registration_of_a_broker_without_an_entry_creates_none(self, hb: BrokerHeartbeatManager) -> None:
        hb.registered("broker1", 1)
        assert hb.find("broker1", 1) is None and not hb.is_active("broker1", 1)

    def test_another_incarnation_replaces_the_entry_on_any_controller(self, hb: BrokerHeartbeatManager) -> None:
        hb.on_heartbeat(replace(beat(1, epoch=3, max_offset=900), incarnation=11))
        hb.on_heartbeat(replace(beat(1, epoch=3, max_offset=400), incarnation=12))
        info = hb.find("broker1", 1)
        assert info is not None and (info.epoch, info.maxOffset, info.incarnation) == (3, 400, 12)

    def test_within_one_incarnation_progress_only_moves_forward(self, hb: BrokerHeartbeatManager) -> None:
        hb.on_heartbeat(replace(beat(1, epoch=3, max_offset=900), incarnation=11))
        hb.on_heartbeat(replace(beat(1, epoch=3, max_offset=400), incarnation=11))  # late, reordered
        hb.on_heartbeat(beat(1, epoch=3, max_offset=300))  # a broker that does not say (RocketMQ's)
        info = hb.find("broker1", 1)
        assert info is not None and (info.maxOffset, info.incarnation) == (900, 11)


class TestPausesOfTheController:
    """Time the controller did not run is not counted against brokers, once its ticker notes that it runs."""

    def test_a_pause_longer_than_the_timeout_expires_nobody(self, hb: BrokerHeartbeatManager,
                                                            clock: FakeClock) -> None:
        hb.start_noting()
        hb.on_heartbeat(beat(1, timeout=3000))
        clock.advance(500)
        hb.note_running()
        clock.advance(5000)  # the loop stalled: no tick, no heartbeat read
        assert hb.is_active("broker1", 1)
        assert hb.scan_expired() == []
        assert hb.paused_ms == 5000 - TICK_MS
        for _ in range(14):  # running again, and the broker still silent: it expires on its own time
            clock.advance(TICK_MS)
            hb.note_running()
        assert [e.brokerId for e in hb.scan_expired()] == [1]
        assert hb.paused_ms == 5000 - TICK_MS

    def test_a_silent_broker_expires_while_the_controller_ticks(self, hb: BrokerHeartbeatManager,
                                                                 clock: FakeClock) -> None:
        hb.start_noting()
        hb.on_heartbeat(beat(1, timeout=3000))
        hb.on_heartbeat(beat(2, timeout=3000))
        for _ in range(13):  # 3250 ms of ticks, a heartbeat from broker 2 alone every 1000 ms
            clock.advance(TICK_MS)
            hb.note_running()
            if clock.monotonic_ms() % 1000 == 0:
                hb.on_heartbeat(beat(2, timeout=3000))
        assert [e.brokerId for e in hb.scan_expired()] == [1]
        assert hb.paused_ms == 0

    def test_a_gap_within_the_tolerance_is_no_pause(self, hb: BrokerHeartbeatManager, clock: FakeClock) -> None:
        hb.start_noting()
        hb.on_heartbeat(beat(1, timeout=1000))
        clock.advance(PAUSE_TOLERANCE_MS)
        assert hb.note_running() == 0
        clock.advance(1)
        assert not hb.is_active("broker1", 1)

    def test_without_the_ticker_nothing_is_credited(self, hb: BrokerHeartbeatManager, clock: FakeClock) -> None:
        hb.on_heartbeat(beat(1, timeout=3000))
        clock.advance(10_000)
        assert hb.note_running() == 0
        assert [e.brokerId for e in hb.scan_expired()] == [1]

    def test_the_credit_never_puts_a_heartbeat_in_the_future(self, hb: BrokerHeartbeatManager,
                                                               clock: FakeClock) -> None:
        hb.start_noting()
        hb.on_heartbeat(beat(1, timeout=3000))
        clock.advance(60_000)
        hb.note_running()
        info = hb.find("broker1", 1)
        assert info is not None and info.lastUpdateMs <= clock.monotonic_ms()
