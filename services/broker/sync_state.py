"""The master's view of its SyncStateSet: committed set, in-flight proposal, caught-up times.

The local set changes only after the controller commits an alter. While a proposal is in flight (or its
outcome is unknown, e.g. the reply was lost), writes count against the union of both sets. Shrink and
expand decisions are pure functions of the caught-up table and an injected time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass
class SyncStateTracker:
    self_id: int
    local: frozenset[int] = frozenset()
    local_epoch: int = 0
    remote: frozenset[int] | None = None
    caught_up_ms: dict[int, int] = field(default_factory=dict)

    @property
    def synchronizing(self) -> bool:
        return self.remote is not None

    def effective(self) -> frozenset[int]:
        return self.local | (self.remote or frozenset())

    def in_sync_nums(self) -> int:
        return max(len(self.local), len(self.remote)) if self.remote is not None else len(self.local)

    def reset(self, members: Iterable[int], epoch: int) -> None:
        self.local, self.local_epoch, self.remote = frozenset(members), epoch, None
        self.caught_up_ms.clear()

    def committed(self, members: Iterable[int], epoch: int) -> bool:
        """The controller committed ``members`` at ``epoch``; applied only if newer."""
        if epoch <= self.local_epoch:
            return False
        self.local, self.local_epoch, self.remote = frozenset(members), epoch, None
        return True

    def propose(self, members: Iterable[int]) -> None:
        self.remote = frozenset(members)

    def refused(self) -> None:
        """The controller definitely did not commit the proposal."""
        self.remote = None

    def record_caught_up(self, slave_id: int, now_ms: int) -> None:
        self.caught_up_ms[slave_id] = max(now_ms, self.caught_up_ms.get(slave_id, 0))

    def expand_candidate(self, slave_id: int, ack: int, confirm: int, last_epoch_start: int,
                         learner: bool, caught_up: bool = True) -> frozenset[int] | None:
        """A caught-up slave (its ack holds what the master had at its last transfer, RocketMQ's
        ``lastMasterMaxOffset``) whose ack reached confirmOffset and the current epoch's start joins the set."""
        if learner or not caught_up or slave_id in self.effective() or ack < confirm or ack < last_epoch_start:
            return None
        return self.local | {slave_id}

    def shrink_candidate(self, now_ms: int, connected: Iterable[int], max_not_catchup_ms: int) -> frozenset[int] | None:
        """Members other than the master that lag too long or have no connection leave the set."""
        alive = set(connected)
        keep = {self.self_id}
        for member in self.local:
            if member == self.self_id:
                continue
            last = self.caught_up_ms.get(member)
            if member in alive and last is not None and now_ms - last <= max_not_catchup_ms:
                keep.add(member)
        new = frozenset(keep)
        return None if new == self.local else new
