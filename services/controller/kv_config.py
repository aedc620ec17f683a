"""The name server's KV config (RocketMQ's ``KVConfigManager``), kept in the controllers' replicated state.

RocketMQ keeps a KV table per name server, in a local file (``kvConfig.json``), and mqadmin writes a key
to every name server it is given, one after another. mqctl's controller group is one name server answered
by three nodes, so the table is part of the Raft state machine: a put or delete is an event, committed
once and applied by every node, snapshotted with the rest of the state, and read from any node's applied
state (a follower may trail the leader by a few entries, as a name server's soft state does).

``ORDER_TOPIC_CONFIG`` is the namespace RocketMQ reads a topic's ``orderTopicConf`` from (``broker-a:4;
broker-b:4``): with ``orderMessageEnable`` on, a route answer carries it.

The table is bounded whoever writes (``KV_LIMITS``): a command refuses an entry that would not fit with a
remark naming the bound, and apply skips such an entry too, so that a put raced past the leader's check
still leaves every replica with the same table. Apply reads no clock and never raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from services.common.codes import ResponseCode
from services.controller.events import DeleteKvConfigEvent, PutKvConfigEvent

__all__ = ["KV_LIMITS", "ORDER_TOPIC_CONFIG", "KvConfig", "KvLimits", "KvRefused", "check_kv_names"]

#: NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG.
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class KvLimits:
    """What the replicated table holds at most. Constants, not settings: every replica must apply alike."""

    max_name: int = 255  # a namespace or key, in characters
    max_value: int = 16_384  # characters
    max_entries: int = 10_000  # keys, over every namespace
    max_chars: int = 4 * 1024 * 1024  # namespaces, keys and values together


KV_LIMITS = KvLimits()


class KvRefused(Exception):
    """A KV request this table refuses; ``code`` and ``remark`` are the answer."""

    def __init__(self, code: ResponseCode, remark: str) -> None:
        super().__init__(remark)
        self.code, self.remark = code, remark


def check_kv_names(namespace: str, key: str | None = None, limits: KvLimits = KV_LIMITS) -> None:
    """A namespace (and key) of 1-``max_name`` characters without control characters; raises KvRefused."""
    for what, value in (("namespace", namespace), ("key", key)):
        if value is None:
            continue
        if not 1 <= len(value) <= limits.max_name or _CONTROL.search(value):
            raise KvRefused(ResponseCode.INVALID_PARAMETER,
                            f"{what} {value[:60]!r} must be 1-{limits.max_name} characters without control "
                            "characters")


class KvConfig:
    """namespace -> key -> value, with the commands that write it and the apply that changes it."""

    def __init__(self, limits: KvLimits = KV_LIMITS) -> None:
        self.limits = limits
        self.table: dict[str, dict[str, str]] = {}
        self._entries = 0
        self._chars = 0

    # ------------------------------------------------------------------ reads
    def get(self, namespace: str, key: str) -> str | None:
        return self.table.get(namespace, {}).get(key)

    def namespace(self, namespace: str) -> dict[str, str] | None:
        found = self.table.get(namespace)
        return None if found is None else dict(found)

    # ------------------------------------------------------------------ commands (no mutation)
    def put_command(self, namespace: str, key: str, value: str) -> PutKvConfigEvent:
        """The event that sets ``key``; raises KvRefused for a name, value or size out of bounds."""
        check_kv_names(namespace, key, self.limits)
        if len(value) > self.limits.max_value or "\x00" in value:
            raise KvRefused(ResponseCode.INVALID_PARAMETER,
                            f"value of {len(value)} characters: at most {self.limits.max_value}, without NUL")
        refusal = self._room_refusal(namespace, key, value)
        if refusal is not None:
            raise KvRefused(ResponseCode.SYSTEM_ERROR, refusal)
        return PutKvConfigEvent(namespace, key, value)

    def delete_command(self, namespace: str, key: str) -> DeleteKvConfigEvent:
        check_kv_names(namespace, key, self.limits)
        return DeleteKvConfigEvent(namespace, key)

    def _room_refusal(self, namespace: str, key: str, value: str) -> str | None:
        old = self.get(namespace, key)
        entries = self._entries + (old is None)
        chars = self._chars + _size(namespace, key, value) - (0 if old is None else _size(namespace, key, old))
        if entries > self.limits.max_entries:
            return f"the KV config holds its limit of {self.limits.max_entries} keys"
        if chars > self.limits.max_chars:
            return f"the KV config would pass its limit of {self.limits.max_chars} characters"
        return None

    # ------------------------------------------------------------------ apply (the only mutators)
    def apply_put(self, event: PutKvConfigEvent) -> None:
        if not _valid(event.namespace, event.key, self.limits) or not isinstance(event.value, str) \
                or len(event.value) > self.limits.max_value \
                or self._room_refusal(event.namespace, event.key, event.value) is not None:
            return  # refused by the command already, unless two puts raced: every replica skips it alike
        old = self.get(event.namespace, event.key)
        if old is not None:
            self._chars -= _size(event.namespace, event.key, old)
        else:
            self._entries += 1
        self.table.setdefault(event.namespace, {})[event.key] = event.value
        self._chars += _size(event.namespace, event.key, event.value)

    def apply_delete(self, event: DeleteKvConfigEvent) -> None:
        keys = self.table.get(event.namespace)
        if keys is None or event.key not in keys:
            return
        self._chars -= _size(event.namespace, event.key, keys.pop(event.key))
        self._entries -= 1
        if not keys:
            del self.table[event.namespace]  # RocketMQ keeps an emptied namespace; nothing reads the difference

    # ------------------------------------------------------------------ snapshots
    def to_dict(self) -> dict[str, Any]:
        return {ns: dict(sorted(keys.items())) for ns, keys in sorted(self.table.items())}

    def load_dict(self, data: object) -> None:
        """From a snapshot (absent in one written before the table existed: then empty)."""
        self.table, self._entries, self._chars = {}, 0, 0
        if not isinstance(data, dict):
            return
        for namespace, keys in data.items():
            if isinstance(keys, dict):
                for key, value in keys.items():
                    self.apply_put(PutKvConfigEvent(namespace, key, value))


def _size(namespace: str, key: str, value: str) -> int:
    return len(namespace) + len(key) + len(value)


def _valid(namespace: object, key: object, limits: KvLimits) -> bool:
    return (isinstance(namespace, str) and isinstance(key, str)
            and all(1 <= len(v) <= limits.max_name and not _CONTROL.search(v) for v in (namespace, key)))
