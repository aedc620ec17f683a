"""Side by side with RocketMQ: what each process kind costs while the cluster idles, on this machine, in one run.

    python -m bench.vs_rocketmq_footprint [--settle 20] [--seconds 60] [--timer on|off] [--controllers 3]
                                          [--replicas 3] [--rate 0] [--version 5.3.3]

**Footprint at idle.** Both sides are the controller-mode cluster an operator runs: RocketMQ's (a name server,
three DLedger controllers, a group of three brokers (``--controllers``, ``--replicas``), from the test kit's jars and settings, tests/rocketmq;
the timer store on, RocketMQ's own default, unless ``--timer off`` as the test kit runs it) and ours (three
controllers, which are also the name servers, and a group of three brokers, with mqctl's defaults). Both run
at once: once each group has its master and every replica in sync, ``--settle`` seconds pass, then each
process's CPU (user + system, from /proc) is taken over ``--seconds``, and its resident memory (VmRSS) at the
end. Nothing is sent: what is measured is what the processes do by themselves (heartbeats, Raft or DLedger,
replication keep-alives, scans, flushes, statistics).

**Under load** (``--rate R``): each side in turn gets a topic and the kit's Java load program (mode ``load``,
one producer sending 1 KiB messages asynchronously, 256 unanswered at most) sending at ``R`` messages per
second, evenly spaced (``paced``), through the settling time and the measured seconds, while the other side
idles (two loaded clusters at once would take more than the machine's two cores); the load JVMs are not
counted. The result file is ``vs_rocketmq_footprint_load`` instead of
``vs_rocketmq_footprint``, with each side's acknowledged messages and send latency.

Per process kind and per side: the count, the mean RSS (MiB) and CPU (% of one core) of one process, and
the side's totals. Ratios are ours / RocketMQ's; RocketMQ's name server and controllers are counted
together as the side's control plane against our controllers, which do both jobs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import cpu_seconds, scratch_dir, table, write_result
from bench.vs_rocketmq import Load, create_topic, rss_mib, stop_ours
from mqctl.cluster import BrokerNode, ControllerCluster, make_broker
from tests.rocketmq import PINNED, RocketMQCluster
from tests.rocketmq.javaclients import JavaClients
from tests.rocketmq.jvm import poll

GROUP = "broker-a"
READY_S = 180.0


def replica_props(replicas: int) -> dict[str, object]:
    """A group of ``replicas``: RocketMQ's counts of its brokers (the test kit's for three)."""
    return {"totalReplicas": replicas, "inSyncReplicas": min(2, replicas), "minInSyncReplicas": 1}


def ours(root: Path, size: int, replicas: int) -> tuple[ControllerCluster, list[BrokerNode]]:
    """``size`` controllers and ``replicas`` replicas of GROUP with mqctl's defaults (quiet logs), every replica
    in sync."""
    controllers = ControllerCluster(root / "controllers", size=size, extra={"logLevel": "WARNING"})
    controllers.configure()
    controllers.start()
    controllers.leader(timeout=60)
    used: set[int] = set()
    brokers = [make_broker(root, GROUP, i, controllers.addresses, used, logLevel="WARNING", **replica_props(replicas))
               for i in range(replicas)]
    for broker in brokers:
        broker.start()

    def whole() -> bool | None:
        with controllers.client(timeout=3.0) as client:
            found = client.sync_state_data([GROUP]).brokers
        return bool(found and found[0].masterAddress and len(found[0].inSyncReplicas) == replicas) or None
    poll(whole, READY_S, "our group's master and its replicas in sync")
    return controllers, brokers


def measure(kinds: dict[str, list[int]], seconds: float) -> dict[str, dict[str, float]]:
    """Per kind: count, mean RSS (MiB) and CPU (% of a core) of one process over ``seconds``."""
    before = {pid: cpu_seconds(pid) for pids in kinds.values() for pid in pids}
    started = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - started
    found = {}
    for kind, pids in kinds.items():
        cpu = sum(cpu_seconds(pid) - before[pid] for pid in pids)
        rss = sum(rss_mib(pid) for pid in pids)
        found[kind] = {"count": len(pids), "rss_mib": rss / len(pids), "cpu_pct": cpu / elapsed * 100 / len(pids),
                       "total_rss_mib": rss, "total_cpu_pct": cpu / elapsed * 100}
    return found


def loaded(load: Load, kinds: dict[str, list[int]], rate: float, settle: float,
           seconds: float) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """``measure`` of one side's kinds while its load sends at ``rate`` (after ``settle`` s of it); the load's
    answer too."""
    json.loads(load.ask(f"paced {rate:.1f} {int(settle * 1000)}", settle + 60))
    answer: dict[str, Any] = {}
    failed: list[BaseException] = []

    def pace() -> None:
        try:
            answer.update(json.loads(load.ask(f"paced {rate:.1f} {int(seconds * 1000)}", seconds + 60)))
        except BaseException as exc:  # noqa: BLE001  raised again in the caller's thread
            failed.append(exc)
    pacing = threading.Thread(target=pace)
    pacing.start()
    figures = measure(kinds, seconds)
    pacing.join()
    if failed:
        raise failed[0]
    return figures, answer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--settle", type=float, default=20.0, help="idle seconds before measuring")
    parser.add_argument("--seconds", type=float, default=60.0, help="measured seconds")
    parser.add_argument("--timer", choices=["on", "off"], default="on",
                        help="RocketMQ's timer store (RocketMQ's default: on; the test kit's: off)")
    parser.add_argument("--controllers", type=int, choices=[1, 3], default=3, help="controllers per side")
    parser.add_argument("--replicas", type=int, choices=[1, 2, 3], default=3, help="brokers of the group per side")
    parser.add_argument("--rate", type=float, default=0.0, help="messages per second sent to each side (0: idle)")
    parser.add_argument("--version", default=PINNED, help="RocketMQ's version")
    args = parser.parse_args(argv)
    root = scratch_dir("mqctl-vs-rocketmq-footprint-")
    theirs = RocketMQCluster(root / "rocketmq", args.version, brokers=args.replicas, controllers=args.controllers,
                             broker_props={"timerWheelEnable": "true" if args.timer == "on" else "false",
                                           **replica_props(args.replicas)})
    controllers: ControllerCluster | None = None
    brokers: list[BrokerNode] = []
    loads: list[Load] = []
    sent: dict[str, dict[str, Any]] = {}
    try:
        theirs.start()
        controllers, brokers = ours(root / "ours", args.controllers, args.replicas)
        theirs.sync_state(in_sync=args.replicas)
        namesrv = theirs.namesrv.process.pid if theirs.namesrv and theirs.namesrv.process.pid else None
        their_controllers = [p.pid for p in (theirs.controllers.processes if theirs.controllers else []) if p.pid]
        kinds = {"rocketmq name server": [namesrv] if namesrv else [],
                 "rocketmq controller": their_controllers,
                 "rocketmq broker": [b.process.pid for b in theirs.brokers if b.process.pid],
                 "mqctl controller": [n.process.pid for n in controllers.nodes if n.process and n.process.pid],
                 "mqctl broker": [b.process.pid for b in brokers if b.process and b.process.pid]}
        if args.rate > 0:
            clients = JavaClients(args.version).build()
            figures = {}
            for name, address in (("rocketmq", theirs.namesrv_addr), ("mqctl", controllers.addresses)):
                create_topic(clients, root / f"create-{name}", address)
                loads.append(Load(clients, root / f"load-{name}", address, 1, 1024, "async", 256))
                mine = {kind: pids for kind, pids in kinds.items() if kind.startswith(name)}
                found, sent[name] = loaded(loads[-1], mine, args.rate, args.settle, args.seconds)
                figures.update(found)
                loads[-1].close()  # the other side is measured without this side's load
        else:
            time.sleep(args.settle)  # a benchmark's settling time, not a wait for a state (both are whole above)
            figures = measure(kinds, args.seconds)
    finally:
        for load in loads:
            load.close()
        stop_ours(controllers, brokers)
        theirs.stop()

    def side(prefix: str) -> dict[str, float]:
        rows = [f for kind, f in figures.items() if kind.startswith(prefix)]
        return {"rss_mib": sum(r["total_rss_mib"] for r in rows), "cpu_pct": sum(r["total_cpu_pct"] for r in rows)}

    def plane(prefix: str, kinds_in: tuple[str, ...]) -> dict[str, float]:
        rows = [figures[f"{prefix} {k}"] for k in kinds_in]
        return {"rss_mib": sum(r["total_rss_mib"] for r in rows), "cpu_pct": sum(r["total_cpu_pct"] for r in rows)}

    totals = {"rocketmq": side("rocketmq"), "mqctl": side("mqctl")}
    control = {"rocketmq": plane("rocketmq", ("name server", "controller")), "mqctl": plane("mqctl", ("controller",))}
    data = {"rocketmq": plane("rocketmq", ("broker",)), "mqctl": plane("mqctl", ("broker",))}

    def ratio(pair: dict[str, dict[str, float]], key: str) -> float | None:
        return pair["mqctl"][key] / pair["rocketmq"][key] if pair["rocketmq"][key] else None
    ratios = {f"{what} {key}": ratio(pair, key) for what, pair in (("total", totals), ("control plane", control),
                                                                   ("brokers", data)) for key in ("rss_mib", "cpu_pct")}
    rows = [{"kind": kind, **{k: round(v, 2) for k, v in f.items()}} for kind, f in figures.items()]
    print(table(rows, ["kind", "count", "rss_mib", "cpu_pct", "total_rss_mib", "total_cpu_pct"]))
    print("ours / RocketMQ's: " + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items() if v is not None))
    if sent:
        print("sent: " + ", ".join(f"{side} {s['sent'] / s['seconds']:,.0f} msg/s (p99 {s['p99_us'] / 1000:.1f} ms)"
                                   for side, s in sent.items()))
    path = write_result("vs_rocketmq_footprint_load" if args.rate > 0 else "vs_rocketmq_footprint", {
        "rocketmq_version": args.version, "timer": args.timer, "settle_s": args.settle, "seconds": args.seconds,
        "controllers": args.controllers, "replicas": args.replicas, "rate": args.rate, "sent": sent,
        "kinds": figures, "totals": totals, "control_plane": control, "brokers": data,
        "ratios_ours_over_rocketmq": ratios, "cpus": os.cpu_count()})
    print(f"result: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
