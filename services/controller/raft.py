"""Raft replication of the controller state machine. The only module that imports pysyncobj.

One replicated method, :meth:`_ControllerSyncObj.apply_entry`, takes a versioned JSON entry (a batch
of events, or a no-op barrier) so that method ids never change when the code is refactored. Apply
never raises, de-duplicates by request id, and runs under a lock that readers also take.

Configuration follows the safety rules for pysyncobj 0.3.17: explicit bind address, a password
always (it encrypts and authenticates peer traffic; without one pysyncobj unpickles whatever reaches
the port), journal *and* full dump files, unbatched appends, a short leader fall-back timeout so a
leader cut off from the majority steps down within a second, and no command waits forever for a
leader. The port itself is served by :mod:`services.controller.raft_transport` (bounded frames,
handshake deadline, connection cap).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pysyncobj.syncobj  # type: ignore[import-untyped]
from pysyncobj import SyncObj, SyncObjConf, replicated
from pysyncobj.config import FAIL_REASON  # type: ignore[import-untyped]
from pysyncobj.journal import MemoryJournal  # type: ignore[import-untyped]
from pysyncobj.serializer import SERIALIZER_STATE  # type: ignore[import-untyped]

from services.common.errors import ConfigError
from services.controller.events import (
    LOG_FORMAT_VERSION,
    Event,
    encode_batch,
    encode_entry,
    encode_identity,
    encode_noop,
    event_from_dict,
)
from services.controller.raft_fork import install_fork_hook
from services.controller.raft_journal import DurableJournal
from services.controller.raft_logging import install_resend_filter
from services.controller.raft_store import check_raft_store
from services.controller.raft_transport import MAX_ENTRY_BYTES, GuardedTransport
from services.controller.state_machine import ReplicasInfoManager

log = logging.getLogger(__name__)
install_resend_filter()


T = TypeVar("T")

# Writes carried by one log entry at most; more waiting writes go into further entries of the same round.
MAX_WRITES_PER_ENTRY = 128
#: After a snapshot could not be written, log compaction waits this long before trying again (pysyncobj would
#: fork a new writer on every tick of a full disk).
COMPACTION_RETRY_S = 10.0

_FAIL_NAMES = {getattr(FAIL_REASON, n): n for n in dir(FAIL_REASON) if n.isupper()}


class RaftError(Exception):
    """A proposal did not commit (not leader, no quorum, timeout). ``outcome_unknown`` means it may
    still commit later; a retry with the same request id is then safe."""

    def __init__(self, reason: str, outcome_unknown: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.outcome_unknown = outcome_unknown


class JournalNotWritable(RaftError):
    """This node's Raft journal cannot be written (a full disk): nothing was proposed."""


@dataclass(frozen=True)
class RaftSettings:
    self_address: str  # host:raftPort
    peer_addresses: list[str]  # other nodes' host:raftPort
    bind_address: str
    store_dir: Path
    password: str  # never empty: see services/controller/raft_secret.py
    election_timeout_min_s: float = 0.6
    election_timeout_max_s: float = 1.2
    heartbeat_period_s: float = 0.1
    leader_fallback_timeout_s: float = 0.5
    log_compaction_min_entries: int = 5000
    log_compaction_min_time_s: int = 300


def _create_journal(journal_file: str | None) -> Any:
    """pysyncobj's journal factory, replaced: the durable journal beside its snapshot (raft_journal.py)."""
    if journal_file is None:
        return MemoryJournal()
    return DurableJournal(journal_file, Path(journal_file).with_name(DUMP_FILE))


pysyncobj.syncobj.createJournal = _create_journal
DUMP_FILE = "raft.dump"


class _ControllerSyncObj(SyncObj):  # type: ignore[misc]
    """pysyncobj's node with the durable journal's rules: nothing leaves and nothing is applied unless the
    journal on disk holds it, and a node whose journal cannot be written sits out (raft_journal.py)."""

    def __init__(self, settings: RaftSettings, conf: SyncObjConf) -> None:
        # Everything assigned before super().__init__() is excluded from snapshots.
        self._lock = threading.RLock()
        self._compaction_retry_at = 0.0
        super().__init__(settings.self_address, settings.peer_addresses, conf, transportClass=GuardedTransport)
        self.manager = ReplicasInfoManager()
        self._watch_snapshots()

    def journal(self) -> DurableJournal | None:
        raft_log = self._SyncObj__raftLog
        return raft_log if isinstance(raft_log, DurableJournal) else None  # a MemoryJournal has nothing to sync

    def journal_sync(self) -> bool:
        """Make the journal durable up to its last entry (before a message leaves, before an apply); False
        while it cannot be written."""
        journal = self.journal()
        return journal is None or journal.sync()

    def _onTick(self, timeToWait: float = 0.0) -> None:
        """One step of Raft, skipped while the journal cannot be written: the node then sends, applies and reads
        nothing, as if paused, so no entry it does not hold on disk is ever claimed or applied."""
        journal = self.journal()
        if journal is not None and not journal.repair():
            time.sleep(timeToWait)
            return
        super()._onTick(timeToWait)

    def _SyncObj__tryLogCompaction(self) -> None:  # pysyncobj's private step, reached through name mangling
        if time.monotonic() >= self._compaction_retry_at:
            SyncObj._SyncObj__tryLogCompaction(self)

    def _watch_snapshots(self) -> None:
        """Note a snapshot the disk did not take, so that compaction waits before forking a writer again."""
        serializer = self._SyncObj__serializer
        check = serializer.checkSerializing

        def checked() -> Any:
            state, ident = check()
            if state == SERIALIZER_STATE.FAILED:
                self._compaction_retry_at = time.monotonic() + COMPACTION_RETRY_S
                log.warning("the Raft snapshot %s could not be written (is its filesystem full?); log compaction "
                            "tries again in %.0f s", self.conf.fullDumpFile, COMPACTION_RETRY_S)
            return state, ident
        serializer.checkSerializing = checked

    @replicated  # type: ignore[untyped-decorator]
    def apply_entry(self, entry: str) -> dict[str, Any]:
        if not self.journal_sync():  # applied (and answered) only once on disk here; _onTick sees to it
            raise RuntimeError("a Raft entry reached the apply while the journal cannot be written")
        with self._lock:
            try:
                return _apply_entry(self.manager, entry)
            except Exception as exc:  # never let an exception escape an apply
                log.exception("raft apply failed for entry %.200s", entry)
                return {"ok": False, "error": repr(exc)}


def _apply_entry(manager: ReplicasInfoManager, entry: str) -> dict[str, Any]:
    data = json.loads(entry)
    version = data.get("v")
    if not isinstance(version, int) or not 1 <= version <= LOG_FORMAT_VERSION:
        log.error("log entry of unsupported version %r skipped", version)
        return {"ok": False, "error": "unsupported log entry version"}
    if data.get("kind") == "batch":
        return {"ok": True, "items": [_apply_write(manager, item) for item in data.get("items", [])]}
    return _apply_write(manager, data)


def _apply_write(manager: ReplicasInfoManager, data: dict[str, Any]) -> dict[str, Any]:
    """One write (its events, atomically) or a no-op, at most once per request id."""
    request_id = str(data.get("reqId", ""))
    if request_id and manager.seen_request(request_id):
        return {"ok": True, "duplicate": True}
    kind = data.get("kind", "events")
    if kind == "identity":
        manager.adopt_cluster_id(data.get("clusterId"))
    elif kind == "events":
        for raw in data.get("events", []):
            try:
                event = event_from_dict(raw)
            except (TypeError, ValueError) as exc:
                log.error("malformed event %r skipped: %s", raw, exc)
                continue
            manager.apply_event(event)
    if request_id:
        manager.remember_request(request_id)
    return {"ok": True}


#: Request ids of writes that bring none: a random prefix per process and a counter. Unique across
#: processes and restarts like a uuid4, without reading os.urandom for every write (0.2 µs against
#: 1.8 µs; uuid4 was 2 % of a busy leader's profile samples).
_REQUEST_ID_PREFIX = uuid.uuid4().hex[:16]
_request_numbers = itertools.count()


def new_request_id() -> str:
    return f"{_REQUEST_ID_PREFIX}{next(_request_numbers):016x}"


_Pending = tuple[list[Event], str, asyncio.Future[dict[str, Any]], float]


class RaftNode:
    """Owns the SyncObj; must be created on the main thread (pysyncobj's tick thread dies with the
    thread that created it)."""

    def __init__(self, settings: RaftSettings,
                 on_state_changed: Callable[[bool], None] | None = None) -> None:
        if not settings.password:
            raise ConfigError("the Raft port needs a password: without one pysyncobj runs any pickle sent to it")
        settings.store_dir.mkdir(parents=True, exist_ok=True)
        check_raft_store(settings.store_dir, single_node=not settings.peer_addresses)
        install_fork_hook()
        self._on_state_changed = on_state_changed
        conf = SyncObjConf(
            password=settings.password,
            bindAddress=settings.bind_address,
            journalFile=str(settings.store_dir / "raft.journal"),
            fullDumpFile=str(settings.store_dir / DUMP_FILE),
            appendEntriesUseBatch=False,
            appendEntriesPeriod=settings.heartbeat_period_s,
            raftMinTimeout=settings.election_timeout_min_s,
            raftMaxTimeout=settings.election_timeout_max_s,
            connectionTimeout=max(settings.election_timeout_max_s, 1.5),
            leaderFallbackTimeout=settings.leader_fallback_timeout_s,
            commandsWaitLeader=False,
            connectionRetryTime=1.0,
            dynamicMembershipChange=False,
            logCompactionMinEntries=settings.log_compaction_min_entries,
            logCompactionMinTime=settings.log_compaction_min_time_s,
            onStateChanged=self._state_changed,
        )
        self._obj = _ControllerSyncObj(settings, conf)
        self.settings = settings
        self._pending: list[_Pending] = []

    # -------------------------------------------------------------- proposals
    async def propose_events(self, events: list[Event], timeout_s: float,
                             request_id: str | None = None) -> dict[str, Any]:
        """Commit ``events`` as one write. Writes proposed while the event loop is busy are committed
        together in one log entry (group commit): each keeps its own request id and result, and
        the Raft, journal, timer and wake-up costs are paid once per entry instead of once per write."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        self._pending.append((events, request_id or new_request_id(), future, timeout_s))
        if len(self._pending) == 1:
            loop.call_soon(self._propose_pending, loop)
        return await future

    def _propose_pending(self, loop: asyncio.AbstractEventLoop) -> None:
        pending, self._pending = self._pending, []
        for start in range(0, len(pending), MAX_WRITES_PER_ENTRY):
            self._propose_chunk(loop, pending[start:start + MAX_WRITES_PER_ENTRY])

    def _propose_chunk(self, loop: asyncio.AbstractEventLoop, chunk: list[_Pending]) -> None:
        """One entry for ``chunk``, halved until it fits in MAX_ENTRY_BYTES (peers drop larger frames,
        so a larger entry could never be replicated); a single write that does not fit is refused."""
        if len(chunk) == 1:
            events, request_id, _, _ = chunk[0]
            entry = encode_entry(events, request_id)
        else:
            entry = encode_batch([(events, request_id) for events, request_id, _, _ in chunk])
        if len(entry) > MAX_ENTRY_BYTES // 4 and len(entry.encode("utf-8")) > MAX_ENTRY_BYTES:
            if len(chunk) > 1:
                half = len(chunk) // 2
                self._propose_chunk(loop, chunk[:half])
                self._propose_chunk(loop, chunk[half:])
            elif not chunk[0][2].done():
                chunk[0][2].set_exception(RaftError(
                    f"the write is {len(entry.encode('utf-8'))} bytes once encoded, more than the "
                    f"{MAX_ENTRY_BYTES} bytes a Raft log entry may hold"))
            return
        self._submit(loop, entry, [future for _, _, future, _ in chunk], max(t for _, _, _, t in chunk))

    async def barrier(self, timeout_s: float, cluster_id: str | None = None) -> None:
        """Commit a no-op: when it returns, this node was leader of a majority after the call began,
        and has applied every entry committed before it. With ``cluster_id``, the no-op also proposes it as
        the group's id (kept only if the state has none yet)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        request_id = new_request_id()
        entry = encode_identity(cluster_id, request_id) if cluster_id else encode_noop(request_id)
        self._submit(loop, entry, [future], timeout_s)
        await future

    def _submit(self, loop: asyncio.AbstractEventLoop, entry: str, futures: list[asyncio.Future[dict[str, Any]]],
                timeout_s: float) -> None:
        """Propose ``entry``; its writers' futures get the outcome, or a timeout error (the outcome is
        then unknown: the entry may still commit) after ``timeout_s``. Refused at once while this node's
        journal cannot be written."""
        fault = self.journal_fault()
        if fault is not None:
            for future in futures:
                if not future.done():
                    future.set_exception(JournalNotWritable(fault))
            return
        timer = loop.call_later(timeout_s, _expire, futures)

        def done(result: Any, err: Any) -> None:  # on pysyncobj's tick thread
            loop.call_soon_threadsafe(_resolve_all, futures, result, err, timer)

        self._obj.apply_entry(entry, callback=done)

    # -------------------------------------------------------------- reads and status
    def read(self, fn: Callable[[ReplicasInfoManager], T]) -> T:
        with self._obj._lock:
            return fn(self._obj.manager)

    def is_leader(self) -> bool:
        return bool(self._obj._isLeader())

    def journal_fault(self) -> str | None:
        """Why this node's Raft journal cannot be written (None: it can)."""
        journal = self._obj.journal()
        fault = journal.fault if journal is not None else None
        return None if fault is None else fault.describe()

    def leader_address(self) -> str | None:
        leader = self._obj._getLeader()
        return None if leader is None else str(leader.address)

    def status(self) -> dict[str, Any]:
        st = self._obj.getStatus()
        return {
            "state": {0: "FOLLOWER", 1: "CANDIDATE", 2: "LEADER"}.get(st.get("state"), "UNKNOWN"),
            "term": st.get("raft_term"), "commitIndex": st.get("commit_idx"),
            "lastApplied": st.get("last_applied"), "logLength": st.get("log_len"),
            "leader": None if st.get("leader") is None else str(st["leader"].address),
            "hasQuorum": st.get("has_quorum"), "journalError": self.journal_fault(),
        }

    def tick_thread_alive(self) -> bool:
        return bool(self._obj.tick_thread_alive())

    def force_log_compaction(self) -> None:
        self._obj.forceLogCompaction()

    def destroy(self) -> None:
        self._obj.destroy_synchronous()

    def _state_changed(self, old: int, new: int) -> None:  # runs on the tick thread
        if self._on_state_changed is not None:
            self._on_state_changed(new == 2)


def _expire(futures: list[asyncio.Future[dict[str, Any]]]) -> None:
    for future in futures:
        if not future.done():
            future.set_exception(RaftError("timed out waiting for the Raft commit", outcome_unknown=True))


def _resolve_all(futures: list[asyncio.Future[dict[str, Any]]], result: Any, err: Any,
                 timer: asyncio.TimerHandle) -> None:
    """Runs on the event loop: hand each write of a committed (or failed) entry its own outcome."""
    timer.cancel()
    if err == FAIL_REASON.SUCCESS:
        answer = result if isinstance(result, dict) else {"ok": True}
        items = answer.get("items")
        for i, future in enumerate(futures):
            if not future.done():
                future.set_result(items[i] if isinstance(items, list) and i < len(items) else answer)
        return
    name = _FAIL_NAMES.get(err, str(err))
    unknown = err in (FAIL_REASON.LEADER_CHANGED, getattr(FAIL_REASON, "UNKNOWN_OUTCOME", -99))
    for future in futures:
        if not future.done():
            future.set_exception(RaftError(f"Raft proposal failed: {name}", outcome_unknown=unknown))
