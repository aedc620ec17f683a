"""The lock table of orderly consumers (services/broker/rebalance_lock.py), with the time given: RocketMQ's
RebalanceLockManager rules (per group and queue, one owner, renewals, expiry strictly after the live time,
release by the owner only), and the bound RocketMQ does not have."""

from __future__ import annotations

from services.broker.rebalance_lock import RebalanceLocks
from services.remoting.broker_bodies import MessageQueue

Q0, Q1, Q2 = (MessageQueue("T", "broker-a", i) for i in range(3))


def test_a_free_queue_goes_to_the_first_client_and_not_to_a_second() -> None:
    locks = RebalanceLocks(60_000)
    assert locks.try_lock_batch("g", {Q0, Q1}, "c1", 0) == {Q0, Q1}
    assert locks.try_lock_batch("g", {Q1, Q2}, "c2", 1_000) == {Q2}
    assert (locks.owner("g", Q1, 1_000), locks.owner("g", Q2, 1_000)) == ("c1", "c2")


def test_locks_are_per_group_and_per_queue_of_each_broker() -> None:
    locks = RebalanceLocks(60_000)
    assert locks.try_lock_batch("g1", {Q0}, "c1", 0) == {Q0}
    assert locks.try_lock_batch("g2", {Q0}, "c2", 0) == {Q0}
    other_broker = MessageQueue("T", "broker-b", 0)
    assert locks.try_lock_batch("g1", {other_broker}, "c2", 0) == {other_broker}


def test_a_lock_expires_strictly_after_its_live_time_and_a_renewal_moves_it_on() -> None:
    locks = RebalanceLocks(60_000)
    locks.try_lock_batch("g", {Q0}, "c1", 0)
    assert locks.try_lock_batch("g", {Q0}, "c2", 60_000) == frozenset()  # exactly the live time: still held
    assert locks.try_lock_batch("g", {Q0}, "c1", 50_000) == {Q0}  # renewed at 50 s
    assert locks.try_lock_batch("g", {Q0}, "c2", 100_000) == frozenset()
    assert locks.owner("g", Q0, 110_001) is None
    assert locks.try_lock_batch("g", {Q0}, "c2", 110_001) == {Q0}  # expired: the next client takes it
    assert locks.try_lock_batch("g", {Q0}, "c1", 110_002) == frozenset()


def test_an_owner_takes_its_own_expired_lock_back() -> None:
    locks = RebalanceLocks(10)
    locks.try_lock_batch("g", {Q0}, "c1", 0)
    assert locks.try_lock_batch("g", {Q0}, "c1", 1_000) == {Q0}


def test_only_the_owner_releases_and_an_expired_lock_is_still_its_to_release() -> None:
    locks = RebalanceLocks(60_000)
    locks.try_lock_batch("g", {Q0, Q1}, "c1", 0)
    assert locks.unlock_batch("g", {Q0, Q1}, "c2") == frozenset()
    assert locks.owner("g", Q0, 1) == "c1"
    assert locks.unlock_batch("g", {Q0}, "c1") == {Q0}
    assert locks.try_lock_batch("g", {Q0}, "c2", 2) == {Q0}
    assert locks.unlock_batch("g", {Q1}, "c1") == {Q1} and len(locks) == 1
    assert locks.unlock_batch("unknown", {Q1}, "c1") == frozenset()


def test_purge_drops_expired_entries_and_the_table_is_bounded() -> None:
    locks = RebalanceLocks(100, max_locks=2)
    assert locks.try_lock_batch("g", [Q0, Q1, Q2], "c1", 0) == {Q0, Q1} and len(locks) == 2
    assert locks.refused_full == 1
    assert locks.try_lock_batch("g", {Q0, Q1}, "c1", 50) == {Q0, Q1}  # renewals need no room
    assert locks.purge(120) == 0 and locks.purge(151) == 2 and len(locks) == 0
    assert locks.try_lock_batch("g", {Q2}, "c2", 200) == {Q2}
