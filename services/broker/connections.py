"""Who is connected, per producer and consumer group, as mqadmin's consumerConnection and producerConnection
ask (GET_CONSUMER_CONNECTION_LIST, 203; GET_PRODUCER_CONNECTION_LIST, 204): RocketMQ's ClientChannelInfo
(client id, address, language, version) and a consumer group's consume type, message model and where it
starts, as the group's last heartbeat said. Pure: no I/O, time passed in.

A client is forgotten when it unregisters, when its connection closes and when it has not been heard for
CLIENT_EXPIRY_MS, as consumers.py forgets consumers. Bounded: at most MAX_GROUPS groups of each kind and
MAX_CLIENTS clients in a group; a heartbeat beyond a bound is still served, its client just not listed.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

from services.broker.consumers import CLIENT_EXPIRY_MS, MAX_CLIENTS, MAX_GROUPS

__all__ = ["ClientInfo", "ConsumerMode", "Connections"]


@dataclass(frozen=True)
class ClientInfo:
    client_id: str
    address: str
    language: str
    version: int
    channel: Hashable
    last_seen_ms: int


@dataclass(frozen=True)
class ConsumerMode:
    """What a consumer group's heartbeat says of how it consumes (RocketMQ's ConsumerGroupInfo)."""

    consume_type: str | None
    message_model: str | None
    consume_from_where: str | None


class Connections:
    def __init__(self) -> None:
        self._producers: dict[str, dict[str, ClientInfo]] = {}
        self._consumers: dict[str, dict[str, ClientInfo]] = {}
        self._modes: dict[str, ConsumerMode] = {}

    def heard(self, client: ClientInfo, producer_groups: list[str], consumer_groups: list[tuple[str, ConsumerMode]]) \
            -> None:
        for group in producer_groups:
            self._put(self._producers, group, client)
        for group, mode in consumer_groups:
            if self._put(self._consumers, group, client):
                self._modes[group] = mode

    @staticmethod
    def _put(table: dict[str, dict[str, ClientInfo]], group: str, client: ClientInfo) -> bool:
        clients = table.get(group)
        if clients is None:
            if len(table) >= MAX_GROUPS:
                return False
            clients = table[group] = {}
        if client.client_id not in clients and len(clients) >= MAX_CLIENTS:
            return False
        clients[client.client_id] = client
        return True

    def unregister(self, client_id: str, producer_group: str | None, consumer_group: str | None) -> None:
        for table, group in ((self._producers, producer_group), (self._consumers, consumer_group)):
            if group and group in table:
                table[group].pop(client_id, None)
                self._drop_if_empty(table, group)

    def channel_closed(self, channel: Hashable) -> None:
        self._remove(lambda c: c.channel == channel)

    def expire(self, now_ms: int) -> None:
        self._remove(lambda c: now_ms - c.last_seen_ms > CLIENT_EXPIRY_MS)

    def _remove(self, gone: Callable[[ClientInfo], bool]) -> None:
        for table in (self._producers, self._consumers):
            for group, clients in list(table.items()):
                for cid in [cid for cid, c in clients.items() if gone(c)]:
                    del clients[cid]
                self._drop_if_empty(table, group)

    def _drop_if_empty(self, table: dict[str, dict[str, ClientInfo]], group: str) -> None:
        if not table.get(group, True):
            del table[group]
            if table is self._consumers:
                self._modes.pop(group, None)

    def producers(self, group: str) -> list[ClientInfo] | None:
        clients = self._producers.get(group)
        return None if clients is None else sorted(clients.values(), key=lambda c: c.client_id)

    def consumers(self, group: str) -> tuple[list[ClientInfo], ConsumerMode] | None:
        clients = self._consumers.get(group)
        if clients is None:
            return None
        return sorted(clients.values(), key=lambda c: c.client_id), self._modes[group]
