"""The order Java's hash collections iterate String keys in, where RocketMQ prints or sends one as it
iterates it (a route's groups, mqadmin's lists of brokers, controller configs).

* ``java.util.HashMap`` / ``HashSet``: a table of 2^k buckets, the bucket of a key the low bits of its
  ``String.hashCode`` with the high half folded in; within a bucket, insertion order (a resize splits a
  bucket keeping that order). The table starts at the capacity asked for (16 by default) and doubles
  whenever it holds more than 3/4 of it.
* ``java.util.concurrent.ConcurrentHashMap`` (what a ``java.util.Properties`` holds since Java 9): the same
  buckets (with the sign bit cleared), but a resize moves the nodes of a bucket ahead of its last run in
  reverse order, so insertion order within a bucket is not kept; simulated here put by put.

All of it is pure: keys in, their iteration order out.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

__all__ = ["concurrent_hash_map_order", "hash_map_order", "hash_set_order", "java_hash_order", "java_string_hash",
           "message_queue_hash", "message_queue_order", "new_hash_set_table_size"]

T = TypeVar("T", bound=Hashable)
_INT = 0xFFFFFFFF

#: ConcurrentHashMap.HASH_BITS: a node's hash never has the sign bit.
_HASH_BITS = 0x7FFFFFFF


def java_string_hash(text: str) -> int:
    """String.hashCode over UTF-16 code units, as an unsigned 32-bit value."""
    units = text.encode("utf-16-be")
    value = 0
    for index in range(0, len(units), 2):
        value = (31 * value + (units[index] << 8 | units[index + 1])) & 0xFFFFFFFF
    return value


def _spread(h: int) -> int:
    return h ^ (h >> 16)  # HashMap.hash: the high half folded into the low


def java_hash_order(keys: Iterable[str], table_size: int) -> list[str]:
    """The order a HashMap (or HashSet) with ``table_size`` buckets iterates String keys inserted in the
    order given: by bucket, and in insertion order within a bucket."""
    return sorted(keys, key=lambda key: _spread(java_string_hash(key)) & (table_size - 1))


def _table_size_for(capacity: int) -> int:
    return 1 << max(capacity - 1, 0).bit_length()


def hash_map_order(keys: Iterable[str], initial_capacity: int = 16) -> list[str]:
    """The order of ``new HashMap<>(initial_capacity)`` (or a HashSet) filled by put in this order (a
    repeated key keeps its first place)."""
    return hash_set_order(keys, java_string_hash, initial_capacity)


def hash_set_order(items: Iterable[T], hash_code: Callable[[T], int], initial_capacity: int = 16) -> list[T]:
    """``hash_map_order`` for items of any class, given its ``hashCode`` (as an unsigned 32-bit value)."""
    distinct = list(dict.fromkeys(items))
    size = _table_size_for(initial_capacity)
    while len(distinct) > size * 3 // 4:
        size *= 2
    return sorted(distinct, key=lambda item: _spread(hash_code(item) & _INT) & (size - 1))


def message_queue_hash(topic: str, broker_name: str, queue_id: int) -> int:
    """MessageQueue.hashCode: 31-based over the broker name, the queue id and the topic."""
    value = 1
    for part in (java_string_hash(broker_name), queue_id, java_string_hash(topic)):
        value = (31 * value + part) & _INT
    return value


def message_queue_order(topic: str, broker_name: str, queue_ids: Iterable[int]) -> list[int]:
    """The queue ids of one broker's topic in the order a ``HashSet<MessageQueue>`` filled in this order
    iterates them (how mqadmin's consumeMessage visits a topic's queues)."""
    return hash_set_order(queue_ids, lambda queue_id: message_queue_hash(topic, broker_name, queue_id))


def new_hash_set_table_size(count: int) -> int:
    """``new HashSet<>(collection)``: capacity max(count / .75 + 1, 16), rounded up to a power of two."""
    return _table_size_for(max(int(count / 0.75) + 1, 16))


def concurrent_hash_map_order(keys: Iterable[str], initial_capacity: int = 8) -> list[str]:
    """The order of ``new ConcurrentHashMap<>(initial_capacity)`` filled by put in this order (Java 17's
    putVal, addCount and transfer; a repeated key keeps its place). ``new Properties()`` asks for 8."""
    size = _table_size_for(int(1.0 + initial_capacity / 0.75))
    table: list[list[tuple[int, str]]] = [[] for _ in range(size)]
    threshold, count, seen = size - (size >> 2), 0, set()
    for key in keys:
        if key in seen:
            continue
        seen.add(key)
        node = (_spread(java_string_hash(key)) & _HASH_BITS, key)
        table[node[0] & (len(table) - 1)].append(node)
        count += 1
        if count >= threshold:
            table = _transfer(table)
            threshold = (len(table) >> 1) + (len(table) >> 2)  # 3/4 of the new table
    return [key for bucket in table for _, key in bucket]


def _transfer(table: list[list[tuple[int, str]]]) -> list[list[tuple[int, str]]]:
    """ConcurrentHashMap.transfer: every bucket i splits into i and i + n; its last run (the longest tail
    whose nodes all go the same way) moves as it is, the nodes before it are put in front one by one."""
    n = len(table)
    grown: list[list[tuple[int, str]]] = [[] for _ in range(2 * n)]
    for index, bucket in enumerate(table):
        if not bucket:
            continue
        last_run = len(bucket) - 1
        while last_run > 0 and bucket[last_run - 1][0] & n == bucket[last_run][0] & n:
            last_run -= 1
        low: list[tuple[int, str]] = []
        high: list[tuple[int, str]] = []
        (high if bucket[last_run][0] & n else low).extend(bucket[last_run:])
        for node in bucket[:last_run]:
            (high if node[0] & n else low).insert(0, node)
        grown[index], grown[index + n] = low, high
    return grown
