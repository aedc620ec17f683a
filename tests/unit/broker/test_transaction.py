"""The pure rules of transactional messages (services/broker/transaction/half.py, checks.py, progress.py): the
half rewrite and the commit, op records, the check count and immunity rules, which half entries are resolved or
need a check with time passed in, and the progress that is kept on disk and copied to slaves."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.broker.remoting_messages import WIRE, WireFields
from services.broker.store import Message
from services.broker.transaction.checks import HalfEntry, OpIndex, Verdict, plan, verdict
from services.broker.transaction.half import (
    CHECK_IMMUNITY,
    CHECK_TIMES,
    COMMIT,
    DISCARD_TOPIC,
    HALF_TOPIC,
    OP_TOPIC,
    CheckRules,
    committed,
    discarded,
    is_transactional,
    op_half_offsets,
    op_record,
    renewed,
    to_half,
)
from services.broker.transaction.progress import ProgressDamaged, TransactionProgress, TransactionProgressFile
from services.remoting.errors import BodyError
from services.remoting.message import TRANSACTION_PREPARED_TYPE

RULES = CheckRules(timeout_ms=6_000, check_max=3, interval_ms=1_000, reserved_ms=3_600_000)
NOW = 1_000_000


def half_entry(offset: int, born: int, tid: str = "", **props: str) -> HalfEntry:
    return HalfEntry(offset, tid or f"T{offset}", {"REAL_TOPIC": "T", "REAL_QID": "1", **props}, born)


def test_a_transactional_send_is_told_by_its_property_or_its_prepared_sys_flag() -> None:
    assert is_transactional({"TRAN_MSG": "true"}, 0)
    assert is_transactional({}, TRANSACTION_PREPARED_TYPE)
    assert not is_transactional({"TRAN_MSG": "false"}, 0) and not is_transactional({}, 0x8)


def test_a_half_message_is_held_in_queue_0_of_the_half_topic_and_commits_to_its_real_queue() -> None:
    wire = WireFields(3, TRANSACTION_PREPARED_TYPE, 5, reconsume_times=0).encode()
    half = to_half(Message("Orders", b"b", "k", "t", 2, {"UNIQ_KEY": "U1", "TRAN_MSG": "true", "PGROUP": "g",
                                                        WIRE: wire}))
    assert (half.topic, half.queue_id) == (HALF_TOPIC, 0)
    assert half.properties["REAL_TOPIC"] == "Orders" and half.properties["REAL_QID"] == "2"
    assert half.properties["__transactionId__"] == "U1"
    real = committed("k", "t", half.properties, b"b", queue_nums=4)
    assert real is not None
    assert (real.topic, real.queue_id, real.keys, real.tags, real.body) == ("Orders", 2, "k", "t", b"b")
    assert not {"REAL_TOPIC", "REAL_QID", "TRAN_MSG"} & set(real.properties)
    assert WireFields.decode(real.properties[WIRE], 0).sys_flag == COMMIT  # prepared bits replaced by commit
    assert committed("k", "t", {"REAL_TOPIC": OP_TOPIC}, b"b", 4) is None  # never into a system topic
    out_of_range = committed("k", "t", {"REAL_TOPIC": "T", "REAL_QID": "9"}, b"b", 4)
    assert out_of_range is not None and out_of_range.queue_id is None  # left to the store's choice


def test_op_records_are_rocketmqs_and_hostile_bodies_resolve_nothing() -> None:
    op = op_record(41, "U1")
    assert (op.topic, op.queue_id, op.tags, op.body) == (OP_TOPIC, 0, "d", b"41")
    assert op_half_offsets("d", b"41") == [41]
    assert op_half_offsets("d", b"1,2,x,-3,99999999999999999999") == [1, 2]  # RocketMQ 5 batches them
    assert op_half_offsets("x", b"41") == [] and op_half_offsets("d", b"1," * 40_000) == []


def test_the_check_count_and_the_discard_after_transaction_check_max() -> None:
    assert RULES.next_check({}) == 1
    assert RULES.next_check({CHECK_TIMES: "2"}) == 3
    assert RULES.next_check({CHECK_TIMES: "3"}) is None
    assert RULES.next_check({CHECK_TIMES: "junk"}) is None  # a count that is no number is not checked for ever
    assert renewed("k", "t", {"A": "1"}, b"b", 2).properties == {"A": "1", CHECK_TIMES: "2"}
    assert discarded("k", "t", {}, b"b").topic == DISCARD_TOPIC


def test_immunity_is_the_timeout_or_the_messages_own_longer_time() -> None:
    assert RULES.immunity_ms({}) == 6_000
    assert RULES.immunity_ms({CHECK_IMMUNITY: "60"}) == 60_000
    assert RULES.immunity_ms({CHECK_IMMUNITY: "1"}) == 6_000
    # the producer's own late verdict is refused only for a message that set its immunity
    assert RULES.end_refused({CHECK_IMMUNITY: "10"}, NOW - 11_000, NOW, from_check=False)
    assert not RULES.end_refused({CHECK_IMMUNITY: "10"}, NOW - 11_000, NOW, from_check=True)
    assert not RULES.end_refused({}, NOW - 60_000, NOW, from_check=False)


def test_young_half_messages_wait_old_ones_are_checked_resolved_ones_passed() -> None:
    index = OpIndex(0)
    index.read(0, "T1", [1], half_end=3)
    entries = [half_entry(0, NOW - 7_000), half_entry(1, NOW - 7_000), half_entry(2, NOW - 2_000),
               half_entry(3, NOW - 9_000)]
    steps = plan(RULES, entries, NOW, index, caught_up=True, max_checks=10)
    assert [(s.offset, s.verdict, s.check_times) for s in steps] == [
        (0, Verdict.CHECK, 1), (1, Verdict.RESOLVED, 0)]  # stops at the young one: later ones wait behind it
    assert verdict(RULES, half_entry(0, NOW + 5_000), NOW, index, True).verdict is Verdict.CHECK  # born ahead
    assert verdict(RULES, half_entry(0, NOW - 7_000, **{CHECK_TIMES: "3"}), NOW, index, True).verdict \
        is Verdict.DISCARD
    assert verdict(RULES, half_entry(0, NOW - 4_000_000), NOW, index, True).verdict is Verdict.DISCARD
    assert verdict(RULES, HalfEntry(5, "", None, 0), NOW, index, True).verdict is Verdict.SKIP


def test_nothing_is_checked_while_op_records_are_unread() -> None:
    index = OpIndex(0, window=1)
    index.read(0, "T9", [9], half_end=10)
    assert index.room() == 0
    steps = plan(RULES, [half_entry(0, NOW - 7_000)], NOW, index, caught_up=False, max_checks=10)
    assert steps == []


def test_every_copy_of_a_resolved_transaction_is_resolved() -> None:
    index = OpIndex(0)
    index.read(0, "TX", [4], half_end=10)  # the op names the copy at 4; an older copy at 2 and a newer at 8
    for offset in (2, 4, 8):
        assert verdict(RULES, half_entry(offset, NOW - 7_000, tid="TX"), NOW, index, True).verdict \
            is Verdict.RESOLVED


def test_the_op_watermark_moves_once_the_half_watermark_passes_what_existed_when_read() -> None:
    index = OpIndex(5)
    index.read(5, "A", [1], half_end=3)
    index.read(6, "B", [2], half_end=8)
    assert not index.advance(2) and index.watermark == 5
    assert index.advance(3) and index.watermark == 6 and not index.resolved(1, "A")
    assert index.resolved(2, "B")
    assert index.advance(8) and index.watermark == 7 and not index.resolved(2, "B")
    with pytest.raises(ValueError):
        index.read(6, "C", [], 8)


def test_a_flood_of_op_records_is_held_to_the_window() -> None:
    index = OpIndex(0, window=3)
    for offset in range(3):
        index.read(offset, f"T{offset}", [offset], half_end=offset + 1)
    assert index.room() == 0
    for n in range(10_000):  # stored-here notes are bounded too
        index.note(f"N{n}")
    assert len(index._by_id) <= 2 * 3


def test_max_checks_bounds_one_walk() -> None:
    entries = [half_entry(i, NOW - 7_000) for i in range(10)]
    steps = plan(RULES, entries, NOW, OpIndex(0), caught_up=True, max_checks=4)
    assert [s.offset for s in steps] == [0, 1, 2, 3]


def test_progress_round_trips_and_refuses_anything_else(tmp_path: Path) -> None:
    progress = TransactionProgress(12, 7, 81920)
    assert TransactionProgress.decode(progress.encode()) == progress
    for bad in (b"[]", b"{}", b"x" * 5000, progress.encode().replace(b"12", b"13"),
                b'{"halfOffset":-1,"opOffset":0,"logOffset":0,"crc":0}'):
        with pytest.raises(BodyError):
            TransactionProgress.decode(bad)
    file = TransactionProgressFile(tmp_path / "config" / "transactionProgress.json")
    assert file.load() == TransactionProgress()
    file.save(progress)
    assert TransactionProgressFile(file.path).load() == progress
    file.path.write_bytes(b"{")
    with pytest.raises(ProgressDamaged):
        TransactionProgressFile(file.path).load()
