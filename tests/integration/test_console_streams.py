"""Many slow readers of the console's event stream (/console/stream) against a real controller: 200 clients
that connect with a 1 KiB receive buffer and never read, while the controller's view changes every second and
a well-behaved page keeps reading. The node serves at most MAX_STREAMS streams (the rest are refused with 503
SYSTEM_BUSY), cuts off each stream whose client takes nothing for httpBodyTimeoutMillis (its buffer freed), so
its memory stays bounded; meanwhile its API and Raft keep answering and the reading page keeps receiving.

Before the bounds, every stream was admitted and kept open for as long as its client stayed connected, each
holding its write buffer and its connection: memory grew with every reader that stopped, and nothing ever
closed them."""

from __future__ import annotations

import contextlib
import itertools
import select
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mqctl.cluster import ControllerCluster, ControllerNode
from services.controller import contract
from services.controller.console import MAX_STREAMS, STREAM
from tests.integration.conftest import FAST_SCANS, poll, register_broker

pytestmark = pytest.mark.integration

STALL_MS = 2000
SLOW_READERS = 200
#: What 200 stopped readers may add to the controller's memory: about 18 MB here with the bounds, 74 MB without
#: them (and without them it grows with every further reader, up to the connection cap).
MAX_GROWTH_KB = 40_000
_ports = itertools.count(22000)


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[ControllerCluster]:
    cluster = ControllerCluster(tmp_path / "c", size=1, extra={**FAST_SCANS, "httpBodyTimeoutMillis": STALL_MS})
    cluster.configure()
    cluster.start()
    try:
        cluster.leader(timeout=60)
        yield cluster
    finally:
        cluster.kill_all()


def rss_kb(node: ControllerNode) -> int:
    assert node.process is not None
    line = next(x for x in Path(f"/proc/{node.process.pid}/status").read_text().splitlines() if x.startswith("VmRSS"))
    return int(line.split()[1])


class Page:
    """A console page that reads its stream, counting the views it gets."""

    def __init__(self, address: str) -> None:
        self.views = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(address,), daemon=True)
        self._thread.start()

    def _read(self, address: str) -> None:
        with contextlib.suppress(httpx.HTTPError), \
                httpx.stream("GET", f"http://{address}{STREAM}", timeout=30) as response:
            for line in response.iter_lines():  # until closed, or the node is stopped at the end of the test
                self.views += line.startswith("event: state")
                if self._stop.is_set():
                    return

    def close(self) -> None:
        self._stop.set()


def stopped_reader(address: str) -> socket.socket:
    """A client that asks for the stream and never reads a byte of it."""
    host, _, port = address.rpartition(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    sock.connect((host, int(port)))
    sock.sendall(f"GET {STREAM} HTTP/1.1\r\nHost: {address}\r\n\r\n".encode())
    return sock


def drain(readers: list[socket.socket], within: float) -> tuple[int, int]:
    """Read what the server sent each reader until it closed the connection. Returns how many it had not closed
    after ``within`` seconds, and how many it had refused (503: the node serves MAX_STREAMS streams at most)."""
    waiting = {r.fileno(): r for r in readers}
    first: dict[int, bytes] = {}
    deadline = time.monotonic() + within
    while waiting and time.monotonic() < deadline:
        ready, _, _ = select.select(list(waiting.values()), [], [], 0.2)
        for sock in ready:
            try:
                data = sock.recv(1 << 16)
            except ConnectionResetError:  # cut off: what it had not read is gone with the connection
                data = b""
            first.setdefault(sock.fileno(), data)
            if not data:
                del waiting[sock.fileno()]
    refused = sum(1 for data in first.values() if data.startswith(b"HTTP/1.1 503 "))
    return len(waiting), refused


def change(cluster: ControllerCluster, count: int) -> None:
    """New groups: each changes the view every stream is sent."""
    with cluster.client(timeout=10) as client:
        for _ in range(count):
            register_broker(client, "StreamCluster", f"g{next(_ports)}", f"127.0.0.1:{next(_ports)}")


def test_stopped_readers_are_refused_or_cut_off_and_memory_stays_bounded(controller: ControllerCluster) -> None:
    node = controller.nodes[0]
    change(controller, 300)  # a view of some size: every message carries it whole
    page = Page(node.address)
    poll(lambda: page.views >= 1, 30, "the page's first view")
    baseline = rss_kb(node)
    with contextlib.ExitStack() as stack:
        readers = [stack.enter_context(stopped_reader(node.address)) for _ in range(SLOW_READERS)]
        peak, seen = baseline, page.views
        for _ in range(10):  # the view changes every second for 10 s
            started = time.monotonic()
            change(controller, 3)  # Raft keeps committing
            with httpx.Client(timeout=2.0) as client:
                assert client.get(f"http://{node.address}{contract.METADATA}").status_code == 200
            assert time.monotonic() - started < 5, "the API or Raft slowed down under the stopped readers"
            peak = max(peak, rss_kb(node))
            time.sleep(max(0.0, 1.0 - (time.monotonic() - started)))
        assert page.views >= seen + 5, (seen, page.views)  # the reading page kept getting every change
        left, refused = drain(readers, within=3 * STALL_MS / 1000)
        assert left == 0, f"{left} of {SLOW_READERS} stopped readers were still connected"
        assert SLOW_READERS - MAX_STREAMS <= refused <= SLOW_READERS - MAX_STREAMS + 1  # the page holds one
    assert peak - baseline < MAX_GROWTH_KB, f"memory grew by {peak - baseline} KiB"
    later = Page(node.address)  # the places came back
    poll(lambda: later.views >= 1, 30, "a new page's first view")
    page.close()
    later.close()
