"""Slave side of replication: connect to the master, reconcile the log, append what it streams, ack.

The sockets live here; the connection's protocol state is a ``SlaveSession`` (``ha/session.py``), which
decides the truncation point and checks every frame (rules in ``ha/protocol.py``).
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

from services.broker.commitlog import CommitLogError, StoreNotWritable
from services.broker.config import BrokerConfig
from services.broker.contract import RUNTIME_INFO
from services.broker.ha.auth import BrokerKey, valid_public_key
from services.broker.ha.flow import FlowMonitor
from services.broker.ha.frames import ProtocolError, Transfer
from services.broker.ha.protocol import Unreconcilable
from services.broker.ha.session import KeysNeeded, Reconcile, SlaveSession
from services.broker.store import MessageStore
from services.common import tls
from services.common.addresses import http_url
from services.common.clock import Clock
from services.common.errors import MqctlError
from services.common.remoting_client import RemotingClient
from services.remoting.command import make_request

log = logging.getLogger(__name__)

#: How often a slave whose disk refused a write connects again to try (the master meanwhile goes on without it).
STORE_RETRY_S = 2.0
STORE_ERROR = "local store not writable: "
#: RocketMQ's request for a master's replication address (AdminBrokerProcessor.updateBrokerHaInfo).
EXCHANGE_BROKER_HA_INFO = 906


def _host_port(address: str) -> bool:
    host, _, port = address.rpartition(":")
    return bool(host) and port.isdigit() and 0 < int(port) < 65536


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
        self.flow = FlowMonitor()  # bytes received per second
        self.last_write_ms = 0
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
            pause = 0.0
            try:
                await self._session()
            except StoreNotWritable as exc:
                self._store_refused(exc)
                pause = STORE_RETRY_S
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
            except (TimeoutError, ProtocolError, ConnectionError, OSError, httpx.HTTPError, MqctlError) as exc:
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
            await asyncio.sleep(pause or delay)

    def _store_refused(self, exc: StoreNotWritable) -> None:
        """The local disk refused what the master sent: nothing of it was kept or acknowledged. The connection
        closes (the master drops this slave from the SyncStateSet and goes on) and is made again every
        STORE_RETRY_S, which resumes replication once there is room."""
        if not (self.error or "").startswith(STORE_ERROR):
            log.error("replication from %s paused: %s; nothing more is acknowledged until there is room, tried "
                      "again every %.0f s (see docs/operations.md, 'Full disk')", self.master_address, exc,
                      STORE_RETRY_S)
        self.error = f"{STORE_ERROR}{exc}"

    async def _master_ha_address(self) -> str:
        """The master's replication address, from its runtime info (the controller names its client
        address only). A malformed answer is a protocol error: retried like a broken connection."""
        async with httpx.AsyncClient(timeout=2.0, verify=tls.httpx_verify()) as client:
            response = await client.get(http_url(self.master_address, RUNTIME_INFO, "master"))
        try:
            address = response.json()["data"]["haAddress"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ProtocolError(f"master {self.master_address} did not say its HA address ({exc!r})") from None
        if not isinstance(address, str) or ":" not in address:
            raise ProtocolError(f"master {self.master_address} named no HA address: {str(address)[:80]!r}")
        return address

    async def _rocketmq_master(self) -> bool:
        """Whether the master is RocketMQ's own broker, served by its own protocol without proof: only with
        ``rocketmqHaPeers``, and only when the controllers hold no key for the master's id (an mqctl master
        always has one, and always proves itself)."""
        if not self.config.rocketmqHaPeers:
            return False
        keys = await self.master.public_keys()
        return not valid_public_key(keys.get(self.master.broker_id, ""))

    async def _rocketmq_master_ha_address(self) -> str:
        """A RocketMQ master's replication address, as it answers EXCHANGE_BROKER_HA_INFO (906) with an
        empty request on its client port; its default (``listenPort + 1``) if it names none."""
        client = RemotingClient(timeout_s=3.0)
        try:
            answer = await client.call(self.master_address, make_request(EXCHANGE_BROKER_HA_INFO, 0, {}))
        finally:
            await client.close()
        address = (answer.ext_fields or {}).get("masterHaAddress") or ""
        if answer.code == 0 and _host_port(address):
            return address
        host, _, port = self.master_address.rpartition(":")
        return f"{host}:{int(port) + 1}"

    async def _session(self) -> None:
        plain = await self._rocketmq_master()
        self.master_ha_address = await (self._rocketmq_master_ha_address() if plain else self._master_ha_address())
        if self._stopped:
            return
        host, _, port = self.master_ha_address.rpartition(":")
        reader, writer = await asyncio.wait_for(asyncio.open_connection(
            host.strip("[]"), int(port), ssl=tls.client_tls(), server_hostname=tls.server_hostname(host)), 3.0)
        self._writer = writer
        self.state = "HANDSHAKE"
        m = self.master
        session = SlaveSession(self.store, self.config.brokerName, self.self_id, m.broker_id, m.epoch, m.key,
                               self.config.asyncLearner, self.config.syncFromLastFile, plain=plain)
        if plain:
            log.warning("replicating from master %d (%s, %s) over RocketMQ's protocol, without proof of identity "
                        "(rocketmqHaPeers)", m.broker_id, self.master_address, self.master_ha_address)
        await self._write(session.opening())
        heartbeat: asyncio.Task[None] | None = None
        try:
            while True:
                for event in session.receive(await self._read(reader)):
                    if isinstance(event, KeysNeeded):
                        await self._write(session.proof(await m.public_keys()))
                    elif isinstance(event, Reconcile):
                        await self._write(await self._reconcile(session, event.point))
                        self.state = "TRANSFER"
                        heartbeat = asyncio.create_task(self._heartbeats(session))
                    else:
                        await self._apply(session, event.frames)
        finally:
            if heartbeat is not None:
                heartbeat.cancel()

    async def _reconcile(self, session: SlaveSession, point: int) -> bytes:
        """Cut the log in a worker thread (fsyncs), holding the lock the flush service takes."""
        end = self.store.max_offset
        if point < end:
            log.warning("truncating the local log from %d to %d to match the master", end, point)

        def locked() -> bytes:
            with self.io_lock:
                return session.reconcile(point)
        first_ack = await asyncio.to_thread(locked)
        if point < end:
            self.on_truncated(point)
        return first_ack

    async def _apply(self, session: SlaveSession, frames: tuple[Transfer, ...]) -> None:
        confirm = self._write_locally(session, frames)
        if (self.error or "").startswith(STORE_ERROR):
            log.warning("replication from %s resumed: the local store takes writes again", self.master_address)
            self.error = None
        if self.config.sync_flush:
            await self.wait_flushed(self.store.max_offset, self.config.syncFlushTimeout)
        ack = session.ack(self._ackable())
        if ack is not None:
            await self._write(ack)
        # Indexing what is now confirmed comes after the ack: the master is waiting for the ack, not
        # for this work.
        self.store.set_confirm_offset(confirm)

    def _write_locally(self, session: SlaveSession, frames: tuple[Transfer, ...]) -> int:
        """Apply the frames to the store; any write the disk refuses (the log, the epoch file) is a
        StoreNotWritable, whatever file it was."""
        try:
            if session.starts_over(frames):
                # Discarding the log deletes files the flush service fsyncs: hold its lock, and stay on the loop
                # so that no read is served from the queues while they go (once in a replica's life).
                with self.io_lock:
                    return session.apply(frames)
            return session.apply(frames)
        except StoreNotWritable:
            raise
        except OSError as exc:
            raise StoreNotWritable(exc.filename or self.store.root, exc) from exc

    async def _read(self, reader: asyncio.StreamReader) -> bytes:
        if self._stopped:
            raise ConnectionError("replication client stopped")
        async with asyncio.timeout(self.config.haHousekeepingInterval / 1000):
            data = await reader.read(1 << 20)
        if not data:
            raise ConnectionError("closed by the master")
        self.last_read_ms = self.clock.now_ms()
        self.flow.add(len(data), self.clock.monotonic_ms())
        return data

    def _ackable(self) -> int:
        """What this slave may acknowledge: its max offset, or under SYNC_FLUSH only what is flushed."""
        if self.config.sync_flush:
            return min(self.store.max_offset, self.store.commitlog.flushed_offset)
        return self.store.max_offset

    async def _write(self, data: bytes) -> None:
        assert self._writer is not None
        self._writer.write(data)
        await self._writer.drain()
        self.last_write_ms = self.clock.now_ms()

    async def _heartbeats(self, session: SlaveSession) -> None:
        period = self.config.haSendHeartbeatInterval / 1000
        while True:
            await asyncio.sleep(period)
            if self.clock.now_ms() - self.last_write_ms >= self.config.haSendHeartbeatInterval * 0.9:
                await self._write(session.heartbeat(self._ackable()))

    def status(self) -> dict[str, object]:
        return {"masterAddress": self.master_address, "masterHaAddress": self.master_ha_address,
                "state": self.state, "maxOffset": self.store.max_offset, "confirmOffset": self.store.confirm_offset,
                "lastReadTimestamp": self.last_read_ms or None, "lastWriteTimestamp": self.last_write_ms or None,
                "transferSpeedKBps": self.flow.per_second(self.clock.monotonic_ms()) / 1024,
                "masterFlushOffset": self.store.master_flushed_offset, "error": self.error}
