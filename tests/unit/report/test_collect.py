"""Live collection against a fake controller and brokers behind an httpx.MockTransport (no network)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.console import Console

from mqctl.collect import EVENT_FIELDS, collect
from services.broker import contract as bc
from services.common.broker_client import BrokerClient
from services.common.controller_client import ControllerClient
from services.common.errors import UsageError
from services.controller import contract

CONTROLLER = "127.0.0.1:9878"
BROKERS = {1: "127.0.0.1:10911", 2: "127.0.0.1:10921", 3: "127.0.0.1:10931"}  # broker 3 is down


def record(index: int, cluster: str = "DefaultCluster", group: str = "broker-a") -> dict[str, Any]:
    body: dict[str, Any] = {name: None for name in EVENT_FIELDS if name != "brokerIds"}
    body.update(index=index, timestamp=1_000 + index, eventType="ALTER_SYNC_STATE_SET", clusterName=cluster,
                brokerName=group, syncStateSet=[1, 2], extraField="dropped")
    return body


HISTORY = [record(i) for i in range(7)] + [record(7, cluster="OtherCluster", group="broker-z")]


def envelope(data: Any, code: int = 0) -> httpx.Response:
    return httpx.Response(200, json={"code": code, "codeName": "SUCCESS" if code == 0 else "X", "remark": "",
                                     "data": data})


def handler(request: httpx.Request) -> httpx.Response:
    address, path = f"{request.url.host}:{request.url.port}", request.url.path
    if address == CONTROLLER and path == contract.EVENTS:
        start, limit = int(request.url.params["fromIndex"]), int(request.url.params["limit"])
        page = HISTORY[start:start + limit]
        return envelope({"events": page, "nextIndex": page[-1]["index"] + 1 if page else start,
                         "latestIndex": len(HISTORY) - 1})
    if address == CONTROLLER and path == contract.SYNC_STATE_DATA:
        if request.url.params.get("clusterName") != "DefaultCluster":
            return envelope({"brokers": []})
        replica = [{"brokerName": "broker-a", "brokerId": i, "brokerAddress": a, "alive": i != 3}
                   for i, a in BROKERS.items()]
        return envelope({"brokers": [{"clusterName": "DefaultCluster", "brokerName": "broker-a",
                                      "masterBrokerId": 1, "masterAddress": BROKERS[1], "masterEpoch": 1,
                                      "syncStateSetEpoch": 2,
                                      "inSyncReplicas": replica[:2], "notInSyncReplicas": replica[2:]}]})
    for broker_id, broker_address in BROKERS.items():
        if address == broker_address and broker_id != 3 and path == bc.EPOCH_CACHE:
            entries = [bc.EpochRow(epoch=1, startOffset=0, endOffset=100 * broker_id)]
            return envelope(bc.EpochCache(brokerId=broker_id, role="SLAVE", epochEntries=entries,
                                          maxOffset=100 * broker_id).model_dump())
    raise httpx.ConnectError("connection refused", request=request)


def run(tmp_path: Path, cluster: str | None) -> tuple[Any, list[dict[str, Any]], list[dict[str, Any]]]:
    transport = httpx.MockTransport(handler)
    with ControllerClient([CONTROLLER], timeout=2, transport=transport) as controller, \
            BrokerClient(2, transport=transport) as brokers:
        result = collect(controller, brokers, cluster, tmp_path, Console(file=io.StringIO()), page_size=3)
    events = [json.loads(line) for line in (tmp_path / "events" / "events.jsonl").read_text().splitlines()]
    epochs = [json.loads(line) for line in (tmp_path / "epochs" / "epochs.jsonl").read_text().splitlines()]
    return result, events, epochs


def test_collects_every_page_and_every_reachable_broker(tmp_path: Path) -> None:
    result, events, epochs = run(tmp_path, None)
    assert [e["index"] for e in events] == list(range(8))
    assert list(events[0]) == list(EVENT_FIELDS)  # exactly the dataset's fields, unknown ones dropped
    assert result.clusters == ["DefaultCluster", "OtherCluster"]
    assert epochs == [
        {"clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": i, "brokerAddress": BROKERS[i],
         "epoch": 1, "startOffset": 0, "endOffset": 100 * i} for i in (1, 2)]
    assert (result.events, result.epoch_entries, result.brokers) == (8, 2, 2)
    assert len(result.unreachable) == 1 and result.unreachable[0].startswith("broker-a broker 3 at 127.0.0.1:10931")
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["events"] == 8 and manifest["brokersUnreachable"] == result.unreachable


def test_one_cluster(tmp_path: Path) -> None:
    result, events, _ = run(tmp_path, "OtherCluster")
    assert [e["index"] for e in events] == [7] and result.brokers == 0


def test_unknown_cluster_without_events(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cluster Nowhere has no events and no broker group in the controller"):
        run(tmp_path, "Nowhere")
