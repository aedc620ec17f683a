"""The slave's replication client (ha/slave.py) against a scripted master on a loopback socket.

What the slave answers matters to the master: an ack says "these bytes are safe here". The client
answers a frame that moved its ack, stays silent on a frame that only moved confirmOffset (its last ack
still holds), and under SYNC_FLUSH never acknowledges, not even in a heartbeat, what it has not flushed.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from services.broker.config import BrokerConfig
from services.broker.ha.frames import MasterHandshake, SlaveFrameReader, SlaveHandshake, Transfer
from services.broker.ha.slave import HAClient
from services.broker.store import Message, MessageStore
from services.common.clock import SystemClock

HOST = "127.0.0.1:10911"
DEADLINE_S = 5.0


class ScriptedMaster:
    """Accepts one slave, answers its handshake with epoch 1 from offset 0, then sends what the test
    says and records every ack."""

    def __init__(self) -> None:
        self.acks: list[int] = []
        self.changed = asyncio.Event()
        self.writer: asyncio.StreamWriter | None = None
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"127.0.0.1:{port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        frames = SlaveFrameReader()
        while True:
            data = await reader.read(4096)
            if not data:
                return
            for frame in frames.feed(data):
                if isinstance(frame, SlaveHandshake):
                    self.writer = writer
                    writer.write(MasterHandshake(0, 1, ((1, 0),)).encode())
                else:
                    self.acks.append(frame.max_offset)
                self.changed.set()

    async def send(self, frame: Transfer) -> None:
        assert self.writer is not None
        self.writer.write(frame.encode())
        await self.writer.drain()

    async def wait(self, condition: Callable[[], bool]) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not condition():
            self.changed.clear()
            left = deadline - time.monotonic()
            assert left > 0, f"timed out; acks so far: {self.acks}"
            try:
                await asyncio.wait_for(self.changed.wait(), left)
            except TimeoutError:
                pass

    async def stop(self) -> None:
        if self.writer is not None:
            self.writer.close()
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


def records(root: Path, count: int) -> bytes:
    """The bytes a master's commitlog holds after ``count`` messages."""
    store = MessageStore(root, HOST, segment_size=1 << 20)
    store.open()
    try:
        store.append_batch([Message("TopicTest", b"m%d" % i) for i in range(count)], 1_700_000_000_000)
        return store.commitlog.read(0, store.max_offset)
    finally:
        store.close()


@pytest.fixture
def slave_store(tmp_path: Path) -> Iterator[MessageStore]:
    store = MessageStore(tmp_path / "slave", HOST, segment_size=1 << 20)
    store.open()
    yield store
    store.close()


@contextlib.asynccontextmanager
async def running_client(config: BrokerConfig, store: MessageStore, master: ScriptedMaster,
                         wait_flushed: Callable[[int, int], Awaitable[bool]]) -> AsyncIterator[HAClient]:
    ha_address = await master.start()
    client = HAClient(config, store, SystemClock(), 2, "unused", threading.Lock(), wait_flushed, lambda _: None)

    async def master_ha_address() -> str:
        return ha_address

    client._master_ha_address = master_ha_address  # type: ignore[method-assign]
    client.start()
    try:
        yield client
    finally:
        await client.stop()
        await master.stop()


async def always_flushed(_offset: int, _timeout_ms: int) -> bool:
    return True


async def never_flushed(_offset: int, _timeout_ms: int) -> bool:
    return False


def test_a_confirm_only_frame_is_not_answered(tmp_path: Path, slave_store: MessageStore) -> None:
    data = records(tmp_path / "master", 5)

    async def scenario() -> None:
        master = ScriptedMaster()
        async with running_client(BrokerConfig(), slave_store, master, always_flushed):
            await master.wait(lambda: master.acks == [0])  # the first ack asks for offset 0
            await master.send(Transfer(0, 1, 0, 0, data))
            await master.wait(lambda: master.acks == [0, len(data)])
            await master.send(Transfer(len(data), 1, 0, len(data)))  # confirmOffset moved, nothing else
            deadline = time.monotonic() + DEADLINE_S
            while slave_store.confirm_offset < len(data):
                assert time.monotonic() < deadline, "the slave never applied the new confirmOffset"
                await asyncio.sleep(0.01)
            await master.send(Transfer(len(data), 1, 0, len(data)))  # a master heartbeat
            # a later data frame is answered: the acks in between would have arrived before it
            more = records(tmp_path / "master2", 7)[len(data):]
            assert more, "the second log must be longer"
            await master.send(Transfer(len(data), 1, 0, len(data), more))
            await master.wait(lambda: len(master.acks) == 3)
            assert master.acks == [0, len(data), len(data) + len(more)]

    asyncio.run(scenario())


def test_sync_flush_never_acknowledges_unflushed_bytes(tmp_path: Path, slave_store: MessageStore) -> None:
    data = records(tmp_path / "master", 5)
    config = BrokerConfig(flushDiskType="SYNC_FLUSH", haSendHeartbeatInterval=100)

    async def scenario() -> None:
        master = ScriptedMaster()
        async with running_client(config, slave_store, master, never_flushed):
            await master.wait(lambda: master.acks == [0])
            await master.send(Transfer(0, 1, 0, 0, data))
            await master.wait(lambda: len(master.acks) >= 4)  # the data frame's ack, then heartbeats
            assert slave_store.max_offset == len(data)
            assert all(ack <= slave_store.commitlog.flushed_offset for ack in master.acks), master.acks

    asyncio.run(scenario())
