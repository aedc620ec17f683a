"""A blocking client of RocketMQ's remoting protocol, for the command line: one request at a time per
address, over a connection kept open for the command's lifetime.

The answer is hostile until checked: frames are bounded by ``max_frame_size`` and decoded by the sans-I/O
codec, the whole exchange must finish before the caller's deadline, and an answer is matched to its
request by ``opaque`` (an answer to anything else is dropped). Transport failures become
``UnreachableError``, a frame the codec refuses a ``RemoteError`` naming the address; either way the
connection is closed, so the next request starts clean.
"""

from __future__ import annotations

import itertools
import socket
import time
from collections.abc import Callable
from dataclasses import replace

from services.common import tls
from services.common.codes import ResponseCode
from services.common.errors import RemoteError, UnreachableError
from services.remoting.acl import sign
from services.remoting.codec import FrameDecoder, encode
from services.remoting.command import RemotingCommand
from services.remoting.errors import RemotingProtocolError

#: The largest answer the command line accepts (a cluster's whole route table is far smaller).
MAX_ANSWER_FRAME = 16 * 1024 * 1024

__all__ = ["MAX_ANSWER_FRAME", "BlockingRemoting", "signer"]


class _Link:
    def __init__(self, sock: socket.socket, max_frame_size: int) -> None:
        self.sock = sock
        self.decoder = FrameDecoder(max_frame_size)

    def close(self) -> None:
        self.sock.close()


class BlockingRemoting:
    def __init__(self, max_frame_size: int = MAX_ANSWER_FRAME,
                 signer: Callable[[RemotingCommand], RemotingCommand] | None = None) -> None:
        self.max_frame_size = max_frame_size
        self.signer = signer  # applied to every request (see ``signer``)
        self._links: dict[tuple[str, int], _Link] = {}
        self._opaque = itertools.count(1)

    def close(self) -> None:
        for link in self._links.values():
            link.close()
        self._links.clear()

    def call(self, host: str, port: int, request: RemotingCommand, deadline: float) -> RemotingCommand:
        """Send ``request`` to ``host:port`` and return its answer, or raise before ``deadline``."""
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if self.signer is not None:
            request = self.signer(request)
        request = replace(request, opaque=next(self._opaque) % (2**31 - 1) or 1)
        link = self._link(host, port, where, deadline)
        try:
            _remaining(deadline, where)
            link.sock.settimeout(_remaining(deadline, where))
            link.sock.sendall(encode(request, self.max_frame_size))
            return self._answer(link, request.opaque, where, deadline)
        except BaseException:
            self._drop(host, port)
            raise

    def _link(self, host: str, port: int, where: str, deadline: float) -> _Link:
        link = self._links.get((host, port))
        if link is None:
            try:
                sock = socket.create_connection((host, port), timeout=min(_remaining(deadline, where), 2.0))
            except OSError as exc:
                raise UnreachableError(f"{where} is unreachable: {_reason(exc)}", [where]) from None
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            context = tls.client_tls()
            if context is not None:
                try:
                    sock = context.wrap_socket(sock, server_hostname=tls.server_hostname(host))
                except (OSError, ValueError) as exc:
                    sock.close()
                    raise UnreachableError(f"{where}: TLS handshake failed: {tls.handshake_reason(exc)}",
                                           [where]) from None
            link = self._links[(host, port)] = _Link(sock, self.max_frame_size)
        return link

    def _answer(self, link: _Link, opaque: int, where: str, deadline: float) -> RemotingCommand:
        while True:
            link.sock.settimeout(_remaining(deadline, where))
            try:
                data = link.sock.recv(65536)
            except TimeoutError:
                raise UnreachableError(f"{where} did not answer in time", [where]) from None
            except OSError as exc:
                raise UnreachableError(f"{where} is unreachable: {_reason(exc)}", [where]) from None
            if not data:
                raise UnreachableError(f"{where} closed the connection without answering", [where])
            try:
                commands = link.decoder.feed(data)
            except RemotingProtocolError as exc:
                raise RemoteError(int(ResponseCode.SYSTEM_ERROR),
                                  f"{where} answered a malformed remoting frame: {exc}") from None
            for command in commands:
                if command.is_response and command.opaque == opaque:
                    return command

    def _drop(self, host: str, port: int) -> None:
        link = self._links.pop((host, port), None)
        if link is not None:
            link.close()


def _remaining(deadline: float, where: str) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise UnreachableError(f"{where} did not answer in time", [where])
    return left


def _reason(exc: OSError) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    return exc.strerror or str(exc) or type(exc).__name__


def signer(token: str | None) -> Callable[[RemotingCommand], RemotingCommand] | None:
    """Signs each request with ``token`` at the time it is sent (services/remoting/acl.py); None without one."""
    if not token:
        return None
    return lambda request: sign(request, token, time.time_ns() // 1_000_000)
