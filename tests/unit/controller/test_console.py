"""The console's server side without a network: the page and its files, the snapshot one node builds from its
own state machine and the answers of its peers and of the groups' masters (an httpx mock transport), the
report link, and what is refused."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.broker import contract as bc
from services.controller import console
from services.controller import contract as c
from services.controller.config import ControllerConfig
from services.controller.controller import ControllerManager
from services.controller.state_machine import ReplicasInfoManager
from spark_reports.render import anchor
from tests.unit.controller.helpers import mock_meta_data
from tests.unit.controller.test_api_limits import Client

PEERS = "n0-127.0.0.1:9878;n1-127.0.0.1:9880;n2-127.0.0.1:9882"


class Raft:
    """The RaftNode surface the console reads: a real state machine, and a status."""

    def __init__(self, machine: ReplicasInfoManager) -> None:
        self.machine = machine

    def read(self, fn: Any) -> Any:
        return fn(self.machine)

    def is_leader(self) -> bool:
        return True

    def leader_address(self) -> str | None:
        return "127.0.0.1:9879"

    def journal_fault(self) -> str | None:
        return None

    def status(self) -> dict[str, Any]:
        return {"state": "LEADER", "term": 3, "commitIndex": 40, "lastApplied": 40}


def manager(tmp_path: Path, **config: Any) -> ControllerManager:
    machine = ReplicasInfoManager()
    mock_meta_data(machine)
    m = ControllerManager(ControllerConfig(controllerDLegerPeers=PEERS, controllerStorePath=str(tmp_path),
                                           controllerRaftPassword="x" * 20, **config))
    m.attach_raft(Raft(machine))  # type: ignore[arg-type]
    return m


def peers_and_brokers(request: httpx.Request) -> httpx.Response:
    if request.url.path == c.METADATA:
        if request.url.port == 9882:
            return httpx.Response(503)  # one peer does not answer
        return httpx.Response(200, json={"code": 0, "data": {
            "isLeader": False, "raft": {"state": "FOLLOWER", "term": 3, "commitIndex": 40, "lastApplied": 39}}})
    if request.url.path == bc.HA_STATUS:
        return httpx.Response(200, json={"code": 0, "data": {
            "role": "MASTER", "confirmOffset": 4096, "maxOffset": 5000,
            "slaves": [{"slaveId": 2, "ackOffset": 4096, "lag": 904}]}})
    return httpx.Response(404)


def snapshot(m: ControllerManager) -> dict[str, Any]:
    async def build() -> dict[str, Any]:
        async with httpx.AsyncClient(transport=httpx.MockTransport(peers_and_brokers)) as http:
            return await console.ConsoleFeed(m).build(http)
    return asyncio.run(build())


def test_a_snapshot_is_this_nodes_state_its_peers_and_each_masters_replication(tmp_path: Path) -> None:
    m = manager(tmp_path)
    state = snapshot(m)
    assert state["node"]["id"] == "n0" and state["tokenRequired"] is False
    rows = {r["id"]: r for r in state["controllers"]}
    assert rows["n0"]["thisNode"] and rows["n0"]["state"] == "LEADER"
    assert rows["n1"]["reachable"] and rows["n1"]["lastApplied"] == 39
    assert rows["n2"]["reachable"] is False and rows["n2"]["state"] is None
    machine = m.raft.read(lambda s: s)  # type: ignore[union-attr]
    groups = machine.get_sync_state_data(list(machine.broker_sets), m.alive).data["brokers"]
    assert [g["brokerName"] for g in state["groups"]] == [g["brokerName"] for g in groups]
    group = state["groups"][0]
    assert group["confirmOffset"] == 4096 and group["report"] is None
    slave = next(r for r in group["replicas"] if r["brokerId"] == 2)
    assert slave["ackOffset"] == 4096 and slave["lag"] == 904


def test_groups_link_to_their_timeline_in_the_report(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    m = manager(tmp_path, consoleReportDir=str(reports))
    group = snapshot(m)["groups"][0]
    assert group["report"] is None  # nothing written yet
    mark = anchor(group["clusterName"], group["brokerName"])
    assert mark == console.report_anchor(group["clusterName"], group["brokerName"])  # one rule, two places
    (reports / "report.html").write_text(f'<h3 id="{mark}">x</h3>')
    assert snapshot(m)["groups"][0]["report"] == f"{console.REPORT}#{mark}"
    assert console.report_anchor("c 1", "b/<x>") == "g-c_1_b__x_"


@pytest.fixture
def app(tmp_path: Path) -> Client:
    from services.controller.api import create_app
    return Client(create_app(manager(tmp_path)))


def test_the_page_its_files_and_nothing_else_are_served(app: Client) -> None:
    page = app.get(console.PAGE)
    assert page.status_code == 200 and "/console/static/console.js" in page.text
    assert page.headers["cache-control"] == "no-store"
    script = app.get(f"{console.PAGE}/static/console.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    assert "EventSource" in script.text and "innerHTML" not in script.text  # server text is never HTML
    for name in ("index.html", "..%2F..%2Fconfig.py", "missing.js"):
        assert app.get(f"{console.PAGE}/static/{name}").status_code == 404
    report = app.get(console.REPORT)
    assert report.status_code == 500 and "consoleReportDir" in report.json()["remark"]


def test_admin_actions_are_validated_before_anything_is_sent(app: Client) -> None:
    answer = app.post(console.ELECT, json={"brokerName": "", "brokerId": 1})
    assert answer.status_code == 400 and answer.json()["codeName"] == "INVALID_PARAMETER"
    answer = app.post(console.CLEAN, json={"clusterName": "c", "brokerName": "b", "isCleanLivingBroker": "yes"})
    assert answer.status_code == 400


#: (answer, whether it is also unusable as a peer's metadata: the same answer comes from peers and masters)
HOSTILE = [
    (httpx.Response(200, content=b"\x00\xff not json"), True),  # garbage
    (httpx.Response(200, content=b'{"code": 0, "data": {"x": "' + b"a" * (33 * 2**20) + b'"}}'), True),  # too big
    (httpx.Response(200, json={"code": 0, "data": {"confirmOffset": "4096", "slaves": [{"slaveId": "2"}]}}), False),
    (httpx.Response(200, json={"code": 0, "data": {"maxOffset": 2**70}}), False),  # beyond a Java long
    (httpx.Response(200, json={"code": 0, "data": {"slaves": [{"slaveId": i} for i in range(1001)]}}), False),
    (httpx.Response(200, json={"code": 0, "data": {"isLeader": "yes", "raft": {"state": "L" * 1000}}}), True),
    (httpx.Response(200, json={"code": 1, "data": {"confirmOffset": 7}}), True),  # a refusal is not a status
]


@pytest.mark.parametrize(("answer", "peer_refused"), HOSTILE,
                         ids=["garbage", "huge", "strings", "overflow", "too-many", "forged", "refused"])
def test_a_hostile_peer_or_master_is_shown_as_unknown(tmp_path: Path, answer: httpx.Response,
                                                       peer_refused: bool) -> None:
    m = manager(tmp_path)

    async def build() -> dict[str, Any]:
        async with httpx.AsyncClient(transport=httpx.MockTransport(lambda _: answer)) as http:
            return await console.ConsoleFeed(m).build(http)
    state = asyncio.run(build())
    if peer_refused:
        assert [r["reachable"] for r in state["controllers"]] == [True, False, False]
    for group in state["groups"]:
        assert group["confirmOffset"] is None and group["maxOffset"] is None
        assert all(r["ackOffset"] is None and r["lag"] is None for r in group["replicas"])
