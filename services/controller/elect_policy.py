"""Master election policy (RocketMQ's ``DefaultElectPolicy``), deterministic.

Candidates are the SyncStateSet first, then (only when unclean election is enabled) every replica.
Dead brokers and async learners are never candidates. The old master wins if it is still a live
candidate; a designated (admin) broker id never falls back to someone else. Otherwise the best replica:
higher epoch, then higher maxOffset, then lower electionPriority, then lower broker id.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from services.controller.heartbeat import BrokerLiveInfo

AlivePredicate = Callable[[str, str, int], bool]  # (clusterName, brokerName, brokerId) -> alive
LiveInfoGetter = Callable[[str, str, int], BrokerLiveInfo | None]


@dataclass(frozen=True)
class ElectionOutcome:
    broker_id: int | None
    unclean: bool = False


class DefaultElectPolicy:
    def __init__(self, alive: AlivePredicate | None = None, live_info: LiveInfoGetter | None = None) -> None:
        self._alive = alive
        self._live_info = live_info

    def elect(self, cluster: str, broker_name: str, sync_state_set: Iterable[int],
              all_replicas: Iterable[int] | None, old_master: int | None,
              prefer: int | None, incumbent: int | None = None) -> ElectionOutcome:
        """``incumbent``: a master that restarted and asks to keep its role; it is ranked like any other
        candidate (its log may have lost its unflushed tail) and only wins ties."""
        chosen = self._try_elect(cluster, broker_name, sync_state_set, old_master, prefer, incumbent)
        if chosen is not None:
            return ElectionOutcome(chosen)
        if all_replicas is not None:
            chosen = self._try_elect(cluster, broker_name, all_replicas, old_master, prefer, incumbent)
            if chosen is not None:
                in_set = chosen in set(sync_state_set)
                return ElectionOutcome(chosen, unclean=not in_set)
        return ElectionOutcome(None)

    def _try_elect(self, cluster: str, broker_name: str, brokers: Iterable[int],
                   old_master: int | None, prefer: int | None, incumbent: int | None = None) -> int | None:
        candidates = sorted(b for b in set(brokers) if self.eligible(cluster, broker_name, b))
        if not candidates:
            return None
        if old_master is not None and old_master in candidates and prefer in (None, old_master):
            return old_master
        if prefer is not None:
            return prefer if prefer in candidates else None
        if self._live_info is None:
            return incumbent if incumbent in candidates else candidates[0]
        return min(candidates, key=lambda b: self._rank(cluster, broker_name, b, incumbent))

    def eligible(self, cluster: str, broker_name: str, broker_id: int) -> bool:
        if self._alive is not None and not self._alive(cluster, broker_name, broker_id):
            return False
        info = self._live_info(cluster, broker_name, broker_id) if self._live_info else None
        return not (info is not None and info.asyncLearner)

    def _rank(self, cluster: str, broker_name: str, broker_id: int,
              incumbent: int | None = None) -> tuple[int, int, int, int, int, int]:
        assert self._live_info is not None
        info = self._live_info(cluster, broker_name, broker_id)
        if info is None:
            return (1, 0, 0, 0, 0, broker_id)  # no live info: after everyone we know about
        return (0, -info.epoch, -info.maxOffset, 0 if broker_id == incumbent else 1, info.electionPriority,
                broker_id)
