"""Fuzz both HTTP APIs in-process from their OpenAPI specs (schemathesis), plus targeted Hypothesis
fuzzing of the controller's write endpoints with values that hit real broker-sets.

The controller app runs on a :class:`ControllerManager` whose Raft is a synchronous single-node fake
(events go through the real log-entry encoding and ``raft._apply_entry``). The broker app runs on a real
:class:`Broker` over a temporary store, made MASTER of a group of one; its controller address is a closed
loopback port, and the HA client a demotion would start is replaced by a stub (a fuzzed masterAddress
must never be dialled).

Checks on every answer: no 5xx; the body is the envelope ``{code, codeName, remark, data}``; a rejected
request (any non-SUCCESS code) leaves the controller's replicated state (``to_dict()``) and config, or
the broker's log, unchanged. The one documented exception: a failed controller-triggered election
(CONTROLLER_MASTER_NOT_AVAILABLE) commits an event that clears the master.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import shutil
import socket
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from schemathesis.python.asgi import get_client, shutdown_lifespans

from services.broker import api as broker_api
from services.broker import contract as bc
from services.broker.broker import Broker
from services.broker.config import BrokerConfig
from services.broker.ha import slave as ha_slave
from services.broker.ha.master import HAService
from services.broker.replicas_manager import Role
from services.common.codes import ResponseCode as RC
from services.common.codes import code_name
from services.controller import api as controller_api
from services.controller import contract
from services.controller.config import ControllerConfig
from services.controller.controller import ControllerManager
from services.controller.events import Event, encode_entry
from services.controller.heartbeat import Heartbeat
from services.controller.raft import _apply_entry
from services.controller.state_machine import ReplicasInfoManager
from tests.support.examples import examples

ENVELOPE_KEYS = {"code", "codeName", "remark", "data"}
FUZZ = settings(max_examples=examples(25), deadline=None, database=None, suppress_health_check=list(HealthCheck))


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------------------------- the fakes
class FakeRaft:
    """Single-node, synchronous Raft: what ControllerManager uses of RaftNode."""

    def __init__(self, raft_address: str) -> None:
        self.manager = ReplicasInfoManager()
        self.raft_address = raft_address
        self.proposals = 0

    def read(self, fn: Any) -> Any:
        return fn(self.manager)

    def is_leader(self) -> bool:
        return True

    def journal_fault(self) -> str | None:
        return None

    async def propose_events(
        self, events: list[Event], timeout_s: float, request_id: str | None = None
    ) -> dict[str, Any]:
        self.proposals += 1
        return _apply_entry(self.manager, encode_entry(events, request_id or uuid.uuid4().hex))

    async def barrier(self, timeout_s: float) -> None:
        return None

    def leader_address(self) -> str:
        return self.raft_address

    def status(self) -> dict[str, Any]:
        return {
            "state": "LEADER",
            "term": 1,
            "commitIndex": self.proposals,
            "lastApplied": self.proposals,
            "logLength": self.proposals,
            "leader": self.raft_address,
            "hasQuorum": True,
        }

    def tick_thread_alive(self) -> bool:
        return True


@dataclass
class ControllerUnderTest:
    app: FastAPI
    manager: ControllerManager
    raft: FakeRaft

    def state(self) -> dict[str, Any]:
        return copy.deepcopy(self.raft.manager.to_dict())


def make_controller(store: Path) -> ControllerUnderTest:
    port = closed_port()
    config = ControllerConfig(
        controllerDLegerPeers=f"n0-127.0.0.1:{port}",
        controllerDLegerSelfId="n0",
        controllerStorePath=str(store),
        notifyBrokerRoleChanged=False,
        maxHeartbeatTimeoutMillis=3_600_000,  # the seeded brokers stay alive for the whole module
    )
    manager = ControllerManager(config)
    raft = FakeRaft(config.self_peer().raft_address)
    manager.attach_raft(raft)  # type: ignore[arg-type]
    # What start() + _take_office() would set up, without the scan loops (they would elect on their own).
    manager._write_lock = asyncio.Lock()
    manager._barrier_lock = asyncio.Lock()
    manager._serving = True
    seed_controller_state(raft.manager)
    for broker_id in (1, 2, 3):
        manager.on_heartbeat(
            Heartbeat(
                "DefaultCluster",
                "broker-a",
                f"127.0.0.1:{10910 + broker_id}",
                broker_id,
                epoch=1,
                maxOffset=100,
                heartbeatTimeoutMills=3_600_000,
            )
        )
    return ControllerUnderTest(controller_api.create_app(manager), manager, raft)


def seed_controller_state(m: ReplicasInfoManager) -> None:
    """broker-a: ids 1..3 registered, 1 master (masterEpoch 1), SyncStateSet {1, 2} (epoch 2)."""
    from services.controller.elect_policy import DefaultElectPolicy
    from services.controller.state_machine import ElectMasterRequest

    def run(result: Any) -> None:
        assert result.ok, result
        for e in result.events:
            m.apply_event(e)

    for i in (1, 2, 3):
        run(m.apply_broker_id("DefaultCluster", "broker-a", i, f"127.0.0.1:{10910 + i};1"))
    def alive(c, n, i):
        return True
    run(
        m.elect_master(
            ElectMasterRequest("DefaultCluster", "broker-a", 1), DefaultElectPolicy(alive), False, alive
        )
    )
    run(m.alter_sync_state_set("broker-a", 1, 1, [1, 2], 1, alive))


@dataclass
class BrokerUnderTest:
    app: FastAPI
    broker: Broker
    final: bool = False  # the next lifespan shutdown stops the broker for good


def make_broker(store: Path) -> BrokerUnderTest:
    config = BrokerConfig(
        brokerName="broker-a",
        listenPort=closed_port(),
        haListenPort=closed_port(),
        storePathRootDir=str(store),
        controllerAddr=f"127.0.0.1:{closed_port()}",
        mappedFileSizeCommitLog=1 << 20,
        maxMessageSize=64 * 1024,
        slaveTimeout=200,
        flushIntervalCommitLog=50,
    )
    broker = Broker(config)
    broker.open_store()
    app = broker_api.create_app(broker)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # Broker.start() without the controller registration loop and the HA listener: a master of a
        # group of one, as if the controller had just elected it.
        # schemathesis ends every ASGI lifespan when a test ends and starts it again on the next
        # request, so this runs once per test: only the flush service stops in between. The store stays
        # open (the module's tests share it) until the fixture's final shutdown stops the broker.
        broker.flush.start()
        if broker.replicas.broker_id is None:
            broker.replicas.broker_id = 1
            await broker.replicas.change_to_master(1, 1, frozenset({1}))
        yield
        if under.final:
            await broker.stop()
        else:
            await broker.flush.stop()

    app.router.lifespan_context = lifespan
    under = BrokerUnderTest(app, broker)
    return under


class _NoDialHAClient:
    """Replaces HAClient: a fuzzed notifyRoleChanged may name any masterAddress, which must not be dialled."""

    started: ClassVar[list[str]] = []

    def __init__(
        self, config: Any, store: Any, clock: Any, self_id: int, master_address: str, *args: Any
    ) -> None:
        self.master_address = master_address

    def start(self) -> None:
        _NoDialHAClient.started.append(self.master_address)

    async def stop(self) -> None:
        return None

    def status(self) -> dict[str, object]:
        return {"masterAddress": self.master_address, "state": "STUB"}


async def _no_check(self: HAService) -> None:
    return None


# ---------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def services() -> Iterator[SimpleNamespace]:
    tmp = Path(tempfile.mkdtemp(prefix="mqctl-fuzz-"))
    root = logging.getLogger()
    level = root.level
    patch = pytest.MonkeyPatch()
    patch.setattr(ha_slave, "HAClient", _NoDialHAClient)
    # Not under test, and it would outlive the broker: a call to the (absent) controller in a thread.
    patch.setattr(HAService, "check_total_replicas", _no_check)
    broker: BrokerUnderTest | None = None
    try:
        broker = make_broker(tmp / "broker")
        with get_client(broker.app):
            pass  # runs the broker's lifespan start-up now (schemathesis ends it after each test)
        yield SimpleNamespace(controller=make_controller(tmp / "controller"), broker=broker)
    finally:
        if broker is not None:
            broker.final = True
            with get_client(broker.app):
                pass  # (re)starts the lifespan, so that the shutdown below stops the broker
        shutdown_lifespans()  # the lifespans run on schemathesis' event loop thread
        patch.undo()
        root.setLevel(level)  # POST /config may have changed logLevel
        shutil.rmtree(tmp, ignore_errors=True)


def spec_of(app: FastAPI) -> dict[str, Any]:
    return app.openapi()


# The specs depend only on the routes: build them from apps over inert objects (no I/O at import).
CONTROLLER_SPEC = spec_of(controller_api.create_app(ControllerManager(ControllerConfig())))
BROKER_SPEC = spec_of(
    broker_api.create_app(
        SimpleNamespace(  # type: ignore[arg-type]
            metrics=SimpleNamespace(registry=CollectorRegistry())
        )
    )
)
controller_schema = schemathesis.openapi.from_dict(CONTROLLER_SPEC)
broker_schema = schemathesis.openapi.from_dict(BROKER_SPEC)
for _schema in (controller_schema, broker_schema):
    _schema.config.generation.update(
        modes=[schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE]
    )


def check_envelope(status: int, body: Any, what: str) -> dict[str, Any]:
    assert status < 500, f"{what}: HTTP {status}: {body!r}"
    assert isinstance(body, dict) and set(body) == ENVELOPE_KEYS, f"{what}: not the envelope: {body!r}"
    assert isinstance(body["code"], int) and body["codeName"] == code_name(body["code"]), f"{what}: {body!r}"
    assert isinstance(body["remark"], str), f"{what}: {body!r}"
    assert body["data"] is None or isinstance(body["data"], dict), f"{what}: {body!r}"
    assert body["code"] != RC.SYSTEM_ERROR or "internal error" not in body["remark"], f"{what}: {body!r}"
    return body


# ---------------------------------------------------------------------------------- schemathesis
@controller_schema.parametrize()
@FUZZ
def test_controller_api_fuzz(case: Any, services: SimpleNamespace) -> None:
    c: ControllerUnderTest = services.controller
    before, config_before = c.state(), c.manager.config
    response = case.call(app=c.app)
    body = check_envelope(response.status_code, response.json(), f"{case.method} {case.path}")
    if body["code"] not in (RC.SUCCESS, RC.CONTROLLER_MASTER_NOT_AVAILABLE):
        assert c.state() == before, (
            f"{case.method} {case.path} was refused ({body['codeName']}) but changed state"
        )
        assert c.manager.config == config_before


@broker_schema.parametrize()
@FUZZ
def test_broker_api_fuzz(case: Any, services: SimpleNamespace) -> None:
    b: BrokerUnderTest = services.broker
    before = (b.broker.store.max_offset, b.broker.store.epochs.entries())
    response = case.call(app=b.app)
    body = check_envelope(response.status_code, response.json(), f"{case.method} {case.path}")
    if body["code"] in (RC.INVALID_PARAMETER, RC.MESSAGE_ILLEGAL, RC.SERVICE_NOT_AVAILABLE):
        assert (b.broker.store.max_offset, b.broker.store.epochs.entries()) == before, (
            f"{case.method} {case.path} was refused ({body['codeName']}) but changed the store"
        )


# ---------------------------------------------------------------------------------- targeted
NAMES = st.sampled_from(["broker-a", "broker-b", "x" * 255, "broker-a\x00", ""])
IDS = st.one_of(st.integers(-2, 5), st.sampled_from([0, 2**31, 2**63, -(2**63)]))
JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=5),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.integers(), max_size=2),
)


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """The value, sometimes junk of another type."""
    return st.one_of(strategy, strategy, strategy, JUNK)


WRITES = st.one_of(
    st.tuples(
        st.just(contract.APPLY_BROKER_ID),
        st.fixed_dictionaries(
            {
                "clusterName": maybe(st.just("DefaultCluster")),
                "brokerName": maybe(NAMES),
                "appliedBrokerId": maybe(IDS),
                "registerCheckCode": maybe(
                    st.sampled_from(["127.0.0.1:10911;1", "127.0.0.1:10999;2", ";", ""])
                ),
            }
        ),
    ),
    st.tuples(
        st.just(contract.REGISTER_BROKER),
        st.fixed_dictionaries(
            {
                "clusterName": maybe(st.just("DefaultCluster")),
                "brokerName": maybe(NAMES),
                "brokerId": maybe(IDS),
                "brokerAddress": maybe(st.sampled_from(["127.0.0.1:10911", "127.0.0.1:10999", ""])),
            }
        ),
    ),
    st.tuples(
        st.just(contract.ALTER_SYNC_STATE_SET),
        st.fixed_dictionaries(
            {
                "brokerName": maybe(NAMES),
                "masterBrokerId": maybe(IDS),
                "masterEpoch": maybe(st.integers(-1, 3)),
                "newSyncStateSet": maybe(st.lists(IDS, max_size=4)),
                "syncStateSetEpoch": maybe(st.integers(-1, 4)),
            }
        ),
    ),
    st.tuples(
        st.just(contract.ELECT_MASTER),
        st.fixed_dictionaries(
            {
                "clusterName": maybe(st.just("DefaultCluster")),
                "brokerName": maybe(NAMES),
                "brokerId": maybe(IDS),
                "designateElect": maybe(st.booleans()),
            }
        ),
    ),
    st.tuples(
        st.just(contract.CLEAN_BROKER_DATA),
        st.fixed_dictionaries(
            {
                "clusterName": maybe(st.just("DefaultCluster")),
                "brokerName": maybe(NAMES),
                "brokerControllerIdsToClean": maybe(
                    st.sampled_from(["1", "3", "1;2", "x", ";;", "99999999999999999999"])
                ),
                "isCleanLivingBroker": maybe(st.booleans()),
            }
        ),
    ),
    st.tuples(
        st.just(contract.HEARTBEAT),
        st.fixed_dictionaries(
            {
                "clusterName": maybe(st.just("DefaultCluster")),
                "brokerName": maybe(NAMES),
                "brokerAddr": maybe(st.just("127.0.0.1:10911")),
                "brokerId": maybe(IDS),
                "heartbeatTimeoutMills": maybe(st.integers(-1, 5000)),
            }
        ),
    ),
)


@settings(max_examples=examples(300), deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.lists(WRITES, min_size=1, max_size=8), st.booleans())
def test_controller_writes_on_a_live_broker_set(
    services: SimpleNamespace, requests: list[Any], fresh: bool
) -> None:
    """Requests aimed at the seeded broker-set (ids, epochs and names that exist), with type junk mixed
    in: every answer is an envelope, and a refusal commits nothing."""
    c: ControllerUnderTest = services.controller
    if fresh:
        c.raft.manager.__init__()  # type: ignore[misc]
        seed_controller_state(c.raft.manager)
    with get_client(c.app) as client:
        for path, body in requests:
            before = c.state()
            response = client.post(path, json=body)
            answer = check_envelope(response.status_code, response.json(), f"POST {path} {body!r}")
            if answer["code"] not in (RC.SUCCESS, RC.CONTROLLER_MASTER_NOT_AVAILABLE):
                assert c.state() == before, (
                    f"POST {path} {body!r} refused ({answer['codeName']}) but changed state"
                )


TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)
BODIES = st.one_of(
    st.builds(lambda t: {"body": t}, st.one_of(TEXT, st.sampled_from(["", "\x00\x01\x02", "é" * 1000]))),
    st.builds(lambda t: {"bodyBase64": t}, st.sampled_from(["AAEC/w==", "not base64!", "", "////", "4pyT"])),
    st.just({}),
    st.just({"body": "a", "bodyBase64": "YQ=="}),
)
MESSAGE = st.builds(
    lambda fields, body, queue: {**fields, **body, **queue},
    st.fixed_dictionaries(
        {
            "topic": st.one_of(
                st.just("TopicA"), st.sampled_from(["Topic%B|c_-", "bad topic", "x" * 128, "../etc"])
            ),
            "keys": st.one_of(st.just("k1"), TEXT),
            "tags": st.one_of(st.just(""), TEXT),
            "properties": st.one_of(st.just({}), st.dictionaries(TEXT, TEXT, max_size=3)),
        }
    ),
    st.one_of(BODIES.filter(lambda b: len(b) == 1 and b.get("body", "x") != ""), BODIES),
    st.one_of(
        st.just({}), st.builds(lambda q: {"queueId": q}, st.one_of(st.integers(-1, 5), st.just(2**40)))
    ),
)


@settings(max_examples=examples(80), deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.lists(MESSAGE, min_size=1, max_size=3), st.booleans())
def test_broker_puts_round_trip_or_change_nothing(
    services: SimpleNamespace, messages: list[dict[str, Any]], batch: bool
) -> None:
    """Odd but well-formed messages: a refused put writes nothing; an accepted one reads back as sent."""
    b: BrokerUnderTest = services.broker
    with get_client(b.app) as client:
        if b.broker.role is not Role.MASTER:  # the schema fuzz may have demoted it: promote it again
            epoch = b.broker.replicas.state.master_epoch + 1
            client.post(
                bc.NOTIFY_ROLE_CHANGED,
                json={
                    "masterBrokerId": 1,
                    "masterAddress": b.broker.config.address,
                    "masterEpoch": epoch,
                    "syncStateSetEpoch": 1,
                    "syncStateSet": [1],
                },
            )
            assert b.broker.role is Role.MASTER
        before = b.broker.store.max_offset
        if batch:
            response = client.post(bc.SEND_MESSAGES, json={"messages": messages})
        else:
            response = client.post(bc.SEND_MESSAGE, json=messages[0])
            messages = messages[:1]
        body = check_envelope(response.status_code, response.json(), "send")
        if body["code"] != RC.SUCCESS:
            assert body["codeName"] in ("INVALID_PARAMETER", "MESSAGE_ILLEGAL"), body
            assert b.broker.store.max_offset == before, f"refused put ({body}) wrote to the log"
            return
        results = body["data"]["results"] if batch else [body["data"]]
        assert len(results) == len(messages)
        for sent, result in zip(messages, results):
            pulled = client.get(
                bc.PULL_MESSAGE,
                params={
                    "topic": sent["topic"],
                    "queueId": result["queueId"],
                    "queueOffset": result["queueOffset"],
                    "maxNums": 1,
                },
            )
            got = check_envelope(pulled.status_code, pulled.json(), "pull")["data"]["messages"]
            store = b.broker.store
            assert len(got) == 1, (
                f"{sent} was accepted ({result}) but cannot be read back: pull answered {pulled.json()}; "
                f"store max {store.max_offset} confirm {store.confirm_offset} dispatched {store.reput_offset}; "
                f"role {b.broker.replicas.state}; replication {b.broker.replication.status()}"
            )
            msg = got[0]
            assert msg["commitLogOffset"] == result["commitLogOffset"]
            if "body" in sent:
                assert msg["body"] == sent["body"]
            else:
                import base64

                raw = base64.b64decode(sent["bodyBase64"])
                assert (
                    (msg["body"] or "").encode() == raw
                    if msg["bodyBase64"] is None
                    else base64.b64decode(msg["bodyBase64"]) == raw
                )
            assert (msg["keys"], msg["tags"]) == (sent["keys"], sent["tags"])
            assert msg["properties"] == {
                k: v for k, v in sent["properties"].items() if k not in ("KEYS", "TAGS")
            }


#: Every number a heartbeat carries, with its range (RocketMQ's Java types; the timeout capped by the
#: controller's maxHeartbeatTimeoutMillis, set to 3 600 000 here).
HEARTBEAT_NUMBERS = {
    "brokerId": (1, 2**63 - 1),
    "epoch": (-1, 2**31 - 1),
    "maxOffset": (-1, 2**63 - 1),
    "confirmOffset": (-1, 2**63 - 1),
    "heartbeatTimeoutMills": (1, 3_600_000),
    "electionPriority": (-(2**31), 2**31 - 1),
}
ANY_NUMBER = st.one_of(
    st.integers(),
    st.integers(-(2**64), 2**64),
    st.sampled_from([0, -1, 2**31 - 1, 2**31, 2**63 - 1, 2**63, 10**18, -(2**31) - 1]),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.sampled_from("0123456789-. e"), max_size=6),
    st.none(),
)


def _in_range(field: str, value: Any) -> bool:
    low, high = HEARTBEAT_NUMBERS[field]
    return type(value) is int and low <= value <= high


@settings(max_examples=examples(300), deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.dictionaries(st.sampled_from(sorted(HEARTBEAT_NUMBERS)), ANY_NUMBER, min_size=1))
def test_heartbeat_numbers_are_strict_integers_in_range(services: SimpleNamespace, numbers: dict[str, Any]) -> None:
    """A heartbeat is taken only if every number is a JSON integer inside its type's range; otherwise
    INVALID_PARAMETER names a bad field and the live table is untouched. The table never holds a timeout
    above the cap (which also bounds the start-up grace)."""
    c: ControllerUnderTest = services.controller
    body = {"clusterName": "DefaultCluster", "brokerName": "fuzz-heartbeats", "brokerAddr": "127.0.0.1:1",
            "brokerId": 1, **numbers}
    before = sorted(c.manager.heartbeats.snapshot(), key=repr)
    with get_client(c.app) as client:
        response = client.post(contract.HEARTBEAT, json=body)
    answer = check_envelope(response.status_code, response.json(), f"heartbeat {body!r}")
    bad = [f for f, v in numbers.items() if not _in_range(f, v) and not (f == "brokerId" and v is None)]
    if bad and body["brokerId"] is None:  # refused either way: for the empty id (as RocketMQ) or a bad number
        assert answer["code"] in (RC.INVALID_PARAMETER, RC.CONTROLLER_INVALID_REQUEST), (body, answer)
        assert sorted(c.manager.heartbeats.snapshot(), key=repr) == before
    elif bad:
        assert answer["code"] == RC.INVALID_PARAMETER, (body, answer)
        assert any(f in answer["remark"] for f in bad), (bad, answer)
        assert sorted(c.manager.heartbeats.snapshot(), key=repr) == before
    elif body["brokerId"] is None:
        assert answer["code"] == RC.CONTROLLER_INVALID_REQUEST, (body, answer)
    else:
        assert answer["code"] == RC.SUCCESS, (body, answer)
    cap = c.manager.config.maxHeartbeatTimeoutMillis
    assert all(i.heartbeatTimeoutMs <= cap for i in c.manager.heartbeats.snapshot())
    assert c.manager.heartbeat_grace_ms() <= cap


REQUEST_IDS = st.one_of(
    st.text(st.sampled_from("abcXYZ019._:-"), min_size=1, max_size=128),
    st.text(max_size=200),
    st.sampled_from(["x" * 129, "x" * 100_000, "", " ", "a/b", "é"]),
    ANY_NUMBER,
)


@settings(max_examples=examples(150), deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(REQUEST_IDS)
def test_request_ids_are_bounded_before_they_reach_raft(services: SimpleNamespace, request_id: Any) -> None:
    """Only ids of 1-128 characters of [A-Za-z0-9._:-] get past validation, so nothing longer is
    replicated or remembered by the dedup table."""
    import re

    c: ControllerUnderTest = services.controller
    before = c.state()
    body = {"clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": 1,
            "brokerAddress": "127.0.0.1:10911", "requestId": request_id}
    with get_client(c.app) as client:
        response = client.post(contract.REGISTER_BROKER, json=body)
    answer = check_envelope(response.status_code, response.json(), f"registerBroker {request_id!r}")
    plain = isinstance(request_id, str) and re.fullmatch(r"[A-Za-z0-9._:-]{1,128}", request_id) is not None
    if not plain and request_id is not None:  # absent: the server makes one up
        assert answer["code"] == RC.INVALID_PARAMETER and "requestId" in answer["remark"], answer
        assert c.state() == before
    assert all(len(r) <= 128 for r in c.raft.manager.applied_requests)


def test_unknown_routes_and_methods_answer_with_the_envelope(services: SimpleNamespace) -> None:
    for app in (services.controller.app, services.broker.app):
        with get_client(app) as client:
            for method, path in (
                ("GET", "/nope"),
                ("DELETE", contract.METADATA),
                ("PUT", bc.SEND_MESSAGE),
                ("POST", contract.HEARTBEAT),
                ("POST", bc.SEND_MESSAGE),
            ):
                response = client.request(method, path, data=b"{not json")
                check_envelope(response.status_code, response.json(), f"{method} {path}")


def test_broker_refuses_an_epoch_the_replication_protocol_cannot_carry(services: SimpleNamespace) -> None:
    b: BrokerUnderTest = services.broker
    with get_client(b.app) as client:
        response = client.post(
            bc.NOTIFY_ROLE_CHANGED,
            json={
                "masterBrokerId": 1,
                "masterAddress": b.broker.config.address,
                "masterEpoch": 2**31,
                "syncStateSetEpoch": 1,
                "syncStateSet": [1],
            },
        )
    body = check_envelope(response.status_code, response.json(), "notifyRoleChanged")
    entries = b.broker.store.epochs.entries()
    # Whatever the answer, the epoch file must only hold epochs a MasterHandshake can encode.
    from services.broker.ha.frames import MasterHandshake

    MasterHandshake(
        b.broker.store.max_offset, entries[-1].epoch, tuple((e.epoch, e.start_offset) for e in entries)
    ).encode()
    assert body["code"] == RC.INVALID_PARAMETER
