"""The name server's KV config in the replicated state (services/controller/kv_config.py): commands that do
not mutate, apply that every replica runs alike (bounds included), snapshots with and without the table,
and the Raft entry a put travels in.

RocketMQ behaviour followed: namesrv/.../kvconfig/KVConfigManager.java (putKVConfig overwrites, deleteKVConfig
of an absent key does nothing, getKVListByNamespace is null for an unknown namespace) at commit 8fc57f1.
"""

from __future__ import annotations

import json
import pickle

import pytest

from services.common.codes import ResponseCode
from services.controller.events import DeleteKvConfigEvent, PutKvConfigEvent, encode_entry, event_from_dict
from services.controller.kv_config import ORDER_TOPIC_CONFIG, KvConfig, KvLimits, KvRefused
from services.controller.raft import _apply_entry
from services.controller.state_machine import ReplicasInfoManager
from tests.unit.controller.helpers import run


def test_a_put_is_read_back_and_overwritten_and_a_delete_removes_it() -> None:
    m = ReplicasInfoManager()
    assert run(m, lambda s: s.put_kv_config(ORDER_TOPIC_CONFIG, "TopicOrder", "broker-a:4")).ok
    assert m.kv.get(ORDER_TOPIC_CONFIG, "TopicOrder") == "broker-a:4"
    assert run(m, lambda s: s.put_kv_config(ORDER_TOPIC_CONFIG, "TopicOrder", "broker-a:4;broker-b:4")).ok
    assert m.kv.namespace(ORDER_TOPIC_CONFIG) == {"TopicOrder": "broker-a:4;broker-b:4"}
    assert run(m, lambda s: s.delete_kv_config(ORDER_TOPIC_CONFIG, "TopicOrder")).ok
    assert m.kv.get(ORDER_TOPIC_CONFIG, "TopicOrder") is None
    assert m.kv.namespace(ORDER_TOPIC_CONFIG) is None


def test_deleting_an_absent_key_succeeds_and_changes_nothing() -> None:
    m = ReplicasInfoManager()
    result = run(m, lambda s: s.delete_kv_config("ns", "nothing"))
    assert result.ok and m.kv.table == {}


def test_kv_events_are_not_part_of_the_broker_history() -> None:
    m = ReplicasInfoManager()
    run(m, lambda s: s.put_kv_config("ns", "k", "v"))
    assert len(m.history) == 0 and m.next_event_index == 0


@pytest.mark.parametrize(("namespace", "key", "value", "code"), [
    ("", "k", "v", ResponseCode.INVALID_PARAMETER),
    ("ns", "", "v", ResponseCode.INVALID_PARAMETER),
    ("n" * 256, "k", "v", ResponseCode.INVALID_PARAMETER),
    ("ns", "k\n", "v", ResponseCode.INVALID_PARAMETER),
    ("ns", "k", "v" * 16_385, ResponseCode.INVALID_PARAMETER),
    ("ns", "k", "a\x00b", ResponseCode.INVALID_PARAMETER),
], ids=["empty-namespace", "empty-key", "long-namespace", "control-key", "long-value", "nul-value"])
def test_names_and_values_out_of_bounds_are_refused(namespace: str, key: str, value: str, code: int) -> None:
    m = ReplicasInfoManager()
    result = run(m, lambda s: s.put_kv_config(namespace, key, value))
    assert result.code == code and not result.events and m.kv.table == {}
    assert result.remark and len(result.remark) < 200


def test_the_table_stops_at_its_entry_and_size_limits() -> None:
    kv = KvConfig(KvLimits(max_entries=2, max_chars=30))
    kv.apply_put(kv.put_command("ns", "a", "1"))
    kv.apply_put(kv.put_command("ns", "b", "2"))
    with pytest.raises(KvRefused, match="limit of 2 keys"):
        kv.put_command("ns", "c", "3")
    kv.apply_put(kv.put_command("ns", "a", "x" * 10))  # an overwrite needs no new entry
    with pytest.raises(KvRefused, match="limit of 30 characters"):
        kv.put_command("ns", "b", "y" * 20)


def test_a_put_raced_past_the_command_is_skipped_alike_on_every_replica() -> None:
    """Two puts evaluated on the same state each fit; the second applied would not: apply skips it, and
    every replica applying the same log ends with the same table."""
    replicas = [KvConfig(KvLimits(max_entries=1)) for _ in range(3)]
    first, second = replicas[0].put_command("ns", "a", "1"), replicas[0].put_command("ns", "b", "2")
    for kv in replicas:
        kv.apply_put(first)
        kv.apply_put(second)
    assert all(kv.table == {"ns": {"a": "1"}} for kv in replicas)


def test_apply_skips_malformed_events_without_raising() -> None:
    m = ReplicasInfoManager()
    for event in (PutKvConfigEvent("", "k", "v"), PutKvConfigEvent("ns", 5, "v"),  # type: ignore[arg-type]
                  PutKvConfigEvent("ns", "k", None), DeleteKvConfigEvent("ns", "k")):  # type: ignore[arg-type]
        m.apply_event(event)
    assert m.kv.table == {}


def test_the_table_is_in_the_snapshot_and_an_old_snapshot_loads_empty() -> None:
    m = ReplicasInfoManager()
    run(m, lambda s: s.put_kv_config("ns", "k", "v"))
    restored = pickle.loads(pickle.dumps(m))
    assert restored.kv.table == {"ns": {"k": "v"}}
    assert json.loads(json.dumps(m.to_dict()))["kvConfig"] == {"ns": {"k": "v"}}
    old = m.to_dict()
    del old["kvConfig"]  # what a snapshot of the previous version holds
    fresh = ReplicasInfoManager()
    fresh.load_dict(old)
    assert fresh.kv.table == {}
    assert "kvConfig" not in ReplicasInfoManager().to_dict()  # an empty table writes nothing


def test_events_round_trip_and_travel_in_a_version_1_entry() -> None:
    put = PutKvConfigEvent("ns", "k", "v", timestamp=5)
    assert event_from_dict(json.loads(json.dumps(put.to_dict()))) == put
    delete = DeleteKvConfigEvent("ns", "k")
    assert event_from_dict(delete.to_dict()) == delete
    m = ReplicasInfoManager()
    assert _apply_entry(m, encode_entry([put], "r1")) == {"ok": True}
    assert _apply_entry(m, encode_entry([put], "r1")) == {"ok": True, "duplicate": True}
    assert m.kv.get("ns", "k") == "v"
    _apply_entry(m, encode_entry([delete], "r2"))
    assert m.kv.table == {}


def test_an_entry_missing_a_field_is_skipped() -> None:
    m = ReplicasInfoManager()
    entry = '{"v":1,"kind":"events","reqId":"x","events":[{"eventType":"PUT_KV_CONFIG","namespace":"ns"}],"crc":0}'
    assert _apply_entry(m, entry) == {"ok": True}
    assert m.kv.table == {}
