"""FlushService: the commitlog is fsynced every flushIntervalCommitLog (or per group commit), the consume
queues and the checkpoint at most every flushIntervalConsumeQueue."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.broker.flush import FlushService
from services.broker.store import Message, MessageStore

TS = 1_700_000_000_000


def append(store: MessageStore, n: int) -> int:
    for i in range(n):
        store.append(Message("TopicTest", f"m{i}".encode(), queue_id=0), TS)
    store.set_confirm_offset(store.max_offset)
    return store.max_offset


def dispatched(root: Path) -> int:
    return int(json.loads((root / "checkpoint").read_text())["dispatchedOffset"])


async def until(predicate, seconds: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.005)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    s = MessageStore(tmp_path, "127.0.0.1:10911", segment_size=2**20, queue_nums=1)
    s.open()
    yield s
    s.close()


def test_async_flush_defers_queues_and_checkpoint(store: MessageStore, tmp_path: Path) -> None:
    async def scenario() -> None:
        flush = FlushService(store, False, 10, threading.Lock(), index_interval_ms=60_000)
        flush.start()
        first = append(store, 3)
        await until(lambda: flush.flushed_offset == first and (tmp_path / "checkpoint").exists())
        assert dispatched(tmp_path) == first  # the first flush includes the index
        second = append(store, 3)
        await until(lambda: flush.flushed_offset == second)
        assert dispatched(tmp_path) == first and store.queues.queue("TopicTest", 0).dirty  # type: ignore[union-attr]
        await flush.stop()  # a stop flushes everything
        assert dispatched(tmp_path) == second

    asyncio.run(scenario())


def test_group_commit_fsyncs_only_the_commitlog_between_index_flushes(store: MessageStore, tmp_path: Path) -> None:
    async def scenario() -> None:
        flush = FlushService(store, True, 500, threading.Lock(), index_interval_ms=60_000)
        flush.start()
        assert await flush.wait_flushed(append(store, 2), 5000)
        first = dispatched(tmp_path)
        for _ in range(3):
            assert await flush.wait_flushed(append(store, 2), 5000)
        assert flush.flushed_offset == store.max_offset and dispatched(tmp_path) == first
        await flush.stop()
        assert dispatched(tmp_path) == store.max_offset

    asyncio.run(scenario())
