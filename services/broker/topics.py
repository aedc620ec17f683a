"""The broker's topic configs (RocketMQ's TopicConfigManager table), kept in
``<storePathRootDir>/config/topics.json`` so that a topic exists before its first message, keeps the queue
counts and perm ``updateTopic`` gave it, and survives a restart.

A topic has a config once it is created (``UPDATE_AND_CREATE_TOPIC``, a first send with
autoCreateTopicEnable, a consumer group's retry topic from a heartbeat, or a copy from the master). A
topic written before configs were kept has none on disk: it has ``defaultTopicQueueNums`` read and write
queues and perm 6 (a group's ``%RETRY%`` and ``%DLQ%`` topics one queue), as every topic had then
(:func:`implicit_config`).

File: ``{"crc":C,"version":2,"topics":[TopicConfig,...]}``, each config as RocketMQ's TopicConfig JSON,
sorted by name, ``crc`` the CRC32 of the ``topics`` array's text as written; written with fsync and
atomic rename. The older ``{"crc":C,"topics":["a","b"]}`` (names only) loads, each topic with the
implicit config. A file that does not read back exactly is refused at start with one line naming it
(docs/operations.md, 'Damaged topics.json'); nothing is guessed.
"""

from __future__ import annotations

import json
import threading
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType

from services.broker.record import valid_topic
from services.common.durable import atomic_write
from services.common.errors import MqctlError
from services.remoting.errors import BodyError
from services.remoting.namesrv_bodies import TopicConfig

__all__ = ["MAX_QUEUE_NUMS", "MAX_TOPICS", "PERM_INHERIT", "PERM_READ", "PERM_READ_WRITE", "PERM_WRITE",
           "TopicRegistry", "TopicsDamaged", "TopicsFull", "config_problem", "decode_file", "encode_file",
           "implicit_config"]

#: The most topics created explicitly on one broker (RocketMQ has no such bound; a bound keeps the file
#: and the name server registrations small).
MAX_TOPICS = 100_000
#: The most read or write queues of one topic (RocketMQ has no bound; its benchmark topic has 1024). Every
#: replica checks the queue id of each record it receives against it.
MAX_QUEUE_NUMS = 1024
#: A topic's attributes: at most this many, each key and value at most MAX_ATTRIBUTE_TEXT characters.
MAX_ATTRIBUTES, MAX_ATTRIBUTE_TEXT = 16, 64
#: The largest file read back (MAX_TOPICS configs of a name, five numbers and their attributes).
MAX_FILE_BYTES = MAX_TOPICS * (300 + MAX_ATTRIBUTES * (2 * MAX_ATTRIBUTE_TEXT + 6)) + 64
#: RocketMQ's PermName bits.
PERM_INHERIT, PERM_WRITE, PERM_READ = 1, 2, 4
PERM_READ_WRITE = PERM_READ | PERM_WRITE
RECOVERY = "see docs/operations.md, 'Damaged topics.json'"
_RETRY_PREFIX, _DLQ_PREFIX = "%RETRY%", "%DLQ%"
_VERSION = 2


class TopicsDamaged(MqctlError):
    """topics.json does not read back as the file this module writes."""


class TopicsFull(MqctlError):
    """MAX_TOPICS topics exist already."""


def implicit_config(topic: str, queue_nums: int) -> TopicConfig:
    """The config of a topic that has none on disk: a group's retry and dead-letter topics one queue (as
    RocketMQ creates them), the rest ``defaultTopicQueueNums``; read and write."""
    if topic.startswith((_RETRY_PREFIX, _DLQ_PREFIX)):
        return TopicConfig(topic, 1, 1, PERM_READ_WRITE)
    return TopicConfig(topic, queue_nums, queue_nums, PERM_READ_WRITE)


def config_problem(config: TopicConfig) -> str | None:
    """Why this broker cannot keep ``config`` (our bounds; RocketMQ's broker takes any int), or None."""
    if not valid_topic(config.topic_name):
        return f"topic {config.topic_name[:80]!r} is illegal: use 1-127 of letters, digits, '%', '|', '_' and '-'"
    for what, value in (("readQueueNums", config.read_queue_nums), ("writeQueueNums", config.write_queue_nums)):
        if not 0 <= value <= MAX_QUEUE_NUMS:
            return f"{what} {value} is out of range: a topic of this broker has 0 to {MAX_QUEUE_NUMS} queues"
    if not 0 <= config.perm <= PERM_READ | PERM_WRITE | PERM_INHERIT:
        return f"perm {config.perm} is not a combination of read (4), write (2) and inherit (1)"
    if config.topic_sys_flag < 0:
        return f"topicSysFlag {config.topic_sys_flag} is negative"
    if len(config.attributes) > MAX_ATTRIBUTES or any(
            len(k) > MAX_ATTRIBUTE_TEXT or len(v) > MAX_ATTRIBUTE_TEXT for k, v in config.attributes.items()):
        return f"a topic has at most {MAX_ATTRIBUTES} attributes of at most {MAX_ATTRIBUTE_TEXT} characters"
    return None


def _configs_text(configs: Iterable[TopicConfig]) -> str:
    items = [c.to_json() for c in sorted(configs, key=lambda c: c.topic_name)]
    return json.dumps(items, ensure_ascii=True, separators=(",", ":"), sort_keys=True)


def encode_file(configs: Iterable[TopicConfig]) -> bytes:
    text = _configs_text(configs)
    return f'{{"crc":{zlib.crc32(text.encode())},"version":{_VERSION},"topics":{text}}}'.encode()


def decode_file(raw: bytes, path: Path, queue_nums: int) -> dict[str, TopicConfig]:
    """The configs of a file ``encode_file`` wrote, or of the older list of names (each then with its
    implicit config); TopicsDamaged for anything else."""
    if len(raw) > MAX_FILE_BYTES:
        raise TopicsDamaged(f"{path} is damaged (larger than {MAX_FILE_BYTES} bytes); {RECOVERY}")
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        raise TopicsDamaged(f"{path} is damaged (not JSON); {RECOVERY}") from None
    if isinstance(doc, dict) and set(doc) == {"crc", "topics"}:
        return {n: implicit_config(n, queue_nums) for n in _decode_names(doc, path)}
    if not isinstance(doc, dict) or set(doc) != {"crc", "version", "topics"} or doc["version"] != _VERSION \
            or type(doc["crc"]) is not int or not isinstance(doc["topics"], list) or len(doc["topics"]) > MAX_TOPICS:
        raise TopicsDamaged(f"{path} is damaged (not a list of topic configs with its crc); {RECOVERY}")
    configs = [_decode_config(item, path) for item in doc["topics"]]
    names = [c.topic_name for c in configs]
    if names != sorted(set(names)) or zlib.crc32(_configs_text(configs).encode()) != doc["crc"]:
        raise TopicsDamaged(f"{path} is damaged (its topics do not match its crc); {RECOVERY}")
    return {c.topic_name: c for c in configs}


def _decode_config(item: object, path: Path) -> TopicConfig:
    try:
        config = TopicConfig.decode(json.dumps(item).encode())
    except (BodyError, TypeError, ValueError) as exc:
        raise TopicsDamaged(f"{path} is damaged (a topic config does not read: {exc}); {RECOVERY}") from None
    problem = config_problem(config)
    if problem is not None:
        raise TopicsDamaged(f"{path} is damaged ({problem[:200]}); {RECOVERY}")
    return config


def _decode_names(doc: dict[str, object], path: Path) -> list[str]:
    """The names of the older file (no configs)."""
    names = doc["topics"]
    if type(doc["crc"]) is not int or not isinstance(names, list) or not all(isinstance(t, str) for t in names):
        raise TopicsDamaged(f"{path} is damaged (not a topic list with its crc); {RECOVERY}")
    text = json.dumps(sorted(names), ensure_ascii=True, separators=(",", ":"))
    if zlib.crc32(text.encode()) != doc["crc"] or names != sorted(set(names)):
        raise TopicsDamaged(f"{path} is damaged (its topics do not match its crc); {RECOVERY}")
    bad = [t for t in names if not valid_topic(t)]
    if bad or len(names) > MAX_TOPICS:
        raise TopicsDamaged(f"{path} is damaged (it lists {bad[0][:80]!r}, which is no topic name); {RECOVERY}"
                            if bad else f"{path} is damaged (more than {MAX_TOPICS} topics); {RECOVERY}")
    return names


class TopicRegistry:
    """The topic configs, on disk before ``put`` returns. Thread-safe; readers see an immutable table."""

    def __init__(self, path: Path, queue_nums: int = 4) -> None:
        self.path = path
        self.queue_nums = queue_nums
        self._configs: Mapping[str, TopicConfig] = MappingProxyType({})
        self._lock = threading.Lock()

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self._configs)

    @property
    def configs(self) -> Mapping[str, TopicConfig]:
        return self._configs

    def get(self, topic: str) -> TopicConfig | None:
        return self._configs.get(topic)

    def load(self) -> None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            self._configs = MappingProxyType({})
            return
        except OSError as exc:
            raise TopicsDamaged(f"{self.path} cannot be read ({exc.strerror}); {RECOVERY}") from None
        self._configs = MappingProxyType(decode_file(raw, self.path, self.queue_nums))

    def create(self, topic: str) -> bool:
        """Record ``topic`` with its implicit config; False if it has a config already. Raises ValueError
        for a bad name, TopicsFull at the bound."""
        if not valid_topic(topic):
            raise ValueError(f"topic {topic[:80]!r} is illegal")
        if topic in self._configs:
            return False
        return bool(self.put_all([implicit_config(topic, self.queue_nums)], replace=False))

    def put(self, config: TopicConfig) -> bool:
        """Create or update ``config``'s topic; False if it was kept already exactly so. ValueError for a
        config this broker cannot keep (``config_problem``), TopicsFull at the bound."""
        return bool(self.put_all([config]))

    def remove(self, topic: str) -> bool:
        """Forget ``topic``'s config, on disk before returning; False if it had none."""
        with self._lock:
            if topic not in self._configs:
                return False
            table = {name: config for name, config in self._configs.items() if name != topic}
            atomic_write(self.path, encode_file(table.values()))
            self._configs = MappingProxyType(table)
            return True

    def put_all(self, configs: Iterable[TopicConfig], replace: bool = True) -> list[str]:
        """Keep every config (with ``replace``, over a different one of the same topic) in one write; the
        topics whose config changed."""
        configs = list(configs)
        for config in configs:
            problem = config_problem(config)
            if problem is not None:
                raise ValueError(problem)
        with self._lock:
            table = dict(self._configs)
            changed = [c.topic_name for c in configs if c.topic_name not in table
                       or (replace and table[c.topic_name] != c)]
            if not changed:
                return []
            table.update((c.topic_name, c) for c in configs if c.topic_name in changed)
            if len(table) > MAX_TOPICS:
                raise TopicsFull(f"this broker already holds {MAX_TOPICS} created topics")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, encode_file(table.values()))
            self._configs = MappingProxyType(table)
            return changed
