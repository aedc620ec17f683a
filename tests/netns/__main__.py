"""``python -m tests.netns up HOST [HOST ...]`` builds a topology and prints its hosts and addresses (it stays
until ``down``); ``python -m tests.netns down RUN`` removes one; ``down --all`` removes every namespace a
test run left behind; ``list`` shows them."""

from __future__ import annotations

import argparse
import sys

from tests.netns.topology import PREFIX, NetnsUnavailable, Topology, cleanup_all, namespaces, remove


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.netns")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="create hosts on a private bridge")
    up.add_argument("hosts", nargs="+")
    down = sub.add_parser("down", help="remove a topology (or all of them)")
    down.add_argument("run", nargs="?")
    down.add_argument("--all", action="store_true")
    sub.add_parser("list", help="list the namespaces of every topology")
    args = parser.parse_args(argv)
    if args.command == "up":
        try:
            topology = Topology(args.hosts).up()
        except NetnsUnavailable as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"run {topology.run}")
        for host in args.hosts:
            print(f"{host}\t{topology.ns(host)}\t{topology.address(host)}")
        print(f"run commands with: ip netns exec {topology.ns(args.hosts[0])} <command>")
        return 0
    if args.command == "down":
        if args.all:
            print("\n".join(cleanup_all()) or "nothing to remove")
            return 0
        if not args.run:
            parser.error("give a run id or --all")
        for ns in [n for n in namespaces() if n.startswith(f"{PREFIX}{args.run}-")]:
            remove(ns)
            print(ns)
        return 0
    print("\n".join(ns for ns in namespaces() if ns.startswith(PREFIX)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
