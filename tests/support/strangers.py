"""Attacks from a stranger, shared by the integration tests and the chaos harness: connections that trickle a
remoting frame one byte at a time, connections that never say anything, and a web page's websocket to the
controllers' liveness channel.

On loopback every node is configured at 127.0.0.1, so connections from there are the nodes' known peers; a
stranger connects from ``STRANGER``, another loopback address (Linux routes all of 127.0.0.0/8 to lo)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import resource
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import websockets
from websockets.exceptions import InvalidStatus, WebSocketException
from websockets.sync.client import connect as ws_connect

STRANGER = "127.0.0.2"
#: The start of a remoting frame that declares 1 MiB and never gets there: its first byte routes the
#: connection to the remoting protocol, the rest follows a byte at a time.
FRAME_START = b"\x00\x10\x00\x00"


def source_for(host: str) -> str | None:
    """The address a stranger connects from: ``STRANGER`` on loopback, the host's own address elsewhere."""
    return STRANGER if host.startswith("127.") else None


def raise_fd_limit() -> int:
    """This process may hold as many sockets as its hard limit allows (returned)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return int(hard if hard != resource.RLIM_INFINITY else 1 << 20)


#: Linux's IP_BIND_ADDRESS_NO_PORT: a socket bound to a source address before it connects gets its port at
#: connect time, so the ports of one source address are not used up by connections to different servers.
_BIND_ADDRESS_NO_PORT = 24


async def connect_from(host: str, port: int, source: str | None) -> socket.socket:
    """A non-blocking socket connected to ``host:port`` from ``source`` (any address if None)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        if source:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_IP, _BIND_ADDRESS_NO_PORT, 1)
            sock.bind((source, 0))
        await asyncio.get_running_loop().sock_connect(sock, (host, port))
    except BaseException:
        sock.close()
        raise
    return sock


def open_from(host: str, port: int, source: str | None, timeout: float = 5.0) -> socket.socket:
    return socket.create_connection((host, port), timeout=timeout,
                                    source_address=(source, 0) if source else None)


@contextlib.contextmanager
def silent_connections(host: str, port: int, count: int, source: str | None = STRANGER) -> Iterator[list[socket.socket]]:
    """``count`` connections that never send a byte (not even a TLS ClientHello), closed at the end. One the
    server refuses at once may fail to open: it is left out."""
    held: list[socket.socket] = []
    try:
        for _ in range(count):
            with contextlib.suppress(OSError):
                held.append(open_from(host, port, source))
        yield held
    finally:
        for sock in held:
            sock.close()


def closed_by_server(sock: socket.socket) -> bool:
    """True once the server has closed ``sock`` (it reads as the end, or a reset)."""
    sock.setblocking(False)
    try:
        return sock.recv(4096) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


@dataclass
class Trickler:
    """Keeps ``per_target`` connections to each target, each sending a remoting frame one byte every
    ``pace_s``; a connection the server closes is opened again (after a pace if it lived less). Runs on a thread
    of its own."""

    targets: list[tuple[str, int]]
    per_target: int
    pace_s: float = 0.3
    opened: int = 0
    open_now: int = 0
    most_open: int = 0
    #: How long each connection the server closed had lived (seconds).
    lifetimes: list[float] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Trickler:
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True, name="trickler")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    async def _run(self) -> None:
        tasks = [asyncio.create_task(self._keep(host, port)) for host, port in self.targets
                 for _ in range(self.per_target)]
        await asyncio.to_thread(self._stop.wait)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _keep(self, host: str, port: int) -> None:
        # A connection the server refused (or closed within a pace) is opened again after a pace, not at once:
        # this attacker holds connections open, it does not flood the accept queue (a connect flood from
        # thousands of tasks would take this machine's cores from everyone, servers and harness alike).
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                await self._trickle(host, port)
            except OSError:
                pass
            if time.monotonic() - started < self.pace_s:
                await asyncio.sleep(self.pace_s)

    async def _trickle(self, host: str, port: int) -> None:
        reader, writer = await asyncio.open_connection(sock=await connect_from(host, port, source_for(host)))
        started = time.monotonic()
        self.opened += 1
        self.open_now += 1
        self.most_open = max(self.most_open, self.open_now)
        try:
            writer.write(FRAME_START[:1])
            sent = 1
            while not reader.at_eof():
                with contextlib.suppress(TimeoutError):
                    if await asyncio.wait_for(reader.read(4096), self.pace_s) == b"":
                        break
                writer.write(FRAME_START[sent:sent + 1] or b"\x00")
                sent += 1
            self.lifetimes.append(time.monotonic() - started)
        except (ConnectionError, OSError):
            self.lifetimes.append(time.monotonic() - started)
        finally:
            self.open_now -= 1
            writer.close()


def _trickle_in_child(targets: list[tuple[str, int]], per_target: int, pace_s: float,
                      opened: Any, stop: Any) -> None:
    raise_fd_limit()
    attack = Trickler(targets, per_target, pace_s).start()
    while not stop.wait(0.2):
        opened.value = attack.opened
    attack.stop()


@dataclass
class TricklerProcess:
    """A Trickler in a process of its own: the chaos harness's proxies and producers share its process, and
    thousands of trickling connections on a thread there took the interpreter from them (the brokers'
    heartbeats, passing the harness's proxies, then missed their deadlines: the harness, not the servers,
    was starved)."""

    targets: list[tuple[str, int]]
    per_target: int
    pace_s: float = 0.3
    _process: Any = None
    _opened: Any = None
    _stop: Any = None

    def start(self) -> TricklerProcess:
        context = multiprocessing.get_context("spawn")
        self._opened, self._stop = context.Value("q", 0), context.Event()
        self._process = context.Process(target=_trickle_in_child, name="trickler", daemon=True,
                                        args=(self.targets, self.per_target, self.pace_s, self._opened, self._stop))
        self._process.start()
        return self

    @property
    def opened(self) -> int:
        return int(self._opened.value) if self._opened is not None else 0

    def stop(self) -> None:
        if self._process is None:
            return
        self._stop.set()
        self._process.join(timeout=30)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(timeout=10)


def channel_url(address: str, cluster: str, group: str, broker_id: int, scheme: str = "ws") -> str:
    return (f"{scheme}://{address}/v1/controller/channel?clusterName={cluster}&brokerName={group}"
            f"&brokerId={broker_id}")


def cross_site_channel(url: str, origin: str) -> tuple[int, dict[str, Any] | None]:
    """What a web page from ``origin`` gets when it opens ``url`` (a liveness channel) and closes it at once:
    101 when the channel opened, else the refusal's status and its JSON envelope (None if it had none)."""
    try:
        with ws_connect(url, origin=websockets.Origin(origin), proxy=None, open_timeout=5, close_timeout=2):
            return 101, None
    except InvalidStatus as exc:
        body = exc.response.body or b""
        try:
            return exc.response.status_code, json.loads(body)
        except ValueError:
            return exc.response.status_code, None
    except (WebSocketException, OSError):
        return 0, None
