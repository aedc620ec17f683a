"""The message key index (services/broker/key_index.py) and the store's queries over it, then QUERY_MESSAGE (12)
and VIEW_MESSAGE_BY_ID (33) over a real store (the rest of the broker faked as in test_broker_remoting.py).
tests/integration/test_query_message.py asks real mqadmin on a replicated group, across a failover."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.broker.key_index import MAX_KEYS_PER_MESSAGE, KeyIndex, index_keys
from services.broker.store import Message, MessageStore
from services.common.codes import ResponseCode as C
from services.remoting import broker_headers as bh
from services.remoting.command import make_request
from services.remoting.message import decode_pulled
from tests.unit.broker.test_broker_remoting import FakeBroker, broker, send_request, serve

__all__ = ["broker"]  # the fixture, shared


def entries(topic: str, *keyed: tuple[int, int, str]) -> list[tuple[int, int, str, dict[str, str]]]:
    return [(phy, ts, topic, {"KEYS": keys}) for phy, ts, keys in keyed]


def test_a_message_is_found_by_each_of_its_keys_and_its_unique_key() -> None:
    assert index_keys({"KEYS": "a b  a", "UNIQ_KEY": "U1"}) == ["U1", "a", "b"]
    assert len(index_keys({"KEYS": " ".join(f"k{i}" for i in range(200))})) == MAX_KEYS_PER_MESSAGE
    assert index_keys({"KEYS": "x" * 2000}) == []


def test_lookups_give_the_newest_first_within_the_time_range_across_files(tmp_path: Path) -> None:
    index = KeyIndex(tmp_path, slots=100, capacity=1000)
    index.load(0, 0)
    index.add(entries("T", (0, 10, "a"), (100, 20, "b a"), (200, 30, "a")), 300)
    assert index.lookup("T", "a", 10, 0, 99) == [200, 100, 0]
    assert index.lookup("T", "a", 2, 0, 99) == [200, 100]
    assert index.lookup("T", "a", 10, 15, 25) == [100]
    assert index.lookup("Other", "a", 10, 0, 99) == []  # another topic's key is another key
    index.close()
    small = KeyIndex(tmp_path / "small", slots=100, capacity=1000)
    small.load(0, 0)
    small.add(entries("T", *((i * 10, i, f"k{i % 7}") for i in range(2500))), 25_000)
    assert len(small.files) == 3  # a full file is closed and the next one begins
    assert small.lookup("T", "k3", 1000, 0, 10**9) == [i * 10 for i in reversed(range(2500)) if i % 7 == 3]
    small.close()


def test_a_clean_close_keeps_the_index_and_a_crash_indexes_the_last_file_again(tmp_path: Path) -> None:
    index = KeyIndex(tmp_path, slots=100, capacity=1000)
    index.load(0, 0)
    index.add(entries("T", *((i * 10, i, f"k{i}") for i in range(1500))), 15_000)
    index.close()
    reopened = KeyIndex(tmp_path, slots=100, capacity=1000)
    reopened.load(0, 20_000)
    assert reopened.indexed == 15_000 and reopened.lookup("T", "k1400", 5, 0, 10**9) == [14_000]
    reopened.add(entries("T", (15_000, 1, "late")), 15_010)
    reopened.flush()
    for file in reopened.files:  # a crash: the files stay as they are, the last one not closed cleanly
        file.close(clean=False)
    crashed = KeyIndex(tmp_path, slots=100, capacity=1000)
    crashed.load(0, 20_000)
    assert crashed.indexed == 10_000  # where the dropped file began: indexed again from there
    assert crashed.lookup("T", "k10", 5, 0, 10**9) == [100] and crashed.lookup("T", "late", 5, 0, 10**9) == []
    crashed.close()


def test_a_damaged_file_is_dropped_and_a_truncated_log_cuts_the_index(tmp_path: Path) -> None:
    index = KeyIndex(tmp_path, slots=100, capacity=1000)
    index.load(0, 0)
    index.add(entries("T", *((i * 10, i, "k") for i in range(1500))), 15_000)
    index.close()
    first = min(tmp_path.iterdir())
    first.write_bytes(b"\0" * 64 + first.read_bytes()[64:])
    reopened = KeyIndex(tmp_path, slots=100, capacity=1000)
    reopened.load(0, 20_000)
    assert not first.exists() and reopened.lookup("T", "k", 5, 0, 10**9) == [14_990, 14_980, 14_970, 14_960, 14_950]
    reopened.truncate(12_000)
    assert reopened.indexed == 12_000
    reopened.truncate(9_000)  # the file that began at 10000 goes
    assert reopened.files == [] and reopened.indexed == 9_000
    reopened.close()


def test_a_symbolic_link_among_the_files_is_dropped_and_its_target_left_alone(tmp_path: Path) -> None:
    index = KeyIndex(tmp_path / "index", slots=100, capacity=1000)
    index.load(0, 0)
    index.add(entries("T", (0, 1, "k")), 100)
    index.close()
    target = tmp_path / "elsewhere"
    target.write_bytes(b"keep me")
    (tmp_path / "index" / f"{200:020d}").symlink_to(target)
    reopened = KeyIndex(tmp_path / "index", slots=100, capacity=1000)
    reopened.load(0, 1000)
    assert target.read_bytes() == b"keep me" and not (tmp_path / "index" / f"{200:020d}").exists()
    assert reopened.lookup("T", "k", 5, 0, 10) == [0]
    reopened.close()


def test_the_store_finds_only_confirmed_messages_that_carry_the_key(tmp_path: Path) -> None:
    store = MessageStore(tmp_path / "store", "10.0.0.7:10911", 1 << 20)
    store.open()
    try:
        results = store.append_batch([Message("T", b"one", keys="order-1 shared", properties={"UNIQ_KEY": "U1"}),
                                      Message("T", b"two", keys="order-2 shared"),
                                      Message("U", b"other", keys="shared")], 1000)
        store.flush()
        assert store.query_messages("T", "shared", 10, 0, 2000) == []  # nothing confirmed yet
        store.set_confirm_offset(store.max_offset)
        store.flush()
        assert [r.body for r in store.query_messages("T", "shared", 10, 0, 2000)] == [b"one", b"two"]
        assert [r.body for r in store.query_messages("T", "U1", 10, 0, 2000)] == [b"one"]
        assert store.query_messages("T", "shared", 10, 1001, 2000) == []
        assert store.read_message(results[1].commit_log_offset).body == b"two"  # type: ignore[union-attr]
        assert store.read_message(results[1].commit_log_offset + 1) is None
        store.truncate(results[1].commit_log_offset)
        store.flush()
        assert [r.body for r in store.query_messages("T", "shared", 10, 0, 2000)] == [b"one"]
    finally:
        store.close()
    reopened = MessageStore(tmp_path / "store", "10.0.0.7:10911", 1 << 20)
    reopened.open()
    try:
        assert [r.body for r in reopened.query_messages("T", "order-1", 10, 0, 2000)] == [b"one"]
    finally:
        reopened.close()


def test_a_store_without_an_index_indexes_its_log_at_start(tmp_path: Path) -> None:
    store = MessageStore(tmp_path / "store", "10.0.0.7:10911", 1 << 20)
    store.open()
    store.append_batch([Message("T", f"m{i}".encode(), keys=f"k{i}") for i in range(50)], 1000)
    store.set_confirm_offset(store.max_offset)
    store.close()
    for path in (tmp_path / "store" / "index").iterdir():
        path.unlink()
    reopened = MessageStore(tmp_path / "store", "10.0.0.7:10911", 1 << 20)
    reopened.open()
    try:
        assert reopened.keys_behind
        reopened.flush()
        assert not reopened.keys_behind
        assert [r.body for r in reopened.query_messages("T", "k42", 10, 0, 2000)] == [b"m42"]
    finally:
        reopened.close()


# ------------------------------------------------------------------------------------------- over the broker


def query(key: str, unique: bool = False, topic: str = "TopicTest", max_num: str = "32",
          end: str = str(2**62)) -> dict[str, str]:
    fields = {"topic": topic, "key": key, "maxNum": max_num, "beginTimestamp": "0", "endTimestamp": end}
    return {**fields, "_UNIQUE_KEY_QUERY": "true"} if unique else fields


def test_query_message_answers_the_messages_with_the_key_in_rocketmqs_encoding(broker: FakeBroker) -> None:
    for index in range(3):
        assert serve(broker, send_request(body=f"m{index}".encode(), KEYS=f"order-{index} batch-7",
                                          UNIQ_KEY=f"UNIQ{index}")).code == C.SUCCESS
    broker.store.flush()
    answer = serve(broker, make_request(bh.QUERY_MESSAGE, 1, query("batch-7")))
    assert answer.code == C.SUCCESS, answer.remark
    messages = decode_pulled(answer.body)
    assert [m.body for m in messages] == [b"m0", b"m1", b"m2"] and messages[2].properties["UNIQ_KEY"] == "UNIQ2"
    assert int(answer.ext_fields["indexLastUpdatePhyoffset"]) == broker.store.max_offset
    assert int(answer.ext_fields["indexLastUpdateTimestamp"]) == broker.clock.now_ms()
    by_id = serve(broker, make_request(bh.QUERY_MESSAGE, 1, query("UNIQ1", unique=True, max_num="1")))
    assert [m.body for m in decode_pulled(by_id.body)] == [b"m1"]
    two = serve(broker, make_request(bh.QUERY_MESSAGE, 1, query("batch-7", max_num="2")))
    assert [m.body for m in decode_pulled(two.body)] == [b"m1", b"m2"]  # the newest two
    missing = serve(broker, make_request(bh.QUERY_MESSAGE, 1, query("nothing")))
    assert (missing.code, missing.remark) == (C.QUERY_NOT_FOUND, "can not find message, maybe time range not correct")
    viewed = serve(broker, make_request(bh.VIEW_MESSAGE_BY_ID, 1, {"offset": str(messages[1].commit_log_offset)}))
    assert [m.body for m in decode_pulled(viewed.body)] == [b"m1"]
    nowhere = serve(broker, make_request(bh.VIEW_MESSAGE_BY_ID, 1, {"offset": "7"}))
    assert (nowhere.code, nowhere.remark) == (C.SYSTEM_ERROR, "can not find message by the offset, 7")


@pytest.mark.parametrize("fields", [query("k", topic="a b"), query(""), query("k" * 1025), {"topic": "T"},
                                    query("k", max_num="x")])
def test_a_malformed_query_is_refused_naming_the_field(broker: FakeBroker, fields: dict[str, str]) -> None:
    assert serve(broker, make_request(bh.QUERY_MESSAGE, 1, fields)).code == C.INVALID_PARAMETER


def test_forged_entries_end_their_chain_and_never_answer_a_message_that_lacks_the_key(tmp_path: Path) -> None:
    """Entries whose previous-entry links point forward or loop, and offsets into nowhere: the walk ends, and
    the store reads every candidate back before answering it."""
    store = MessageStore(tmp_path / "store", "10.0.0.7:10911", 1 << 20)
    store.open()
    try:
        store.append_batch([Message("T", b"one", keys="k")], 1000)
        store.set_confirm_offset(store.max_offset)
        store.flush()
        file = store.keys.files[-1]
        entries_at = 64 + 4 * file.header.slots
        forged = (b"\xff" * 4 + (10**12).to_bytes(8, "big") + (1000).to_bytes(8, "big")
                  + (5).to_bytes(4, "big")) * 3  # a hash of nothing, offsets past the log, links forward
        with open(file.path, "r+b") as raw:
            raw.seek(entries_at + 24)
            raw.write(forged)
        assert [r.body for r in store.query_messages("T", "k", 10, 0, 2000)] == [b"one"]
        assert store.query_messages("T", "other", 10, 0, 2000) == []
        assert store.read_message(10**12) is None
    finally:
        store.close()
