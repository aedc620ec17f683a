"""python -m tests.rocketmq fetch|up|status|mqadmin|down: the kit by hand.

``up`` starts a name server, three controllers and the brokers of one group under a folder (default
``$MQCTL_ROCKETMQ_RUN`` or ``<tmp>/mqctl-rocketmq-run``) and returns, leaving them running; ``status``
and ``down`` find them through the folder's state.json; ``mqadmin`` runs the real mqadmin against them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from tests.rocketmq import VERSIONS, KitError, RocketMQ
from tests.rocketmq.cluster import RocketMQCluster, load_state, mqadmin, recorded_processes
from tests.rocketmq.fetch import require_java
from tests.rocketmq.jvm import stop_all
from tests.rocketmq.probe import controller_metadata, sync_state
from tests.rocketmq.servers import Runtime


def default_dir() -> Path:
    return Path(os.environ.get("MQCTL_ROCKETMQ_RUN") or Path(tempfile.gettempdir()) / "mqctl-rocketmq-run")


def cmd_fetch(args: argparse.Namespace) -> int:
    require_java()
    for version in args.versions or VERSIONS:
        rocketmq = RocketMQ(version)
        cached = rocketmq.is_fetched()
        rocketmq.fetch()
        jars = len(list(rocketmq.lib.glob("*.jar")))
        print(f"RocketMQ {version}: {rocketmq.lib} ({jars} jars{', cached' if cached else ''})")
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    root: Path = args.dir
    if (root / "state.json").is_file() and any(p.alive() for p in recorded_processes(load_state(root))):
        raise KitError(f"a cluster started from {root} is still running: python -m tests.rocketmq down first")
    shutil.rmtree(root, ignore_errors=True)  # an old store under another identity breaks registration
    cluster = RocketMQCluster(root, args.version, brokers=args.brokers, outlive_parent=True)
    cluster.start()
    assert cluster.controllers is not None
    print(f"RocketMQ {args.version} is up under {root}")
    print(f"  name server   {cluster.namesrv_addr}")
    print(f"  controllers   {cluster.controller_addrs}   (leader {cluster.leader()})")
    print(f"  brokers       {' '.join(b.address for b in cluster.brokers)}   (group {cluster.group})")
    print("  ready after   " + ", ".join(f"{k.replace('_', ' ')} {v:.1f} s" for k, v in cluster.timings.items()))
    print(f"try: python -m tests.rocketmq mqadmin getSyncStateSet -a '{cluster.controller_addrs}' -b {cluster.group}")
    print(f"     mqctl getSyncStateSet -a '{cluster.controller_addrs}' -b {cluster.group} --format mqadmin")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    processes = recorded_processes(load_state(args.dir))
    running = [p for p in processes if p.alive()]
    stop_all(running)
    left = [p for p in running if p.alive()]
    print(f"stopped {len(running) - len(left)} of {len(running)} running processes started from {args.dir}")
    return 1 if left else 0


def cmd_status(args: argparse.Namespace) -> int:
    state = load_state(args.dir)
    print(f"RocketMQ {state['version']} under {args.dir}")
    for process in recorded_processes(state):
        print(f"  {process.name:<16} pid {process.pid:<8} {'running' if process.alive() else 'stopped'}")
    for address in state["controllers"]:
        try:
            meta = controller_metadata(address)
            print(f"  controller {address}: leader {meta.controller_leader_address}")
        except Exception as exc:  # noqa: BLE001 - a status line per node, whatever went wrong
            print(f"  controller {address}: no answer ({exc})")
            continue
        if meta.is_leader and (info := sync_state(address, state["group"])) is not None:
            members = ", ".join(f"{r.broker_id}@{r.broker_address}" for r in info.in_sync_replicas)
            print(f"  {state['group']}: master {info.master_broker_id}@{info.master_address} "
                  f"epoch {info.master_epoch}, in sync: {members}")
    return 0


def cmd_mqadmin(args: argparse.Namespace) -> int:
    state = load_state(args.dir) if (args.dir / "state.json").is_file() else None
    version = args.version or (state["version"] if state else VERSIONS[0])
    runtime = Runtime(require_java(), RocketMQ(version).fetch(), args.dir / "home")
    done = mqadmin(runtime, args.dir / "admin", tuple(args.args), state["namesrv"] if state else None)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    return done.returncode


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m tests.rocketmq", description=__doc__.split("\n")[0])
    sub = top.add_subparsers(dest="command", required=True)
    fetch = sub.add_parser("fetch", help="resolve the jars of these versions (default: every tested one)")
    fetch.add_argument("versions", nargs="*")
    fetch.set_defaults(run=cmd_fetch)
    for name, run, text in (("up", cmd_up, "start a cluster and leave it running"),
                            ("down", cmd_down, "stop what up started"), ("status", cmd_status, "what runs"),
                            ("mqadmin", cmd_mqadmin, "run the real mqadmin (NAMESRV_ADDR set)")):
        command = sub.add_parser(name, help=text)
        command.add_argument("--dir", type=Path, default=default_dir(), help="the cluster's folder")
        command.set_defaults(run=run)
        if name in ("up", "mqadmin"):
            command.add_argument("--version", default=VERSIONS[0] if name == "up" else None)
        if name == "up":
            command.add_argument("--brokers", type=int, default=3)
        if name == "mqadmin":
            command.add_argument("args", nargs=argparse.REMAINDER, help="mqadmin's command and options")
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        code: int = args.run(args)
    except (KitError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
