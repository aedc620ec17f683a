"""The multi-host test topology (tests/netns): hosts reach each other over the private bridge, partitions
and one-way cuts drop exactly the traffic they name, netem is applied, and ``down`` leaves nothing behind.
Skipped, with the reason, where network namespaces cannot be created (they can on this project's CI)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.netns.topology import (
    PREFIX,
    IptablesUnavailable,
    NetemUnavailable,
    Topology,
    namespaces,
    unavailable_reason,
    wait_port,
)

pytestmark = [pytest.mark.slow, pytest.mark.netns]

REASON = unavailable_reason()


@pytest.fixture
def topology() -> Iterator[Topology]:
    if REASON is not None:
        pytest.skip(f"network namespaces are not available here: {REASON}")
    with Topology(["a", "b", "c"]) as t:
        yield t


SERVER = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 7000)); s.listen()
while True:
    c, _ = s.accept(); c.sendall(b"hello"); c.close()
"""


def reach(t: Topology, src: str, dst: str) -> bool:
    probe = (f"import socket; s = socket.create_connection(({t.address(dst)!r}, 7000), timeout=1); "
             "assert s.recv(5) == b'hello'")
    return t.run_in(src, sys.executable, "-c", probe, check=False).returncode == 0


def test_hosts_partitions_and_cleanup(topology: Topology) -> None:
    t = topology
    servers = [t.popen(h, [sys.executable, "-c", SERVER, t.address(h)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL) for h in ("a", "b")]
    for h in ("a", "b"):
        wait_port(t, h, t.address(h), 7000)
    assert reach(t, "c", "a") and reach(t, "c", "b") and reach(t, "a", "b")
    # The hosts have no route but their own /24: nothing they send can leave the topology.
    assert t.run_in("a", "ip", "route", "show").stdout.split("\n")[0].startswith(f"10.{t.net}.0.0/24")
    assert "default" not in t.run_in("a", "ip", "route", "show").stdout

    t.partition("a", "b")
    assert not reach(t, "a", "b") and not reach(t, "b", "a")
    assert reach(t, "c", "a") and reach(t, "c", "b")
    t.heal()
    assert reach(t, "a", "b")

    t.cut("c", "a")  # one way: c's packets to a are dropped, so c cannot connect; b still can
    assert not reach(t, "c", "a") and reach(t, "b", "a")
    t.heal()

    for server in servers:
        assert server.poll() is None


def test_netem(topology: Topology) -> None:
    t = topology
    try:
        t.impair("a", delay_ms=30, jitter_ms=5, loss_pct=1)
    except NetemUnavailable as exc:
        pytest.skip(str(exc))
    qdisc = t.run_in("a", "tc", "qdisc", "show", "dev", "eth0").stdout
    assert "netem" in qdisc and "delay 30ms" in qdisc and "loss 1%" in qdisc
    t.heal()
    assert "netem" not in t.run_in("a", "tc", "qdisc", "show", "dev", "eth0").stdout


def test_random_loss_with_iptables(topology: Topology) -> None:
    t = topology
    server = t.popen("a", [sys.executable, "-c", SERVER, t.address("a")], stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
    wait_port(t, "b", t.address("a"), 7000)
    try:
        t.lose("b", "a", 100.0)  # every packet b sends to a: b cannot connect, c still can
    except IptablesUnavailable as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(str(exc))
    rules = t.run_in("b", "iptables", "-S", "OUTPUT").stdout
    assert f"-d {t.address('a')}/32" in rules and "statistic" in rules
    assert not reach(t, "b", "a") and reach(t, "c", "a")
    t.heal()
    assert reach(t, "b", "a") and "statistic" not in t.run_in("b", "iptables", "-S", "OUTPUT").stdout
    assert server.poll() is None


def test_down_kills_processes_and_removes_every_namespace() -> None:
    if REASON is not None:
        pytest.skip(f"network namespaces are not available here: {REASON}")
    t = Topology(["x"]).up()
    sleeper = t.popen("x", ["sleep", "600"])
    t.down()
    assert sleeper.wait(timeout=10) != 0
    assert not [ns for ns in namespaces() if ns.startswith(f"{PREFIX}{t.run}-")]
