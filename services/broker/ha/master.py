"""Master side of replication: accept slave connections, stream the log, count acks, keep the
SyncStateSet (shrink on lag or disconnect, expand on catch-up) in step with the controller.

The sockets live here; each connection's protocol state is a ``MasterSession`` (``ha/session.py``), and
the rules live in ``ha/protocol.py``, ``quorum.py`` and ``sync_state.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from services.broker.config import BrokerConfig
from services.broker.controller_api import ControllerApi
from services.broker.ha.auth import BrokerKey
from services.broker.ha.flow import FlowMonitor
from services.broker.ha.frames import ProtocolError
from services.broker.ha.session import Acked, Authenticated, KeysNeeded, MasterSession, State
from services.broker.quorum import confirm_offset, need_ack_nums, quorum_offset
from services.broker.store import MessageStore
from services.broker.sync_state import SyncStateTracker
from services.common.clock import Clock
from services.common.codes import ResponseCode
from services.common.errors import MqctlError, RemoteError
from services.common.tasks import TaskSet

log = logging.getLogger(__name__)

#: Answers that prove the controller did not commit an alter (it checked and refused). Anything else —
#: SYSTEM_ERROR after a Raft timeout, NOT_LEADER after a leader change — may still commit later.
DEFINITE_ALTER_REFUSALS = frozenset({
    ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH, ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
    ResponseCode.CONTROLLER_INVALID_MASTER, ResponseCode.CONTROLLER_INVALID_REPLICAS,
    ResponseCode.CONTROLLER_BROKER_NOT_ALIVE, ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
    ResponseCode.INVALID_PARAMETER})

#: An alter whose outcome is unknown (no answer) is only given up after this long without the
#: controller showing it committed: Raft may still commit it late.
UNKNOWN_ALTER_GRACE_MS = 10_000

#: How long a slave's handshake waits for the hello that starts its proof before, with ``rocketmqHaPeers``,
#: the slave is taken for RocketMQ's own broker (whose protocol has none). Ours send both in one write.
PLAIN_PEER_WAIT_S = 0.5
#: A connection must prove its identity within this long, or it is closed.
AUTH_TIMEOUT_MS = 5_000
#: Connections that have not proved their identity yet, at most; more are closed at once. A group has a
#: handful of replicas, so legitimate slaves never come near it.
MAX_UNAUTHENTICATED = 16


@dataclass(eq=False)
class SlaveConnection:
    """The sockets and tasks of one slave's connection; the protocol state is in ``session``."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    peer: str
    session: MasterSession
    #: Set once the slave proved it holds the key the controller has for its id: only then does the
    #: master send its epochs, count acks, or let the connection replace an older one of the same id.
    authenticated: asyncio.Event = field(default_factory=asyncio.Event)
    first_ack: asyncio.Event = field(default_factory=asyncio.Event)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    closed: bool = False
    flow: FlowMonitor = field(default_factory=FlowMonitor)  # bytes sent per second

    @property
    def slave_id(self) -> int:
        return self.session.slave_id

    @property
    def learner(self) -> bool:
        return self.session.learner


class HAService:
    def __init__(self, config: BrokerConfig, store: MessageStore, api: ControllerApi, clock: Clock,
                 key: BrokerKey, apply_committed: Callable[[list[int], int], bool] | None = None) -> None:
        self.config = config
        self.key = key
        self.store = store
        self.api = api
        self.clock = clock
        self.active = False
        self.self_id = 0
        self.master_epoch = 0
        self.tracker = SyncStateTracker(0)
        self.connections: dict[int, SlaveConnection] = {}
        self._pending: set[SlaveConnection] = set()
        self._waiters: list[tuple[int, asyncio.Future[bool]]] = []
        self._server: asyncio.base_events.Server | None = None
        self._alter_lock = asyncio.Lock()
        self._shrink_task: asyncio.Task[None] | None = None
        self._remote_since_ms = 0
        self._background = TaskSet()  # checks and proposals started from callbacks, held until they end
        #: Applies a SyncStateSet this master's own alter committed (ReplicasManager.change_sync_state_set).
        self.apply_committed = apply_committed
        self.on_sync_flush: Callable[[int], Awaitable[bool]] | None = None

    # ------------------------------------------------------------------ lifecycle
    async def start_server(self) -> None:
        tls = self.config.server_tls()
        self._server = await asyncio.start_server(self._accept, self.config.listen_host(),
                                                  self.config.ha_port, ssl=tls, ssl_handshake_timeout=10.0 if tls else None)
        log.info("replication (HA) listening on %s:%d%s", self.config.listen_host(), self.config.ha_port,
                 " (TLS)" if tls else "")

    async def stop(self) -> None:
        await self.become_inactive()
        await self._background.close()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def become_master(self, self_id: int, master_epoch: int, members: frozenset[int], ss_epoch: int) -> None:
        await self._drop_all()
        self.self_id, self.master_epoch, self.active = self_id, master_epoch, True
        self.tracker = SyncStateTracker(self_id)
        self.tracker.reset(members or {self_id}, ss_epoch)
        self._remote_since_ms = 0
        if self._shrink_task is None:
            self._shrink_task = asyncio.create_task(self._shrink_loop(), name="sync-state-set-check")
        self.update_confirm()
        self._background.spawn(self.check_total_replicas())

    async def become_inactive(self) -> None:
        self.active = False
        if self._shrink_task is not None:
            self._shrink_task.cancel()
            await asyncio.wait({self._shrink_task}, timeout=2.0)
            self._shrink_task = None
        await self._drop_all()
        for _, future in self._waiters:
            if not future.done():
                future.set_result(False)
        self._waiters.clear()

    async def _drop_all(self) -> None:
        for conn in list(self.connections.values()) + list(self._pending):
            await self._close(conn, "role change")
        self.connections.clear()
        self._pending.clear()

    # ------------------------------------------------------------------ write path hooks
    def notify_new_data(self) -> None:
        for conn in self.connections.values():
            conn.wakeup.set()

    def auto_in_sync(self) -> int:
        """The master plus every connected slave within haMaxGapNotInSync bytes (RIP-34's adaptive mode)."""
        return 1 + sum(1 for c in self.connections.values()
                       if not c.learner and c.session.ack_offset >= 0
                       and self.store.max_offset - c.session.ack_offset <= self.config.haMaxGapNotInSync)

    def need(self) -> int:
        return need_ack_nums(self.config.allAckInSyncStateSet, self.config.inSyncReplicas,
                             self.config.adaptiveInSyncReplicas, self.config.minInSyncReplicas,
                             self.auto_in_sync())

    def quorum_unreachable(self) -> str | None:
        """Why a write cannot possibly be acknowledged now (adaptive mode), or None."""
        if not self.config.adaptiveInSyncReplicas or self.config.allAckInSyncStateSet:
            return None
        need, now = self.need(), self.auto_in_sync()
        if need > now:
            return f"in-sync replicas not enough: {need} acks needed, {now} replicas in sync"
        return None

    async def check_total_replicas(self) -> None:
        try:
            count = await self.api.registered_replicas(self.config.brokerName)
        except (MqctlError, RuntimeError, KeyError, TypeError):
            return
        if count > self.config.totalReplicas > 1:
            log.warning("broker-set %s has %d registered replicas but totalReplicas=%d; quorum settings "
                        "(inSyncReplicas=%d, minInSyncReplicas=%d) may not mean what you intend",
                        self.config.brokerName, count, self.config.totalReplicas, self.config.inSyncReplicas,
                        self.config.minInSyncReplicas)

    def retention_floor(self) -> int | None:
        """The lowest offset a connected slave (learners too) still needs: what it has acknowledged. While an
        authenticated one has not yet said where its log ends, the log's start (nothing goes)."""
        if not self.active:
            return None
        if any(c.session.ack_offset < 0 for c in self.connections.values()):
            return self.store.min_offset
        return min((c.session.ack_offset for c in self.connections.values()), default=None)

    def acks(self) -> dict[int, int]:
        return {sid: c.session.ack_offset for sid, c in self.connections.items() if not c.learner}

    def quorum(self) -> int:
        return quorum_offset(self.need(), self.acks(), self.tracker.effective(), self.self_id, self.store.max_offset)

    async def wait_for_acks(self, next_offset: int) -> bool:
        if not self.active:
            return False
        if self.quorum() >= next_offset:
            return True
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiters.append((next_offset, future))
        try:
            return await asyncio.wait_for(future, self.config.slaveTimeout / 1000)
        except TimeoutError:
            return False
        finally:
            self._waiters = [w for w in self._waiters if w[1] is not future]

    def release_waiters(self) -> None:
        if not self._waiters:
            return
        reached = self.quorum()
        for offset, future in self._waiters:
            if offset <= reached and not future.done():
                future.set_result(True)

    def update_confirm(self) -> None:
        if not self.active:
            return
        target = confirm_offset(self.config.allAckInSyncStateSet, self.acks(), self.tracker.effective(),
                                self.self_id, list(self.connections), self.store.max_offset)
        if len(self.tracker.effective()) <= 1:
            target = self.store.max_offset
        if target is not None and target > self.store.confirm_offset:
            self.store.set_confirm_offset(target)
            self.notify_new_data()

    # ------------------------------------------------------------------ SyncStateSet
    def on_committed(self, members: frozenset[int], ss_epoch: int) -> None:
        if self.tracker.committed(members, ss_epoch):
            self.update_confirm()
            self.release_waiters()

    def resolve_unknown_alter(self, controller_ss_epoch: int) -> None:
        """Called with the controller's current syncStateSetEpoch: a proposal it never committed is
        given up once the grace period has passed."""
        if not self.tracker.synchronizing or controller_ss_epoch != self.tracker.local_epoch:
            return
        if self._remote_since_ms and self.clock.monotonic_ms() - self._remote_since_ms > UNKNOWN_ALTER_GRACE_MS:
            log.info("the proposed syncStateSet %s was never committed; dropping it", sorted(self.tracker.remote or ()))
            self.tracker.refused()

    async def propose(self, members: frozenset[int], why: str) -> None:
        async with self._alter_lock:
            if not self.active or members == self.tracker.local:
                return
            self.tracker.propose(members)
            self._remote_since_ms = self.clock.monotonic_ms()
            log.info("proposing syncStateSet %s (was %s): %s", sorted(members), sorted(self.tracker.local), why)
            try:
                signature = self.key.sign_alter(self.config.brokerName, self.self_id, self.master_epoch,
                                                sorted(members), self.tracker.local_epoch)
                answer = await self.api.alter_sync_state_set(self.config.brokerName, self.self_id, self.master_epoch,
                                                             sorted(members), self.tracker.local_epoch, signature)
            except RemoteError as exc:
                if exc.code in DEFINITE_ALTER_REFUSALS:
                    log.warning("controller refused syncStateSet %s: %s", sorted(members), exc)
                    self.tracker.refused()
                else:
                    log.warning("syncStateSet %s outcome unknown (%s); counting acks against the union until "
                                "the controller shows what it committed", sorted(members), exc)
                return
            except MqctlError as exc:
                log.warning("syncStateSet %s outcome unknown (%s); counting acks against the union until "
                            "the controller shows what it committed", sorted(members), exc)
                return
            if self.apply_committed is not None:
                self.apply_committed(answer.syncStateSet, answer.newSyncStateSetEpoch)

    async def _shrink_loop(self) -> None:
        while self.active:
            await asyncio.sleep(self.config.checkSyncStateSetPeriod / 1000)
            try:
                await self.check_shrink("periodic check")
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("syncStateSet check failed")

    async def check_shrink(self, why: str) -> None:
        if not self.active or self.tracker.synchronizing:
            return
        connected = [sid for sid, c in self.connections.items() if not c.closed]
        new = self.tracker.shrink_candidate(self.clock.monotonic_ms(), connected,
                                            self.config.haMaxTimeSlaveNotCatchup)
        if new is not None:
            await self.propose(new, why)

    # ------------------------------------------------------------------ connections
    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peername = writer.get_extra_info("peername")
        peer = f"{peername[0]}:{peername[1]}" if isinstance(peername, tuple) else str(peername)
        if not self.active:
            log.info("refusing replication connection from %s: this broker is not master", peer)
            writer.close()
            return
        if len(self._pending) >= MAX_UNAUTHENTICATED:
            log.warning("refusing replication connection from %s: %d connections are still authenticating",
                        peer, len(self._pending))
            writer.close()
            return
        session = MasterSession(self.store, self.config.brokerName, self.self_id, self.master_epoch, self.key,
                                self.clock.monotonic_ms())
        conn = SlaveConnection(reader, writer, peer, session)
        self._pending.add(conn)
        conn.tasks = [asyncio.create_task(self._read_loop(conn)), asyncio.create_task(self._write_loop(conn)),
                      asyncio.create_task(self._housekeeping(conn))]

    async def _close(self, conn: SlaveConnection, reason: str) -> None:
        if conn.closed:
            return
        conn.closed = True
        log.info("replication connection from slave %s (%s) closed: %s", conn.slave_id, conn.peer, reason)
        conn.writer.close()
        current = asyncio.current_task()
        for task in conn.tasks:
            if task is not current:
                task.cancel()
        self._pending.discard(conn)
        if self.connections.get(conn.slave_id) is conn:
            del self.connections[conn.slave_id]
            if self.active and conn.slave_id in self.tracker.local:
                self._background.spawn(self.check_shrink(f"slave {conn.slave_id} disconnected"))

    async def _read_loop(self, conn: SlaveConnection) -> None:
        try:
            while True:
                if self.config.rocketmqHaPeers and conn.session.state is State.HELLO:
                    try:
                        data = await asyncio.wait_for(conn.reader.read(65536), PLAIN_PEER_WAIT_S)
                    except TimeoutError:
                        await self._serve_plain(conn)
                        continue
                else:
                    data = await conn.reader.read(65536)
                if not data:
                    raise ConnectionError("closed by the slave")
                for event in conn.session.receive(data, self.clock.monotonic_ms()):
                    if isinstance(event, KeysNeeded):
                        conn.writer.write(conn.session.challenge(await self._group_keys()))
                    elif isinstance(event, Authenticated):
                        await self._on_authenticated(conn)
                    else:
                        self._on_ack(conn, event)
        except (ProtocolError, ConnectionError, OSError) as exc:
            await self._close(conn, str(exc) or type(exc).__name__)
        except asyncio.CancelledError:
            pass

    async def _serve_plain(self, conn: SlaveConnection) -> None:
        """A handshake and no hello: RocketMQ's own broker (``rocketmqHaPeers``), if the controllers agree."""
        try:
            addresses = await self.api.replica_addresses(self.config.brokerName)
        except (MqctlError, RuntimeError, KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"cannot check the slave's id with the controller: {exc}") from None
        event = conn.session.plain(await self._group_keys(), addresses, conn.peer.rpartition(":")[0])
        log.warning("slave %d (%s) replicates over RocketMQ's protocol, without proof of identity "
                    "(rocketmqHaPeers)", event.slave_id, conn.peer)
        await self._on_authenticated(conn)

    async def _group_keys(self) -> dict[int, str]:
        try:
            return await self.api.broker_keys(self.config.brokerName)
        except (MqctlError, RuntimeError, KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"cannot check the slave's id with the controller: {exc}") from None

    async def _on_authenticated(self, conn: SlaveConnection) -> None:
        old = self.connections.get(conn.slave_id)
        if old is not None:
            await self._close(old, "replaced by a new, authenticated connection from the same slave")
        self._pending.discard(conn)
        self.connections[conn.slave_id] = conn
        conn.authenticated.set()
        log.info("slave %d connected from %s (learner=%s)", conn.slave_id, conn.peer, conn.learner)

    def _on_ack(self, conn: SlaveConnection, ack: Acked) -> None:
        if ack.first:
            conn.first_ack.set()
        since = conn.session.caught_up_since(self.clock.monotonic_ms())
        if since is not None:
            self.tracker.record_caught_up(conn.slave_id, since)
        self._maybe_expand(conn, caught_up=since is not None)
        self.update_confirm()
        self.release_waiters()

    def _maybe_expand(self, conn: SlaveConnection, caught_up: bool) -> None:
        if self.tracker.synchronizing:
            return  # one proposal at a time (the union rule counts acks against one); the next ack retries
        last = self.store.epochs.last_entry()
        new = self.tracker.expand_candidate(conn.slave_id, conn.session.ack_offset, self.store.confirm_offset,
                                            last.start_offset if last else 0, conn.learner, caught_up)
        if new is not None:
            self._background.spawn(self.propose(new, f"slave {conn.slave_id} caught up"))

    async def _housekeeping(self, conn: SlaveConnection) -> None:
        limit = self.config.haHousekeepingInterval
        try:
            while not conn.closed:
                await asyncio.sleep(min(limit, AUTH_TIMEOUT_MS, 1000) / 1000)
                reason = conn.session.close_reason(self.clock.monotonic_ms(), limit, AUTH_TIMEOUT_MS)
                if reason is not None:
                    await self._close(conn, reason)
                    return
        except asyncio.CancelledError:
            pass

    async def _write_loop(self, conn: SlaveConnection) -> None:
        try:
            await conn.authenticated.wait()
            await self._send(conn, conn.session.handshake())
            await conn.first_ack.wait()
            conn.session.start_transfer(self.config.mappedFileSizeCommitLog)
            await self._stream(conn)
        except (ProtocolError, ConnectionError, OSError) as exc:
            await self._close(conn, str(exc) or type(exc).__name__)
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # never leave a half-dead connection behind
            log.exception("replication to slave %s failed", conn.slave_id)
            await self._close(conn, f"{type(exc).__name__}: {exc}")

    async def _stream(self, conn: SlaveConnection) -> None:
        """Move the session's frames to the socket; when the slave has everything, wait for new data or
        the heartbeat interval (an empty frame then carries a moved confirmOffset at once)."""
        heartbeat, session = self.config.haSendHeartbeatInterval / 1000, conn.session
        while not conn.closed:
            conn.wakeup.clear()
            frame = session.next_transfer(self.config.haTransferBatchSize, self.clock.monotonic_ms())
            if frame is not None:
                await self._send(conn, frame)
                continue
            if not session.learner and session.ack_offset >= self.store.max_offset:
                self.tracker.record_caught_up(conn.slave_id, self.clock.monotonic_ms())
            try:
                await asyncio.wait_for(conn.wakeup.wait(), heartbeat)
                if self.store.max_offset <= session.transfer_offset:
                    await self._send(conn, session.heartbeat())
            except TimeoutError:
                await self._send(conn, session.heartbeat())

    async def _send(self, conn: SlaveConnection, frame: bytes) -> None:
        conn.flow.add(len(frame), self.clock.monotonic_ms())
        conn.writer.write(frame)
        await conn.writer.drain()

    def status(self) -> list[dict[str, object]]:
        now = self.clock.monotonic_ms()
        rows = []
        for sid, conn in sorted(self.connections.items()):
            caught, session = self.tracker.caught_up_ms.get(sid), conn.session
            rows.append({"slaveId": sid, "slaveAddress": conn.peer, "ackOffset": session.ack_offset,
                         "lag": max(0, self.store.max_offset - max(session.ack_offset, 0)),
                         "inSync": sid in self.tracker.local, "asyncLearner": conn.learner,
                         "lastCaughtUpAgoMs": None if caught is None else now - caught,
                         "lastCaughtUpTimestamp": None if caught is None else int(time.time() * 1000) - (now - caught),
                         "transferOffset": session.transfer_offset,
                         "transferSpeedKBps": conn.flow.per_second(now) / 1024,
                         "transferFromWhere": transfer_from_where(self.store.max_offset, session.transfer_offset)})
        return rows


def transfer_from_where(max_offset: int, transfer_offset: int) -> int:
    """What RocketMQ's master shows as a slave's ``TransferFromWhere`` (its ``nextTransferFromWhere``): the
    next offset to send, or -1 while the master's commitlog holds nothing (RocketMQ finds no offset to start
    from in a log with no file yet)."""
    return -1 if max_offset == 0 and transfer_offset == 0 else transfer_offset
