"""Deleting a topic in the store (DELETE_TOPIC_IN_BROKER): a mark in the log hides the topic's messages so far,
on the master and on a replica that copies the log, after a restart, and until a truncation cuts the mark."""

from __future__ import annotations

from pathlib import Path

from services.broker.broker import PutOutcome
from services.broker.store import TOPIC_DELETED, MessageStore
from services.common.codes import ResponseCode as C
from services.remoting import admin_headers as ah
from services.remoting.command import make_request
from tests.unit.broker.test_broker_remoting import FakeBroker, broker, fill, serve
from tests.unit.broker.test_store import SEG, TS, make_store, msg, root, visible

__all__ = ["broker", "root"]  # the fixtures, used by name


def delete(store: MessageStore, topic: str = "TopicTest") -> int:
    offset = store.append(store.deletion_mark(topic), TS).commit_log_offset
    store.set_confirm_offset(store.max_offset)
    return offset


def fill_store(store: MessageStore, n: int, topic: str = "TopicTest") -> None:
    for i in range(n):
        store.append(msg(i, queue_id=i % 2, topic=topic), TS + i)
    store.set_confirm_offset(store.max_offset)


def test_a_deleted_topic_is_gone_and_comes_back_with_its_next_message(root: Path) -> None:
    store = make_store(root)
    fill_store(store, 4)
    fill_store(store, 1, topic="Other")
    delete(store)
    assert store.topic_names() == ["Other"] and not store.has_topic("TopicTest") and store.topic_config("TopicTest") \
        is None
    result = store.get_messages("TopicTest", 0, 0, 10)
    assert (result.status, result.next_begin_offset, result.min_offset) == ("OFFSET_TOO_SMALL", 2, 2)
    assert visible(store, "Other") == [0]
    store.flush()  # indexes the keys
    assert store.query_messages("Other", "key0", 10, 0, 2**62) != []
    assert store.query_messages("TopicTest", "key1", 10, 0, 2**62) == []
    store.append(msg(9, queue_id=0), TS)  # re-created by its next message: offsets go on from where they were
    assert store.has_topic("TopicTest")  # appended, not yet indexed
    store.set_confirm_offset(store.max_offset)
    assert store.topic_names() == ["Other", "TopicTest"]
    assert [r.queue_offset for r in store.get_messages("TopicTest", 0, 2, 10).records] == [2]
    store.flush()
    assert store.query_messages("TopicTest", "key9", 10, 0, 2**62)[0].queue_offset == 2
    store.close()


def test_a_deletion_survives_a_restart_and_is_not_listed_as_a_topic(root: Path) -> None:
    store = make_store(root)
    fill_store(store, 4)
    at = delete(store)
    store.close()
    again = make_store(root)
    assert again.deleted == {"TopicTest": at}
    assert again.topic_names() == [] and TOPIC_DELETED not in again.topic_names()
    assert again.get_messages("TopicTest", 1, 0, 10).status == "OFFSET_TOO_SMALL"
    again.close()


def test_a_replica_that_copies_the_log_drops_the_topic_too(tmp_path: Path) -> None:
    master = make_store(tmp_path / "m")
    fill_store(master, 6)
    delete(master)
    fill_store(master, 1)
    slave = make_store(tmp_path / "s")
    offset = 0
    while offset < master.max_offset:
        chunk = master.commitlog.aligned_chunk(offset, 1500)
        slave.append_raw(offset, chunk)
        offset += len(chunk)
    slave.set_confirm_offset(master.confirm_offset)
    assert visible(slave, queue_id=0) == [] and slave.get_messages("TopicTest", 0, 3, 10).records[0].queue_offset == 3
    assert slave.topic_names() == master.topic_names() == ["TopicTest"]
    master.close()
    slave.close()


def test_a_truncation_that_cuts_the_mark_brings_the_messages_back(root: Path) -> None:
    store = make_store(root, segment_size=SEG)
    fill_store(store, 4)
    at = delete(store)
    store.truncate(at)
    assert store.deleted == {} and visible(store) == [0, 1]
    store.close()


def test_delete_topic_in_broker_answers_as_rocketmq(broker: FakeBroker) -> None:
    fill(broker, "tagA", "tagB")
    broker.consumer_offsets.table.commit("cg", "TopicTest", 1, 1)
    answer = serve(broker, make_request(ah.DELETE_TOPIC_IN_BROKER, 1, {"topic": "TopicTest"}))
    assert (answer.code, answer.remark) == (C.SUCCESS, None)
    assert not broker.store.has_topic("TopicTest") and broker.consumer_offsets.table.query("cg", "TopicTest", 1) is None
    assert broker.namesrv.triggers == 1
    again = serve(broker, make_request(ah.DELETE_TOPIC_IN_BROKER, 2, {"topic": "TopicTest"}))
    assert again.code == C.SUCCESS and list(broker.store.deleted) == ["TopicTest"]  # nothing to delete: no mark
    system = serve(broker, make_request(ah.DELETE_TOPIC_IN_BROKER, 3, {"topic": "RMQ_SYS_TRANS_HALF_TOPIC"}))
    assert (system.code, system.remark) == (C.INVALID_PARAMETER,
                                            "The topic[RMQ_SYS_TRANS_HALF_TOPIC] is conflict with system topic.")
    blank = serve(broker, make_request(ah.DELETE_TOPIC_IN_BROKER, 4, {"topic": " "}))
    assert (blank.code, blank.remark) == (C.INVALID_PARAMETER, "The specified topic is blank.")


def test_a_delete_the_put_path_refuses_is_a_system_error_naming_why(broker: FakeBroker) -> None:
    fill(broker, "tagA")
    broker.forced = PutOutcome("SERVICE_NOT_AVAILABLE", remark="this broker is a slave")
    answer = serve(broker, make_request(ah.DELETE_TOPIC_IN_BROKER, 1, {"topic": "TopicTest"}))
    assert answer.code == C.SYSTEM_ERROR
    assert answer.remark == "topic TopicTest is not deleted: SERVICE_NOT_AVAILABLE: this broker is a slave"
    assert broker.store.has_topic("TopicTest")
