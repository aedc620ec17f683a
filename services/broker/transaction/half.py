"""The rules of transactional messages, pure: how a send becomes a half message, how a half message becomes
the committed message, its op record or its discarded copy, and the time and count rules of the check-back.

A **half message** (``TRAN_MSG=true``, RocketMQ's TransactionMQProducer) is stored in
``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 with its real topic and queue in ``REAL_TOPIC`` and ``REAL_QID``, as
RocketMQ's TransactionalMessageBridge stores it: consumers of the real topic see nothing of it. The send is
answered SEND_OK with the half queue's offset and the message's transaction id (its UNIQ_KEY).

**END_TRANSACTION** names the half message by its commitlog offset and half queue offset. A commit stores the
message in its real topic (the half properties dropped, sysFlag's transaction bits set to commit) and an
**op record** in ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` queue 0, both in one put; a rollback stores only the op
record. An op record is RocketMQ's: tag ``d``, body the half queue offset in decimal; ours also carries the
transaction id (``__MQCTL.TRAN_ID``), so that every copy of a resolved transaction is known resolved.

The **check-back**: a half message with no op record, older than its immunity (``transactionTimeOut``, or
``CHECK_IMMUNITY_TIME_IN_SECONDS`` when that is longer) since it was born, is stored again at the end of the
half queue with ``TRANSACTION_CHECK_TIMES`` one higher, and the producer group is asked about that copy
(CHECK_TRANSACTION_STATE). A copy already checked ``transactionCheckMax`` times, or older than the store's
``fileReservedTime``, is discarded: stored in ``TRANS_CHECK_MAX_TIME_TOPIC``, as RocketMQ 5 does, and never
checked again.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.broker.remoting_messages import WIRE, WireFields
from services.broker.store import Message
from services.remoting.message import TRANSACTION_PREPARED_TYPE, TRANSACTION_TYPE_MASK

__all__ = ["CHECK_IMMUNITY", "CHECK_TIMES", "COMMIT", "DISCARD_TOPIC", "HALF_TOPIC", "NOT_KNOWN", "OP_TAG",
           "OP_TOPIC", "ROLLBACK", "TRAN_ID", "CheckRules", "committed", "discarded", "is_transactional",
           "op_half_offsets", "op_record", "renewed", "to_half", "transaction_id"]

HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
DISCARD_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
OP_TAG = "d"
#: MessageSysFlag's transaction types, as END_TRANSACTION's commitOrRollback carries them.
NOT_KNOWN, COMMIT, ROLLBACK = 0x0, 0x1 << 3, 0x3 << 2
TRAN_MSG, PGROUP, UNIQ_KEY = "TRAN_MSG", "PGROUP", "UNIQ_KEY"
REAL_TOPIC, REAL_QID = "REAL_TOPIC", "REAL_QID"
CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
CHECK_IMMUNITY = "CHECK_IMMUNITY_TIME_IN_SECONDS"
#: RocketMQ's TransactionalMessageUtil.TRANSACTION_ID, set on a half message as RocketMQ sets it.
_TRANSACTION_ID = "__transactionId__"
#: The transaction an op record resolves (a broker-only property: clients cannot set ``__MQCTL.`` names).
TRAN_ID = "__MQCTL.TRAN_ID"
_MAX_OFFSET_TEXT = 19


def is_transactional(properties: dict[str, str], sys_flag: int) -> bool:
    """A half message: ``TRAN_MSG=true``, or a prepared sysFlag (how RocketMQ's send path tells it)."""
    return properties.get(TRAN_MSG, "").lower() == "true" or \
        sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_PREPARED_TYPE


def transaction_id(properties: dict[str, str]) -> str:
    return properties.get(UNIQ_KEY, "")


def to_half(message: Message) -> Message:
    """A send's message as the half queue holds it (queue 0, the real topic and queue in properties)."""
    props = dict(message.properties)
    props[REAL_TOPIC] = message.topic
    if message.queue_id is not None:
        props[REAL_QID] = str(message.queue_id)
    props[TRAN_MSG] = "true"
    if props.get(UNIQ_KEY):
        props[_TRANSACTION_ID] = props[UNIQ_KEY]
    return Message(HALF_TOPIC, message.body, message.keys, message.tags, 0, props)


def committed(keys: str, tags: str, properties: dict[str, str], body: bytes, queue_nums: int) -> Message | None:
    """The message a committed half message becomes in its real topic; None if it names none."""
    props = dict(properties)
    topic, qid = props.pop(REAL_TOPIC, ""), props.pop(REAL_QID, "")
    if not topic or topic in (HALF_TOPIC, OP_TOPIC):
        return None
    props.pop(TRAN_MSG, None)
    wire = props.get(WIRE)
    if wire is not None:
        fields = WireFields.decode(wire, 0)
        props[WIRE] = WireFields(fields.flag, (fields.sys_flag & ~TRANSACTION_TYPE_MASK) | COMMIT,
                                 fields.born_timestamp, fields.born_host, fields.reconsume_times).encode()
    queue = int(qid) if qid.isdecimal() and int(qid) < queue_nums else None
    return Message(topic, body, keys, tags, queue, props)


def op_record(half_offset: int, tid: str) -> Message:
    """The op record that resolves the half message at ``half_offset`` (committed or rolled back)."""
    props = {TRAN_ID: tid} if tid else {}
    return Message(OP_TOPIC, str(half_offset).encode(), "", OP_TAG, 0, props)


def op_half_offsets(tags: str, body: bytes) -> list[int]:
    """The half queue offsets an op record resolves (RocketMQ 5 batches them, comma-separated); [] for a record
    that is no op record (wrong tag, not offsets)."""
    if tags != OP_TAG or len(body) > 64 * 1024:
        return []
    found = []
    for part in body.split(b","):
        text = part.strip()
        if text.isdigit() and len(text) <= _MAX_OFFSET_TEXT:
            found.append(int(text))
    return found


def renewed(keys: str, tags: str, properties: dict[str, str], body: bytes, check_times: int) -> Message:
    """A half message stored again at the end of the half queue before its check-back, counting the check."""
    props = dict(properties)
    props[CHECK_TIMES] = str(check_times)
    return Message(HALF_TOPIC, body, keys, tags, 0, props)


def discarded(keys: str, tags: str, properties: dict[str, str], body: bytes) -> Message:
    """A half message given up on (checked transactionCheckMax times), kept where an operator can read it."""
    return Message(DISCARD_TOPIC, body, keys, tags, 0, dict(properties))


@dataclass(frozen=True)
class CheckRules:
    """What the broker's configuration says of the check-back (milliseconds)."""

    timeout_ms: int = 6_000  # transactionTimeOut
    check_max: int = 15  # transactionCheckMax
    interval_ms: int = 30_000  # transactionCheckInterval
    reserved_ms: int = 72 * 3_600_000  # fileReservedTime: a half message older than the log kept is given up

    def immunity_ms(self, properties: dict[str, str]) -> int:
        """How long after its birth a half message is left to its producer: transactionTimeOut, or the
        message's CHECK_IMMUNITY_TIME_IN_SECONDS when that is longer (TransactionalMessageUtil.getImmunityTime)."""
        text = properties.get(CHECK_IMMUNITY, "").strip()
        seconds = int(text) if text.isdigit() and len(text) <= 9 else 0
        return max(self.timeout_ms, seconds * 1000)

    def next_check(self, properties: dict[str, str]) -> int | None:
        """The check count of the next check-back, or None when the message has had transactionCheckMax of them
        (RocketMQ's needDiscard: the first check counts 1)."""
        text = properties.get(CHECK_TIMES)
        if text is None:
            return 1
        times = int(text) if text.strip().isdigit() and len(text) <= 9 else self.check_max
        return None if times >= self.check_max else times + 1

    def end_refused(self, properties: dict[str, str], born_ms: int, now_ms: int, from_check: bool) -> bool:
        """A producer's own commit or rollback comes too late: the message set CHECK_IMMUNITY_TIME_IN_SECONDS
        and that time has passed, so only the answer to a check-back counts (RocketMQ's rejectCommitOrRollback,
        ILLEGAL_OPERATION)."""
        if from_check or not properties.get(CHECK_IMMUNITY, "").strip():
            return False
        return now_ms - born_ms > self.immunity_ms(properties)
