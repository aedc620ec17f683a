"""Raft log entries as the controller applies them (``raft._apply_entry``), the journal check of each
entry's CRC, and group commit: writes proposed in one turn of the event loop share one log entry.

The proposal tests run :class:`RaftNode` over a stand-in for the SyncObj that applies every entry to a
real state machine on another thread, as pysyncobj's tick thread does; no network.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from typing import Any

import pytest
from pysyncobj import pickle as sync_pickle
from pysyncobj.config import FAIL_REASON

from services.controller import raft as raft_module
from services.controller.events import (
    ApplyBrokerIdEvent,
    ElectMasterEvent,
    Event,
    encode_batch,
    encode_entry,
    encode_noop,
)
from services.controller.raft import (
    MAX_WRITES_PER_ENTRY,
    RaftError,
    RaftNode,
    _apply_entry,
    new_request_id,
)
from services.controller.raft_store import _command_problem
from services.controller.state_machine import ReplicasInfoManager
from tests.unit.controller.helpers import CLUSTER, IPS, check_code


def register(name: str, broker_id: int = 1) -> list[Event]:
    return [ApplyBrokerIdEvent(CLUSTER, name, IPS[0], broker_id, check_code(IPS[0]), timestamp=5)]


def broker_names(manager: ReplicasInfoManager) -> list[str]:
    return sorted(manager.broker_sets)


# ---------------------------------------------------------------------- applying entries
def test_a_batch_applies_each_write_in_order_as_separate_entries_would() -> None:
    writes = [(register("a"), "r1"), (register("b"), "r2"),
              ([ElectMasterEvent("a", True, 1, "INITIAL", CLUSTER, timestamp=6)], "r3")]
    batched, one_by_one = ReplicasInfoManager(), ReplicasInfoManager()
    answer = _apply_entry(batched, encode_batch(writes))
    for events, request_id in writes:
        assert _apply_entry(one_by_one, encode_entry(events, request_id)) == {"ok": True}
    assert answer == {"ok": True, "items": [{"ok": True}] * 3}
    assert batched.to_dict() == one_by_one.to_dict()
    assert batched.broker_sets["a"].masterBrokerId == 1


def test_each_write_of_a_batch_is_deduplicated_by_its_own_request_id() -> None:
    manager = ReplicasInfoManager()
    _apply_entry(manager, encode_entry(register("a"), "seen"))
    answer = _apply_entry(manager, encode_batch([(register("a", 2), "seen"), (register("b"), "new")]))
    assert answer["items"] == [{"ok": True, "duplicate": True}, {"ok": True}]
    assert sorted(manager.broker_sets["a"].brokers) == [1]  # the retried write did not apply twice
    assert broker_names(manager) == ["a", "b"]


def test_generated_request_ids_are_distinct() -> None:
    ids = [new_request_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch("[0-9a-f]{32}", i) for i in ids)  # across processes: tests/integration/test_request_ids.py


def test_entries_of_an_unknown_version_are_refused_and_version_1_still_applies() -> None:
    manager = ReplicasInfoManager()
    newer = json.dumps({"v": 3, "kind": "batch", "items": [json.loads(encode_entry(register("x"), "r"))]})
    assert _apply_entry(manager, newer) == {"ok": False, "error": "unsupported log entry version"}
    assert _apply_entry(manager, json.dumps({"kind": "events"})) == {"ok": False,
                                                                     "error": "unsupported log entry version"}
    assert _apply_entry(manager, encode_entry(register("a"), "r1")) == {"ok": True}
    assert _apply_entry(manager, encode_noop("r2")) == {"ok": True}
    assert broker_names(manager) == ["a"]


def command(entry: str) -> bytes:
    return bytes([0]) + sync_pickle.dumps((0, (entry,), {}))


def test_the_journal_check_verifies_every_write_of_a_batch() -> None:
    entry = encode_batch([(register("a"), "r1"), (register("b"), "r2")])
    assert _command_problem(0, command(entry)) is None
    damaged = entry.replace('"brokerName":"b"', '"brokerName":"c"')
    assert _command_problem(0, command(damaged)) == "the entry at offset 0 fails its checksum"


# ---------------------------------------------------------------------- group commit
class TickThread:
    """Stands in for the SyncObj: records each entry, applies it on another thread and answers."""

    def __init__(self, fail: int | None = None) -> None:
        self.manager = ReplicasInfoManager()
        self.entries: list[str] = []
        self.fail = fail

    def journal(self) -> None:
        return None  # a journal that is always writable

    def apply_entry(self, entry: str, callback: Any) -> None:
        self.entries.append(entry)

        def commit() -> None:
            if self.fail is not None:
                callback(None, self.fail)
            else:
                callback(_apply_entry(self.manager, entry), FAIL_REASON.SUCCESS)
        threading.Thread(target=commit).start()


def node(obj: TickThread) -> RaftNode:
    raft = RaftNode.__new__(RaftNode)
    raft._obj = obj
    raft._pending = []
    return raft


def test_writes_proposed_together_share_one_entry_and_each_gets_its_own_answer() -> None:
    obj = TickThread()
    raft = node(obj)

    async def main() -> list[dict[str, Any]]:
        await raft.propose_events(register("a"), 5, "first")  # alone: a version-1 entry
        return await asyncio.gather(*(raft.propose_events(register(n), 5, rid)
                                      for n, rid in (("b", "r-b"), ("c", "r-c"), ("b", "first"))))

    answers = asyncio.run(main())
    assert [json.loads(e)["kind"] for e in obj.entries] == ["events", "batch"]
    assert answers == [{"ok": True}, {"ok": True}, {"ok": True, "duplicate": True}]
    assert broker_names(obj.manager) == ["a", "b", "c"]


def test_more_writes_than_one_entry_holds_are_split_in_order() -> None:
    obj = TickThread()
    raft = node(obj)
    names = [f"g{i:03d}" for i in range(MAX_WRITES_PER_ENTRY + 3)]

    async def main() -> list[dict[str, Any]]:
        return await asyncio.gather(*(raft.propose_events(register(n), 5) for n in names))

    assert asyncio.run(main()) == [{"ok": True}] * len(names)
    sizes = [len(json.loads(e)["items"]) if json.loads(e)["kind"] == "batch" else 1 for e in obj.entries]
    assert sizes == [MAX_WRITES_PER_ENTRY, 3]
    assert broker_names(obj.manager) == names


def test_a_failed_entry_fails_every_write_it_carried() -> None:
    raft = node(TickThread(fail=FAIL_REASON.NOT_LEADER))

    async def main() -> list[Any]:
        return await asyncio.gather(*(raft.propose_events(register(n), 5) for n in "ab"),
                                    return_exceptions=True)

    outcomes = asyncio.run(main())
    assert all(isinstance(o, RaftError) and "NOT_LEADER" in o.reason and not o.outcome_unknown
               for o in outcomes)


def test_a_write_never_committed_times_out_with_an_unknown_outcome() -> None:
    class Silent(TickThread):
        def apply_entry(self, entry: str, callback: Any) -> None:
            self.entries.append(entry)  # never answers, as with a leader cut off mid-commit

    raft = node(Silent())

    async def main() -> list[Any]:
        return await asyncio.gather(raft.propose_events(register("a"), 0.05), raft.barrier(0.05),
                                    return_exceptions=True)

    outcomes = asyncio.run(main())
    assert all(isinstance(o, RaftError) and o.outcome_unknown and "timed out" in o.reason for o in outcomes)


def test_writes_are_split_so_that_no_entry_outgrows_what_peers_accept(monkeypatch: pytest.MonkeyPatch) -> None:
    """Peers drop frames above a bound (raft_transport.py), so an entry above MAX_ENTRY_BYTES could
    never be replicated: a group commit is halved until each part fits."""
    monkeypatch.setattr(raft_module, "MAX_ENTRY_BYTES", 2000)
    obj = TickThread()
    raft = node(obj)
    names = [f"{i}" + "x" * 600 for i in range(4)]

    async def main() -> list[dict[str, Any]]:
        return await asyncio.gather(*(raft.propose_events(register(n), 5) for n in names))

    assert asyncio.run(main()) == [{"ok": True}] * len(names)
    assert len(obj.entries) > 1 and all(len(e.encode()) <= 2000 for e in obj.entries)
    assert broker_names(obj.manager) == sorted(names)


def test_a_single_write_larger_than_an_entry_is_refused_and_never_proposed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(raft_module, "MAX_ENTRY_BYTES", 2000)
    obj = TickThread()
    raft = node(obj)

    async def main() -> list[Any]:
        return await asyncio.gather(raft.propose_events(register("y" * 2500), 5), raft.propose_events(register("z"), 5),
                                    return_exceptions=True)

    too_big, small = asyncio.run(main())
    assert isinstance(too_big, RaftError) and "more than the 2000 bytes a Raft log entry may hold" in too_big.reason
    assert not too_big.outcome_unknown and small == {"ok": True}
    assert broker_names(obj.manager) == ["z"]
