"""The consumer groups this broker knows from client heartbeats (RocketMQ's ConsumerManager), pure:
no I/O, time passed in.

A client's heartbeat (HEART_BEAT, 34) lists its consumer groups and their subscriptions; the broker
keeps, per group, each client id with the connection it came on and when it was last heard. Clients read
the list back (GET_CONSUMER_LIST_BY_GROUP, 38) to share out a topic's queues among themselves, so a
client must leave it when it goes: when it says so (UNREGISTER_CLIENT, 35), when its connection closes,
or when it has not been heard for ``CLIENT_EXPIRY_MS`` (RocketMQ's 120 s). Every change that adds or
removes a client is reported back, so the broker can tell the group's other clients to rebalance now
(NOTIFY_CONSUMER_IDS_CHANGED, 40) instead of at their next periodic rebalance.

The subscription a group registered also serves pulls that do not carry one (a Java push consumer sends
its expression only in heartbeats).

Bounds: ``MAX_GROUPS`` groups and ``MAX_CLIENTS`` clients in a group; a registration beyond either is
refused (``RegistryFull``), so a client inventing names cannot grow the broker's memory without bound.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field

__all__ = ["CLIENT_EXPIRY_MS", "MAX_CLIENTS", "MAX_GROUPS", "ConsumerGroups", "RegistryFull"]

CLIENT_EXPIRY_MS = 120_000
MAX_GROUPS = 10_000
MAX_CLIENTS = 10_000


class RegistryFull(Exception):
    """A heartbeat would add a group or a client beyond the registry's bounds."""


@dataclass
class _Client:
    channel: Hashable
    last_seen_ms: int
    subscriptions: dict[str, str] = field(default_factory=dict)  # topic -> expression


class ConsumerGroups:
    def __init__(self) -> None:
        self._groups: dict[str, dict[str, _Client]] = {}

    def register(self, group: str, client_id: str, channel: Hashable, subscriptions: Mapping[str, str],
                 now_ms: int) -> bool:
        """A heartbeat from ``client_id`` for ``group``; True if the group's membership changed (a new
        client, or a known one on another connection)."""
        clients = self._groups.get(group)
        if clients is None:
            if len(self._groups) >= MAX_GROUPS:
                raise RegistryFull(f"this broker already knows {MAX_GROUPS} consumer groups")
            clients = self._groups[group] = {}
        known = clients.get(client_id)
        if known is None and len(clients) >= MAX_CLIENTS:
            raise RegistryFull(f"consumer group {group} already has {MAX_CLIENTS} clients")
        clients[client_id] = _Client(channel, now_ms, dict(subscriptions))
        return known is None or known.channel != channel

    def unregister(self, group: str, client_id: str) -> bool:
        clients = self._groups.get(group)
        if clients is None or clients.pop(client_id, None) is None:
            return False
        if not clients:
            del self._groups[group]
        return True

    def channel_closed(self, channel: Hashable) -> list[str]:
        """Forget every client that came on ``channel``; returns the groups that lost one."""
        return self._remove(lambda c: c.channel == channel)

    def expire(self, now_ms: int) -> list[str]:
        """Forget clients not heard for CLIENT_EXPIRY_MS; returns the groups that lost one."""
        return self._remove(lambda c: now_ms - c.last_seen_ms > CLIENT_EXPIRY_MS)

    def _remove(self, gone: Callable[[_Client], bool]) -> list[str]:
        changed = []
        for group, clients in list(self._groups.items()):
            leaving = [cid for cid, client in clients.items() if gone(client)]
            for cid in leaving:
                del clients[cid]
            if leaving:
                changed.append(group)
            if not clients:
                del self._groups[group]
        return changed

    def client_ids(self, group: str) -> list[str]:
        return sorted(self._groups.get(group, {}))

    def channels(self, group: str) -> list[Hashable]:
        return [client.channel for client in self._groups.get(group, {}).values()]

    def subscription(self, group: str, topic: str) -> str | None:
        """The expression a client of ``group`` registered for ``topic`` (the most recently heard)."""
        clients = sorted(self._groups.get(group, {}).values(), key=lambda c: c.last_seen_ms, reverse=True)
        return next((c.subscriptions[topic] for c in clients if topic in c.subscriptions), None)

    def groups(self) -> list[str]:
        return sorted(self._groups)
