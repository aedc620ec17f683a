"""Topics created explicitly (``UPDATE_AND_CREATE_TOPIC``, mqctl/mqadmin ``updateTopic``), kept in
``<storePathRootDir>/config/topics.json`` so that a topic exists before its first message and after a
restart.

A topic also exists once a message has been written to it (RocketMQ's autoCreateTopicEnable, which our
brokers always have): its consume queues say so. Every topic of a broker has ``defaultTopicQueueNums``
read and write queues, so the file holds names only.

File: ``{"crc":C,"topics":["a","b"]}`` (names sorted), written with fsync and atomic rename; ``crc`` is
the CRC32 of the ``topics`` array's text as written. A file that does not read back exactly is refused
at start with one line naming it (docs/operations.md, 'Damaged topics.json'); nothing is guessed.
"""

from __future__ import annotations

import json
import threading
import zlib
from pathlib import Path

from services.broker.record import valid_topic
from services.common.durable import atomic_write
from services.common.errors import MqctlError

__all__ = ["MAX_TOPICS", "TopicRegistry", "TopicsDamaged", "TopicsFull", "decode_file", "encode_file"]

#: The most topics created explicitly on one broker (RocketMQ has no such bound; a bound keeps the file
#: and the name server registrations small).
MAX_TOPICS = 100_000
#: The largest file read back (MAX_TOPICS names of at most 127 characters, quoted).
MAX_FILE_BYTES = MAX_TOPICS * 131 + 64
RECOVERY = "see docs/operations.md, 'Damaged topics.json'"


class TopicsDamaged(MqctlError):
    """topics.json does not read back as the file this module writes."""


class TopicsFull(MqctlError):
    """MAX_TOPICS topics exist already."""


def _names_text(names: list[str]) -> str:
    return json.dumps(sorted(names), ensure_ascii=True, separators=(",", ":"))


def encode_file(names: set[str] | frozenset[str]) -> bytes:
    text = _names_text(list(names))
    return f'{{"crc":{zlib.crc32(text.encode())},"topics":{text}}}'.encode()


def decode_file(raw: bytes, path: Path) -> frozenset[str]:
    if len(raw) > MAX_FILE_BYTES:
        raise TopicsDamaged(f"{path} is damaged (larger than {MAX_FILE_BYTES} bytes); {RECOVERY}")
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        raise TopicsDamaged(f"{path} is damaged (not JSON); {RECOVERY}") from None
    if not isinstance(doc, dict) or set(doc) != {"crc", "topics"} or type(doc["crc"]) is not int \
            or not isinstance(doc["topics"], list) or not all(isinstance(t, str) for t in doc["topics"]):
        raise TopicsDamaged(f"{path} is damaged (not a topic list with its crc); {RECOVERY}")
    names: list[str] = doc["topics"]
    if zlib.crc32(_names_text(names).encode()) != doc["crc"] or names != sorted(set(names)):
        raise TopicsDamaged(f"{path} is damaged (its topics do not match its crc); {RECOVERY}")
    bad = [t for t in names if not valid_topic(t)]
    if bad or len(names) > MAX_TOPICS:
        raise TopicsDamaged(f"{path} is damaged (it lists {bad[0][:80]!r}, which is no topic name); {RECOVERY}"
                            if bad else f"{path} is damaged (more than {MAX_TOPICS} topics); {RECOVERY}")
    return frozenset(names)


class TopicRegistry:
    """The explicitly created topics, on disk before ``create`` returns. Thread-safe."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._names: frozenset[str] = frozenset()
        self._lock = threading.Lock()

    @property
    def names(self) -> frozenset[str]:
        return self._names

    def load(self) -> None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            self._names = frozenset()
            return
        except OSError as exc:
            raise TopicsDamaged(f"{self.path} cannot be read ({exc.strerror}); {RECOVERY}") from None
        self._names = decode_file(raw, self.path)

    def create(self, topic: str) -> bool:
        """Record ``topic``; False if it was already recorded. Raises ValueError for a bad name,
        TopicsFull at the bound."""
        if not valid_topic(topic):
            raise ValueError(f"topic {topic[:80]!r} is illegal")
        with self._lock:
            if topic in self._names:
                return False
            if len(self._names) >= MAX_TOPICS:
                raise TopicsFull(f"this broker already holds {MAX_TOPICS} created topics")
            names = self._names | {topic}
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, encode_file(names))
            self._names = names
            return True
