"""Slave side of replication: connect to the master, reconcile the log, append what it streams, ack.

The sockets live here; the decisions (truncation point, frame checks) are in ``ha/protocol.py``.
An unreconcilable log stops replication with an error (shown in runtimeInfo and the log), never a
silent retry loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx

from services.broker.commitlog import CommitLogError
from services.broker.config import BrokerConfig
from services.broker.ha.auth import Binding, BrokerKey, master_proof_ok, new_nonce
from services.broker.ha.frames import (
    MasterChallenge,
    MasterFrame,
    MasterFrameReader,
    MasterHandshake,
    ProtocolError,
    SlaveAck,
    SlaveHandshake,
    SlaveHello,
    SlaveProof,
    Transfer,
)
from services.broker.ha.protocol import Unreconcilable, decide_truncation, slave_step
from services.broker.store import MessageStore
from services.common.clock import Clock

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MasterIdentity:
    """The master the controller named: who it is and how this slave checks that it is talking to it."""

    broker_id: int
    address: str
    epoch: int
    key: BrokerKey                                      # this slave's own key, to prove itself
    public_keys: Callable[[], Awaitable[dict[int, str]]]  # the group's keys, as the controller holds them


class HAClient:
    def __init__(self, config: BrokerConfig, store: MessageStore, clock: Clock, self_id: int,
                 master: MasterIdentity, io_lock: threading.Lock,
                 wait_flushed: Callable[[int, int], Awaitable[bool]],
                 on_truncated: Callable[[int], None]) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.self_id = self_id
        self.master = master
        self.master_address = master.address
        self.io_lock = io_lock
        self.wait_flushed = wait_flushed
        self.on_truncated = on_truncated
        self.error: str | None = None
        self.state = "READY"
        self.master_ha_address: str | None = None
        self.last_read_ms = 0
        self.last_write_ms = 0
        self._acked = -1  # the last offset acknowledged on this connection
        self._task: asyncio.Task[None] | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._stopped = False

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="ha-client")

    async def stop(self) -> None:
        """Stop for good. Bounded: a cancellation that races with a completing await (wait_for in
        Python 3.11) can be swallowed, so the loop also checks a flag and cancellation is repeated."""
        self._stopped = True
        self._close()
        task = self._task
        if task is None:
            return
        for _ in range(5):
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=1.0)
            if done:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    task.result()
                return
        log.error("the replication client from %s did not stop", self.master_address)

    def _close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    async def _run(self) -> None:
        delay = 0.2
        while not self._stopped:
            try:
                await self._session()
            except Unreconcilable as exc:
                self.error, self.state = str(exc), "STOPPED"
                log.error("replication from %s stopped: %s", self.master_address, exc)
                self._close()
                return
            except CommitLogError as exc:
                self.error, self.state = f"local commitlog error: {exc}", "STOPPED"
                log.error("replication from %s stopped: %s", self.master_address, self.error)
                self._close()
                return
            except (TimeoutError, ProtocolError, ConnectionError, OSError, httpx.HTTPError, KeyError) as exc:
                log.warning("replication from %s interrupted: %s; reconnecting", self.master_address,
                            str(exc) or type(exc).__name__)
            except Exception as exc:  # never let the replication task die silently
                self.error = f"unexpected {type(exc).__name__}: {exc}"
                log.exception("replication from %s failed unexpectedly; retrying", self.master_address)
            self._close()
            if self._stopped:
                return
            delay = 0.2 if self.state == "TRANSFER" else min(delay * 2, 2.0)
            self.state = "READY"
            await asyncio.sleep(delay)

    async def _master_ha_address(self) -> str:
        async with httpx.AsyncClient(timeout=2.0) as client:
            response = await client.get(f"http://{self.master_address}/v1/broker/runtimeInfo")
        return str(response.json()["data"]["haAddress"])

    async def _session(self) -> None:
        self.master_ha_address = await self._master_ha_address()
        if self._stopped:
            return
        host, _, port = self.master_ha_address.rpartition(":")
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 3.0)
        self._writer = writer
        self.state = "HANDSHAKE"
        hs = SlaveHandshake(self.self_id, self.config.syncFromLastFile, self.config.asyncLearner)
        nonce = new_nonce()
        await self._write(hs.encode() + SlaveHello(nonce).encode())
        frames = MasterFrameReader()
        pending: list[MasterFrame] = []
        pending = await self._next_frames(frames, reader, pending)
        challenge = pending.pop(0)
        if not isinstance(challenge, MasterChallenge):
            raise ProtocolError("expected the master's challenge first (is the master an older mqctl version?)")
        await self._write(SlaveProof(await self._check_master(challenge, nonce)).encode())
        pending = await self._next_frames(frames, reader, pending)
        first = pending.pop(0)
        if not isinstance(first, MasterHandshake):
            raise ProtocolError("expected the master's handshake after the challenge")
        await self._reconcile(first)
        self.state = "TRANSFER"
        await self._ack(self.store.max_offset)
        heartbeat = asyncio.create_task(self._heartbeats())
        try:
            while True:
                if pending:
                    await self._apply(pending)
                pending = frames.feed(await self._read(reader))
        finally:
            heartbeat.cancel()

    async def _next_frames(self, frames: MasterFrameReader, reader: asyncio.StreamReader,
                           pending: list[MasterFrame]) -> list[MasterFrame]:
        while not pending:
            pending = frames.feed(await self._read(reader))
        return pending

    async def _check_master(self, challenge: MasterChallenge, nonce: bytes) -> bytes:
        """The master must be the broker the controller named, at no older an epoch, holding that broker's
        key; the answer is this slave's own signature over the same binding."""
        expected = self.master
        if challenge.master_id != expected.broker_id or challenge.master_epoch < expected.epoch:
            raise ProtocolError(f"the peer at {self.master_ha_address} claims to be master {challenge.master_id} at "
                                f"epoch {challenge.master_epoch}; the controller named {expected.broker_id} at "
                                f"epoch {expected.epoch}")
        binding = Binding(self.config.brokerName, challenge.master_id, self.self_id, challenge.master_epoch,
                          challenge.nonce, nonce)
        keys = await expected.public_keys()
        if not master_proof_ok(keys.get(challenge.master_id, ""), binding, challenge.signature):
            raise ProtocolError(f"the peer at {self.master_ha_address} failed to prove it is broker "
                                f"{challenge.master_id} (bad signature, or no key registered for it)")
        return expected.key.sign_as_slave(binding)

    async def _reconcile(self, hs: MasterHandshake) -> None:
        point = decide_truncation(self.store.epochs.entries(), self.store.min_offset, self.store.max_offset, hs)
        if point < self.store.max_offset:
            log.warning("truncating the local log from %d to %d to match the master", self.store.max_offset, point)
            await asyncio.to_thread(self._truncate, point)
            self.on_truncated(point)
        self.store.epochs.truncate_suffix_by_offset(point)

    def _truncate(self, point: int) -> None:
        with self.io_lock:
            self.store.truncate(point)

    async def _apply(self, frames: list[MasterFrame]) -> None:
        confirm = -1
        for frame in frames:
            if not isinstance(frame, Transfer):
                raise ProtocolError("unexpected handshake or challenge during transfer")
            step = slave_step(frame, self.store.min_offset, self.store.max_offset, self.store.epochs.last_epoch())
            if step.new_epoch is not None and not self.store.epochs.append(*step.new_epoch):
                raise ProtocolError(f"cannot record epoch {step.new_epoch} after {self.store.epochs.entries()[-1:]}")
            if step.append:
                self.store.append_raw(frame.offset, step.append)
            confirm = max(confirm, step.confirm_offset)
        if self.config.sync_flush:
            await self.wait_flushed(self.store.max_offset, self.config.syncFlushTimeout)
        ack = self._ackable()
        if ack != self._acked:  # a frame that only moved confirmOffset needs no answer
            await self._ack(ack)
        # Indexing what is now confirmed comes after the ack: the master is waiting for the ack, not
        # for this work.
        self.store.set_confirm_offset(confirm)

    async def _read(self, reader: asyncio.StreamReader) -> bytes:
        if self._stopped:
            raise ConnectionError("replication client stopped")
        async with asyncio.timeout(self.config.haHousekeepingInterval / 1000):
            data = await reader.read(1 << 20)
        if not data:
            raise ConnectionError("closed by the master")
        self.last_read_ms = self.clock.now_ms()
        return data

    def _ackable(self) -> int:
        """What this slave may acknowledge: its max offset, or under SYNC_FLUSH only what is flushed."""
        if self.config.sync_flush:
            return min(self.store.max_offset, self.store.commitlog.flushed_offset)
        return self.store.max_offset

    async def _ack(self, offset: int) -> None:
        self._acked = offset
        await self._write(SlaveAck(offset).encode())

    async def _write(self, data: bytes) -> None:
        assert self._writer is not None
        self._writer.write(data)
        await self._writer.drain()
        self.last_write_ms = self.clock.now_ms()

    async def _heartbeats(self) -> None:
        period = self.config.haSendHeartbeatInterval / 1000
        while True:
            await asyncio.sleep(period)
            if self.clock.now_ms() - self.last_write_ms >= self.config.haSendHeartbeatInterval * 0.9:
                await self._ack(self._ackable())

    def status(self) -> dict[str, object]:
        return {"masterAddress": self.master_address, "masterHaAddress": self.master_ha_address,
                "state": self.state, "maxOffset": self.store.max_offset, "confirmOffset": self.store.confirm_offset,
                "lastReadTimestamp": self.last_read_ms or None, "lastWriteTimestamp": self.last_write_ms or None,
                "error": self.error}
