"""``python -m tests.chaos --minutes 10 [--seed N] [--hosts | --java-clients]``: a long fault-injection run with a
verdict.

``--hosts`` puts every node on a host of its own (network namespaces; needs root) and makes the network
faults in the kernel between them (tests/chaos/hosts.py)."""

from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.chaos.checker import check
from tests.chaos.harness import FAULT_KINDS, HOST_FAULT_KINDS, ChaosRun
from tests.chaos.hosts import CLIENT, HOSTS, topology_of
from tests.netns.topology import NetnsUnavailable, Topology
from tests.rocketmq import PINNED
from tests.rocketmq.javaclients import JavaClients


def _stop_on_sigterm() -> None:
    """SIGTERM ends the run as Ctrl-C does: the cluster it started is stopped, not left running."""
    def raise_interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, raise_interrupt)


def main() -> int:
    _stop_on_sigterm()
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=None, help="replay a run (printed at the start of each run)")
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--faults", default=None, help="comma-separated fault kinds (default: every kind the mode has)")
    parser.add_argument("--hosts", action="store_true", help="each node on its own host (network namespaces)")
    parser.add_argument("--inside", default=None, help=argparse.SUPPRESS)  # run:net of the hosts, on the client host
    parser.add_argument("--data-dir", default=None, help="keep the cluster's files here")
    parser.add_argument("--json", default=None, help="write the verdict as JSON to this file")
    parser.add_argument("--controller-protocol", choices=("http", "remoting"), default="http",
                        help="how the brokers talk to the controllers")
    parser.add_argument("--java-clients", action="store_true",
                        help="RocketMQ's Java clients in the workload too: orderly, failing, delayed and transactional "
                             "(tests/chaos/java_workload.py; needs java and mvn)")
    args = parser.parse_args()
    if args.java_clients and args.hosts:
        parser.error("--java-clients runs on loopback only")
    if args.hosts and args.inside is None:
        return on_hosts(args)
    seed = args.seed if args.seed is not None else random.randrange(1, 2**31)
    print(f"[chaos] seed={seed} minutes={args.minutes} (replay with --seed {seed})", flush=True)
    root = Path(args.data_dir) if args.data_dir else Path(tempfile.mkdtemp(prefix="mqctl-chaos-"))
    kinds = args.faults.split(",") if args.faults else HOST_FAULT_KINDS if args.hosts else FAULT_KINDS
    run = ChaosRun(root, seed, args.minutes * 60, producers=args.producers, kinds=tuple(k for k in kinds if k),
                   on_event=lambda s: print(s, flush=True), controller_protocol=args.controller_protocol,
                   topology=topology_of(args.inside) if args.inside else None,
                   java=JavaClients(PINNED).build() if args.java_clients else None)
    started = time.monotonic()
    try:
        run.start()
        history = run.run()
        assert run.cluster is not None
        run.heal(timeout=120)
        run.drain_java()
        time.sleep(3)
        verdict = check(run.cluster, history, run.workload)
    finally:
        run.stop()
        if not args.data_dir:
            shutil.rmtree(root, ignore_errors=True)
    report = {"seed": seed, "mode": "hosts" if args.hosts else "loopback", "seconds": round(time.monotonic() - started, 1), "ok": verdict.ok,
              "stats": verdict.stats, "violations": {k: v for k, v in verdict.violations.items() if v}}
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0 if verdict.ok else 1


def on_hosts(args: argparse.Namespace) -> int:
    """Build the hosts, run this command again on the client host, remove the hosts."""
    seed = args.seed if args.seed is not None else random.randrange(1, 2**31)
    try:
        topology = Topology(HOSTS).up()
    except NetnsUnavailable as exc:
        print(f"error: hosts mode needs network namespaces: {exc}", file=sys.stderr)
        return 2
    try:
        argv = [*sys.argv[1:], *([] if args.seed is not None else ["--seed", str(seed)]),
                "--inside", f"{topology.run}:{topology.net}"]
        return subprocess.run(["ip", "netns", "exec", topology.ns(CLIENT), sys.executable, "-m", "tests.chaos",
                               *argv], check=False).returncode
    finally:
        topology.down()


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt as exc:
        print(f"[chaos] interrupted ({exc or 'Ctrl-C'}): the cluster was stopped, no verdict", file=sys.stderr)
        sys.exit(130)
