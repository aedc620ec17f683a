"""The controller's replicated metadata state machine (RocketMQ's ``ReplicasInfoManager``).

Theory of operation
-------------------
State is kept per *broker-set* (keyed by brokerName, as RocketMQ does): the registered broker ids with
their address and registerCheckCode, the next id to hand out, the master id, ``masterEpoch``, the
SyncStateSet and ``syncStateSetEpoch``.

Every request is a *command*: a method that reads the state and returns a :class:`ControllerResult`
(response code, remark, response data and a list of events) **without mutating anything**. The leader
stamps the events with the wall-clock time and proposes them through Raft; once committed, every node
calls :meth:`ReplicasInfoManager.apply_event`, the only method that changes state. Apply is pure:
no clock, no randomness, no I/O, and it never raises (a Raft apply that raises wedges the cluster).

Each applied event is also appended to a bounded history (index, timestamp, and the broker-set's state
after the event) that backs ``/v1/controller/events`` and the epoch-history reports.

The state also holds the name server's KV config (``kv_config.py``): its events change that table only
and are not part of the history (which is the broker-sets' story).

Epoch arithmetic: a successful election bumps masterEpoch and syncStateSetEpoch and resets the set to
``{newMaster}``; a failed controller-triggered election clears the master and bumps masterEpoch only; a
successful alter bumps syncStateSetEpoch only.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from services.common.codes import ResponseCode
from services.common.fields import REQUEST_ID_MAX_LENGTH
from services.common.signing import alter_signature_ok
from services.common.text import java_text as _java
from services.controller.elect_policy import DefaultElectPolicy
from services.controller.events import (
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    CleanBrokerDataEvent,
    DeleteKvConfigEvent,
    ElectMasterEvent,
    Event,
    PutKvConfigEvent,
    UpdateBrokerAddressEvent,
)
from services.controller.kv_config import KvConfig, KvRefused

log = logging.getLogger(__name__)

#: Applied events kept for ``/v1/controller/events``; older ones are dropped first. A constant, not a
#: per-node setting, because every replica must drop the same entries.
HISTORY_MAX_EVENTS = 100_000
#: Request ids remembered for de-duplicating retried writes.
REQUEST_IDS_MAX = 10_000
#: An id is remembered as itself up to this length (the API refuses longer ones), a longer one (from a
#: log entry written before that check) as its SHA-256: the table holds at most REQUEST_IDS_MAX ids of at
#: most this many characters, whatever the log holds.
REQUEST_ID_KEPT_LENGTH = REQUEST_ID_MAX_LENGTH
#: 2: the history as rows in ``HISTORY_FIELDS`` order (about 5x faster to snapshot than 1's dicts);
#: format 1 snapshots are still read.
STATE_FORMAT_VERSION = 2

AlivePredicate = Callable[[str, str, int], bool]


@dataclass(frozen=True)
class ControllerResult:
    code: int = ResponseCode.SUCCESS
    remark: str | None = None
    data: dict[str, Any] | None = None
    events: tuple[Event, ...] = ()

    @property
    def ok(self) -> bool:
        return self.code == ResponseCode.SUCCESS


#: A broker id as Long.valueOf reads one (an optional sign, then digits; at most a long's 19).
_DECIMAL_ID = re.compile(r"[+-]?[0-9]{1,19}")
#: A controller group's id: 128 bits in lower-case hex (services/controller/store_identity.py makes them).
_CLUSTER_ID = re.compile(r"[0-9a-f]{32}")


def _fail(code: ResponseCode, remark: str, data: dict[str, Any] | None = None) -> ControllerResult:
    return ControllerResult(code=int(code), remark=remark, data=data)


@dataclass
class BrokerEntry:
    address: str
    registerCheckCode: str
    publicKey: str = ""  # set once (apply, or the first registration that brings one), never replaced


@dataclass
class BrokerSet:
    clusterName: str
    brokerName: str
    nextAssignBrokerId: int = 1
    brokers: dict[int, BrokerEntry] = field(default_factory=dict)
    masterBrokerId: int | None = None
    masterEpoch: int = 0
    syncStateSet: set[int] = field(default_factory=set)
    syncStateSetEpoch: int = 0

    def address_of(self, broker_id: int | None) -> str | None:
        entry = self.brokers.get(broker_id) if broker_id is not None else None
        return entry.address if entry else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "clusterName": self.clusterName, "brokerName": self.brokerName,
            "nextAssignBrokerId": self.nextAssignBrokerId,
            "brokers": {str(k): [v.address, v.registerCheckCode, v.publicKey] for k, v in sorted(self.brokers.items())},
            "masterBrokerId": self.masterBrokerId, "masterEpoch": self.masterEpoch,
            "syncStateSet": sorted(self.syncStateSet), "syncStateSetEpoch": self.syncStateSetEpoch,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BrokerSet:
        return cls(
            d["clusterName"], d["brokerName"], d["nextAssignBrokerId"],
            {int(k): BrokerEntry(*v[:3]) for k, v in d["brokers"].items()},
            d["masterBrokerId"], d["masterEpoch"], set(d["syncStateSet"]), d["syncStateSetEpoch"],
        )


@dataclass(frozen=True)
class ElectMasterRequest:
    clusterName: str
    brokerName: str
    brokerId: int | None = None  # None / -1: triggered by the controller itself
    designateElect: bool = False

    @property
    def controller_triggered(self) -> bool:
        return self.brokerId is None or self.brokerId < 0


#: The fields of one history record, in storage order.
HISTORY_FIELDS = ("index", "timestamp", "eventType", "clusterName", "brokerName", "elected", "electReason",
                  "masterBrokerId", "masterEpoch", "syncStateSet", "syncStateSetEpoch", "brokerId",
                  "brokerAddress", "brokerIds")
_LIST_FIELDS = frozenset({"syncStateSet", "brokerIds"})
_CLEAN = "CLEAN_BROKER_DATA"  # the only event type whose record carries brokerIds


class EventHistory:
    """The applied events, oldest first, as a sequence of record dicts (``HISTORY_FIELDS``).

    Stored as flat tuples of numbers, strings and tuples: the garbage collector stops tracking such a
    tuple after it survives one collection, whereas 100,000 records as dicts with a list each made every
    full collection scan 200,000 more objects (43 ms instead of 2 on an idle machine), and snapshots
    pickle rows about 5x faster than dicts. A record is built as a dict only when it is read."""

    def __init__(self, records: Iterable[dict[str, Any]] = ()) -> None:
        self._rows: list[tuple[Any, ...]] = []
        for record in records:
            self.append(record)

    @classmethod
    def from_rows(cls, rows: Iterable[Sequence[Any]]) -> EventHistory:
        """From :meth:`rows` (lists instead of tuples after a JSON round trip are fine)."""
        history = cls()
        history._rows = [cls._row(zip(HISTORY_FIELDS, row, strict=True)) for row in rows]
        return history

    def rows(self) -> list[tuple[Any, ...]]:
        return list(self._rows)

    def append(self, record: dict[str, Any]) -> None:
        self._rows.append(self._row((n, record.get(n)) for n in HISTORY_FIELDS))

    @staticmethod
    def _row(fields: Iterable[tuple[str, Any]]) -> tuple[Any, ...]:
        return tuple(tuple(value) if name in _LIST_FIELDS and value is not None else value
                     for name, value in fields)

    def trim(self, keep: int) -> None:
        """Drop the oldest records beyond ``keep``."""
        if len(self._rows) > keep:
            del self._rows[: len(self._rows) - keep]

    @staticmethod
    def _record(row: tuple[Any, ...]) -> dict[str, Any]:
        record = {name: list(value) if name in _LIST_FIELDS and value is not None else value
                  for name, value in zip(HISTORY_FIELDS, row)}
        if record["eventType"] != _CLEAN:
            del record["brokerIds"]
        return record

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, key: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, key: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, key: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(key, slice):
            return [self._record(row) for row in self._rows[key]]
        return self._record(self._rows[key])

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (self._record(row) for row in self._rows)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EventHistory) and self._rows == other._rows

    __hash__ = None  # type: ignore[assignment]

    @property
    def first_index(self) -> int | None:
        return self._rows[0][0] if self._rows else None


class ReplicasInfoManager:
    def __init__(self) -> None:
        self.broker_sets: dict[str, BrokerSet] = {}
        self.history = EventHistory()
        self.next_event_index = 0
        self.applied_requests: OrderedDict[str, None] = OrderedDict()
        #: The controller group's id (store_identity.py): set once, by the first identity entry committed.
        self.cluster_id: str | None = None
        #: The name server's KV config (kv_config.py), replicated like the rest.
        self.kv = KvConfig()

    # ------------------------------------------------------------------ snapshots (pickle-safe)
    def __getstate__(self) -> dict[str, Any]:
        return self.to_dict()

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]
        self.load_dict(state)

    def to_dict(self) -> dict[str, Any]:
        state = {
            "v": STATE_FORMAT_VERSION,
            "brokerSets": [b.to_dict() for b in self.broker_sets.values()],
            "history": self.history.rows(),
            "nextEventIndex": self.next_event_index,
            "appliedRequests": list(self.applied_requests),
        }
        if self.cluster_id is not None:
            state["clusterId"] = self.cluster_id  # an older version's snapshot reader ignores the key
        if self.kv.table:
            state["kvConfig"] = self.kv.to_dict()  # likewise; absent from a snapshot written before it existed
        return state

    def load_dict(self, state: dict[str, Any]) -> None:
        if state.get("v") not in (1, STATE_FORMAT_VERSION):
            raise ValueError(f"unsupported controller state version {state.get('v')!r}")
        self.broker_sets = {d["brokerName"]: BrokerSet.from_dict(d) for d in state["brokerSets"]}
        self.history = (EventHistory.from_rows(state["history"]) if state["v"] >= 2
                        else EventHistory(state["history"]))
        self.next_event_index = state["nextEventIndex"]
        self.applied_requests = OrderedDict((_request_key(r), None) for r in state["appliedRequests"])
        _trim(self.applied_requests)
        self.cluster_id = None
        self.adopt_cluster_id(state.get("clusterId"))
        self.kv.load_dict(state.get("kvConfig"))

    # ------------------------------------------------------------------ request de-duplication
    def seen_request(self, request_id: str) -> bool:
        return _request_key(request_id) in self.applied_requests

    def remember_request(self, request_id: str) -> None:
        self.applied_requests[_request_key(request_id)] = None
        _trim(self.applied_requests)

    def adopt_cluster_id(self, cluster_id: object) -> None:
        """Apply a committed identity entry: the group's id is the first valid one committed, never replaced."""
        if self.cluster_id is None and isinstance(cluster_id, str) and _CLUSTER_ID.fullmatch(cluster_id):
            self.cluster_id = cluster_id

    # ------------------------------------------------------------------ read commands
    def get_next_broker_id(self, cluster: str, broker_name: str) -> ControllerResult:
        bs = self.broker_sets.get(broker_name)
        next_id = bs.nextAssignBrokerId if bs else 1
        while bs is not None and next_id in bs.brokers:
            next_id += 1  # an id applied out of order must never be offered again
        return ControllerResult(data={"clusterName": cluster, "brokerName": broker_name, "nextBrokerId": next_id})

    def get_replica_info(self, broker_name: str) -> ControllerResult:
        bs = self.broker_sets.get(broker_name)
        if bs is None:
            return _fail(ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST, "Broker metadata is not existed")
        return ControllerResult(data={
            "clusterName": bs.clusterName, "brokerName": bs.brokerName,
            "masterBrokerId": bs.masterBrokerId, "masterAddress": bs.address_of(bs.masterBrokerId),
            "masterEpoch": bs.masterEpoch, "syncStateSet": sorted(bs.syncStateSet),
            "syncStateSetEpoch": bs.syncStateSetEpoch,
        })

    def get_sync_state_data(self, broker_names: Iterable[str], alive: AlivePredicate) -> ControllerResult:
        brokers = [self._replicas_info(bs, alive) for name in broker_names
                   if (bs := self.broker_sets.get(name)) is not None]
        return ControllerResult(data={"brokers": brokers})

    def broker_names_of_cluster(self, cluster: str) -> list[str]:
        return [bs.brokerName for bs in self.broker_sets.values() if bs.clusterName == cluster]

    def _replicas_info(self, bs: BrokerSet, alive: AlivePredicate) -> dict[str, Any]:
        def identity(broker_id: int) -> dict[str, Any]:
            return {"brokerName": bs.brokerName, "brokerId": broker_id,
                    "brokerAddress": bs.address_of(broker_id) or "",
                    "alive": bool(alive(bs.clusterName, bs.brokerName, broker_id))}
        return {
            "clusterName": bs.clusterName, "brokerName": bs.brokerName,
            "masterBrokerId": bs.masterBrokerId, "masterAddress": bs.address_of(bs.masterBrokerId),
            "masterEpoch": bs.masterEpoch, "syncStateSetEpoch": bs.syncStateSetEpoch,
            "inSyncReplicas": [identity(i) for i in sorted(bs.syncStateSet) if i in bs.brokers],
            "notInSyncReplicas": [identity(i) for i in sorted(bs.brokers) if i not in bs.syncStateSet],
        }

    # ------------------------------------------------------------------ the name server's KV config
    def put_kv_config(self, namespace: str, key: str, value: str) -> ControllerResult:
        try:
            return ControllerResult(events=(self.kv.put_command(namespace, key, value),))
        except KvRefused as exc:
            return _fail(exc.code, exc.remark)

    def delete_kv_config(self, namespace: str, key: str) -> ControllerResult:
        try:
            event = self.kv.delete_command(namespace, key)
        except KvRefused as exc:
            return _fail(exc.code, exc.remark)
        return ControllerResult(events=(event,))  # even for a key not set here: a follower's view may trail

    # ------------------------------------------------------------------ write commands
    def apply_broker_id(self, cluster: str, broker_name: str, broker_id: int,
                        check_code: str, public_key: str = "") -> ControllerResult:
        address = check_code.split(";", 1)[0]
        data = {"clusterName": cluster, "brokerName": broker_name}
        event = ApplyBrokerIdEvent(cluster, broker_name, address, broker_id, check_code, public_key)
        bs = self.broker_sets.get(broker_name)
        if bs is None:
            if broker_id == 1:
                return ControllerResult(data=data, events=(event,))
            return _fail(ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                         f"Broker-set: {broker_name} hasn't been registered in controller, "
                         f"but broker try to apply brokerId: {broker_id}")
        entry = bs.brokers.get(broker_id)
        if entry is None:
            return ControllerResult(data=data, events=(event,))
        if entry.registerCheckCode == check_code and (not entry.publicKey or entry.publicKey == public_key):
            # A retry of the same apply (the check code is not secret: the key is what proves it).
            return ControllerResult(data=data, events=(event,))
        return _fail(ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                     f"Fail to apply brokerId: {broker_id} in broker-set: {broker_name}")

    def broker_keys(self, broker_name: str) -> ControllerResult:
        """The public key of every broker id of a broker-set ("" for a broker that has none)."""
        bs = self.broker_sets.get(broker_name)
        if bs is None:
            return _fail(ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST, "Broker metadata is not existed")
        return ControllerResult(data={"clusterName": bs.clusterName, "brokerName": bs.brokerName, "keys": [
            {"brokerId": i, "publicKey": e.publicKey} for i, e in sorted(bs.brokers.items())]})

    def register_broker(self, cluster: str, broker_name: str, broker_id: int, address: str,
                        alive: AlivePredicate, public_key: str = "") -> ControllerResult:
        bs = self.broker_sets.get(broker_name)
        if bs is None:
            return _fail(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                         f"Broker-set: {broker_name} hasn't been registered in controller")
        if broker_id not in bs.brokers:
            return _fail(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                         f"BrokerId: {broker_id} hasn't been registered in broker-set: {broker_name}")
        held = bs.brokers[broker_id].publicKey
        if public_key and held and public_key != held:
            return _fail(ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                         f"BrokerId: {broker_id} of broker-set: {broker_name} is registered with another key")
        data: dict[str, Any] = {
            "clusterName": cluster, "brokerName": broker_name, "masterBrokerId": None,
            "masterAddress": None, "masterEpoch": None, "syncStateSetEpoch": bs.syncStateSetEpoch,
            "syncStateSet": sorted(bs.syncStateSet),
        }
        master = bs.masterBrokerId
        if master is not None and alive(bs.clusterName, broker_name, master):
            data.update(masterBrokerId=master, masterAddress=bs.address_of(master), masterEpoch=bs.masterEpoch)
        events: tuple[Event, ...] = ()
        new_key = public_key if public_key and not held else ""
        if bs.brokers[broker_id].address != address or new_key:
            events = (UpdateBrokerAddressEvent(cluster, broker_name, address, broker_id, new_key),)
        return ControllerResult(data=data, events=events)

    def elect_master(self, request: ElectMasterRequest, policy: DefaultElectPolicy,
                     enable_unclean: bool, alive: AlivePredicate) -> ControllerResult:
        bs = self.broker_sets.get(request.brokerName)
        if bs is None:
            return _fail(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "Broker hasn't been registered")
        new_master, unclean = self._choose_master(bs, request, policy, enable_unclean, alive)
        old_master = bs.masterBrokerId
        if new_master is not None and new_master == old_master:
            return _fail(ResponseCode.CONTROLLER_MASTER_STILL_EXIST,
                         f"The old master {old_master} is still alive, not need to elect new master "
                         f"for broker {bs.brokerName}", self._master_view(bs, sorted(bs.syncStateSet)))
        if new_master is not None:
            return self._elected(bs, request, new_master, unclean)
        if request.controller_triggered:
            events: tuple[Event, ...] = ()
            if old_master is not None:
                events = (ElectMasterEvent(bs.brokerName, False, None, None, bs.clusterName),)
            return ControllerResult(code=int(ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE),
                                    remark="Old master has down and failed to elect a new broker master",
                                    data=self._empty_master_view(bs), events=events)
        return _fail(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED, "Failed to elect a new master",
                     self._empty_master_view(bs))

    def _choose_master(self, bs: BrokerSet, request: ElectMasterRequest, policy: DefaultElectPolicy,
                       enable_unclean: bool, alive: AlivePredicate) -> tuple[int | None, bool]:
        if bs.masterEpoch == 0 and not request.controller_triggered:
            # First election of a broker-set: the requester wins, but only if it is a registered,
            # live broker (RocketMQ takes any id as is).
            rid = request.brokerId
            assert rid is not None
            ok = rid in bs.brokers and policy.eligible(bs.clusterName, bs.brokerName, rid)
            return (rid if ok else None), False
        prefer = request.brokerId if request.designateElect else None
        all_replicas = sorted(bs.brokers) if enable_unclean else None
        old_master, incumbent = bs.masterBrokerId, None
        if not request.designateElect and request.brokerId is not None and request.brokerId == bs.masterBrokerId:
            # The recorded master itself asks: it restarted. Its log may have lost an unflushed tail that
            # the slaves hold, so it must win on merit (epoch, maxOffset), not because it was master.
            old_master, incumbent = None, request.brokerId
        outcome = policy.elect(bs.clusterName, bs.brokerName, sorted(bs.syncStateSet), all_replicas,
                               old_master, prefer, incumbent)
        return outcome.broker_id, outcome.unclean

    def _elected(self, bs: BrokerSet, request: ElectMasterRequest, new_master: int,
                 unclean: bool) -> ControllerResult:
        if unclean:
            reason = "UNCLEAN"
        elif request.designateElect:
            reason = "ADMIN"
        elif bs.masterEpoch == 0:
            reason = "INITIAL"
        else:
            reason = "FAILOVER"
        event = ElectMasterEvent(bs.brokerName, True, new_master, reason, bs.clusterName)
        data = {
            "clusterName": bs.clusterName, "brokerName": bs.brokerName,
            "masterBrokerId": new_master, "masterAddress": bs.address_of(new_master),
            "masterEpoch": bs.masterEpoch + 1, "syncStateSetEpoch": bs.syncStateSetEpoch + 1,
            "syncStateSet": [new_master], "electReason": reason,
            "brokers": [{"brokerId": i, "brokerAddress": e.address} for i, e in sorted(bs.brokers.items())],
        }
        return ControllerResult(data=data, events=(event,))

    def _master_view(self, bs: BrokerSet, sync_state_set: list[int]) -> dict[str, Any]:
        return {
            "clusterName": bs.clusterName, "brokerName": bs.brokerName,
            "masterBrokerId": bs.masterBrokerId, "masterAddress": bs.address_of(bs.masterBrokerId),
            "masterEpoch": bs.masterEpoch, "syncStateSetEpoch": bs.syncStateSetEpoch,
            "syncStateSet": sync_state_set,
            "brokers": [{"brokerId": i, "brokerAddress": e.address} for i, e in sorted(bs.brokers.items())],
        }

    def _empty_master_view(self, bs: BrokerSet) -> dict[str, Any]:
        return {"clusterName": bs.clusterName, "brokerName": bs.brokerName, "masterBrokerId": None,
                "masterAddress": None, "masterEpoch": None, "syncStateSetEpoch": None,
                "syncStateSet": sorted(bs.syncStateSet), "brokers": []}

    def alter_sync_state_set(self, broker_name: str, master_id: int, master_epoch: int,
                             new_set: Iterable[int], sync_state_set_epoch: int,
                             alive: AlivePredicate, signature: str = "") -> ControllerResult:
        """``signature``: the master's (hex), required when the master has a key: only the master decides
        who is in sync with it, and an alter from anyone else could put a lagging replica in the set (a
        master without a key, e.g. a RocketMQ broker, cannot sign: its alters are taken as they come)."""
        proposed = set(new_set)
        bs = self.broker_sets.get(broker_name)
        if bs is None:
            return _fail(ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, "Broker metadata is not existed")
        if proposed == bs.syncStateSet:
            return _fail(ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                         "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet")
        if bs.masterBrokerId is None or bs.masterBrokerId != master_id:
            return _fail(ResponseCode.CONTROLLER_INVALID_MASTER,
                         f"Rejecting alter syncStateSet request because the current leader is:"
                         f"{{{_java(bs.masterBrokerId)}}}, not {{{master_id}}}")
        if master_epoch != bs.masterEpoch:
            return _fail(ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
                         f"Rejecting alter syncStateSet request because the current master epoch is:"
                         f"{{{bs.masterEpoch}}}, not {{{master_epoch}}}")
        if sync_state_set_epoch != bs.syncStateSetEpoch:
            return _fail(ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                         f"Rejecting alter syncStateSet request because the current syncStateSet epoch is:"
                         f"{{{bs.syncStateSetEpoch}}}, not {{{sync_state_set_epoch}}}")
        key = bs.brokers[master_id].publicKey if master_id in bs.brokers else ""
        if key and not alter_signature_ok(
                key, signature, broker_name, master_id, master_epoch, proposed, sync_state_set_epoch):
            return _fail(ResponseCode.NO_PERMISSION,
                         f"Rejecting alter syncStateSet request because it is not signed by master {master_id}")
        for broker_id in sorted(proposed):
            if broker_id not in bs.brokers:
                return _fail(ResponseCode.CONTROLLER_INVALID_REPLICAS,
                             f"Rejecting alter syncStateSet request because the replicas {{{broker_id}}} "
                             f"don't exist")
            if not alive(bs.clusterName, broker_name, broker_id):
                return _fail(ResponseCode.CONTROLLER_BROKER_NOT_ALIVE,
                             f"Rejecting alter syncStateSet request because the replicas {{{broker_id}}} "
                             f"don't alive")
        if bs.masterBrokerId not in proposed:
            return _fail(ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                         f"Rejecting alter syncStateSet request because the newSyncStateSet don't contains "
                         f"origin leader {{{_java(bs.masterBrokerId)}}}")
        members = tuple(sorted(proposed))
        return ControllerResult(
            data={"newSyncStateSetEpoch": bs.syncStateSetEpoch + 1, "syncStateSet": list(members)},
            events=(AlterSyncStateSetEvent(broker_name, members, bs.clusterName),))

    def clean_broker_data(self, cluster: str | None, broker_name: str, ids_to_clean: str | None,
                          clean_living: bool, alive: AlivePredicate) -> ControllerResult:
        bs = self.broker_sets.get(broker_name)
        ids: tuple[int, ...] | None = None
        if ids_to_clean and ids_to_clean.strip():
            bad = next((p for p in ids_to_clean.split(";") if p.strip() and not _DECIMAL_ID.fullmatch(p.strip())),
                       None)
            if bad is not None:  # the remark as RocketMQ's Long.valueOf failure reads
                return _fail(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                             "Please set the option <brokerControllerIdsToClean> according to the format, "
                             f'exception: java.lang.NumberFormatException: For input string: "{bad}"')
            ids = tuple(sorted({int(p) for p in ids_to_clean.split(";") if p.strip()})) or None
        if not clean_living:
            refusal = self._refuse_living_clean(bs, broker_name, cluster, ids, alive)
            if refusal is not None:
                return refusal
        if bs is None:
            return _fail(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                         f"Broker {broker_name} is not existed,clean broker data failure.")
        return ControllerResult(events=(CleanBrokerDataEvent(broker_name, ids or None, bs.clusterName),))

    def _refuse_living_clean(self, bs: BrokerSet | None, broker_name: str, cluster: str | None,
                             ids: tuple[int, ...] | None, alive: AlivePredicate) -> ControllerResult | None:
        if ids is None:
            if bs is not None and bs.masterBrokerId is not None:
                return _fail(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                             f"Broker {broker_name} is still alive, clean up failure")
            return None
        cluster_name = bs.clusterName if bs is not None else (cluster or "")
        for broker_id in ids:
            if alive(cluster_name, broker_name, broker_id):
                return _fail(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                             f"Broker [{broker_name},  {broker_id}] is still alive, clean up failure")
        return None

    def scan_need_reelect(self, alive: AlivePredicate, policy: DefaultElectPolicy,
                          enable_unclean: bool) -> list[str]:
        """Broker-sets that need an election now: the master is dead (or absent after a failed
        election) and a candidate the policy would accept is alive. Level-triggered: a failed election
        is found again on the next scan."""
        result = []
        for bs in self.broker_sets.values():
            if bs.masterEpoch == 0:
                continue  # never elected: the brokers elect themselves on start-up
            master = bs.masterBrokerId
            if master is not None and alive(bs.clusterName, bs.brokerName, master):
                continue
            all_replicas = sorted(bs.brokers) if enable_unclean else None
            outcome = policy.elect(bs.clusterName, bs.brokerName, sorted(bs.syncStateSet), all_replicas,
                                   None, None)
            if outcome.broker_id is not None or master is not None:
                result.append(bs.brokerName)
        return result

    # ------------------------------------------------------------------ apply (the only mutator)
    def apply_event(self, event: Event) -> None:
        """Apply one committed event. Never raises: a bad event is logged and skipped."""
        try:
            self._apply(event)
        except Exception:  # pragma: no cover - defensive; an exception here would wedge Raft
            log.exception("failed to apply controller event %r; skipped", event)

    def _apply(self, event: Event) -> None:
        if isinstance(event, PutKvConfigEvent):
            self.kv.apply_put(event)
            return
        if isinstance(event, DeleteKvConfigEvent):
            self.kv.apply_delete(event)
            return
        if isinstance(event, ApplyBrokerIdEvent):
            self._apply_broker_id(event)
        elif isinstance(event, UpdateBrokerAddressEvent):
            bs = self.broker_sets.get(event.brokerName)
            if bs is not None and event.brokerId in bs.brokers:
                entry = bs.brokers[event.brokerId]
                entry.address = event.brokerAddress
                if event.publicKey and not entry.publicKey:
                    entry.publicKey = event.publicKey
        elif isinstance(event, ElectMasterEvent):
            self._apply_elect(event)
        elif isinstance(event, AlterSyncStateSetEvent):
            bs = self.broker_sets.get(event.brokerName)
            if bs is not None:
                bs.syncStateSet = set(event.newSyncStateSet)
                bs.syncStateSetEpoch += 1
        elif isinstance(event, CleanBrokerDataEvent):
            self._apply_clean(event)
        self._record(event)

    def _apply_broker_id(self, event: ApplyBrokerIdEvent) -> None:
        bs = self.broker_sets.get(event.brokerName)
        if bs is None:
            bs = BrokerSet(event.clusterName, event.brokerName)
            self.broker_sets[event.brokerName] = bs
        if event.newBrokerId in bs.brokers:
            return
        bs.brokers[event.newBrokerId] = BrokerEntry(event.brokerAddress, event.registerCheckCode, event.publicKey)
        bs.nextAssignBrokerId += 1

    def _apply_elect(self, event: ElectMasterEvent) -> None:
        bs = self.broker_sets.get(event.brokerName)
        if bs is None:
            log.error("elect-master event for unknown broker-set %s ignored", event.brokerName)
            return
        bs.masterEpoch += 1
        if event.newMasterElected and event.newMasterBrokerId is not None:
            bs.masterBrokerId = event.newMasterBrokerId
            bs.syncStateSet = {event.newMasterBrokerId}
            bs.syncStateSetEpoch += 1
        else:
            bs.masterBrokerId = None

    def _apply_clean(self, event: CleanBrokerDataEvent) -> None:
        bs = self.broker_sets.get(event.brokerName)
        if bs is None:
            return
        if not event.brokerIdSetToClean:
            del self.broker_sets[event.brokerName]
            return
        for broker_id in event.brokerIdSetToClean:
            bs.brokers.pop(broker_id, None)
            bs.syncStateSet.discard(broker_id)
        if bs.masterBrokerId is not None and bs.masterBrokerId not in bs.brokers:
            # The master's metadata is gone: the group has no master any more, which is an epoch change.
            bs.masterBrokerId = None
            bs.masterEpoch += 1
        if not bs.brokers:
            del self.broker_sets[event.brokerName]

    def _record(self, event: Event) -> None:
        bs = self.broker_sets.get(getattr(event, "brokerName", ""))
        cluster = getattr(event, "clusterName", "") or (bs.clusterName if bs else "")
        record: dict[str, Any] = {
            "index": self.next_event_index, "timestamp": event.timestamp, "eventType": event.TYPE,
            "clusterName": cluster, "brokerName": getattr(event, "brokerName", ""),
            "elected": None, "electReason": None,
            "masterBrokerId": bs.masterBrokerId if bs else None,
            "masterEpoch": bs.masterEpoch if bs else None,
            "syncStateSet": sorted(bs.syncStateSet) if bs else None,
            "syncStateSetEpoch": bs.syncStateSetEpoch if bs else None,
            "brokerId": None, "brokerAddress": None,
        }
        if isinstance(event, ElectMasterEvent):
            record.update(elected=event.newMasterElected, electReason=event.electReason)
        elif isinstance(event, ApplyBrokerIdEvent):
            record.update(brokerId=event.newBrokerId, brokerAddress=event.brokerAddress)
        elif isinstance(event, UpdateBrokerAddressEvent):
            record.update(brokerId=event.brokerId, brokerAddress=event.brokerAddress)
        elif isinstance(event, CleanBrokerDataEvent):
            record["brokerIds"] = list(event.brokerIdSetToClean) if event.brokerIdSetToClean else None
        self.next_event_index += 1
        self.history.append(record)
        self.history.trim(HISTORY_MAX_EVENTS)

    def events_page(self, from_index: int, limit: int) -> list[dict[str, Any]]:
        first = self.history.first_index
        if first is None:
            return []
        start = max(0, from_index - first)
        return self.history[start:start + limit]


def _request_key(request_id: str) -> str:
    """The id itself, or for an over-long one its digest (deterministic: every replica keeps the same)."""
    if len(request_id) <= REQUEST_ID_KEPT_LENGTH:
        return request_id
    return "sha256:" + hashlib.sha256(request_id.encode("utf-8", "surrogatepass")).hexdigest()


def _trim(requests: OrderedDict[str, None]) -> None:
    while len(requests) > REQUEST_IDS_MAX:
        requests.popitem(last=False)
