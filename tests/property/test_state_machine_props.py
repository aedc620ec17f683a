"""Property tests of the controller state machine (services/controller/state_machine.py).

A Hypothesis rule-based machine drives one :class:`ReplicasInfoManager` with random sequences of the
write commands a controller runs (applyBrokerId, registerBroker, electMaster with
:class:`DefaultElectPolicy` and random liveness / live-info tables, alterSyncStateSet, cleanBrokerData)
and applies each result's events the way Raft would. After every step it checks the invariants the
module docstring and rocketmq-controller.md §3 promise:

- masterEpoch and syncStateSetEpoch never decrease (while a broker-set exists; deleting it with
  cleanBrokerData starts a new lifetime at 0, as in RocketMQ);
- the master, if any, is a registered broker and a member of the SyncStateSet;
- every SyncStateSet member is registered;
- nextAssignBrokerId is above every registered id (for ids obtained through getNextBrokerId);
- commands never mutate state; apply_event never raises (nothing is swallowed by its safety net);
- the event history indexes are consecutive and end at next_event_index - 1;
- a pickle round trip (the Raft snapshot path) gives the same to_dict();
- replaying the applied events (directly, and as JSON Raft log entries through raft._apply_entry) into
  a fresh manager gives the same to_dict();
- a master elected without enableElectUncleanMaster comes from the previous SyncStateSet (or is the
  first election of the broker-set), is alive and is not an async learner.
"""

from __future__ import annotations

import copy
import functools
import logging
import pickle
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from services.common.codes import ResponseCode as RC
from services.controller.elect_policy import DefaultElectPolicy
from services.controller.events import (
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    CleanBrokerDataEvent,
    ElectMasterEvent,
    Event,
    UpdateBrokerAddressEvent,
    encode_entry,
    stamp,
)
from services.controller.heartbeat import BrokerLiveInfo
from services.controller.raft import _apply_entry
from services.controller.state_machine import ControllerResult, ElectMasterRequest, ReplicasInfoManager
from tests.support.examples import examples

CLUSTER = "c1"
NAMES = ("broker-a", "broker-b")
MAX_ID = 6
IDS = st.integers(min_value=1, max_value=MAX_ID)
ADDRS = st.sampled_from([f"127.0.0.1:{9000 + i}" for i in range(4)])
ALIVE = st.frozensets(IDS, max_size=MAX_ID)


class _SwallowedErrors(logging.Handler):
    """Records every exception that apply_event's safety net logs (it must never fire)."""

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.records.append(record)


def alive_of(ids: frozenset[int]) -> Any:
    return lambda cluster, name, broker_id: broker_id in ids


def live_table(draw_entries: dict[int, tuple[int, int, int, bool]], name: str) -> Any:
    def getter(cluster: str, broker_name: str, broker_id: int) -> BrokerLiveInfo | None:
        entry = draw_entries.get(broker_id)
        if entry is None:
            return None
        epoch, max_offset, priority, learner = entry
        return BrokerLiveInfo(
            cluster,
            broker_name,
            f"127.0.0.1:{9000 + broker_id}",
            broker_id,
            lastUpdateMs=0,
            epoch=epoch,
            maxOffset=max_offset,
            electionPriority=priority,
            asyncLearner=learner,
        )

    return getter


LIVE_INFO = st.one_of(
    st.none(),
    st.dictionaries(
        IDS,
        st.tuples(st.integers(-1, 5), st.integers(-1, 1000), st.integers(0, 3), st.booleans()),
        max_size=MAX_ID,
    ),
)


def snapshot(m: ReplicasInfoManager) -> dict[str, Any]:
    return copy.deepcopy(m.to_dict())


class ControllerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.m = ReplicasInfoManager()
        self.events: list[Event] = []
        self.clock = 1_700_000_000_000
        # per broker-set lifetime: the highest epochs seen (reset when the set is deleted)
        self.seen_master_epoch: dict[str, int] = {}
        self.seen_ss_epoch: dict[str, int] = {}
        # every id getNextBrokerId ever answered, per broker-set lifetime (stale answers are realistic)
        self.offered_ids: dict[str, set[int]] = {n: {1} for n in NAMES}
        self.check_codes: dict[tuple[str, int], str] = {}
        self.errors = _SwallowedErrors()
        logging.getLogger("services.controller.state_machine").addHandler(self.errors)

    def teardown(self) -> None:
        logging.getLogger("services.controller.state_machine").removeHandler(self.errors)
        if self.events:
            self._check_replay()

    # ------------------------------------------------------------------ helpers
    def run(self, command: Any) -> ControllerResult:
        before = snapshot(self.m)
        result: ControllerResult = command(self.m)
        assert snapshot(self.m) == before, "a command mutated the state machine"
        if not result.ok:
            # Only a failed controller-triggered election commits anything (it clears the master).
            assert all(isinstance(e, ElectMasterEvent) and not e.newMasterElected for e in result.events), (
                result
            )
        for event in result.events:
            self.clock += 1
            stamped = stamp(event, self.clock)
            self.m.apply_event(stamped)
            self.events.append(stamped)
        assert not self.errors.records, (
            f"apply_event swallowed an exception: {self.errors.records[0].getMessage()}"
        )
        return result

    def _check_replay(self) -> None:
        fresh = ReplicasInfoManager()
        for event in self.events:
            fresh.apply_event(event)
        assert fresh.to_dict() == self.m.to_dict(), "replaying the applied events gave another state"
        via_log = ReplicasInfoManager()
        for i, event in enumerate(self.events):
            answer = _apply_entry(via_log, encode_entry([event], f"req-{i}"))
            assert answer == {"ok": True}
        expected = self.m.to_dict()
        got = via_log.to_dict()
        assert got["brokerSets"] == expected["brokerSets"]
        assert got["history"] == expected["history"]
        assert got["nextEventIndex"] == expected["nextEventIndex"]

    # ------------------------------------------------------------------ rules
    @initialize(data=st.data(), sizes=st.tuples(st.integers(0, 4), st.integers(0, 4)))
    def initial_groups(self, data: st.DataObject, sizes: tuple[int, int]) -> None:
        """Start from populated broker-sets (as brokers start up: register, the first one elects itself),
        so that the random steps spend their time on elections and SyncStateSet changes."""
        for name, size in zip(NAMES, sizes):
            for i in range(size):
                self.apply_next_id(name, f"127.0.0.1:{9000 + i}", 0)
            if size and data.draw(st.booleans()):
                first = data.draw(st.sampled_from(self.registered(name)))
                request = ElectMasterRequest(CLUSTER, name, first)
                policy = DefaultElectPolicy(alive_of(frozenset(self.registered(name))))
                alive = alive_of(frozenset({first}))
                assert self.run(
                    functools.partial(
                        ReplicasInfoManager.elect_master,
                        request=request,
                        policy=policy,
                        enable_unclean=False,
                        alive=alive,
                    )
                ).ok

    @rule(name=st.sampled_from(NAMES), addr=ADDRS, t=st.integers(0, 3))
    def apply_next_id(self, name: str, addr: str, t: int) -> None:
        """The broker's registration steps: getNextBrokerId, then applyBrokerId with a new check code."""
        if len(self.registered(name)) >= 4:
            return  # groups of up to 4 replicas: enough, and leaves room for the other rules
        got = self.m.get_next_broker_id(CLUSTER, name)
        assert got.ok and got.data is not None
        broker_id = int(got.data["nextBrokerId"])
        self.offered_ids[name].add(broker_id)
        code = f"{addr};{t}"
        result = self.run(lambda m: m.apply_broker_id(CLUSTER, name, broker_id, code))
        if result.ok:
            self.check_codes.setdefault((name, broker_id), code)

    @rule(data=st.data(), name=st.sampled_from(NAMES), addr=ADDRS, t=st.integers(0, 3), retry=st.booleans())
    def apply_stale_id(self, data: st.DataObject, name: str, addr: str, t: int, retry: bool) -> None:
        """An id some earlier getNextBrokerId answered (a stale read), or a retry with the same code."""
        if data.draw(st.integers(0, 2)):
            return
        broker_id = data.draw(st.sampled_from(sorted(self.offered_ids[name])))
        code = self.check_codes.get((name, broker_id)) if retry else None
        result = self.run(lambda m: m.apply_broker_id(CLUSTER, name, broker_id, code or f"{addr};{t}"))
        bs = self.m.broker_sets.get(name)
        if (
            code is not None
            and bs is not None
            and broker_id in bs.brokers
            and bs.brokers[broker_id].registerCheckCode == code
        ):
            assert result.ok, "a retried applyBrokerId with the same check code must succeed"

    def draw_name(self, data: st.DataObject) -> str:
        """Mostly an existing broker-set (interesting), sometimes any name (refusals)."""
        existing = sorted(self.m.broker_sets)
        return data.draw(
            st.sampled_from(existing) if existing and data.draw(st.integers(0, 5)) else st.sampled_from(NAMES)
        )

    def registered(self, name: str) -> list[int]:
        bs = self.m.broker_sets.get(name)
        return sorted(bs.brokers) if bs else []

    def draw_id(self, data: st.DataObject, name: str) -> int:
        """Mostly a registered id (interesting), sometimes any id (refusals)."""
        ids = self.registered(name)
        return data.draw(st.sampled_from(ids) if ids and data.draw(st.integers(0, 4)) else IDS)

    def draw_alive(self, data: st.DataObject, name: str) -> frozenset[int]:
        """Mostly the registered ids minus a few dead ones; sometimes any set."""
        ids = self.registered(name)
        if ids and data.draw(st.integers(0, 3)):
            dead = data.draw(st.sets(st.sampled_from(ids), max_size=len(ids)))
            return frozenset(ids) - dead
        return data.draw(ALIVE)

    @rule(data=st.data(), addr=ADDRS)
    def register(self, data: st.DataObject, addr: str) -> None:
        name = self.draw_name(data)
        broker_id, alive = self.draw_id(data, name), self.draw_alive(data, name)
        result = self.run(lambda m: m.register_broker(CLUSTER, name, broker_id, addr, alive_of(alive)))
        bs = self.m.broker_sets.get(name)
        if result.ok:
            assert bs is not None and bs.brokers[broker_id].address == addr
            assert result.data is not None
            master = result.data["masterBrokerId"]
            assert master is None or (master == bs.masterBrokerId and master in alive)

    @rule(
        data=st.data(),
        by_controller=st.booleans(),
        designate=st.booleans(),
        unclean=st.booleans(),
        live=LIVE_INFO,
    )
    def elect(
        self,
        data: st.DataObject,
        by_controller: bool,
        designate: bool,
        unclean: bool,
        live: dict[int, tuple[int, int, int, bool]] | None,
    ) -> None:
        name = self.draw_name(data)
        requester = None if by_controller else self.draw_id(data, name)
        alive = self.draw_alive(data, name)
        if requester is None:
            designate = False
        bs = self.m.broker_sets.get(name)
        old_sss = set(bs.syncStateSet) if bs else set()
        old_epoch = bs.masterEpoch if bs else 0
        old_ss_epoch = bs.syncStateSetEpoch if bs else 0
        old_master = bs.masterBrokerId if bs else None
        policy = DefaultElectPolicy(alive_of(alive), live_table(live, name) if live is not None else None)
        request = ElectMasterRequest(CLUSTER if requester is not None else "", name, requester, designate)
        result = self.run(lambda m: m.elect_master(request, policy, unclean, alive_of(alive)))
        bs = self.m.broker_sets.get(name)
        elected = [e for e in result.events if isinstance(e, ElectMasterEvent) and e.newMasterElected]
        if not elected:
            if result.events:  # a failed controller-triggered election: master cleared, epoch bumped
                assert bs is not None and bs.masterBrokerId is None and bs.masterEpoch == old_epoch + 1
                assert bs.syncStateSet == old_sss and bs.syncStateSetEpoch == old_ss_epoch
            return
        assert result.ok and bs is not None and result.data is not None
        new = elected[0].newMasterBrokerId
        assert new is not None and new != old_master
        assert new in alive, "an elected master must be alive"
        if live is not None and new in live:
            assert not live[new][3], "an async learner must never be elected"
        if designate:
            assert new == requester, "a designated election never falls back to someone else"
        first = old_epoch == 0
        if not unclean:
            assert new in old_sss or first, (
                f"clean election picked {new} outside the previous SyncStateSet {sorted(old_sss)}"
            )
        if new not in old_sss and not first:
            assert result.data["electReason"] == "UNCLEAN"
        assert (bs.masterBrokerId, bs.masterEpoch, bs.syncStateSet, bs.syncStateSetEpoch) == (
            new,
            old_epoch + 1,
            {new},
            old_ss_epoch + 1,
        )
        assert (
            result.data["masterEpoch"],
            result.data["syncStateSetEpoch"],
            result.data["syncStateSet"],
        ) == (bs.masterEpoch, bs.syncStateSetEpoch, [new])

    def has_master(self) -> bool:
        return any(bs.masterBrokerId is not None for bs in self.m.broker_sets.values())

    @precondition(has_master)
    @rule(data=st.data(), stale=st.integers(0, 4))
    def alter_by_master(self, data: st.DataObject, stale: int) -> None:
        """What a real master sends: its own id and epochs (sometimes one of them stale), members it
        believes alive."""
        name = data.draw(
            st.sampled_from(sorted(n for n, b in self.m.broker_sets.items() if b.masterBrokerId))
        )
        bs = self.m.broker_sets[name]
        master_id, master_epoch, ss_epoch = bs.masterBrokerId, bs.masterEpoch, bs.syncStateSetEpoch
        assert master_id is not None
        if stale == 1:
            master_epoch -= 1
        elif stale == 2:
            ss_epoch -= 1
        members = data.draw(st.sets(st.sampled_from(sorted(bs.brokers)), min_size=1))
        if data.draw(st.integers(0, 5)):
            members |= {master_id}
        self._alter(name, master_id, master_epoch, members, ss_epoch, self.draw_alive(data, name))

    @rule(data=st.data(), go=st.integers(0, 2))
    def alter_anything(self, data: st.DataObject, go: int) -> None:
        """Any request, e.g. a deposed master's or a confused client's."""
        if go:
            return
        name = self.draw_name(data)
        self._alter(
            name,
            data.draw(IDS),
            data.draw(st.integers(0, 6)),
            data.draw(st.sets(IDS, min_size=1)),
            data.draw(st.integers(0, 6)),
            self.draw_alive(data, name),
        )

    def _alter(
        self,
        name: str,
        master_id: int,
        master_epoch: int,
        members: set[int],
        ss_epoch: int,
        alive: frozenset[int],
    ) -> None:
        bs = self.m.broker_sets.get(name)
        old_ss_epoch = bs.syncStateSetEpoch if bs else 0
        result = self.run(
            lambda m: m.alter_sync_state_set(
                name, master_id, master_epoch, sorted(members), ss_epoch, alive_of(alive)
            )
        )
        if result.ok:
            bs = self.m.broker_sets[name]
            assert bs.masterBrokerId == master_id and master_id in members
            assert bs.syncStateSet == members and bs.syncStateSetEpoch == old_ss_epoch + 1
            assert members <= alive, "alter admitted a dead replica"
            assert result.data == {
                "newSyncStateSetEpoch": bs.syncStateSetEpoch,
                "syncStateSet": sorted(members),
            }

    @rule(
        data=st.data(),
        ids=st.one_of(st.none(), st.sets(IDS, max_size=3)),
        living=st.booleans(),
        junk=st.booleans(),
        go=st.integers(0, 2),
    )
    def clean(self, data: st.DataObject, ids: set[int] | None, living: bool, junk: bool, go: int) -> None:
        if go:  # an admin command: rarer than the others
            return
        name = self.draw_name(data)
        alive = self.draw_alive(data, name)
        text = None if ids is None else ";".join(str(i) for i in sorted(ids))
        if junk and text is not None:
            text += ";x"
        existed = name in self.m.broker_sets
        result = self.run(lambda m: m.clean_broker_data(CLUSTER, name, text, living, alive_of(alive)))
        if junk and text is not None:
            assert not result.ok
        if result.ok and existed and name not in self.m.broker_sets:
            # a new lifetime: epochs and the id counter start again
            self.seen_master_epoch.pop(name, None)
            self.seen_ss_epoch.pop(name, None)
            self.offered_ids[name] = {1}

    @rule(alive=ALIVE, unclean=st.booleans())
    def read_commands_do_not_mutate(self, alive: frozenset[int], unclean: bool) -> None:
        before = snapshot(self.m)
        for name in NAMES:
            self.m.get_replica_info(name)
            self.m.get_next_broker_id(CLUSTER, name)
        self.m.get_sync_state_data(list(NAMES), alive_of(alive))
        self.m.scan_need_reelect(alive_of(alive), DefaultElectPolicy(alive_of(alive)), unclean)
        self.m.events_page(0, 1000)
        assert snapshot(self.m) == before

    # ------------------------------------------------------------------ invariants
    @invariant()
    def epochs_never_decrease(self) -> None:
        for name, bs in self.m.broker_sets.items():
            assert bs.masterEpoch >= self.seen_master_epoch.get(name, 0), f"{name} masterEpoch went back"
            assert bs.syncStateSetEpoch >= self.seen_ss_epoch.get(name, 0), (
                f"{name} syncStateSetEpoch went back"
            )
            self.seen_master_epoch[name] = bs.masterEpoch
            self.seen_ss_epoch[name] = bs.syncStateSetEpoch

    @invariant()
    def membership(self) -> None:
        for name, bs in self.m.broker_sets.items():
            assert bs.brokers, f"{name} exists with no broker"
            assert bs.syncStateSet <= set(bs.brokers), (
                f"{name}: SyncStateSet {sorted(bs.syncStateSet)} has unregistered ids ({sorted(bs.brokers)})"
            )
            if bs.masterBrokerId is not None:
                assert bs.masterBrokerId in bs.brokers, (
                    f"{name}: master {bs.masterBrokerId} is not registered"
                )
                assert bs.masterBrokerId in bs.syncStateSet, f"{name}: master not in its SyncStateSet"
                assert bs.masterEpoch >= 1
            assert bs.nextAssignBrokerId > max(bs.brokers), (
                f"{name}: nextAssignBrokerId {bs.nextAssignBrokerId} <= registered id {max(bs.brokers)}"
            )

    @invariant()
    def history_is_consecutive(self) -> None:
        h = self.m.history
        assert [r["index"] for r in h] == list(
            range(self.m.next_event_index - len(h), self.m.next_event_index)
        )
        assert len(h) == len(self.events)

    @invariant()
    def pickle_round_trip(self) -> None:
        assert pickle.loads(pickle.dumps(self.m)).to_dict() == self.m.to_dict()


ControllerMachine.TestCase.settings = settings(
    max_examples=examples(150),
    stateful_step_count=35,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestControllerMachine = ControllerMachine.TestCase


# ---------------------------------------------------------------------------------- raw events
EVENTS = st.one_of(
    st.builds(
        ApplyBrokerIdEvent,
        st.just(CLUSTER),
        st.sampled_from(NAMES),
        ADDRS,
        st.integers(-2, 8),
        st.text(max_size=5),
    ),
    st.builds(UpdateBrokerAddressEvent, st.just(CLUSTER), st.sampled_from(NAMES), ADDRS, st.integers(-2, 8)),
    st.builds(
        ElectMasterEvent,
        st.sampled_from(NAMES),
        st.booleans(),
        st.one_of(st.none(), st.integers(-2, 8)),
        st.sampled_from([None, "INITIAL", "FAILOVER", "ADMIN", "UNCLEAN"]),
        st.just(CLUSTER),
    ),
    st.builds(
        AlterSyncStateSetEvent,
        st.sampled_from(NAMES),
        st.lists(st.integers(-2, 8), max_size=4).map(tuple),
        st.just(CLUSTER),
    ),
    st.builds(
        CleanBrokerDataEvent,
        st.sampled_from(NAMES),
        st.one_of(st.none(), st.lists(st.integers(-2, 8), max_size=4).map(tuple)),
        st.just(CLUSTER),
    ),
)


@settings(max_examples=examples(200), deadline=None, database=None)
@given(st.lists(EVENTS, max_size=30))
def test_apply_of_any_well_typed_event_sequence_never_raises(events: list[Event]) -> None:
    """Apply runs on every node during replay; even events no command would produce (a bug elsewhere, an
    old log) must apply without raising, deterministically, and keep the history consistent."""
    a, b = ReplicasInfoManager(), ReplicasInfoManager()
    for e in events:
        a._apply(e)  # the raw apply, without apply_event's safety net: it must not need it
        b.apply_event(e)
    assert a.to_dict() == b.to_dict()
    assert [r["index"] for r in a.history] == list(range(len(events)))
    assert pickle.loads(pickle.dumps(a)).to_dict() == a.to_dict()


# ---------------------------------------------------------------------------------- known bug
def test_get_next_broker_id_never_answers_a_registered_id() -> None:
    m = ReplicasInfoManager()

    def run(command: Any) -> ControllerResult:
        result: ControllerResult = command(m)
        for e in result.events:
            m.apply_event(e)
        return result

    assert run(lambda s: s.apply_broker_id(CLUSTER, "broker-a", 1, "127.0.0.1:9001;1")).ok
    # applyBrokerId accepts any free id (the HTTP API only asks for >= 1): here 3
    assert run(lambda s: s.apply_broker_id(CLUSTER, "broker-a", 3, "127.0.0.1:9003;1")).ok
    # two more brokers follow the registration steps (identity.py): getNextBrokerId, applyBrokerId,
    # and on CONTROLLER_BROKER_ID_INVALID ask again. Each must end with its own id.
    for addr in ("127.0.0.1:9004", "127.0.0.1:9005"):
        for attempt in range(5):
            next_id = m.get_next_broker_id(CLUSTER, "broker-a").data["nextBrokerId"]  # type: ignore[index]
            result = run(
                functools.partial(
                    ReplicasInfoManager.apply_broker_id,
                    cluster=CLUSTER,
                    broker_name="broker-a",
                    broker_id=next_id,
                    check_code=f"{addr};{attempt}",
                )
            )
            if result.ok:
                break
            assert result.code == RC.CONTROLLER_BROKER_ID_INVALID
        else:
            pytest.fail(
                f"broker {addr} was refused 5 times: getNextBrokerId keeps answering {next_id}, "
                f"already registered ({sorted(m.broker_sets['broker-a'].brokers)})"
            )
