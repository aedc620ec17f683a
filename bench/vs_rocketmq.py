"""Side by side with RocketMQ: the same Java load program against RocketMQ's broker and ours, on this machine,
in one run.

    python -m bench.vs_rocketmq [--seconds 40] [--rounds 8] [--warmup 8] [--threads 8] [--size 1024]
                                [--version 5.3.3]

**Single-message sends, one broker.** Each side is one broker in controller mode with one replica,
ASYNC_FLUSH: RocketMQ's (a name server, one DLedger controller, one broker, from the test kit's jars and
settings, tests/rocketmq) and ours (one controller, which is also the name server, and one broker). The load
is one JVM per side running the kit's Java program (tests/rocketmq/java, mode ``load``): one
``DefaultMQProducer``, ``--threads`` threads each sending ``--size``-byte messages synchronously. Both JVMs
start first and wait; the sides are then measured in alternating slices (``bench.common.alternate``: the
machine's drift falls on both), the idle side's load paused.

Per side: acknowledged messages per second (SEND_OK), the median over the slices of each slice's p50 and p99
send latency, the CPU the servers used per acknowledged message (every process of the side but the load's,
from /proc), and their RSS at the end. Ratios are ours / RocketMQ's.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.common import alternate, cpu_seconds, scratch_dir, table, write_result
from mqctl.cluster import BrokerNode, ControllerCluster, make_broker
from tests.rocketmq import PINNED, RocketMQCluster
from tests.rocketmq.fetch import require_java
from tests.rocketmq.javaclients import JavaClients
from tests.rocketmq.jvm import poll

TOPIC = "BenchVsRocketMQ"
GROUP = "broker-a"
#: Our broker as the kit's RocketMQ broker is set up for this figure (ASYNC_FLUSH, one replica), logging quietly.
OUR_BROKER = {"flushDiskType": "ASYNC_FLUSH", "totalReplicas": 1, "inSyncReplicas": 1, "minInSyncReplicas": 1,
              "logLevel": "WARNING"}
THEIR_BROKER = {"totalReplicas": 1, "inSyncReplicas": 1, "minInSyncReplicas": 1, "flushDiskType": "ASYNC_FLUSH"}
READY_S = 120.0


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Load:
    """The Java load program of one side, driven over its stdin and stdout."""

    def __init__(self, clients: JavaClients, folder: Path, namesrv: str, threads: int, size: int) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        command = clients.command(require_java(), "load", folder, {"namesrv": namesrv, "topic": TOPIC,
                                                                   "threads": threads, "size": size})
        self.log = (folder / "console.log").open("ab")
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                        cwd=folder, text=True, bufsize=1)
        line = self._line(READY_S)
        if line != "READY":
            raise RuntimeError(f"the load program did not start ({line!r}); see {folder / 'console.log'}")

    def _line(self, timeout_s: float) -> str:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout_s)
        if not ready:
            raise RuntimeError(f"the load program said nothing for {timeout_s} s")
        return self.process.stdout.readline().strip()

    def slice(self, seconds: float) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(f"slice {int(seconds * 1000)}\n")
        self.process.stdin.flush()
        answer: dict[str, Any] = json.loads(self._line(seconds + 60))
        return answer

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.write("quit\n")
                self.process.stdin.flush()
                self.process.wait(timeout=20)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
        self.log.close()


class Side:
    """One side's servers (their pids) and its load; ``slice`` is what ``alternate`` measures."""

    def __init__(self, name: str, namesrv: str, pids: list[int], load: Load) -> None:
        self.name, self.namesrv, self.pids, self.load = name, namesrv, pids, load
        self.slices: list[dict[str, Any]] = []

    def slice(self, seconds: float, measured: bool = True) -> None:
        before = sum(cpu_seconds(pid) for pid in self.pids)
        done = self.load.slice(seconds)
        done["server_cpu_s"] = sum(cpu_seconds(pid) for pid in self.pids) - before
        if measured:
            self.slices.append(done)

    def figures(self) -> dict[str, Any]:
        sent = sum(s["sent"] for s in self.slices)
        seconds = sum(s["seconds"] for s in self.slices)
        cpu = sum(s["server_cpu_s"] for s in self.slices)
        return {"side": self.name, "msgs_per_s": sent / seconds if seconds else 0.0,
                "failed": sum(s["failed"] for s in self.slices),
                "p50_ms": statistics.median(s["p50_us"] for s in self.slices) / 1000 if self.slices else 0.0,
                "p99_ms": statistics.median(s["p99_us"] for s in self.slices) / 1000 if self.slices else 0.0,
                "server_cpu_us_per_msg": cpu / sent * 1e6 if sent else 0.0,
                "server_rss_mib": sum(rss_mib(pid) for pid in self.pids), "slices": self.slices}


def create_topic(clients: JavaClients, folder: Path, namesrv: str) -> None:
    run = clients.start("create-topic", folder, namesrv=namesrv, topic=TOPIC, queues=4)
    if run.wait(READY_S) != 0:
        raise RuntimeError(f"the topic could not be created:\n{run.describe()}")


def ours(root: Path) -> tuple[ControllerCluster, BrokerNode]:
    controllers = ControllerCluster(root / "controllers", size=1, extra={"logLevel": "WARNING"})
    controllers.configure()
    controllers.start()
    controllers.leader(timeout=60)
    broker = make_broker(root, GROUP, 0, controllers.addresses, set(), **OUR_BROKER)
    broker.start()

    def master() -> str | None:
        with controllers.client(timeout=3.0) as client:
            found = client.sync_state_data([GROUP]).brokers
        return found[0].masterAddress if found and found[0].masterAddress else None
    poll(master, 60.0, "our broker to be master")
    return controllers, broker


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=40.0, help="measured seconds per side")
    parser.add_argument("--rounds", type=int, default=8, help="slices per side")
    parser.add_argument("--warmup", type=float, default=8.0, help="unmeasured seconds per side first")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--version", default=PINNED, help="RocketMQ's version")
    args = parser.parse_args(argv)
    root = scratch_dir("mqctl-vs-rocketmq-")
    clients = JavaClients(args.version).build()
    theirs = RocketMQCluster(root / "rocketmq", args.version, brokers=1, controllers=1, broker_props=THEIR_BROKER)
    controllers: ControllerCluster | None = None
    broker: BrokerNode | None = None
    loads: list[Load] = []
    try:
        theirs.start()
        controllers, broker = ours(root / "ours")
        for name, namesrv in (("rocketmq", theirs.namesrv_addr), ("mqctl", controllers.addresses)):
            create_topic(clients, root / f"create-{name}", namesrv)
        loads.append(Load(clients, root / "load-rocketmq", theirs.namesrv_addr, args.threads, args.size))
        loads.append(Load(clients, root / "load-mqctl", controllers.addresses, args.threads, args.size))
        their_pids = [p.pid for p in theirs.processes() if p.pid is not None]
        our_pids = [p.pid for p in (*(n.process for n in controllers.nodes), broker.process) if p is not None]
        sides = [Side("rocketmq", theirs.namesrv_addr, their_pids, loads[0]),
                 Side("mqctl", controllers.addresses, our_pids, loads[1])]
        alternate(sides, args.rounds, args.seconds, args.warmup)
        figures = [side.figures() for side in sides]
    finally:
        for load in loads:
            load.close()
        if broker is not None:
            broker.stop()
        if controllers is not None:
            controllers.stop()
        theirs.stop()
    rocketmq, mine = figures
    ratios = {key: (mine[key] / rocketmq[key] if rocketmq[key] else None)
              for key in ("msgs_per_s", "p50_ms", "p99_ms", "server_cpu_us_per_msg", "server_rss_mib")}
    columns = ["side", "msgs_per_s", "failed", "p50_ms", "p99_ms", "server_cpu_us_per_msg", "server_rss_mib"]
    print(table([{k: f[k] for k in columns} for f in figures], columns))
    print("ours / RocketMQ's: " + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items() if v is not None))
    path = write_result("vs_rocketmq_sends", {
        "rocketmq_version": args.version, "threads": args.threads, "size": args.size, "seconds": args.seconds,
        "rounds": args.rounds, "sides": figures, "ratios_ours_over_rocketmq": ratios,
        "cpus": os.cpu_count()})
    print(f"result: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
