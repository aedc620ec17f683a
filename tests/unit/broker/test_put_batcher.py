"""Sends that arrive in one turn of the event loop are stored as one put; each gets its own results."""

from __future__ import annotations

import asyncio

import pytest

from services.broker.broker import PutOutcome
from services.broker.put_batcher import PutBatcher
from services.broker.store import AppendResult, Message


def message(n: int, size: int = 1) -> Message:
    return Message(topic="T", body=b"x" * size, keys=str(n))


class FakeStore:
    def __init__(self, status: str = "PUT_OK") -> None:
        self.puts: list[list[str]] = []
        self.status = status
        self.offset = 0

    async def put(self, messages: list[Message]) -> PutOutcome:
        self.puts.append([m.keys for m in messages])
        results = []
        for m in messages:
            results.append(AppendResult(f"id{m.keys}", 0, self.offset, self.offset, self.offset + 1))
            self.offset += 1
        await asyncio.sleep(0)
        return PutOutcome(self.status, results)


def test_concurrent_sends_share_one_put_and_get_their_own_results() -> None:
    store = FakeStore()

    async def scenario() -> list[PutOutcome]:
        batcher = PutBatcher(store.put)
        return await asyncio.gather(batcher.put([message(1)]), batcher.put([message(2), message(3)]),
                                    batcher.put([message(4)]))
    one, two, three = asyncio.run(scenario())
    assert store.puts == [["1", "2", "3", "4"]]
    assert [r.msg_id for r in one.results] == ["id1"]
    assert [r.msg_id for r in two.results] == ["id2", "id3"]
    assert [r.msg_id for r in three.results] == ["id4"] and three.status == "PUT_OK"


def test_a_batch_is_bounded_and_the_rest_goes_in_the_next() -> None:
    store = FakeStore()

    async def scenario() -> None:
        batcher = PutBatcher(store.put, max_messages=2, max_bytes=10**6)
        await asyncio.gather(*(batcher.put([message(i)]) for i in range(5)))
    asyncio.run(scenario())
    assert store.puts == [["0", "1"], ["2", "3"], ["4"]]


def test_a_refused_put_is_every_sends_answer() -> None:
    store = FakeStore("SERVICE_NOT_AVAILABLE")

    async def refused(messages: list[Message]) -> PutOutcome:
        return PutOutcome("SERVICE_NOT_AVAILABLE", remark="this broker is a slave")

    async def scenario() -> list[PutOutcome]:
        batcher = PutBatcher(refused)
        return await asyncio.gather(batcher.put([message(1)]), batcher.put([message(2)]))
    outcomes = asyncio.run(scenario())
    assert [(o.status, o.results, o.remark) for o in outcomes] == [("SERVICE_NOT_AVAILABLE", [], "this broker is a slave")] * 2
    assert store.puts == []


def test_a_failing_put_fails_every_send_in_its_batch() -> None:
    async def broken(messages: list[Message]) -> PutOutcome:
        raise OSError("disk gone")

    async def scenario() -> list[object]:
        batcher = PutBatcher(broken)
        return await asyncio.gather(batcher.put([message(1)]), batcher.put([message(2)]), return_exceptions=True)
    assert [str(e) for e in asyncio.run(scenario())] == ["disk gone", "disk gone"]
    with pytest.raises(OSError):
        asyncio.run(PutBatcher(broken).put([message(1)]))
