"""Controller events: to_dict / event_from_dict, stamp, and the Raft log-entry encoding."""

from __future__ import annotations

import dataclasses
import json
import zlib

import pytest

from services.controller.events import (
    ELECT_REASONS,
    EVENT_TYPES,
    LOG_FORMAT_VERSION,
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    CleanBrokerDataEvent,
    DeleteKvConfigEvent,
    ElectMasterEvent,
    Event,
    PutKvConfigEvent,
    UpdateBrokerAddressEvent,
    encode_batch,
    encode_entry,
    encode_noop,
    event_from_dict,
    stamp,
)
from services.controller.state_machine import ReplicasInfoManager
from tests.unit.controller.helpers import BROKER, CLUSTER, IPS, check_code, mock_meta_data

EVENTS: list[Event] = [
    ApplyBrokerIdEvent(CLUSTER, BROKER, IPS[0], 1, check_code(IPS[0]), timestamp=11),
    UpdateBrokerAddressEvent(CLUSTER, BROKER, IPS[1], 2, timestamp=12),
    ElectMasterEvent(BROKER, True, 1, "INITIAL", CLUSTER, timestamp=13),
    ElectMasterEvent(BROKER, True, 2, "FAILOVER", CLUSTER),
    ElectMasterEvent(BROKER, True, 3, "ADMIN", CLUSTER),
    ElectMasterEvent(BROKER, True, 3, "UNCLEAN", CLUSTER),
    ElectMasterEvent(BROKER, False, timestamp=14),
    AlterSyncStateSetEvent(BROKER, (1, 2, 3), CLUSTER, timestamp=15),
    AlterSyncStateSetEvent(BROKER, ()),
    CleanBrokerDataEvent(BROKER, (1, 3), CLUSTER, timestamp=16),
    CleanBrokerDataEvent(BROKER, None, CLUSTER),
    CleanBrokerDataEvent(BROKER),
    PutKvConfigEvent("ORDER_TOPIC_CONFIG", "TopicOrder", "broker-a:4", timestamp=17),
    DeleteKvConfigEvent("ORDER_TOPIC_CONFIG", "TopicOrder"),
]

IDS = [f"{type(e).__name__}-{i}" for i, e in enumerate(EVENTS)]


def test_every_event_type_is_covered() -> None:
    assert {type(e) for e in EVENTS} == set(EVENT_TYPES.values())
    assert set(EVENT_TYPES) == {
        "APPLY_BROKER_ID", "UPDATE_BROKER_ADDRESS", "ELECT_MASTER", "ALTER_SYNC_STATE_SET", "CLEAN_BROKER_DATA",
        "PUT_KV_CONFIG", "DELETE_KV_CONFIG"}
    for name, cls in EVENT_TYPES.items():
        assert name == cls.TYPE
    assert set(ELECT_REASONS) == {"INITIAL", "FAILOVER", "ADMIN", "UNCLEAN"}


@pytest.mark.parametrize("event", EVENTS, ids=IDS)
def test_to_dict_shape(event: Event) -> None:
    d = event.to_dict()
    assert d["eventType"] == event.TYPE
    assert set(d) == {f.name for f in dataclasses.fields(event)} | {"eventType"}
    assert d["timestamp"] == event.timestamp
    for f in dataclasses.fields(event):
        assert d[f.name] == getattr(event, f.name)
    json.dumps(d)  # plain JSON


@pytest.mark.parametrize("event", EVENTS, ids=IDS)
def test_dict_round_trip(event: Event) -> None:
    back = event_from_dict(event.to_dict())
    assert type(back) is type(event)
    assert back == event


@pytest.mark.parametrize("event", EVENTS, ids=IDS)
def test_json_round_trip(event: Event) -> None:
    back = event_from_dict(json.loads(json.dumps(event.to_dict())))
    assert back == event
    # sequence fields come back as tuples (hashable, frozen)
    for name in ("newSyncStateSet", "brokerIdSetToClean"):
        if hasattr(back, name) and getattr(back, name) is not None:
            assert isinstance(getattr(back, name), tuple)
    hash(back)


def test_encode_entry_round_trip() -> None:
    entry = encode_entry(EVENTS, "req-42")
    assert isinstance(entry, str)
    assert ", " not in entry and '": ' not in entry  # compact separators
    data = json.loads(entry)
    assert data["v"] == 1  # one write: the oldest format that expresses it
    assert data["kind"] == "events"
    assert data["reqId"] == "req-42"
    assert [d["eventType"] for d in data["events"]] == [e.TYPE for e in EVENTS]
    assert [event_from_dict(d) for d in data["events"]] == EVENTS


def test_encode_entry_empty_batch() -> None:
    data = json.loads(encode_entry([], "r"))
    assert data == {"v": 1, "kind": "events", "reqId": "r", "events": [], "crc": zlib.crc32(b"[]")}


def test_encode_batch_round_trip() -> None:
    data = json.loads(encode_batch([(EVENTS[:2], "a"), ([], "b"), (EVENTS[2:], "c")]))
    assert data["v"] == LOG_FORMAT_VERSION == 2
    assert data["kind"] == "batch"
    assert [item["reqId"] for item in data["items"]] == ["a", "b", "c"]
    assert [event_from_dict(d) for item in data["items"] for d in item["events"]] == EVENTS
    # each write carries the same CRC a single entry of its events would
    assert [item["crc"] for item in data["items"]] == [json.loads(encode_entry(e, "x"))["crc"]
                                                       for e in (EVENTS[:2], [], EVENTS[2:])]


def test_encode_noop() -> None:
    assert json.loads(encode_noop("r1")) == {"v": 1, "kind": "noop", "reqId": "r1"}


def test_stamp() -> None:
    e = ElectMasterEvent(BROKER, True, 1, "INITIAL", CLUSTER)
    s = stamp(e, 1_700_000_000_000)
    assert s.timestamp == 1_700_000_000_000
    assert e.timestamp == 0  # frozen original untouched
    assert dataclasses.replace(s, timestamp=0) == e
    assert type(s) is ElectMasterEvent


def test_events_are_frozen() -> None:
    e = AlterSyncStateSetEvent(BROKER, (1,))
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.brokerName = "x"  # type: ignore[misc]


def test_defaults() -> None:
    e = ElectMasterEvent(BROKER, False)
    assert (e.newMasterBrokerId, e.electReason, e.clusterName, e.timestamp) == (None, None, "", 0)
    c = CleanBrokerDataEvent(BROKER)
    assert (c.brokerIdSetToClean, c.clusterName) == (None, "")


def test_missing_optional_fields_take_defaults() -> None:
    e = event_from_dict({"eventType": "ELECT_MASTER", "brokerName": BROKER, "newMasterElected": False})
    assert e == ElectMasterEvent(BROKER, False)
    e = event_from_dict({"eventType": "ALTER_SYNC_STATE_SET", "brokerName": BROKER, "newSyncStateSet": ["2", 1]})
    assert e == AlterSyncStateSetEvent(BROKER, (2, 1))


def test_unknown_keys_are_ignored() -> None:
    d = EVENTS[0].to_dict()
    d["somethingNew"] = 1
    assert event_from_dict(d) == EVENTS[0]


@pytest.mark.parametrize("data", [
    {},
    {"eventType": "NOPE"},
    {"eventType": None},
    {"eventType": 3},
    {"eventType": ["ELECT_MASTER"]},
])
def test_unknown_event_type_is_value_error(data: dict) -> None:
    with pytest.raises(ValueError):
        event_from_dict(data)


@pytest.mark.parametrize("data", [
    {"eventType": "ELECT_MASTER"},  # required fields missing
    {"eventType": "ALTER_SYNC_STATE_SET", "brokerName": BROKER, "newSyncStateSet": ["x"]},
    {"eventType": "CLEAN_BROKER_DATA", "brokerName": BROKER, "brokerIdSetToClean": 5},
])
def test_malformed_events_raise(data: dict) -> None:
    # the Raft apply path catches both TypeError and ValueError
    with pytest.raises((TypeError, ValueError)):
        event_from_dict(data)


def test_replaying_the_encoded_log_rebuilds_the_state() -> None:
    """Events that went through the log encoding apply to the same state as the originals."""
    original = ReplicasInfoManager()
    applied: list[Event] = []
    apply_event = original.apply_event

    def recording_apply(event: Event) -> None:
        applied.append(stamp(event, 1000 + len(applied)))
        apply_event(applied[-1])

    original.apply_event = recording_apply  # type: ignore[method-assign]
    mock_meta_data(original)
    assert len(applied) == 5
    entries = [encode_entry(applied[:3], "r1"), encode_entry(applied[3:], "r2")]
    replica = ReplicasInfoManager()
    for entry in entries:
        for d in json.loads(entry)["events"]:
            replica.apply_event(event_from_dict(d))
    assert replica.to_dict() == original.to_dict()
