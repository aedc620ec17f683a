"""Collecting an epoch-history dataset from a running cluster, for ``mqctl report``.

Events come from the controller leader's ``/v1/controller/events`` (paged, oldest first); epochs from
every broker the controller knows (``/v1/broker/epochCache``, one row per epoch entry). A broker that
does not answer — typically a master that just died — is reported and skipped: the dataset is still
useful without it. Writes ``events/events.jsonl``, ``epochs/epochs.jsonl`` and ``manifest.json``.

A RocketMQ controller (remoting only) keeps no event log: from such a cluster the dataset holds the
brokers' epochs alone (the cluster must be named), found through the controller or a name server.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from services.common.broker_client import BrokerClient, broker_sets, replica_addresses
from services.common.controller_client import ControllerClient
from services.common.errors import MqctlError, UsageError
from services.common.namesrv_client import NameServerClient
from services.common.remoting_admin import NotOverRemoting

EVENT_FIELDS = ("clusterName", "brokerName", "index", "eventType", "timestamp", "elected", "electReason",
                "masterBrokerId", "masterEpoch", "syncStateSet", "syncStateSetEpoch", "brokerId", "brokerAddress",
                "brokerIds")


@dataclass
class CollectResult:
    directory: Path
    events: int = 0
    epoch_entries: int = 0
    brokers: int = 0
    clusters: list[str] = field(default_factory=list)
    unreachable: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Replica:
    cluster: str
    broker_name: str
    broker_id: int
    address: str


def collect(controller: ControllerClient, brokers: BrokerClient, cluster: str | None, directory: Path,
            console: Console, page_size: int = 1000, namesrv: NameServerClient | None = None) -> CollectResult:
    """Write the dataset under ``directory``; only ``cluster``'s groups when given. With ``namesrv`` the
    brokers are found through it instead of the controller."""
    (directory / "events").mkdir(parents=True, exist_ok=True)
    (directory / "epochs").mkdir(parents=True, exist_ok=True)
    result = CollectResult(directory)
    first = _first_page(controller, cluster, page_size)  # before any progress bar: an unreachable controller
    columns = (TextColumn("{task.description:<8}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        seen_clusters = _collect_events(controller, first, cluster, directory, progress, page_size, result)
        result.clusters = [cluster] if cluster else sorted(seen_clusters)
        must_exist = cluster is not None and not result.events
        replicas = _find_replicas(namesrv or controller, result.clusters, must_exist)
        _collect_epochs(replicas, brokers, directory, progress, result)
    _write_manifest(directory, controller, cluster, result)
    return result


def _first_page(controller: ControllerClient, cluster: str | None, page_size: int) -> dict[str, Any]:
    try:
        return _page(controller, 0, page_size)
    except NotOverRemoting:  # a RocketMQ controller: no event log to read
        if cluster is None:
            raise UsageError("this controller speaks only RocketMQ's remoting protocol and keeps no event log: "
                             "give -c CLUSTER to report the epochs of its brokers") from None
        return {"events": [], "latestIndex": -1, "nextIndex": 0}


def _page(controller: ControllerClient, from_index: int, page_size: int) -> dict[str, Any]:
    return controller.events(from_index, page_size).model_dump()


def _collect_events(controller: ControllerClient, first: dict[str, Any], cluster: str | None, directory: Path,
                    progress: Progress, page_size: int, result: CollectResult) -> set[str]:
    oldest = int(first["events"][0]["index"]) if first["events"] else 0
    task = progress.add_task("events", total=max(int(first["latestIndex"]) - oldest + 1, 0))
    clusters: set[str] = set()
    page = first
    with open(directory / "events" / "events.jsonl", "w", encoding="utf-8") as out:
        while True:
            events: list[dict[str, Any]] = page["events"]
            for event in events:
                progress.advance(task)
                if cluster is not None and event.get("clusterName") != cluster:
                    continue
                clusters.add(str(event.get("clusterName") or ""))
                _write_row(out, {name: event.get(name) for name in EVENT_FIELDS})
                result.events += 1
            if not events or int(page["nextIndex"]) > int(page["latestIndex"]):
                break
            page = _page(controller, int(page["nextIndex"]), page_size)
    progress.update(task, total=progress.tasks[task].completed)  # events applied meanwhile were counted too
    return {c for c in clusters if c}


def _find_replicas(finder: ControllerClient | NameServerClient, clusters: list[str],
                   must_exist: bool) -> list[Replica]:
    replicas = []
    for name in clusters:
        try:
            sets = finder.broker_sets(None, name) if isinstance(finder, NameServerClient) \
                else broker_sets(finder, None, name)
        except UsageError:
            if must_exist:
                raise UsageError(f"cluster {name} has no events and no broker group in the controller") from None
            continue  # every group of this cluster was cleaned: its events are still worth reporting
        for bs in sets:
            for broker_id, address in replica_addresses(bs):
                replicas.append(Replica(str(bs.get("clusterName") or name), str(bs["brokerName"]), broker_id,
                                        address))
    return replicas


def _collect_epochs(replicas: list[Replica], client: BrokerClient, directory: Path, progress: Progress,
                    result: CollectResult) -> None:
    task: TaskID = progress.add_task("brokers", total=len(replicas))
    with open(directory / "epochs" / "epochs.jsonl", "w", encoding="utf-8") as out:
        for replica in replicas:
            try:
                cache = client.epoch_cache(replica.address)
            except MqctlError as exc:
                result.unreachable.append(f"{replica.broker_name} broker {replica.broker_id} at "
                                          f"{replica.address}: {exc}")
                progress.advance(task)
                continue
            for entry in cache.epochEntries:
                _write_row(out, {"clusterName": replica.cluster, "brokerName": replica.broker_name,
                                 "brokerId": replica.broker_id, "brokerAddress": replica.address,
                                 "epoch": entry.epoch, "startOffset": entry.startOffset,
                                 "endOffset": entry.endOffset})
                result.epoch_entries += 1
            result.brokers += 1
            progress.advance(task)


def _write_row(out: IO[str], row: dict[str, Any]) -> None:
    out.write(json.dumps(row, separators=(",", ":")) + "\n")


def _write_manifest(directory: Path, controller: ControllerClient, cluster: str | None,
                    result: CollectResult) -> None:
    manifest = {"collectedAtMs": int(time.time() * 1000), "controllerAddresses": controller.addresses,
                "clusterName": cluster, "clusters": result.clusters, "events": result.events,
                "epochEntries": result.epoch_entries, "brokersAnswered": result.brokers,
                "brokersUnreachable": result.unreachable}
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
