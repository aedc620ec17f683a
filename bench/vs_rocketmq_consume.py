"""Side by side with RocketMQ: a push consumer draining a backlog, and end-to-end latency at half the peak
send rate, with the same Java programs against both controller-mode clusters.

    python -m bench.vs_rocketmq_consume [--messages 1000000] [--size 1024] [--queues 8] [--threads 20]
                                        [--pull-batch 32] [--fill-slice 10] [--latency-seconds 10] [--rounds 2]
                                        [--version 5.3.3]

Each side is one broker in controller mode, one replica, ASYNC_FLUSH (as ``bench.vs_rocketmq`` sets them
up), with a topic of ``--queues`` queues. Three phases:

1. **Backlog**: each side's producer (the kit's Java program, mode ``load``: one thread sending
   asynchronously, 256 sends unanswered at most) fills the topic with ``--messages`` messages of ``--size``
   bytes, the sides alternating in slices of ``--fill-slice`` s; their acknowledged rate is the peak
   (asynchronous) send rate.
2. **Drain**: a push consumer of a new group (mode ``drain``: ``DefaultMQPushConsumer``, ``--threads``
   consume threads, ``--pull-batch`` messages per pull, from the first offset) consumes the whole backlog,
   one side after the other (a drain cannot be cut into alternating slices); messages per second from its
   first message to the backlog's last, and the servers' CPU per message from the consumer's start to its
   report (its start-up and first rebalance included).
3. **Latency**: the same producer sends at half the lower of the two peak rates, evenly spaced (``paced``),
   while the consumer (caught up) notes each message's end-to-end latency (when consumed, less its born
   timestamp: whole milliseconds, one clock); ``--rounds`` windows of ``--latency-seconds`` per side,
   alternating. Per side: the median of the windows' p50 and p99.

Ratios are ours / RocketMQ's. Result file ``vs_rocketmq_consume``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from bench.common import cpu_seconds, scratch_dir, table, write_result
from bench.vs_rocketmq import READY_S, TOPIC, Load, Program, create_topic, ours, rss_mib, stop_ours, theirs
from mqctl.cluster import BrokerNode, ControllerCluster
from tests.rocketmq import PINNED
from tests.rocketmq.javaclients import JavaClients

#: The longest a drain may take (the consumer gives up after it, reporting what it read).
DRAIN_S = 1200


class Side:
    def __init__(self, name: str, namesrv: str, pids: list[int], load: Load) -> None:
        self.name, self.namesrv, self.pids, self.load = name, namesrv, pids, load
        self.backlog, self.fill_seconds = 0, 0.0
        self.drain: dict[str, Any] = {}
        self.windows: list[dict[str, Any]] = []
        self.consumer: Program | None = None

    def cpu(self) -> float:
        return sum(cpu_seconds(pid) for pid in self.pids)

    def fill(self, seconds: float) -> None:
        done = self.load.slice(seconds)
        if done["sent"] == 0:
            raise RuntimeError(f"{self.name}: no send acknowledged in {seconds} s while filling")
        self.backlog += done["sent"]
        self.fill_seconds += done["seconds"]

    def drain_all(self, clients: JavaClients, folder: Path, threads: int, pull_batch: int) -> None:
        before = self.cpu()
        self.consumer = Program(clients, folder, "drain", {
            "namesrv": self.namesrv, "topic": TOPIC, "count": self.backlog, "threads": threads,
            "pull-batch": pull_batch, "group": f"bench-drain-{self.name}", "timeout-s": DRAIN_S})
        self.drain = json.loads(self.consumer.line(READY_S + DRAIN_S))
        self.drain["server_cpu_s"] = self.cpu() - before
        if self.drain["consumed"] < self.backlog:
            raise RuntimeError(f"{self.name}: the consumer read {self.drain['consumed']} of {self.backlog} messages")

    def window(self, rate: float, seconds: float) -> None:
        assert self.consumer is not None and self.consumer.process.stdin is not None
        millis = int(seconds * 1000)
        self.consumer.process.stdin.write(f"measure {millis}\n")
        self.consumer.process.stdin.flush()
        sends = json.loads(self.load.ask(f"paced {rate:.1f} {millis}", seconds + 60))
        consumed = json.loads(self.consumer.line(seconds + 60))
        self.windows.append({"sends": sends, "consumed": consumed})

    def figures(self) -> dict[str, Any]:
        consumed = self.backlog  # the drain's time runs to the backlog's last message
        def median(what: str, key: str) -> float:
            return statistics.median(w[what][key] for w in self.windows) / 1000 if self.windows else 0.0
        return {"side": self.name, "backlog": self.backlog,
                "peak_send_msgs_per_s": self.backlog / self.fill_seconds if self.fill_seconds else 0.0,
                "drain_msgs_per_s": consumed / self.drain["from_first_s"] if self.drain["from_first_s"] else 0.0,
                "drain_s": self.drain["from_first_s"], "consumer_start_s": self.drain["seconds"] -
                self.drain["from_first_s"],
                "drain_server_cpu_us_per_msg": self.drain["server_cpu_s"] / consumed * 1e6 if consumed else 0.0,
                "e2e_p50_ms": median("consumed", "p50_us"), "e2e_p99_ms": median("consumed", "p99_us"),
                "send_p50_ms": median("sends", "p50_us"), "send_p99_ms": median("sends", "p99_us"),
                "server_rss_mib": sum(rss_mib(pid) for pid in self.pids), "windows": self.windows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000, help="the backlog per side")
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--threads", type=int, default=20, help="the consumer's consume threads")
    parser.add_argument("--pull-batch", type=int, default=32)
    parser.add_argument("--fill-slice", type=float, default=10.0, help="seconds of each filling slice")
    parser.add_argument("--latency-seconds", type=float, default=10.0, help="seconds of each latency window")
    parser.add_argument("--rounds", type=int, default=2, help="latency windows per side")
    parser.add_argument("--version", default=PINNED, help="RocketMQ's version")
    args = parser.parse_args(argv)
    root = scratch_dir("mqctl-vs-rocketmq-consume-")
    clients = JavaClients(args.version).build()
    rocketmq = theirs(root / "rocketmq", args.version)
    controllers: ControllerCluster | None = None
    brokers: list[BrokerNode] = []
    sides: list[Side] = []
    try:
        rocketmq.start()
        controllers, brokers = ours(root / "ours")
        their_pids = [p.pid for p in rocketmq.processes() if p.pid is not None]
        our_pids = [p.pid for p in (*(n.process for n in controllers.nodes), *(b.process for b in brokers))
                    if p is not None]
        for name, namesrv, pids in (("rocketmq", rocketmq.namesrv_addr, their_pids),
                                    ("mqctl", controllers.addresses, our_pids)):
            create_topic(clients, root / f"create-{name}", namesrv, args.queues)
            sides.append(Side(name, namesrv, pids, Load(clients, root / f"load-{name}", namesrv, 1, args.size,
                                                        "async", 256)))
        rounds = 0
        while any(side.backlog < args.messages for side in sides):
            for side in sides if rounds % 2 == 0 else sides[::-1]:
                if side.backlog < args.messages:
                    side.fill(args.fill_slice)
            rounds += 1
        for side in sides:
            side.drain_all(clients, root / f"drain-{side.name}", args.threads, args.pull_batch)
            print(f"{side.name}: {side.backlog} messages drained in {side.drain['from_first_s']:.1f} s", flush=True)
        rate = 0.5 * min(side.backlog / side.fill_seconds for side in sides)
        for r in range(args.rounds):
            for side in sides if r % 2 == 0 else sides[::-1]:
                side.window(rate, args.latency_seconds)
        figures = [side.figures() for side in sides]
    finally:
        for side in sides:
            side.load.close()
            if side.consumer is not None:
                side.consumer.close()
        stop_ours(controllers, brokers)
        rocketmq.stop()
    their_figures, mine = figures
    keys = ("peak_send_msgs_per_s", "drain_msgs_per_s", "drain_server_cpu_us_per_msg", "e2e_p50_ms", "e2e_p99_ms",
            "send_p50_ms", "send_p99_ms", "server_rss_mib")
    ratios = {key: (mine[key] / their_figures[key] if their_figures[key] else None) for key in keys}
    columns = ["side", "backlog", *keys[:2], "consumer_start_s", *keys[2:]]
    print(table([{k: f[k] for k in columns} for f in figures], columns))
    print(f"latency at {rate:,.0f} msg/s; ours / RocketMQ's: "
          + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items() if v is not None))
    path = write_result("vs_rocketmq_consume", {
        "rocketmq_version": args.version, "messages": args.messages, "size": args.size, "queues": args.queues,
        "threads": args.threads, "pull_batch": args.pull_batch, "latency_rate_msgs_per_s": rate,
        "latency_seconds": args.latency_seconds, "rounds": args.rounds, "sides": figures,
        "ratios_ours_over_rocketmq": ratios})
    print(f"result: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
