"""Which client of a consumer group holds each queue, for orderly consumers (RocketMQ's
RebalanceLockManager), pure: no I/O, no clock (every call is given the time).

An orderly consumer (``MessageListenerOrderly``) consumes a queue only while it holds the queue's lock on
the broker: it locks the queues its rebalance gives it (LOCK_BATCH_MQ, 41) before pulling, renews them
every 20 s (``lockAll``), and releases them when a rebalance takes a queue away or it shuts down
(UNLOCK_BATCH_MQ, 42). The table holds, per group and queue, the owning client id and when it last locked
or renewed. A lock is:

* granted to its owner again (a renewal), which moves its time on;
* granted to another client only once it has expired: ``max_live_ms`` (RocketMQ's
  ``rocketmq.broker.rebalance.lockMaxLiveTime``, 60 s) since the owner's last renewal, strictly more;
* released only by its owner (an unlock from another client changes nothing).

The client keeps its own lock for 30 s without a renewal, less than the broker's 60 s, so a client that
stops renewing stops consuming before any other client can take its queue. A closed connection or an
unregistered client releases nothing, as in RocketMQ, for the same reason: the client may still be
consuming what it pulled.

Bounds (RocketMQ keeps every entry for ever): an expired entry is dropped when met and by ``purge``; at most
``max_locks`` entries in all. A lock that would pass the bound is not granted (the client retries at its
next renewal), and each refusal is counted in ``refused_full``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from services.remoting.broker_bodies import MessageQueue

__all__ = ["DEFAULT_MAX_LIVE_MS", "MAX_LOCKS", "RebalanceLocks"]

DEFAULT_MAX_LIVE_MS = 60_000
MAX_LOCKS = 200_000


@dataclass
class _Lock:
    client_id: str
    renewed_ms: int


class RebalanceLocks:
    def __init__(self, max_live_ms: int = DEFAULT_MAX_LIVE_MS, max_locks: int = MAX_LOCKS) -> None:
        self.max_live_ms = max_live_ms
        self.max_locks = max_locks
        self._groups: dict[str, dict[MessageQueue, _Lock]] = {}
        self._count = 0
        self.refused_full = 0

    def _expired(self, lock: _Lock, now_ms: int) -> bool:
        return now_ms - lock.renewed_ms > self.max_live_ms

    def try_lock_batch(self, group: str, queues: Iterable[MessageQueue], client_id: str,
                       now_ms: int) -> frozenset[MessageQueue]:
        """Lock or renew each queue for ``client_id``; returns the queues it now holds."""
        locks = self._groups.setdefault(group, {})
        held = set()
        for queue in queues:
            lock = locks.get(queue)
            if lock is not None and lock.client_id != client_id and not self._expired(lock, now_ms):
                continue  # another client's, alive
            if lock is None and self._count >= self.max_locks:
                self.refused_full += 1
                continue
            if lock is None:
                self._count += 1
            locks[queue] = _Lock(client_id, now_ms)
            held.add(queue)
        if not locks:
            del self._groups[group]
        return frozenset(held)

    def unlock_batch(self, group: str, queues: Iterable[MessageQueue], client_id: str) -> frozenset[MessageQueue]:
        """Release each queue ``client_id`` holds (expired or not); returns those released."""
        locks = self._groups.get(group, {})
        released = frozenset(q for q in queues if q in locks and locks[q].client_id == client_id)
        for queue in released:
            del locks[queue]
        self._count -= len(released)
        if group in self._groups and not locks:
            del self._groups[group]
        return released

    def owner(self, group: str, queue: MessageQueue, now_ms: int) -> str | None:
        """The client holding the queue's lock now (None: free, or expired)."""
        lock = self._groups.get(group, {}).get(queue)
        return None if lock is None or self._expired(lock, now_ms) else lock.client_id

    def purge(self, now_ms: int) -> int:
        """Drop every expired entry; returns how many."""
        dropped = 0
        for group, locks in list(self._groups.items()):
            for queue in [q for q, lock in locks.items() if self._expired(lock, now_ms)]:
                del locks[queue]
                dropped += 1
            if not locks:
                del self._groups[group]
        self._count -= dropped
        return dropped

    def __len__(self) -> int:
        return self._count
