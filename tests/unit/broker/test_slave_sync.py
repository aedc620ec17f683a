"""A slave copies its master's topics (slave_sync.TopicSync), as RocketMQ's SlaveSynchronize does."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from services.broker import slave_sync
from services.broker.slave_sync import SlaveSync, TopicSync
from services.broker.topics import TopicRegistry
from services.common.codes import ResponseCode
from services.common.errors import UnreachableError
from services.remoting.command import RemotingCommand, make_response
from services.remoting.namesrv_bodies import TopicConfig, TopicConfigSerializeWrapper


class Master:
    def __init__(self, topics: list[str], code: int = ResponseCode.SUCCESS, body: bytes | None = None,
                 configs: dict[str, TopicConfig] | None = None) -> None:
        self.topics, self.code, self.body, self.configs = topics, code, body, configs
        self.asked: list[str] = []

    async def call(self, address: str, request: RemotingCommand, timeout_s: float | None = None) -> RemotingCommand:
        self.asked.append(address)
        if address == "down:1":
            raise UnreachableError("down:1 is unreachable")
        body = self.body if self.body is not None else TopicConfigSerializeWrapper(
            self.configs or {t: TopicConfig(t, 4, 4, 6) for t in self.topics}).encode()
        return make_response(request, self.code, "refused" if self.code else None, None, body)

    async def close(self) -> None:
        pass


def test_the_masters_topics_are_created_here_once_and_announced(tmp_path: Path) -> None:
    registry = TopicRegistry(tmp_path / "topics.json")
    announced: list[list[str]] = []
    master = Master(["Orders", "TBW102", "%RETRY%group", "bad topic!"])
    sync = TopicSync(registry, announced.append, master)  # type: ignore[arg-type]
    assert asyncio.run(sync.sync_from("m:1")) is True
    assert registry.names == {"Orders", "%RETRY%group"}  # not the auto-create topic, not an illegal name
    assert asyncio.run(sync.sync_from("m:1")) is True
    assert announced == [["%RETRY%group", "Orders"]]  # the second round had nothing new
    reloaded = TopicRegistry(tmp_path / "topics.json")
    reloaded.load()
    assert reloaded.names == {"Orders", "%RETRY%group"}  # on disk


def test_the_masters_queue_counts_and_perm_are_copied_and_follow_its_updates(tmp_path: Path) -> None:
    """As RocketMQ's syncTopicConfig: the config, not only the name; one this broker cannot keep is skipped."""
    registry = TopicRegistry(tmp_path / "topics.json")
    registry.create("Orders")
    changed: list[list[str]] = []
    master = Master([], configs={"Orders": TopicConfig("Orders", 8, 8, 6), "Ro": TopicConfig("Ro", 2, 1, 4),
                                 "Huge": TopicConfig("Huge", 5000, 5000, 6)})
    sync = TopicSync(registry, changed.append, master)  # type: ignore[arg-type]
    assert asyncio.run(sync.sync_from("m:1")) is True
    assert dict(registry.configs) == {"Orders": TopicConfig("Orders", 8, 8, 6), "Ro": TopicConfig("Ro", 2, 1, 4)}
    master.configs = {"Orders": TopicConfig("Orders", 8, 4, 6)}  # the master reduced its writable queues
    assert asyncio.run(sync.sync_from("m:1")) is True
    assert registry.get("Orders") == TopicConfig("Orders", 8, 4, 6) and registry.get("Ro") is not None
    assert changed == [["Orders", "Ro"], ["Orders"]]


def test_a_topic_the_master_deleted_goes_once_this_brokers_log_holds_its_deletion(tmp_path: Path) -> None:
    """Removed only when deleted here too (the mark in the log): a topic the master does not hold yet stays."""
    registry = TopicRegistry(tmp_path / "topics.json")
    for name in ("Orders", "Gone", "NotYetOnMaster"):
        registry.create(name)
    deleted: set[str] = set()
    sync = TopicSync(registry, print, Master(["Orders"]), lambda: deleted)  # type: ignore[arg-type]
    assert asyncio.run(sync.sync_from("m:1")) is True
    assert registry.names == {"Orders", "Gone", "NotYetOnMaster"}
    deleted.add("Gone")
    assert asyncio.run(sync.sync_from("m:1")) is True
    assert registry.names == {"Orders", "NotYetOnMaster"}


def test_a_refusal_an_unreachable_master_or_a_malformed_answer_changes_nothing(tmp_path: Path) -> None:
    registry = TopicRegistry(tmp_path / "topics.json")
    for master, address in ((Master(["A"], ResponseCode.SYSTEM_ERROR), "m:1"), (Master(["A"]), "down:1"),
                            (Master([], body=b'{"topicConfigTable": 5}'), "m:1")):
        assert asyncio.run(TopicSync(registry, print, master).sync_from(address)) is False  # type: ignore[arg-type]
    assert registry.names == frozenset()


def test_only_a_slave_copies_and_a_failing_copy_does_not_stop_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    role = {"master": None}

    async def failing(address: str) -> bool:
        calls.append("offsets")
        raise RuntimeError("boom")

    async def topics(address: str) -> bool:
        calls.append(f"topics from {address}")
        return True

    monkeypatch.setattr(slave_sync, "SYNC_INTERVAL_S", 0.01)

    async def run() -> None:
        sync = SlaveSync(lambda: role["master"], [failing, topics])
        sync.start()
        await asyncio.sleep(0.05)
        assert calls == []  # a master copies from nobody
        role["master"] = "m:1"  # type: ignore[assignment]
        for _ in range(100):
            if "topics from m:1" in calls:
                break
            await asyncio.sleep(0.01)
        await sync.stop()
    asyncio.run(run())
    assert calls[:2] == ["offsets", "topics from m:1"]
