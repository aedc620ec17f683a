"""A web page the operator opens cannot drive the cluster (hardening item 3): a controller with a two-replica
group, attacked as a browser would. A page on another site opening the liveness channel for the master's id
(and closing it, which used to fail the master over at once), posting an election, or reaching the node
through a DNS name rebound to it is refused 403 with the envelope naming the reason, and the master stays.
The console's own origin, brokers and mqctl (which send no Origin) keep working, and so does a name given in
httpAllowedHosts (a reverse proxy's)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mqctl.cluster import BrokerNode, ControllerCluster, make_broker
from services.broker import contract as bc
from services.controller import contract
from tests.integration.conftest import FAST_SCANS, poll
from tests.integration.test_broker import FAST_BROKER
from tests.support.strangers import channel_url, cross_site_channel

pytestmark = pytest.mark.integration
GROUP = "broker-a"
PROXY_NAME = "mq.example.net"


@pytest.fixture
def group(tmp_path: Path) -> Iterator[tuple[ControllerCluster, list[BrokerNode]]]:
    cluster = ControllerCluster(tmp_path / "c", size=1, extra={**FAST_SCANS, "httpAllowedHosts": PROXY_NAME})
    cluster.configure()
    brokers = [make_broker(tmp_path, GROUP, i, "", **FAST_BROKER) for i in range(2)]
    try:
        cluster.start()
        cluster.leader(timeout=60)
        for broker in brokers:
            broker.controller_addr = cluster.addresses
            broker.start()
        yield cluster, brokers
    finally:
        for broker in brokers:
            broker.kill()
        cluster.kill_all()


def replica_info(address: str) -> dict[str, Any]:
    answer = httpx.get(f"http://{address}{contract.REPLICA_INFO}", params={"brokerName": GROUP}, timeout=5).json()
    data: dict[str, Any] = answer["data"] or {}
    return data


def refused(response: httpx.Response, reason: str) -> bool:
    body = response.json()
    return response.status_code == 403 and body["codeName"] == "NO_PERMISSION" and reason in body["remark"]


def test_a_foreign_page_cannot_fail_the_master_over(group: tuple[ControllerCluster, list[BrokerNode]]) -> None:
    cluster, brokers = group
    address = cluster.nodes[0].address
    before = poll(lambda: (i := replica_info(address)).get("masterBrokerId") and len(i["syncStateSet"]) == 2 and i,
                  60, "a master and its slave in sync")
    master = before["masterBrokerId"]
    url = channel_url(address, "DefaultCluster", GROUP, master)
    for origin in ("http://attacker.example", "null", f"http://{address.replace('127.0.0.1', 'localhost')}",
                   "http://127.0.0.1:1"):
        status, body = cross_site_channel(url, origin)
        assert status == 403, f"{origin}: the channel answered {status}"
        assert body is not None and body["codeName"] == "NO_PERMISSION" and origin in body["remark"], body

    port = address.rpartition(":")[2]
    rebound = httpx.get(f"http://{address}{contract.METADATA}", headers={"Host": f"rebound.attacker.example:{port}"})
    assert refused(rebound, "Host"), rebound.text
    elect = {"clusterName": "DefaultCluster", "brokerName": GROUP, "brokerId": 3 - master, "designateElect": True}
    forged = httpx.post(f"http://{address}{contract.ELECT_MASTER}", json=elect,
                        headers={"Origin": "http://attacker.example"})
    assert refused(forged, "Origin"), forged.text
    send = httpx.post(f"http://{brokers[0].address}{bc.SEND_MESSAGE}", json={"topic": "T", "body": "x"},
                      headers={"Origin": "http://attacker.example"})
    assert refused(send, "Origin"), send.text

    # The console from its own origin, under localhost, and behind the proxy name; no Origin at all (mqctl).
    own = httpx.post(f"http://{address}/console/api/electMaster", json={**elect, "brokerId": master},
                     headers={"Origin": f"http://{address}"})
    assert own.status_code == 200 and own.json()["codeName"] != "NO_PERMISSION", own.text
    local = httpx.get(f"http://{address}/console", headers={"Host": f"localhost:{port}"})
    assert local.status_code == 200 and "<html" in local.text.lower()
    proxied = httpx.post(f"http://{address}/console/api/electMaster", json={**elect, "brokerId": master},
                         headers={"Host": PROXY_NAME, "Origin": f"https://{PROXY_NAME}"})
    assert proxied.status_code == 200 and proxied.json()["codeName"] != "NO_PERMISSION", proxied.text
    assert httpx.get(f"http://{address}{contract.METADATA}").json()["code"] == 0

    after = replica_info(address)
    assert (after["masterBrokerId"], after["masterEpoch"]) == (master, before["masterEpoch"]), after
    log = (cluster.nodes[0].store_dir / "logs" / "controller.log").read_text()
    assert "liveness channel of broker" not in log
    assert "refused" in log and "attacker.example" in log
