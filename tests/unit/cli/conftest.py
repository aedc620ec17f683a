"""A fake controller group and broker-set behind an ``httpx.MockTransport``, and a CliRunner helper.

Layout of the fake cluster (no network is ever used):

* 127.0.0.1:9878  controller n0, the leader
* 127.0.0.1:9868  controller n1, a follower: leader-only routes answer 2007 CONTROLLER_NOT_LEADER with
  ``data.controllerLeaderAddress`` (``FakeCluster.leader_hint``; set it to None for "no leader known")
* 127.0.0.1:9858  controller n2, listed in the peers but down (connection refused)
* 127.0.0.1:10911 broker-a id 1, MASTER
* 127.0.0.1:10921 broker-a id 2, SLAVE (refuses writes with SERVICE_NOT_AVAILABLE + masterAddress)
* 127.0.0.1:10931 broker-b id 1, down
* 127.0.0.1:10951 broker-c id 1 (cluster OtherCluster), never contacted by the tests

Any address not listed (or listed in ``FakeCluster.down``) raises ``httpx.ConnectError``. A test can
replace one route with ``FakeCluster.override(address, path, answer)``: the answer is a data envelope
dict, an ``httpx.Response``, an exception instance (raised), or a callable ``(request, n) -> any of
those`` where ``n`` counts the calls of that route (0-based).
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result
from pydantic import BaseModel

from mqctl.app import App
from mqctl.cli import cli
from services.broker import contract as bc
from services.common.codes import code_name
from services.controller import contract
from services.controller.config import BLACK_LIST, RUNTIME_UPDATABLE

LEADER = "127.0.0.1:9878"
FOLLOWER = "127.0.0.1:9868"
DEAD_CONTROLLER = "127.0.0.1:9858"
MASTER = "127.0.0.1:10911"
SLAVE = "127.0.0.1:10921"
DEAD_BROKER = "127.0.0.1:10931"

PEERS = ["n0:127.0.0.1:9878", "n1:127.0.0.1:9868", "n2:127.0.0.1:9858"]

UPDATABLE = RUNTIME_UPDATABLE  # the controller's own lists: the fake cannot drift from them


def envelope(code: int = 0, data: Any = None, remark: str = "") -> dict[str, Any]:
    return {"code": code, "codeName": code_name(code), "remark": remark, "data": data}


def served(model: type[BaseModel], data: Any) -> Any:
    """``data`` as the fake serves it: only after it passed the contract's model of that answer (what the
    real services are held to as well), so the fake cannot drift from them."""
    model.model_validate(data)
    return data


def _replica(name: str, broker_id: int, address: str, alive: bool) -> dict[str, Any]:
    return {"brokerName": name, "brokerId": broker_id, "brokerAddress": address, "alive": alive}


def initial_sync_state() -> dict[str, dict[str, Any]]:
    return {
        "broker-a": {"clusterName": "DefaultCluster", "brokerName": "broker-a", "masterBrokerId": 1,
                     "masterAddress": MASTER, "masterEpoch": 3, "syncStateSetEpoch": 5,
                     "inSyncReplicas": [_replica("broker-a", 1, MASTER, True)],
                     "notInSyncReplicas": [_replica("broker-a", 2, SLAVE, True)]},
        "broker-b": {"clusterName": "DefaultCluster", "brokerName": "broker-b", "masterBrokerId": None,
                     "masterAddress": None, "masterEpoch": 2, "syncStateSetEpoch": 2,
                     "inSyncReplicas": [_replica("broker-b", 1, DEAD_BROKER, False)],
                     "notInSyncReplicas": []},
        "broker-c": {"clusterName": "OtherCluster", "brokerName": "broker-c", "masterBrokerId": 1,
                     "masterAddress": "127.0.0.1:10951", "masterEpoch": 1, "syncStateSetEpoch": 1,
                     "inSyncReplicas": [_replica("broker-c", 1, "127.0.0.1:10951", True)],
                     "notInSyncReplicas": []},
    }


def controller_config(self_id: str, unclean: bool) -> dict[str, Any]:
    return {"controllerDLegerGroup": "DefaultControllerGroup",
            "controllerDLegerPeers": "n0-127.0.0.1:9878;n1-127.0.0.1:9868;n2-127.0.0.1:9858",
            "controllerDLegerSelfId": self_id,
            "controllerStorePath": f"/var/lib/mqctl/{self_id}",
            "configStorePath": "",
            "enableElectUncleanMaster": unclean,
            "scanNotActiveBrokerInterval": 5000,
            "logLevel": "INFO"}


EPOCH_CACHE = {
    MASTER: {"clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": 1, "brokerAddress": MASTER,
             "role": "MASTER", "masterEpoch": 3,
             "epochEntries": [{"epoch": 1, "startOffset": 0, "endOffset": 1000},
                              {"epoch": 3, "startOffset": 1000, "endOffset": 2500}],
             "maxOffset": 2500, "confirmOffset": 2500},
    SLAVE: {"clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": 2, "brokerAddress": SLAVE,
            "role": "SLAVE", "masterEpoch": 3,
            "epochEntries": [{"epoch": 1, "startOffset": 0, "endOffset": 1000},
                             {"epoch": 3, "startOffset": 1000, "endOffset": 2400}],
            "maxOffset": 2400, "confirmOffset": 2400},
}

HA_STATUS = {
    MASTER: {"clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": 1, "brokerAddr": MASTER,
             "role": "MASTER", "masterEpoch": 3, "maxOffset": 2500, "confirmOffset": 2400, "flushedOffset": 2500,
             "syncStateSet": [1], "proposedSyncStateSet": None, "inSyncSlaveNums": 0,
             "slaves": [{"slaveId": 2, "slaveAddress": "127.0.0.1:53422", "ackOffset": 2400, "lag": 100,
                         "inSync": False, "asyncLearner": False, "lastCaughtUpAgoMs": 1500,
                         "lastCaughtUpTimestamp": 1700000000000, "transferOffset": 2500,
                         "transferSpeedKBps": 12.5, "transferFromWhere": 0}]},
    SLAVE: {"clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": 2, "brokerAddr": SLAVE,
            "role": "SLAVE", "masterEpoch": 3, "maxOffset": 2400, "confirmOffset": 2400, "flushedOffset": 2400,
            "masterAddress": MASTER, "masterHaAddress": "127.0.0.1:10912", "state": "TRANSFER",
            "lastReadTimestamp": 1700000000123, "lastWriteTimestamp": 1700000000456, "error": None,
            "transferSpeedKBps": 3.5, "masterFlushOffset": 2200},
}


def stored_message(queue_id: int, queue_offset: int, commit_offset: int, body: str, keys: str = "",
                   tags: str = "") -> dict[str, Any]:
    return {"msgId": f"7F00000100002A9F{commit_offset:016X}", "topic": "TopicTest", "queueId": queue_id,
            "queueOffset": queue_offset, "commitLogOffset": commit_offset, "body": body, "bodyBase64": None,
            "keys": keys, "tags": tags, "properties": {}, "storeTimestamp": 1700000000000 + commit_offset,
            "storeSize": 100}


def initial_messages() -> dict[tuple[str, int], list[dict[str, Any]]]:
    return {("TopicTest", 0): [stored_message(0, 0, 0, "hello", "k1", "tagA"),
                               stored_message(0, 1, 200, "world")],
            ("TopicTest", 1): [stored_message(1, 0, 100, "q1-first", "k2")]}


@dataclass
class Recorded:
    address: str
    method: str
    path: str
    params: dict[str, list[str]]
    body: Any
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)


Answer = Any  # dict (envelope), httpx.Response, BaseException, or a callable producing one of these


@dataclass
class FakeCluster:
    leader_hint: str | None = LEADER
    down: set[str] = field(default_factory=set)
    sync_state: dict[str, dict[str, Any]] = field(default_factory=initial_sync_state)
    configs: dict[str, dict[str, Any]] = field(default_factory=lambda: {
        LEADER: controller_config("n0", False), FOLLOWER: controller_config("n1", True)})
    epoch_cache: dict[str, dict[str, Any]] = field(default_factory=lambda: copy.deepcopy(EPOCH_CACHE))
    ha_status: dict[str, dict[str, Any]] = field(default_factory=lambda: copy.deepcopy(HA_STATUS))
    messages: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=initial_messages)
    requests: list[Recorded] = field(default_factory=list)
    overrides: dict[tuple[str, str], Answer] = field(default_factory=dict)
    calls: dict[tuple[str, str], int] = field(default_factory=dict)
    sent: int = 0

    # ------------------------------------------------------------------ test helpers
    def override(self, address: str, path: str, answer: Answer) -> None:
        self.overrides[(address, path)] = answer

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def hits(self, address: str | None = None, path: str | None = None) -> list[Recorded]:
        return [r for r in self.requests
                if (address is None or r.address == address) and (path is None or r.path == path)]

    # ------------------------------------------------------------------ dispatch
    def handle(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        address = f"[{host}]:{request.url.port}" if ":" in host else f"{host}:{request.url.port}"
        path = request.url.path
        params = {k: request.url.params.get_list(k) for k in request.url.params}
        body = json.loads(request.content) if request.content else None
        self.requests.append(Recorded(address, request.method, path, params, body, str(request.url),
                                      dict(request.headers)))
        key = (address, path)
        n = self.calls.get(key, 0)
        self.calls[key] = n + 1
        if key in self.overrides:
            answer = self.overrides[key]
            if callable(answer) and not isinstance(answer, BaseException):
                answer = answer(request, n)
            return self._response(request, answer)
        if address in self.down:
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        if address in (LEADER, FOLLOWER):
            return self._response(request, self._controller(address, request.method, path, params, body))
        if address in (MASTER, SLAVE):
            return self._response(request, self._broker(address, request.method, path, params, body))
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    @staticmethod
    def _response(request: httpx.Request, answer: Answer) -> httpx.Response:
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, httpx.Response):
            return answer
        status = {29: 400, 1: 500, 3: 404}.get(answer["code"], 200)
        return httpx.Response(status, json=answer)

    # ------------------------------------------------------------------ controllers
    def _controller(self, address: str, method: str, path: str, params: dict[str, list[str]],
                    body: Any) -> dict[str, Any]:
        leader = address == LEADER
        route = (method, path)
        if route == ("GET", contract.METADATA):
            self_id = "n0" if leader else "n1"
            return envelope(0, served(contract.Metadata, {
                "group": "DefaultControllerGroup", "controllerLeaderId": "n0", "controllerLeaderAddress": LEADER,
                "isLeader": leader, "selfId": self_id, "selfAddress": address, "peers": list(PEERS),
                "raft": {"state": "LEADER" if leader else "FOLLOWER", "term": 4, "commitIndex": 17,
                         "lastApplied": 17, "logLength": 17, "leader": "127.0.0.1:9879", "hasQuorum": True}}))
        if route == ("GET", contract.CONFIG):
            return envelope(0, served(contract.ControllerConfig, {"config": dict(self.configs[address])}))
        if route == ("POST", contract.CONFIG):
            return self._update_config(address, body)
        leader_only = {("GET", contract.SYNC_STATE_DATA), ("POST", contract.ELECT_MASTER),
                       ("POST", contract.CLEAN_BROKER_DATA)}
        if route in leader_only and not leader:
            hint = self.leader_hint
            return envelope(2007, {"controllerLeaderId": "n0" if hint else None, "controllerLeaderAddress": hint},
                            "The controller is not in leader state")
        if route == ("GET", contract.SYNC_STATE_DATA):
            names = params.get("brokerName") or [n for n, bs in self.sync_state.items()
                                                 if bs["clusterName"] == (params.get("clusterName") or [""])[0]]
            return envelope(0, served(contract.SyncStateData, {"brokers": [
                copy.deepcopy(self.sync_state[n]) for n in names if n in self.sync_state]}))
        if route == ("POST", contract.ELECT_MASTER):
            return self._elect(body)
        if route == ("POST", contract.CLEAN_BROKER_DATA):
            return self._clean(body)
        return envelope(3, None, f"no such route: {method} {path}")

    def _update_config(self, address: str, body: dict[str, Any]) -> dict[str, Any]:
        for key in body:
            if key in BLACK_LIST:
                return envelope(16, None, "Can not update config in black list.")
            if key not in UPDATABLE:
                return envelope(29, None, f"unknown controller property {key!r}")
        self.configs[address].update(body)
        return envelope(0, {"config": dict(self.configs[address])})

    def _elect(self, body: dict[str, Any]) -> dict[str, Any]:
        bs = self.sync_state.get(body["brokerName"])
        if bs is None:
            return envelope(2010, None, "Broker hasn't been registered")
        replicas = sorted(bs["inSyncReplicas"] + bs["notInSyncReplicas"], key=lambda r: r["brokerId"])
        members = [{"brokerId": r["brokerId"], "brokerAddress": r["brokerAddress"]} for r in replicas]
        view = {"clusterName": bs["clusterName"], "brokerName": bs["brokerName"],
                "masterBrokerId": bs["masterBrokerId"], "masterAddress": bs["masterAddress"],
                "masterEpoch": bs["masterEpoch"], "syncStateSetEpoch": bs["syncStateSetEpoch"],
                "syncStateSet": [r["brokerId"] for r in bs["inSyncReplicas"]], "brokers": members}
        wanted = body["brokerId"]
        if wanted == bs["masterBrokerId"]:
            return envelope(2011, served(contract.MasterView, view), f"The old master {wanted} is still alive, not need to elect new master "
                                        f"for broker {bs['brokerName']}")
        target = next((r for r in replicas if r["brokerId"] == wanted and r["alive"]), None)
        if target is None:
            return envelope(2012, {**view, "masterBrokerId": None, "masterAddress": None, "masterEpoch": None,
                                   "syncStateSetEpoch": None, "brokers": []},
                            f"Failed to elect a new master for broker {bs['brokerName']}")
        bs["masterBrokerId"], bs["masterAddress"] = wanted, target["brokerAddress"]
        bs["masterEpoch"] += 1
        bs["syncStateSetEpoch"] += 1
        bs["inSyncReplicas"] = [target]
        bs["notInSyncReplicas"] = [r for r in replicas if r is not target]
        return envelope(0, served(contract.MasterView, {
            **view, "masterBrokerId": wanted, "masterAddress": target["brokerAddress"],
            "masterEpoch": bs["masterEpoch"], "syncStateSetEpoch": bs["syncStateSetEpoch"],
            "syncStateSet": [wanted], "electReason": "ADMIN"}))

    def _clean(self, body: dict[str, Any]) -> dict[str, Any]:
        name = body["brokerName"]
        bs = self.sync_state.get(name)
        if bs is None:
            return envelope(2009, None, f"Broker {name} is not existed,clean broker data failure.")
        if not body.get("brokerControllerIdsToClean") and bs["masterBrokerId"] is not None \
                and not body.get("isCleanLivingBroker"):
            return envelope(2009, None, f"Broker {name} is still alive, clean up failure")
        del self.sync_state[name]
        return envelope(0, None)

    # ------------------------------------------------------------------ brokers
    def _broker(self, address: str, method: str, path: str, params: dict[str, list[str]],
                body: Any) -> dict[str, Any]:
        route = (method, path)
        if route == ("GET", bc.EPOCH_CACHE):
            return envelope(0, served(bc.EpochCache, copy.deepcopy(self.epoch_cache[address])))
        if route == ("GET", bc.HA_STATUS):
            return envelope(0, served(bc.HaStatus, copy.deepcopy(self.ha_status[address])))
        if route == ("POST", bc.SEND_MESSAGE):
            if address != MASTER:
                return envelope(14, served(bc.SendResult, {
                    "status": "SERVICE_NOT_AVAILABLE", "msgId": None, "queueId": None, "queueOffset": None,
                    "commitLogOffset": None, "masterAddress": MASTER}),
                    f"this broker is a slave; write to the master at {MASTER}")
            offset = 2500 + 100 * self.sent
            queue_id = body.get("queueId") if body.get("queueId") is not None else self.sent % 2
            result = {"status": "PUT_OK", "msgId": f"7F00000100002A9F{offset:016X}", "queueId": queue_id,
                      "queueOffset": 7 + self.sent, "commitLogOffset": offset}
            self.sent += 1
            return envelope(0, served(bc.SendResult, result))
        if route == ("GET", bc.TOPICS):
            topics = sorted({t for t, _ in self.messages})
            return envelope(0, served(bc.Topics, {"topics": [{"topic": t, "queues": [
                {"queueId": q, "minOffset": 0, "maxOffset": len(self.messages.get((t, q), [])),
                 "writtenOffset": len(self.messages.get((t, q), []))} for q in range(2)]} for t in topics]}))
        if route == ("GET", bc.PULL_MESSAGE):
            topic = params["topic"][0]
            qid, offset, max_nums = (int(params[k][0]) for k in ("queueId", "queueOffset", "maxNums"))
            queue = self.messages.get((topic, qid), [])
            batch = queue[offset:offset + max_nums]
            status = "FOUND" if batch else "NO_NEW_MSG"
            return envelope(0, served(bc.PullResult, {
                "status": status, "nextBeginOffset": offset + len(batch), "minOffset": 0, "maxOffset": len(queue),
                "messages": copy.deepcopy(batch)}))
        return envelope(3, None, f"no such route: {method} {path}")


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> None:
    """mqadmin prints times in the local zone: the expected texts are written for UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    cluster = FakeCluster()
    monkeypatch.setattr(App, "transport", cluster.transport())
    return cluster


#: The environment every invocation runs with: fixed width, no colour, no inherited mqctl settings.
BASE_ENV: dict[str, str | None] = {"COLUMNS": "100", "LINES": "50", "NO_COLOR": "1", "FORCE_COLOR": None,
                                   "TTY_COMPATIBLE": None, "TTY_INTERACTIVE": None,
                                   "MQCTL_CONTROLLER_ADDR": None, "MQCTL_DEBUG": None}

Invoke = Callable[..., Result]


@pytest.fixture
def mqctl(fake: FakeCluster) -> Invoke:
    """``mqctl("getSyncStateSet", "-b", "broker-a", env={...}, timeout="0.5")`` → click Result.

    ``--timeout 0.5`` is prepended unless ``timeout=None``. Exceptions other than SystemExit must not
    escape the CLI (its root group maps everything to an exit code)."""

    def run(*args: str, env: dict[str, str | None] | None = None, timeout: str | None = "0.5") -> Result:
        argv = (["--timeout", timeout] if timeout else []) + list(args)
        result = CliRunner().invoke(cli, argv, env={**BASE_ENV, **(env or {})}, prog_name="mqctl")
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            f"exception escaped the CLI: {result.exception!r}\n{result.stderr}")
        return result

    return run


def assert_one_line_error(result: Result, exit_code: int, *fragments: str) -> str:
    """The command exited with ``exit_code`` and wrote exactly one ``Error: ...`` line to stderr that
    contains every fragment, with no traceback. Returns that line."""
    assert result.exit_code == exit_code, (result.exit_code, result.stdout, result.stderr)
    err = result.stderr
    assert "Traceback" not in err
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1, err
    assert lines[0].startswith("Error: "), err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, err)
    return lines[0]
