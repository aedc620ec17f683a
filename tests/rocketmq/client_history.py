"""What a run of our Java test program (tests/rocketmq/java) did, read back from its history file, and what
its numbered messages must look like when consumed.

Each line is ``KIND <TAB> wall-clock ms <TAB> fields...`` (History.java), written as it happens:

=========  ==============================================================================================
STARTED    the mode, the client's version (and for lite-pull: subscribe or assign)
SENT       seq, mode (sync, async, oneway, batch, delayed, transaction), send status, broker name, queue id,
           queue offset, msgId, the store host (host:port of the broker that stored it, from its offset msgId)
FAILED     seq, mode, the exception (class and message)
ONEWAY     seq: handed to the client by a oneway send, never answered
PAUSED     the next seq, async sends still unanswered: a producer's --pause-while file appeared
RESUMED    the next seq: that file is gone
ASSIGNED   the queues a lite-pull consumer in assign mode took
REFUSED    seq, queue id, queue offset: a push consumer refused this delivery (--reconsume-every)
LOCAL      seq, the local transaction's answer, the send result's local state, transaction id
           (transaction-produce)
CHECKED    seq, the answer, transaction id, msgId, reconsume times: a broker's check-back, answered
SENT_ALL   sent, failed: a transaction-produce run's sends are over (it stays up for check-backs)
CONSUMED   seq (-1 for a body the program did not write), queue id, queue offset, tags, keys, body length,
           reconsume times, broker name, store host, msgId, born timestamp (ms: when the client sent this copy)
DONE       a summary; the run ended as asked
=========  ==============================================================================================

Message ``seq`` has the keys ``key-<seq>``, the tag ``TagA``/``TagB``/``TagC`` by ``seq % 3``, and the body
``body-<seq>``, padded with 5,000 dots when ``seq % 50 == 7`` (so the client sends it compressed), as
Clients.java writes them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

TAGS = ("TagA", "TagB", "TagC")
PADDED_EVERY, PADDED_AT, PADDING = 50, 7, 5000
#: The send status of an acknowledged message (SendStatus.SEND_OK).
SEND_OK = "SEND_OK"


def expected_tag(seq: int) -> str:
    return TAGS[seq % len(TAGS)]


def expected_keys(seq: int) -> str:
    return f"key-{seq}"


def expected_body_length(seq: int) -> int:
    return len(f"body-{seq}") + (PADDING if seq % PADDED_EVERY == PADDED_AT else 0)


@dataclass(frozen=True)
class Sent:
    at_ms: int
    seq: int
    mode: str
    status: str
    broker: str
    queue_id: int
    queue_offset: int
    msg_id: str
    store_host: str


@dataclass(frozen=True)
class Failed:
    at_ms: int
    seq: int
    mode: str
    error: str


@dataclass(frozen=True)
class Consumed:
    at_ms: int
    seq: int
    queue_id: int
    queue_offset: int
    tags: str
    keys: str
    body_length: int
    reconsume_times: int
    broker: str
    store_host: str
    msg_id: str
    #: When the producer sent this copy (each attempt of a retried send has its own); -1 in older histories.
    born_ms: int = -1

    def mismatch(self) -> str | None:
        """What is wrong with this message against its number's keys, tag and body, or None."""
        wanted = (expected_keys(self.seq), expected_tag(self.seq), expected_body_length(self.seq))
        if self.seq < 0 or (self.keys, self.tags, self.body_length) != wanted:
            return (f"seq {self.seq} at {self.queue_id}:{self.queue_offset}: keys {self.keys!r}, tags {self.tags!r}, "
                    f"body of {self.body_length} bytes; wanted {wanted}")
        return None


@dataclass(frozen=True)
class History:
    """One history file, parsed."""

    started: tuple[str, ...] | None = None
    done: tuple[str, ...] | None = None
    sent: tuple[Sent, ...] = ()
    failed: tuple[Failed, ...] = ()
    oneway: tuple[int, ...] = ()
    consumed: tuple[Consumed, ...] = ()
    #: The next seq of each PAUSED line.
    paused: tuple[int, ...] = ()
    other: tuple[str, ...] = ()

    @classmethod
    def read(cls, path: Path) -> History:
        """The history file at ``path`` (empty while the client has not written it yet)."""
        try:
            return cls.parse(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls()

    @classmethod
    def parse(cls, text: str) -> History:
        """Every complete line (one still being written, without its newline, is left for the next read)."""
        marks: dict[str, tuple[str, ...]] = {}
        sent: list[Sent] = []
        failed: list[Failed] = []
        oneway: list[int] = []
        consumed: list[Consumed] = []
        paused: list[int] = []
        other: list[str] = []
        for line in text.split("\n")[:-1]:
            kind, _, rest = line.partition("\t")
            f = rest.split("\t")
            if kind in ("STARTED", "DONE"):
                marks[kind] = tuple(f[1:])
            elif kind == "SENT":
                sent.append(Sent(int(f[0]), int(f[1]), f[2], f[3], f[4], int(f[5]), int(f[6]), f[7], f[8]))
            elif kind == "FAILED":
                failed.append(Failed(int(f[0]), int(f[1]), f[2], f[3] if len(f) > 3 else ""))
            elif kind == "ONEWAY":
                oneway.append(int(f[1]))
            elif kind == "CONSUMED":
                consumed.append(_consumed(f))
            elif kind == "PAUSED":
                paused.append(int(f[1]))
            elif kind != "RESUMED":
                other.append(line)
        return cls(marks.get("STARTED"), marks.get("DONE"), tuple(sent), tuple(failed), tuple(oneway),
                   tuple(consumed), tuple(paused), tuple(other))

    @property
    def acknowledged(self) -> frozenset[int]:
        """The numbers a broker answered SEND_OK for."""
        return frozenset(s.seq for s in self.sent if s.status == SEND_OK)

    @property
    def last_seq(self) -> int:
        """The highest number a producer sent, whatever came of it (-1 before its first send)."""
        return max((*(s.seq for s in self.sent), *(f.seq for f in self.failed), *self.oneway), default=-1)

    @property
    def not_acknowledged(self) -> tuple[Sent | Failed, ...]:
        """Every send answered with another status than SEND_OK, or failed."""
        return (*(s for s in self.sent if s.status != SEND_OK), *self.failed)

    def acknowledged_after(self, at_ms: float) -> frozenset[int]:
        return frozenset(s.seq for s in self.sent if s.status == SEND_OK and s.at_ms > at_ms)

    @property
    def seqs(self) -> frozenset[int]:
        """The numbers consumed, each once."""
        return frozenset(c.seq for c in self.consumed)

    @property
    def duplicates(self) -> int:
        """Deliveries beyond the first of a number (at-least-once delivery allows them)."""
        return sum(n - 1 for n in Counter(c.seq for c in self.consumed).values())

    def statuses(self) -> Counter[str]:
        return Counter(s.status for s in self.sent)


def _consumed(f: list[str]) -> Consumed:
    return Consumed(int(f[0]), int(f[1]), int(f[2]), int(f[3]), f[4], f[5], int(f[6]), int(f[7]), f[8],
                    f[9].lstrip("/"), f[10], int(f[11]) if len(f) > 11 else -1)
