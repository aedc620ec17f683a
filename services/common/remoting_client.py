"""An asyncio client of RocketMQ's remoting protocol: one connection per address, many requests in flight
on it, each answer matched to its request by ``opaque``.

``call`` sends a request and waits for its answer (``RemotingTimeout`` after ``timeout_s``; the
connection stays usable and a late answer is dropped); ``oneway`` sends a request that gets no answer.
A connection that breaks (closed by the peer, a malformed frame) fails every request waiting on it with
``RemotingUnreachable`` and is opened again by the next request.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Callable
from dataclasses import replace

from services.common import tls
from services.common.errors import MqctlError, UnreachableError
from services.remoting.codec import MAX_FRAME_SIZE, FrameDecoder, encode
from services.remoting.command import ONEWAY_FLAG, RemotingCommand
from services.remoting.errors import RemotingProtocolError

log = logging.getLogger(__name__)


class RemotingTimeout(MqctlError):
    """No answer within the timeout (the request may still have been carried out)."""

    exit_code = 3


class _Connection:
    def __init__(self, address: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 max_frame_size: int) -> None:
        self.address = address
        self.writer = writer
        self.waiting: dict[int, asyncio.Future[RemotingCommand]] = {}
        self.decoder = FrameDecoder(max_frame_size)
        self.closed = False
        self.reading = asyncio.get_running_loop().create_task(self._read(reader), name=f"remoting-{address}")

    async def _read(self, reader: asyncio.StreamReader) -> None:
        reason = "closed by the peer"
        try:
            while data := await reader.read(65536):
                for command in self.decoder.feed(data):
                    future = self.waiting.pop(command.opaque, None) if command.is_response else None
                    if future is not None and not future.done():
                        future.set_result(command)
        except RemotingProtocolError as exc:
            reason = f"malformed answer: {exc}"
        except (ConnectionError, OSError) as exc:
            reason = str(exc) or type(exc).__name__
        finally:
            self.fail(reason)

    def fail(self, reason: str) -> None:
        self.closed = True
        self.writer.close()
        for future in self.waiting.values():
            if not future.done():
                future.set_exception(UnreachableError(f"{self.address}: connection lost ({reason})"))
        self.waiting.clear()


class RemotingClient:
    def __init__(self, timeout_s: float = 3.0, max_frame_size: int = MAX_FRAME_SIZE,
                 signer: Callable[[RemotingCommand], RemotingCommand] | None = None) -> None:
        self.timeout_s = timeout_s
        self.max_frame_size = max_frame_size
        self.signer = signer  # applied to every request (services/remoting/acl.py)
        self._connections: dict[str, _Connection] = {}
        self._connecting: dict[str, asyncio.Lock] = {}
        self._opaque = itertools.count(1)

    async def call(self, address: str, request: RemotingCommand, timeout_s: float | None = None) -> RemotingCommand:
        timeout = self.timeout_s if timeout_s is None else timeout_s
        conn = await self._connection(address, timeout)
        if self.signer is not None:
            request = self.signer(request)
        request = replace(request, opaque=self._next_opaque())
        future: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        conn.waiting[request.opaque] = future
        try:
            conn.writer.write(encode(request, self.max_frame_size))
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise RemotingTimeout(f"{address} did not answer request {request.code} within {timeout:.1f} s") from None
        finally:
            conn.waiting.pop(request.opaque, None)

    async def oneway(self, address: str, request: RemotingCommand) -> None:
        conn = await self._connection(address, self.timeout_s)
        if self.signer is not None:
            request = self.signer(request)
        request = replace(request, opaque=self._next_opaque(), flag=request.flag | ONEWAY_FLAG)
        conn.writer.write(encode(request, self.max_frame_size))
        with contextlib.suppress(ConnectionError, OSError):
            await conn.writer.drain()

    async def close(self) -> None:
        for conn in list(self._connections.values()):
            conn.fail("client closed")
            conn.reading.cancel()
        self._connections.clear()

    def _next_opaque(self) -> int:
        value = next(self._opaque)
        if value >= 2**31 - 1:
            self._opaque = itertools.count(1)
        return value

    async def _connection(self, address: str, timeout: float) -> _Connection:
        conn = self._connections.get(address)
        if conn is not None and not conn.closed:
            return conn
        lock = self._connecting.setdefault(address, asyncio.Lock())
        async with lock:
            conn = self._connections.get(address)
            if conn is not None and not conn.closed:
                return conn
            host, _, port = address.rpartition(":")
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(
                    host.strip("[]"), int(port), ssl=tls.client_tls(), server_hostname=tls.server_hostname(host)),
                    timeout)
            except (OSError, TimeoutError, ValueError) as exc:
                raise UnreachableError(f"{address} is unreachable: {exc or type(exc).__name__}") from None
            conn = self._connections[address] = _Connection(address, reader, writer, self.max_frame_size)
            return conn
