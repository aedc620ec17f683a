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

Bounds: ``MAX_GROUPS`` groups, ``MAX_CLIENTS`` clients in a group, ``MAX_REGISTRATIONS`` clients in all
groups, ``MAX_SUBSCRIPTION_CHARS`` characters of subscriptions in all; a registration beyond any is refused
(``RegistryFull``), so clients inventing names cannot grow the broker's memory without bound.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field

__all__ = ["CLIENT_EXPIRY_MS", "MAX_CLIENTS", "MAX_GROUPS", "MAX_REGISTRATIONS", "MAX_SUBSCRIPTION_CHARS",
           "ConsumerGroups", "RegistryFull"]

CLIENT_EXPIRY_MS = 120_000
MAX_GROUPS = 10_000
MAX_CLIENTS = 10_000
MAX_REGISTRATIONS = 100_000
MAX_SUBSCRIPTION_CHARS = 64 * 1024 * 1024


class RegistryFull(Exception):
    """A heartbeat would add a group or a client beyond the registry's bounds."""


@dataclass
class _Client:
    channel: Hashable
    last_seen_ms: int
    subscriptions: dict[str, str] = field(default_factory=dict)  # topic -> expression

    @property
    def chars(self) -> int:
        return sum(len(topic) + len(expression) for topic, expression in self.subscriptions.items())


class ConsumerGroups:
    def __init__(self) -> None:
        self._groups: dict[str, dict[str, _Client]] = {}
        self._registrations = 0
        self._chars = 0

    def register(self, group: str, client_id: str, channel: Hashable, subscriptions: Mapping[str, str],
                 now_ms: int) -> bool:
        """A heartbeat from ``client_id`` for ``group``; True if the group's membership changed (a new
        client, or a known one on another connection)."""
        clients = self._groups.get(group)
        known = clients.get(client_id) if clients is not None else None
        client = _Client(channel, now_ms, dict(subscriptions))
        self._check_room(group, clients, known, client)
        if clients is None:
            clients = self._groups[group] = {}
        clients[client_id] = client
        self._registrations += known is None
        self._chars += client.chars - (known.chars if known is not None else 0)
        return known is None or known.channel != channel

    def _check_room(self, group: str, clients: dict[str, _Client] | None, known: _Client | None,
                    client: _Client) -> None:
        if clients is None and len(self._groups) >= MAX_GROUPS:
            raise RegistryFull(f"this broker already knows {MAX_GROUPS} consumer groups")
        if known is None and clients is not None and len(clients) >= MAX_CLIENTS:
            raise RegistryFull(f"consumer group {group} already has {MAX_CLIENTS} clients")
        if known is None and self._registrations >= MAX_REGISTRATIONS:
            raise RegistryFull(f"this broker already knows {MAX_REGISTRATIONS} consumer clients")
        if self._chars + client.chars - (known.chars if known else 0) > MAX_SUBSCRIPTION_CHARS:
            raise RegistryFull(f"the subscriptions this broker keeps would pass {MAX_SUBSCRIPTION_CHARS} characters")

    def unregister(self, group: str, client_id: str) -> bool:
        clients = self._groups.get(group)
        gone = clients.pop(client_id, None) if clients is not None else None
        if clients is None or gone is None:
            return False
        self._forget(gone)
        if not clients:
            del self._groups[group]
        return True

    def _forget(self, client: _Client) -> None:
        self._registrations -= 1
        self._chars -= client.chars

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
                self._forget(clients.pop(cid))
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

    def topics(self, group: str) -> set[str]:
        """Every topic a client of ``group`` subscribes to."""
        return {topic for client in self._groups.get(group, {}).values() for topic in client.subscriptions}
