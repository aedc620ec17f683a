"""Judges a chaos run: the recorded history against the final state of the cluster.

Checks (each returns a list of violations, empty when it holds):

- no acknowledged (PUT_OK) message is missing from the final master;
- nothing is read that was never sent, or that was definitely refused; nothing is read twice;
- per queue, each producer's messages appear in the order they were sent;
- every replica of the final SyncStateSet holds the same bytes up to confirmOffset;
- the replicas' epoch histories are prefixes of one another;
- in the controller's history, masterEpoch only increases, there is at most one master per epoch, and
  an elected master came from the SyncStateSet unless the election is marked UNCLEAN;
- an attack fault (a stranger's, a foreign web page's) achieved nothing it must not: no failover, no
  restarted broker kept out, no route naming anyone but the controller's master as id 0 or an address
  outside the group.
- no master was elected while a stranger's huge frames were being read (``huge_frame``): a frame must not
  hold a node up long enough to be taken for dead;
- with RocketMQ's Java clients in the workload, what java_workload.py says of their histories.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from mqctl.cluster import DevCluster
from services.broker import contract as bc
from services.common.broker_client import BrokerClient, replica_addresses
from services.controller import contract
from tests.chaos.harness import GROUP, TOPIC, History
from tests.chaos.java_workload import JavaWorkload


@dataclass
class Verdict:
    violations: dict[str, list[str]] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())

    def add(self, name: str, problems: list[str]) -> None:
        self.violations[name] = problems


def drain(address: str, queues: int = 4) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    with BrokerClient(10.0) as client:
        for qid in range(queues):
            offset = 0
            while True:
                data = client.request(address, "GET", bc.PULL_MESSAGE, params={
                    "topic": TOPIC, "queueId": qid, "queueOffset": offset, "maxNums": 1024}).data
                messages.extend(data["messages"])
                if data["status"] != "FOUND":
                    break
                offset = data["nextBeginOffset"]
    return messages


def controller_events(cluster: DevCluster) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    with cluster.client(timeout=5.0) as client:
        cursor = 0
        while True:
            data = client.call("GET", contract.EVENTS, params={"fromIndex": cursor, "limit": 5000}).data
            events.extend(data["events"])
            if not data["events"]:
                return events
            cursor = data["nextIndex"]


def commitlog_bytes(cluster: DevCluster, name: str) -> bytes:
    directory = cluster.node_dir(cluster.node(name)) / "store" / "commitlog"
    return b"".join(p.read_bytes() for p in sorted(directory.iterdir()))


def check(cluster: DevCluster, history: History, workload: JavaWorkload | None = None) -> Verdict:
    verdict = Verdict()
    state = cluster.sync_state(GROUP)
    master = cluster.master_of(GROUP)
    assert master is not None, "no master at the end of the run"
    read = drain(master.address)
    bodies = [m["body"] for m in read]
    by_status: dict[str, set[str]] = defaultdict(set)
    for o in history.outcomes:
        by_status[o.status].add(o.body)
    attempted = set().union(*by_status.values()) if by_status else set()
    readable = set(bodies)
    verdict.add("lost acknowledged", sorted(by_status["ok"] - readable)[:20])
    verdict.add("read but never sent", sorted(readable - attempted)[:20])
    verdict.add("read but definitely refused", sorted(readable & by_status["failed"])[:20])
    verdict.add("read twice", [b for b, n in Counter(bodies).items() if n > 1][:20])
    verdict.add("queue order", _queue_order(read))
    verdict.add("replicas differ", _replicas_identical(cluster, state))
    verdict.add("epoch histories", _epoch_prefixes(state))
    events = controller_events(cluster)
    verdict.add("controller history", _controller_history(events))
    verdict.add("attack effects", history.attack_effects[:20])
    verdict.add("failover during huge frames", _failovers_during(events, history, "huge_frame"))
    if workload is not None:
        for name, problems in workload.verdict(events).items():
            verdict.add(name, problems)
    recoveries = [f.recovery_ms for f in history.faults if f.recovery_ms is not None]
    verdict.stats = {
        "acknowledged": len(by_status["ok"]), "failed": len(by_status["failed"]),
        "unknown": len(by_status["unknown"]), "read": len(read),
        "lost": len(by_status["ok"] - readable),
        "faults": dict(Counter(f.kind for f in history.faults)),
        "recovery_ms_p50": statistics.median(recoveries) if recoveries else None,
        "recovery_ms_p99": _percentile(recoveries, 99) if recoveries else None,
        "recovery_ms_max": max(recoveries) if recoveries else None,
        "final_master_epoch": state.get("masterEpoch"),
    }
    if workload is not None:
        verdict.stats["java"] = workload.stats()
    return verdict


def _percentile(values: list[int], p: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def _queue_order(read: list[dict[str, Any]]) -> list[str]:
    problems = []
    last: dict[tuple[int, str], int] = {}
    for m in sorted(read, key=lambda m: (m["queueId"], m["queueOffset"])):
        producer, _, seq = m["body"].partition("-")
        key = (m["queueId"], producer)
        if key in last and int(seq) <= last[key]:
            problems.append(f"queue {m['queueId']}: {m['body']} after seq {last[key]}")
        last[key] = int(seq)
    return problems[:20]


def _replicas_identical(cluster: DevCluster, state: dict[str, Any]) -> list[str]:
    members = {r["brokerId"] for r in state.get("inSyncReplicas", [])}
    infos = {}
    with BrokerClient(3.0) as client:
        for broker_id, address in replica_addresses(state):
            if broker_id in members:
                infos[broker_id] = client.request(address, "GET", bc.RUNTIME_INFO).data
    confirm = min(i["confirmOffset"] for i in infos.values())
    images = {}
    for broker_id, info in infos.items():
        name = next(n.name for n in cluster.brokers(GROUP) if n.address == info["brokerAddress"])
        images[broker_id] = commitlog_bytes(cluster, name)[:confirm]
    reference = next(iter(images.values()))
    return [f"broker {b} differs below confirmOffset {confirm}" for b, img in images.items() if img != reference]


def _epoch_prefixes(state: dict[str, Any]) -> list[str]:
    lists = {}
    with BrokerClient(3.0) as client:
        for broker_id, address in replica_addresses(state):
            data = client.request(address, "GET", bc.EPOCH_CACHE).data
            lists[broker_id] = [(e["epoch"], e["startOffset"]) for e in data["epochEntries"]]
    longest = max(lists.values(), key=len)
    return [f"broker {b} epochs {entries} are not a prefix of {longest}"
            for b, entries in lists.items() if entries != longest[:len(entries)]]


def _failovers_during(events: list[dict[str, Any]], history: History, kind: str) -> list[str]:
    """Elections stamped between a fault of ``kind`` and its healing (faults come one at a time)."""
    windows = [(f.at_ms, f.healed_ms or f.at_ms) for f in history.faults if f.kind == kind]
    return [f"{e['brokerName']}: master {e['masterBrokerId']} elected at {e['timestamp']} ({e['electReason']}) "
            f"during {kind}" for e in events
            if e["eventType"] == "ELECT_MASTER" and e.get("elected")
            and any(start <= int(e.get("timestamp") or 0) <= end for start, end in windows)][:20]


def _controller_history(events: list[dict[str, Any]]) -> list[str]:
    problems = []
    indexes = [e["index"] for e in events]
    if indexes != list(range(indexes[0], indexes[0] + len(indexes))) if indexes else False:
        problems.append("event indexes are not consecutive")
    last_epoch: dict[str, int] = {}
    masters: dict[tuple[str, int], int] = {}
    previous_set: dict[str, list[int]] = {}
    for e in events:
        group = e["brokerName"]
        if e["eventType"] == "ELECT_MASTER":
            epoch = e["masterEpoch"]
            if epoch is not None and epoch <= last_epoch.get(group, 0):
                problems.append(f"{group}: masterEpoch went from {last_epoch[group]} to {epoch}")
            last_epoch[group] = epoch
            if e["elected"]:
                key = (group, epoch)
                if key in masters and masters[key] != e["masterBrokerId"]:
                    problems.append(f"{group}: two masters in epoch {epoch}")
                masters[key] = e["masterBrokerId"]
                before = previous_set.get(group, [])
                if before and e["masterBrokerId"] not in before and e["electReason"] != "UNCLEAN":
                    problems.append(f"{group}: epoch {epoch} master {e['masterBrokerId']} was not in the "
                                    f"SyncStateSet {before} ({e['electReason']})")
        if e.get("syncStateSet") is not None:
            previous_set[group] = e["syncStateSet"]
    return problems[:20]
