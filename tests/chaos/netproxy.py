"""Loopback TCP proxies for network faults: every byte between two processes goes through one, and a
test can cut it (refuse and drop connections), delay it, or make it one-way."""

from __future__ import annotations

import asyncio
import socket
import threading
from dataclasses import dataclass, field


@dataclass
class Proxy:
    listen_port: int
    target: tuple[str, int]
    mode: str = "pass"  # pass | cut | delay | oneway (client→server only)
    delay_s: float = 0.0
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.listen_port}"


class ProxySet:
    """Runs every proxy on one asyncio loop in a background thread."""

    def __init__(self) -> None:
        self.proxies: list[Proxy] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="netproxy")
        self._thread.start()

    def add(self, target: str) -> Proxy:
        host, _, port = target.rpartition(":")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            listen = int(s.getsockname()[1])
        proxy = Proxy(listen, (host, int(port)))
        asyncio.run_coroutine_threadsafe(self._serve(proxy), self._loop).result(5)
        self.proxies.append(proxy)
        return proxy

    def set_mode(self, proxy: Proxy, mode: str, delay_s: float = 0.0) -> None:
        def apply() -> None:
            proxy.mode, proxy.delay_s = mode, delay_s
            if mode == "cut":
                for writer in list(proxy._writers):
                    writer.close()
        self._loop.call_soon_threadsafe(apply)

    async def _serve(self, proxy: Proxy) -> None:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if proxy.mode == "cut":
                writer.close()
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(*proxy.target)
            except OSError:
                writer.close()
                return
            proxy._writers.update({writer, up_writer})
            await asyncio.gather(self._pipe(proxy, reader, up_writer, upstream=True),
                                 self._pipe(proxy, up_reader, writer, upstream=False), return_exceptions=True)
            proxy._writers.difference_update({writer, up_writer})
            for w in (writer, up_writer):
                w.close()

        await asyncio.start_server(handle, "127.0.0.1", proxy.listen_port)

    @staticmethod
    async def _pipe(proxy: Proxy, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, upstream: bool) -> None:
        while True:
            data = await reader.read(65536)
            if not data or proxy.mode == "cut":
                writer.close()
                return
            if proxy.mode == "delay":
                await asyncio.sleep(proxy.delay_s)
            if proxy.mode == "oneway" and not upstream:
                continue  # answers are dropped: requests arrive, nothing comes back
            writer.write(data)
            await writer.drain()

    def close(self) -> None:
        async def shutdown() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
