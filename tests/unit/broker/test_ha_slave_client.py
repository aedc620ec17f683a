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
from services.broker.ha.auth import Binding, BrokerKey, slave_proof_ok
from services.broker.ha.frames import (
    MasterChallenge,
    MasterHandshake,
    SlaveAck,
    SlaveFrameReader,
    SlaveHandshake,
    SlaveHello,
    Transfer,
)
from services.broker.ha.slave import HAClient, MasterIdentity
from services.broker.store import Message, MessageStore
from services.common.clock import SystemClock

HOST = "127.0.0.1:10911"
DEADLINE_S = 5.0


SLAVE_KEY = BrokerKey.generate()
MASTER_KEY = BrokerKey.generate()


class ScriptedMaster:
    """Accepts one slave, proves it is broker 1 at masterEpoch 1 (signing with ``signing_key`` and claiming
    ``claimed_id``/``claimed_epoch``), checks the slave's proof, answers with epoch 1 from offset 0, then
    sends what the test says and records every ack."""

    def __init__(self, signing_key: BrokerKey = MASTER_KEY, claimed_id: int = 1, claimed_epoch: int = 1) -> None:
        self.signing_key = signing_key
        self.claimed_id = claimed_id
        self.claimed_epoch = claimed_epoch
        self.binding: Binding | None = None
        self.proof_ok: bool | None = None
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
                    self.slave_id = frame.slave_broker_id
                elif isinstance(frame, SlaveHello):
                    self.binding = Binding("broker-a", self.claimed_id, self.slave_id, self.claimed_epoch,
                                           b"m" * 32, frame.nonce)
                    writer.write(MasterChallenge(self.claimed_id, self.claimed_epoch, b"m" * 32,
                                                 self.signing_key.sign_as_master(self.binding)).encode())
                elif isinstance(frame, SlaveAck):
                    self.acks.append(frame.max_offset)
                else:
                    assert self.binding is not None
                    self.proof_ok = slave_proof_ok(SLAVE_KEY.public_hex, self.binding, frame.signature)
                    self.writer = writer
                    writer.write(MasterHandshake(0, 1, ((1, 0),)).encode())
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
    async def public_keys() -> dict[int, str]:
        return {1: MASTER_KEY.public_hex, 2: SLAVE_KEY.public_hex}

    identity = MasterIdentity(1, "unused", 1, SLAVE_KEY, public_keys)
    client = HAClient(config, store, SystemClock(), 2, identity, threading.Lock(), wait_flushed, lambda _: None)

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


def test_the_slave_proves_itself_to_the_master(slave_store: MessageStore) -> None:
    async def scenario() -> None:
        master = ScriptedMaster()
        async with running_client(BrokerConfig(), slave_store, master, always_flushed):
            await master.wait(lambda: master.acks == [0])
            assert master.proof_ok is True

    asyncio.run(scenario())


@pytest.mark.parametrize("impostor", [
    {"signing_key": BrokerKey.generate()},       # a peer that does not hold the master's key
    {"signing_key": SLAVE_KEY, "claimed_id": 2},  # a broker that is not the master the controller named
    {"claimed_epoch": 0},                         # a master older than the one the controller named
])
def test_the_slave_never_acks_a_master_that_cannot_prove_itself(
        tmp_path: Path, slave_store: MessageStore, impostor: dict[str, object]) -> None:
    """An impostor on the master's HA port (or a deposed master) gets no proof and no ack, and the slave
    writes nothing it sends; the slave keeps retrying (the real master may come back)."""
    data = records(tmp_path / "master", 3)

    async def scenario() -> None:
        master = ScriptedMaster(**impostor)  # type: ignore[arg-type]
        async with running_client(BrokerConfig(), slave_store, master, always_flushed) as client:
            await master.wait(lambda: master.binding is not None)
            deadline = time.monotonic() + DEADLINE_S
            while client.state != "READY" or master.writer is not None:
                assert time.monotonic() < deadline, "the slave did not give up on the impostor"
                await asyncio.sleep(0.01)
            assert master.proof_ok is None and master.acks == []
            assert slave_store.max_offset == 0 and data

    asyncio.run(scenario())
