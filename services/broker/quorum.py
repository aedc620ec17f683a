"""Quorum-write and confirmOffset rules (RIP-34 in controller mode), pure functions.

- ``allAckInSyncStateSet``: a write is acknowledged when every member of the SyncStateSet — the
  *union* of the committed set and a proposed one while an alter is in flight (RocketMQ issue #5663) —
  has it. A member without a connection holds everything up.
- otherwise ``inSyncReplicas`` acks are needed, the master included; 1 or less does not wait. With
  mqctl's ``adaptiveInSyncReplicas`` the need follows the replicas currently in sync (RIP-34's
  ``calcNeedAckNums``, which RocketMQ uses only outside controller mode), never below
  ``minInSyncReplicas``.
- confirmOffset (master): with allAck, the smallest ack over the set; it does not move while a member
  has no connection or has not acked yet on its connection (RocketMQ ignores such members, which lets
  consumers read what a failover to that member would remove); without allAck, the max offset.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

ALL_ACK = -1


def need_ack_nums(all_ack: bool, in_sync_replicas: int, auto: bool = False, min_in_sync: int = 1,
                  in_sync_now: int = 1) -> int:
    if all_ack:
        return ALL_ACK
    need = in_sync_replicas
    if auto:
        need = max(min(need, in_sync_now), min_in_sync)
    return need


def quorum_offset(need: int, acks: Mapping[int, int], members: Iterable[int], self_id: int,
                  master_max: int) -> int:
    """The largest offset the quorum rule currently acknowledges."""
    if need == ALL_ACK:
        others = [m for m in members if m != self_id]
        if not others:
            return master_max
        return min(*(acks.get(m, -1) for m in others), master_max)
    if need <= 1:
        return master_max
    ranked = sorted(acks.values(), reverse=True)
    if len(ranked) < need - 1:
        return -1
    return min(ranked[need - 2], master_max)


def confirm_offset(all_ack: bool, acks: Mapping[int, int], members: Iterable[int], self_id: int,
                   connected: Iterable[int], master_max: int) -> int | None:
    """The confirmOffset to move to, or None to keep the current one."""
    if not all_ack:
        return master_max
    others = [m for m in members if m != self_id]
    live = set(connected)
    if any(m not in live or acks.get(m, -1) < 0 for m in others):
        return None  # a member without a connection, or that has not acked yet, holds confirmOffset
    return min([master_max, *(acks[m] for m in others)])
