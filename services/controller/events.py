"""Controller events: the only things the Raft log carries and the only way state changes.

Each event is a frozen dataclass that round-trips through plain JSON (``to_dict``/``event_from_dict``).
The log format is versioned by :data:`LOG_FORMAT_VERSION`, the newest version this code reads; a node
refuses entries of a newer version instead of misreading them. Writers use the oldest version that can
express an entry: one write is a version-1 ``events`` entry, several writes committed together are a
version-2 ``batch``. ``timestamp`` is stamped by the leader before the event is proposed, so every
replica records the same time.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar, TypeVar

LOG_FORMAT_VERSION = 2

ELECT_REASONS = ("INITIAL", "FAILOVER", "ADMIN", "UNCLEAN")


@dataclass(frozen=True)
class Event:
    TYPE: ClassVar[str] = ""
    timestamp: int = field(default=0, kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        names = _FIELD_NAMES.get(type(self))
        if names is None:
            names = _FIELD_NAMES[type(self)] = tuple(f.name for f in fields(self))
        body = {name: getattr(self, name) for name in names}  # flat values: no deep copy needed
        body["eventType"] = self.TYPE
        return body


_FIELD_NAMES: dict[type[Event], tuple[str, ...]] = {}


@dataclass(frozen=True)
class ApplyBrokerIdEvent(Event):
    TYPE: ClassVar[str] = "APPLY_BROKER_ID"
    clusterName: str
    brokerName: str
    brokerAddress: str
    newBrokerId: int
    registerCheckCode: str
    #: The broker's Ed25519 public key (hex), "" for a broker that brought none (see ha/auth.py).
    publicKey: str = ""


@dataclass(frozen=True)
class UpdateBrokerAddressEvent(Event):
    """A registration that changed what the controller holds for a broker id: its address, or (once, for
    a broker registered before it had a key) its public key."""

    TYPE: ClassVar[str] = "UPDATE_BROKER_ADDRESS"
    clusterName: str
    brokerName: str
    brokerAddress: str
    brokerId: int
    publicKey: str = ""


@dataclass(frozen=True)
class ElectMasterEvent(Event):
    TYPE: ClassVar[str] = "ELECT_MASTER"
    brokerName: str
    newMasterElected: bool
    newMasterBrokerId: int | None = None
    electReason: str | None = None
    clusterName: str = ""


@dataclass(frozen=True)
class AlterSyncStateSetEvent(Event):
    TYPE: ClassVar[str] = "ALTER_SYNC_STATE_SET"
    brokerName: str
    newSyncStateSet: tuple[int, ...]
    clusterName: str = ""


@dataclass(frozen=True)
class CleanBrokerDataEvent(Event):
    TYPE: ClassVar[str] = "CLEAN_BROKER_DATA"
    brokerName: str
    brokerIdSetToClean: tuple[int, ...] | None = None
    clusterName: str = ""


@dataclass(frozen=True)
class PutKvConfigEvent(Event):
    """The name server's KV config: ``key`` of ``namespace`` set to ``value`` (kv_config.py). A node of an
    older version skips it as an unknown event type, as it skips any: upgrade every node before using it."""

    TYPE: ClassVar[str] = "PUT_KV_CONFIG"
    namespace: str
    key: str
    value: str


@dataclass(frozen=True)
class DeleteKvConfigEvent(Event):
    TYPE: ClassVar[str] = "DELETE_KV_CONFIG"
    namespace: str
    key: str


EVENT_TYPES: dict[str, type[Event]] = {
    cls.TYPE: cls
    for cls in (
        ApplyBrokerIdEvent,
        UpdateBrokerAddressEvent,
        ElectMasterEvent,
        AlterSyncStateSetEvent,
        CleanBrokerDataEvent,
        PutKvConfigEvent,
        DeleteKvConfigEvent,
    )
}

E = TypeVar("E", bound=Event)


def stamp(event: E, timestamp_ms: int) -> E:
    return replace(event, timestamp=timestamp_ms)


def event_from_dict(data: dict[str, Any]) -> Event:
    """Rebuild an event; raises ``ValueError`` on anything malformed (the caller decides what to do)."""
    kind = data.get("eventType")
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"unknown event type {kind!r}")
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        if f.name in data:
            value = data[f.name]
            if f.name in ("newSyncStateSet", "brokerIdSetToClean") and value is not None:
                value = tuple(int(v) for v in value)
            kwargs[f.name] = value
    return cls(**kwargs)


def _item(events: list[Event], request_id: str) -> str:
    """``"reqId":…,"events":[…],"crc":…``: the events are encoded once, for their CRC and the entry."""
    body = json.dumps([e.to_dict() for e in events], separators=(",", ":"))
    crc = zlib.crc32(body.encode("utf-8"))
    return f'"reqId":{json.dumps(request_id)},"events":{body},"crc":{crc}'


def encode_entry(events: list[Event], request_id: str) -> str:
    """One Raft log entry (version 1): a batch of events applied atomically, tagged with a request id for
    dedup and a CRC of the events (checked when a node starts from its journal)."""
    return '{"v":1,"kind":"events",' + _item(events, request_id) + "}"


def encode_batch(writes: list[tuple[list[Event], str]]) -> str:
    """One Raft log entry (version 2) carrying several writes, each ``(events, request id)``: applied in
    order, each write atomically and de-duplicated by its own request id, as if each were its own entry."""
    return '{"v":2,"kind":"batch","items":[' + ",".join("{" + _item(e, rid) + "}" for e, rid in writes) + "]}"


def encode_noop(request_id: str) -> str:
    return json.dumps({"v": 1, "kind": "noop", "reqId": request_id}, separators=(",", ":"))


def encode_identity(cluster_id: str, request_id: str) -> str:
    """A no-op that also names the controller group's id (the first one committed holds; see
    store_identity.py). An older node applies it as a no-op, since it knows no kind ``identity``."""
    return json.dumps({"v": 1, "kind": "identity", "clusterId": cluster_id, "reqId": request_id},
                      separators=(",", ":"))
