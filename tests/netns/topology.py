"""Hosts on one machine: network namespaces on a private bridge, for tests of what crosses a network.

Every host is a network namespace with one interface, ``eth0``, holding a private address
(``10.<net>.0.<n>/24``) and its own loopback. The bridge lives in a namespace of its own (the *switch*), so
nothing is added to the machine's own network: the topology is the namespaces this module creates and
removes, all named ``mqns-<run>-…``. Faults are made with iproute2 alone, inside the hosts:

- ``partition(a, b)`` / ``cut(a, b)`` (one way): blackhole routes, so packets to the other host are dropped
  at the sender (a connection attempt fails at once, an established connection stalls);
- ``impair(host, delay_ms, jitter_ms, loss_pct)``: a netem qdisc on the host's ``eth0`` (every packet it
  sends), where the kernel has netem;
- ``lose(src, dst, pct)``: random loss of what ``src`` sends to ``dst`` (one way), with iptables'
  ``statistic`` match, which kernels without netem have;
- ``heal()``: every route and qdisc back as it was.

``down()`` kills every process still running in the hosts and deletes the namespaces; ``python -m
tests.netns down --all`` removes whatever a crashed run left behind.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Self

PREFIX = "mqns-"


class NetnsUnavailable(Exception):
    """Network namespaces cannot be created here (not root, no iproute2, or the kernel refuses)."""


class NetemUnavailable(Exception):
    """The kernel has no netem qdisc (sch_netem): delay, jitter and loss cannot be made with tc here."""


class IptablesUnavailable(Exception):
    """No iptables command (Debian's iptables package), or the kernel refuses its rule."""


def ip(*args: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    argv = ["ip", *(["-n", ns] if ns else []), *args]
    return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=30)


def in_ns(ns: str, *argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True, check=check,
                          timeout=timeout)


def unavailable_reason() -> str | None:
    """Why namespaces cannot be used here, or None when they can (a namespace is created and removed)."""
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is not installed"
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    probe = f"{PREFIX}probe-{secrets.token_hex(3)}"
    try:
        made = subprocess.run(["ip", "netns", "add", probe], check=False, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"ip netns add failed: {exc}"
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], check=False, capture_output=True, timeout=30)
    return None


def namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], check=False, capture_output=True, text=True, timeout=30).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def kill_all_in(ns: str) -> None:
    pids = subprocess.run(["ip", "netns", "pids", ns], check=False, capture_output=True, text=True, timeout=30).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            continue


def remove(ns: str) -> None:
    kill_all_in(ns)
    subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True, timeout=30)


def cleanup_all() -> list[str]:
    """Remove every namespace this module ever created (after a crash); returns their names."""
    gone = [ns for ns in namespaces() if ns.startswith(PREFIX)]
    for ns in gone:
        remove(ns)
    return gone


@dataclass
class Topology:
    """``hosts`` named hosts on one /24; ``address(name)`` is a host's address."""

    hosts: Sequence[str]
    run: str = field(default_factory=lambda: secrets.token_hex(3))
    net: int = field(default_factory=lambda: 64 + secrets.randbelow(128))
    _impaired: set[str] = field(default_factory=set)
    _routes: set[tuple[str, str]] = field(default_factory=set)
    _filtered: set[str] = field(default_factory=set)
    _started: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def switch(self) -> str:
        return f"{PREFIX}{self.run}-sw"

    def ns(self, host: str) -> str:
        return f"{PREFIX}{self.run}-{host}"

    def address(self, host: str) -> str:
        return f"10.{self.net}.0.{list(self.hosts).index(host) + 1}"

    def up(self) -> Topology:
        reason = unavailable_reason()
        if reason is not None:
            raise NetnsUnavailable(reason)
        try:
            self._build()
        except BaseException:
            self.down()
            raise
        return self

    def _build(self) -> None:
        ip("netns", "add", self.switch)
        ip("link", "add", "br0", "type", "bridge", ns=self.switch)
        ip("link", "set", "br0", "up", ns=self.switch)
        for i, host in enumerate(self.hosts):
            ns = self.ns(host)
            ip("netns", "add", ns)
            ip("link", "set", "lo", "up", ns=ns)
            ip("link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", f"p{i}", "netns", self.switch)
            ip("link", "set", f"p{i}", "master", "br0", ns=self.switch)
            ip("link", "set", f"p{i}", "up", ns=self.switch)
            ip("addr", "add", f"{self.address(host)}/24", "dev", "eth0", ns=ns)
            ip("link", "set", "eth0", "up", ns=ns)

    def down(self) -> None:
        # What popen() started is killed by its pid first: a process forked an instant ago may not have
        # entered its namespace yet, so ``ip netns pids`` would not list it.
        for proc in self._started:
            if proc.poll() is None:
                try:
                    proc.kill()
                except ProcessLookupError:
                    pass
        self._started.clear()
        for host in self.hosts:
            remove(self.ns(host))
        remove(self.switch)

    def __enter__(self) -> Self:
        return self.up()

    def __exit__(self, *_: object) -> None:
        self.down()

    # ------------------------------------------------------------------ processes
    def popen(self, host: str, argv: Sequence[str], **kwargs: object) -> subprocess.Popen[bytes]:
        """Start ``argv`` inside ``host`` (killed by ``down()`` if still running)."""
        proc: subprocess.Popen[bytes] = subprocess.Popen(  # type: ignore[call-overload]
            ["ip", "netns", "exec", self.ns(host), *argv], **kwargs)
        self._started.append(proc)
        return proc

    def run_in(self, host: str, *argv: str, check: bool = True,
               timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return in_ns(self.ns(host), *argv, check=check, timeout=timeout)

    # ------------------------------------------------------------------ faults
    def cut(self, src: str, dst: str) -> None:
        """Drop everything ``src`` sends to ``dst`` (one way)."""
        ip("route", "replace", "blackhole", f"{self.address(dst)}/32", ns=self.ns(src))
        self._routes.add((src, dst))

    def partition(self, a: str, b: str) -> None:
        self.cut(a, b)
        self.cut(b, a)

    def impair(self, host: str, delay_ms: int = 0, jitter_ms: int = 0, loss_pct: float = 0.0) -> None:
        """netem on everything ``host`` sends: delay (± jitter) and random loss. Raises NetemUnavailable
        on a kernel without sch_netem."""
        args = ["qdisc", "replace", "dev", "eth0", "root", "netem"]
        if delay_ms or jitter_ms:
            args += ["delay", f"{delay_ms}ms", *([f"{jitter_ms}ms"] if jitter_ms else [])]
        if loss_pct:
            args += ["loss", f"{loss_pct}%"]
        done = in_ns(self.ns(host), "tc", *args, check=False)
        if done.returncode != 0:
            if "unknown" in done.stderr.lower():
                raise NetemUnavailable(f"tc netem is not available in this kernel: {done.stderr.strip()}")
            raise subprocess.CalledProcessError(done.returncode, done.args, done.stdout, done.stderr)
        self._impaired.add(host)

    def lose(self, src: str, dst: str, pct: float) -> None:
        """Drop ``pct`` % of the packets ``src`` sends to ``dst``, at random (one way)."""
        if shutil.which("iptables") is None:
            raise IptablesUnavailable("iptables is not installed (apt-get install iptables)")
        done = in_ns(self.ns(src), "iptables", "-A", "OUTPUT", "-d", f"{self.address(dst)}/32", "-m", "statistic",
                     "--mode", "random", "--probability", f"{pct / 100:.4f}", "-j", "DROP", check=False)
        if done.returncode != 0:
            raise IptablesUnavailable(f"iptables refused a loss rule: {done.stderr.strip()}")
        self._filtered.add(src)

    def heal(self) -> None:
        for src, dst in sorted(self._routes):
            ip("route", "del", "blackhole", f"{self.address(dst)}/32", ns=self.ns(src), check=False)
        for host in sorted(self._impaired):
            in_ns(self.ns(host), "tc", "qdisc", "del", "dev", "eth0", "root", check=False)
        for host in sorted(self._filtered):
            in_ns(self.ns(host), "iptables", "-F", "OUTPUT", check=False)
        self._routes.clear()
        self._impaired.clear()
        self._filtered.clear()


def wait_port(topology: Topology, host: str, address: str, port: int, timeout: float = 30.0) -> None:
    """Wait until something listens on ``address:port``, as seen from ``host``."""
    deadline = time.monotonic() + timeout
    probe = (f"import socket; socket.create_connection(({address!r}, {port}), timeout=1).close()")
    while time.monotonic() < deadline:
        if topology.run_in(host, "python3", "-c", probe, check=False).returncode == 0:
            return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on {address}:{port} as seen from {host}")
