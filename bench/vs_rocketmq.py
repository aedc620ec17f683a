"""Side by side with RocketMQ: the same Java load program against RocketMQ's broker and ours, on this machine,
in one run.

    python -m bench.vs_rocketmq [--seconds 40] [--rounds 8] [--warmup 8] [--threads 8] [--size 1024]
                                [--replicas 1] [--flush ASYNC_FLUSH] [--mode sync] [--window 256]
                                [--version 5.3.3]

**Single-message sends.** Each side is one group of ``--replicas`` brokers in controller mode with
``--flush`` (ASYNC_FLUSH or SYNC_FLUSH) and ``allAckInSyncStateSet=true``: RocketMQ's (a name server, one
DLedger controller, the brokers, from the test kit's jars and settings, tests/rocketmq) and ours (one
controller, which is also the name server, and the brokers). The load is one JVM per side running the kit's
Java program (tests/rocketmq/java, mode ``load``): one ``DefaultMQProducer`` sending ``--size``-byte
messages, either ``--threads`` threads each sending synchronously (``--mode sync``) or one thread sending
asynchronously with at most ``--window`` sends unanswered (``--mode async``). Both JVMs start first and
wait; the sides are then measured in alternating slices (``bench.common.alternate``: the machine's drift
falls on both), the idle side's load paused.

Per side: acknowledged messages per second (SEND_OK), the median over the slices of each slice's p50 and p99
send latency, the CPU the servers used per acknowledged message (every process of the side but the load's,
from /proc), and their RSS at the end. Ratios are ours / RocketMQ's. The result file is named after the case:
``vs_rocketmq_sends_<mode>_<replicas>r_<flush>`` (``vs_rocketmq_sends_sync_1r_async_flush`` by default).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.common import alternate, cpu_seconds, scratch_dir, table, write_result
from mqctl.cluster import BrokerNode, ControllerCluster, make_broker
from services.common.errors import MqctlError
from services.controller.contract import BrokerReplicas
from tests.rocketmq import PINNED, RocketMQCluster
from tests.rocketmq.fetch import require_java
from tests.rocketmq.javaclients import JavaClients
from tests.rocketmq.jvm import poll, tied_to_parent

TOPIC = "BenchVsRocketMQ"
GROUP = "broker-a"
READY_S = 120.0
FLUSHES = ("ASYNC_FLUSH", "SYNC_FLUSH")
#: Our controllers scan for inactive brokers and masters as often as the test kit's RocketMQ controllers do.
OUR_CONTROLLER = {"logLevel": "WARNING", "scanNotActiveBrokerInterval": 2000, "scanInactiveMasterInterval": 2000}


def broker_props(replicas: int, flush: str) -> dict[str, Any]:
    """What both sides' brokers are given: the group's size, every SyncStateSet member acking, the flush mode."""
    return {"totalReplicas": replicas, "inSyncReplicas": replicas, "minInSyncReplicas": 1,
            "allAckInSyncStateSet": "true", "flushDiskType": flush}


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Program:
    """One mode of the kit's Java program (tests/rocketmq/java) in its own JVM, driven over stdin and stdout,
    one line each way."""

    def __init__(self, clients: JavaClients, folder: Path, mode: str, options: dict[str, Any]) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.mode, self.folder = mode, folder
        command = clients.command(require_java(), mode, folder, options)
        self.log = (folder / "console.log").open("ab")
        self.process = subprocess.Popen(tied_to_parent(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.log, cwd=folder, text=True, bufsize=1)

    def line(self, timeout_s: float) -> str:
        """The program's next line (each command is answered with exactly one, so none waits in a buffer)."""
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout_s)
        if not ready:
            raise RuntimeError(f"the {self.mode} program said nothing for {timeout_s} s{self._console_tail()}")
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.mode} program exited{self._console_tail()}")
        return line.strip()

    def _console_tail(self, lines: int = 15) -> str:
        """The end of the program's stderr, for an error (its folder goes with the run's unless kept)."""
        path = self.folder / "console.log"
        try:
            text = path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return f"; {path} could not be read"
        return f"; the end of {path}:\n" + "\n".join(text)

    def ask(self, command: str, timeout_s: float) -> str:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.line(timeout_s)

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.write("quit\n")
                self.process.stdin.flush()
                self.process.wait(timeout=20)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait(timeout=20)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass
        self.log.close()


class Load(Program):
    """The load mode: one producer, sending in slices (or paced, or until stopped) as asked."""

    def __init__(self, clients: JavaClients, folder: Path, namesrv: str, threads: int, size: int,
                 mode: str = "sync", window: int = 256, route_poll_ms: int = 1000) -> None:
        super().__init__(clients, folder, "load", {"namesrv": namesrv, "topic": TOPIC, "threads": threads,
                                                   "size": size, "mode": mode, "window": window,
                                                   "route-poll-ms": route_poll_ms})
        try:
            line = self.line(READY_S)
            if line != "READY":
                raise RuntimeError(f"the load program did not start ({line!r}); see {folder / 'console.log'}")
        except BaseException:
            self.close()
            raise

    def slice(self, seconds: float) -> dict[str, Any]:
        answer: dict[str, Any] = json.loads(self.ask(f"slice {int(seconds * 1000)}", seconds + 60))
        return answer


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


def create_topic(clients: JavaClients, folder: Path, namesrv: str, queues: int = 4) -> None:
    run = clients.start("create-topic", folder, namesrv=namesrv, topic=TOPIC, queues=queues)
    if run.wait(READY_S) != 0:
        raise RuntimeError(f"the topic could not be created:\n{run.describe()}")


def our_group(controllers: ControllerCluster) -> BrokerReplicas | None:
    """Our group as the controllers see it (None while they do not answer)."""
    try:
        with controllers.client(timeout=3.0) as client:
            found = client.sync_state_data([GROUP]).brokers
    except MqctlError:
        return None
    return found[0] if found else None


def wait_our_group(controllers: ControllerCluster, replicas: int, timeout_s: float = 60.0) -> str:
    """Our group has a master and ``replicas`` members in its SyncStateSet; returns the master's address."""
    def whole() -> str | None:
        group = our_group(controllers)
        if group is None or not group.masterAddress or len(group.inSyncReplicas) < replicas:
            return None
        return group.masterAddress
    address: str = poll(whole, timeout_s, f"our group with a master and {replicas} in sync")
    return address


def ours(root: Path, replicas: int = 1, flush: str = "ASYNC_FLUSH", controllers_n: int = 1,
         **props: Any) -> tuple[ControllerCluster, list[BrokerNode]]:
    """Our controllers (the name server too) and one group of ``replicas`` brokers, logging quietly; stopped again
    if they do not come up."""
    controllers = ControllerCluster(root / "controllers", size=controllers_n, extra=dict(OUR_CONTROLLER))
    used: set[int] = set()
    controllers.configure(used)
    brokers: list[BrokerNode] = []
    try:
        controllers.start()
        controllers.leader(timeout=60)
        brokers = [make_broker(root, GROUP, i, controllers.addresses, used, logLevel="WARNING",
                               **broker_props(replicas, flush), **props) for i in range(replicas)]
        for broker in brokers:
            broker.start()
        wait_our_group(controllers, replicas)
    except BaseException:
        stop_ours(controllers, brokers)
        raise
    return controllers, brokers


def stop_ours(controllers: ControllerCluster | None, brokers: list[BrokerNode]) -> None:
    """Our brokers, then our controllers (a broker a benchmark left stopped is continued first)."""
    for broker in brokers:
        if broker.process is not None and broker.process.poll() is None:
            os.kill(broker.process.pid, signal.SIGCONT)
        broker.stop()
    if controllers is not None:
        controllers.stop()


def theirs(root: Path, version: str, replicas: int = 1, flush: str = "ASYNC_FLUSH", controllers_n: int = 1,
           **props: Any) -> RocketMQCluster:
    """RocketMQ's name server, controllers and one group of ``replicas`` brokers, from the test kit (not started)."""
    return RocketMQCluster(root, version, brokers=replicas, controllers=controllers_n,
                           broker_props={**broker_props(replicas, flush), **props})


def case_name(mode: str, replicas: int, flush: str) -> str:
    return f"vs_rocketmq_sends_{mode}_{replicas}r_{flush.lower()}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=40.0, help="measured seconds per side")
    parser.add_argument("--rounds", type=int, default=8, help="slices per side")
    parser.add_argument("--warmup", type=float, default=8.0, help="unmeasured seconds per side first")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--replicas", type=int, default=1, choices=(1, 2, 3), help="brokers in the group")
    parser.add_argument("--flush", default="ASYNC_FLUSH", choices=FLUSHES)
    parser.add_argument("--mode", default="sync", choices=("sync", "async"),
                        help="sync: --threads threads of synchronous sends; async: one thread, --window unanswered")
    parser.add_argument("--window", type=int, default=256, help="async sends unanswered at most")
    parser.add_argument("--version", default=PINNED, help="RocketMQ's version")
    args = parser.parse_args(argv)
    root = scratch_dir("mqctl-vs-rocketmq-")
    clients = JavaClients(args.version).build()
    rocketmq = theirs(root / "rocketmq", args.version, args.replicas, args.flush)
    controllers: ControllerCluster | None = None
    brokers: list[BrokerNode] = []
    loads: list[Load] = []
    try:
        rocketmq.start()
        controllers, brokers = ours(root / "ours", args.replicas, args.flush)
        for name, namesrv in (("rocketmq", rocketmq.namesrv_addr), ("mqctl", controllers.addresses)):
            create_topic(clients, root / f"create-{name}", namesrv)
        for name, namesrv in (("rocketmq", rocketmq.namesrv_addr), ("mqctl", controllers.addresses)):
            loads.append(Load(clients, root / f"load-{name}", namesrv, args.threads, args.size, args.mode,
                              args.window))
        their_pids = [p.pid for p in rocketmq.processes() if p.pid is not None]
        our_pids = [p.pid for p in (*(n.process for n in controllers.nodes), *(b.process for b in brokers))
                    if p is not None]
        sides = [Side("rocketmq", rocketmq.namesrv_addr, their_pids, loads[0]),
                 Side("mqctl", controllers.addresses, our_pids, loads[1])]
        alternate(sides, args.rounds, args.seconds, args.warmup)
        figures = [side.figures() for side in sides]
    finally:
        for load in loads:
            load.close()
        stop_ours(controllers, brokers)
        rocketmq.stop()
    their_figures, mine = figures
    ratios = {key: (mine[key] / their_figures[key] if their_figures[key] else None)
              for key in ("msgs_per_s", "p50_ms", "p99_ms", "server_cpu_us_per_msg", "server_rss_mib")}
    columns = ["side", "msgs_per_s", "failed", "p50_ms", "p99_ms", "server_cpu_us_per_msg", "server_rss_mib"]
    print(table([{k: f[k] for k in columns} for f in figures], columns))
    print("ours / RocketMQ's: " + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items() if v is not None))
    path = write_result(case_name(args.mode, args.replicas, args.flush), {
        "rocketmq_version": args.version, "mode": args.mode, "window": args.window, "replicas": args.replicas,
        "flush": args.flush, "threads": args.threads, "size": args.size, "seconds": args.seconds,
        "rounds": args.rounds, "sides": figures, "ratios_ours_over_rocketmq": ratios,
        "cpus": os.cpu_count()})
    print(f"result: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
