"""Guards on the services' HTTP listeners: a connection cap, request-head and body deadlines, head and
body size limits. The limits themselves are services/common/httplimits.py.

uvicorn closes a keep-alive connection that stays idle after a response, and nothing else: a client
that connects and sends a request one byte at a time, or declares a body and never sends it, holds its
connection (and a file descriptor) forever, and the body of a request is read whole whatever its size.
So, on every connection:

- **Cap.** The outermost protocol counts open connections from accept (services/common/conncap.py: TLS
  handshakes included, strangers held to half the cap) and answers ``503 SYSTEM_BUSY`` and closes a
  connection beyond the cap at once. The cap is at most half the process's file descriptors (the soft
  limit is raised to the hard one at start), so it is reached long before descriptors run out.
- **Deadlines.** The request line and headers must arrive within ``header_timeout_s`` of the request's
  first byte (or of the connection opening), and the body within ``body_timeout_s`` of the headers;
  otherwise the request is answered ``408`` and the connection closed. Idle keep-alive connections are
  closed by uvicorn after ``keep_alive_s``. A websocket is left alone once upgraded (its pings tell a
  dead peer).
- **Readers that stop.** An answer the client does not take is held by the connection's write buffer: once it
  passes the transport's high-water mark the server waits (uvicorn's flow control). A client that does not
  take it back below the low-water mark within ``body_timeout_s`` is cut off (the connection aborted, the
  buffer freed), so a client that never reads (a console stream left open by a stuck page, or an attack) holds
  neither memory nor its connection for long.
- **Sizes.** A head over ``max_head_bytes`` is answered ``431`` before it is read further; bodies are
  the ASGI middleware's (services/common/bodylimit.py): over its route's limit ``413``, from its
  Content-Length before any byte of it is read, and for a chunked body as soon as the bytes read pass
  the limit; a request that would take the bodies being read at once beyond their shared budget is
  answered ``503 SYSTEM_BUSY`` (retriable) without being read.

Every refusal is the usual JSON envelope and closes the connection, so the rest of an oversized body is
never read into memory. The close is gentle: the answer is sent, our side of the connection shut, and
what the client still sends discarded for up to ``LINGER_S`` (a socket closed with unread input answers
with a reset, and the client would see "connection reset" instead of the answer). At most
``MAX_LINGERING`` connections linger at once; beyond, they are closed outright.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import resource
import socket
import time
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from services.common.codes import ResponseCode
from services.common.envelope import envelope
from services.common.httplimits import HttpLimits

log = logging.getLogger(__name__)

#: The soft descriptor limit a service asks for at start (up to the hard limit).
FD_TARGET = 65_536
#: The ASGI scope extension through which a long-lived answer (a console stream) limits the kernel's send
#: buffer of its connection: ``{"limit": callable taking the size in bytes}``.
SEND_BUFFER = "mqctl.send_buffer"
#: How long a refused connection is drained before it is closed, and how many may be drained at once.
LINGER_S = 2.0
MAX_LINGERING = 256


def raise_fd_limit(target: int = FD_TARGET) -> int:
    """Raise the soft RLIMIT_NOFILE towards ``target`` (never above the hard limit); return the result."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = target if hard == resource.RLIM_INFINITY else min(target, hard)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open-file limit from %d to %d: %s", soft, wanted, exc)
    return int(soft) if soft != resource.RLIM_INFINITY else target


class Throttled:
    """One log line per ``period_s`` for a refusal that a flood of connections repeats thousands of
    times a second; the lines left out are counted in the next one."""

    def __init__(self, period_s: float = 10.0, logger: logging.Logger | None = None) -> None:
        self.period_s = period_s
        self.logger = logger or log
        self._last = -period_s
        self._skipped = 0

    def log(self, level: int, message: str) -> None:
        now = time.monotonic()
        if now - self._last < self.period_s:
            self._skipped += 1
            return
        more = f" (and {self._skipped} more like it)" if self._skipped else ""
        self._last, self._skipped = now, 0
        self.logger.log(level, "%s%s", message, more)


_refusals = Throttled()


def error_response(status: int, code: int, remark: str) -> bytes:
    """A complete HTTP/1.1 answer carrying the envelope, closing the connection."""
    body = json.dumps(envelope(code, remark), separators=(",", ":")).encode()
    phrase = HTTPStatus(status).phrase
    head = (f"HTTP/1.1 {status} {phrase}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n")
    return head.encode("ascii") + body


class Linger:
    """Closes a connection after its answer without resetting it: shut our side (the client reads the
    answer, then sees the end), drop what it still sends, close when it closes or after LINGER_S."""

    active = 0

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self.transport = transport
        self._timer: asyncio.TimerHandle | None = None
        if Linger.active >= MAX_LINGERING or not transport.can_write_eof():
            transport.close()
            return
        Linger.active += 1
        transport.write_eof()
        transport.resume_reading()
        self._timer = loop.call_later(LINGER_S, transport.close)

    def peer_closed(self) -> None:
        self.transport.close()

    def ended(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            Linger.active -= 1


# ---------------------------------------------------------------------------------- head deadline and size
class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline on each request's head and body, and a size limit on
    its head. Subclassed per listener by :func:`guarded_http` to carry the limits."""

    limits = HttpLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._reading_head = True
        self._head_bytes = 0
        self._linger: Linger | None = None
        self._stall: asyncio.TimerHandle | None = None  # armed while the client does not take what is written

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.limits.header_timeout_s)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._reading_again()
        if self._linger is not None:
            self._linger.ended()
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._stall is None:
            self._stall = self.loop.call_later(self.limits.body_timeout_s, self._not_reading)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._reading_again()

    def _reading_again(self) -> None:
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None

    def _not_reading(self) -> None:
        self._stall = None
        _refusals.log(logging.INFO, f"HTTP connection from {_peer(self.client)} closed: it took nothing of its answer "
                                    f"for {self.limits.body_timeout_s:g} s")
        self.transport.abort()  # close() would wait for the buffer to drain, which this client never does

    def eof_received(self) -> None:
        if self._linger is not None:
            self._linger.peer_closed()

    def data_received(self, data: bytes) -> None:
        if self._linger is not None:
            return  # closing: what the client still sends is dropped unread
        if self._reading_head:
            self._head_bytes += len(data)
        super().data_received(data)
        # Checked after parsing: the chunk that completes a head may carry body bytes too.
        if self._reading_head and self._head_bytes > self.limits.max_head_bytes:
            self._refuse(431, f"request line and headers over {self.limits.max_head_bytes} bytes")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._deadline is None:
            self._arm(self.limits.header_timeout_s)

    def on_headers_complete(self) -> None:
        self._reading_head = False
        super().on_headers_complete()
        if self.cycle is not None and self.cycle.scope is self.scope:
            # A response that ends the connection closes it gently (the body may be unread).
            self.cycle.transport = _GentleClose(self.transport, self._close)  # type: ignore[assignment]
            self.scope.setdefault("extensions", {})[SEND_BUFFER] = {"limit": self._limit_send_buffer}
        self._arm(self.limits.body_timeout_s)

    def _limit_send_buffer(self, size: int) -> None:
        """Keep at most about ``size`` bytes of this connection's answer in the kernel (Linux doubles it). The
        kernel otherwise grows the buffer of a connection whose client does not read up to megabytes, and only
        once it is full does the answer back up here, where a reader that stopped is seen and cut off."""
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()
        self._reading_head, self._head_bytes = True, 0

    def busy(self) -> bool:
        """A request is being served (the connection cap does not close this connection to make room)."""
        return self.cycle is not None and not self.cycle.response_complete

    def handle_websocket_upgrade(self) -> None:
        self._disarm()  # the websocket protocol takes the connection over, with its own keepalive pings
        super().handle_websocket_upgrade()

    # ------------------------------------------------------------------ internals
    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.transport is None or self.transport.is_closing():
            return
        if self._earlier_request_in_progress():
            self._arm(self.limits.header_timeout_s)  # the slow party is us, not the client: look later
        elif not self._reading_head:
            self._refuse(408, f"request body not received within {self.limits.body_timeout_s:g} s")
        elif self._head_bytes:
            self._refuse(408, f"request headers not received within {self.limits.header_timeout_s:g} s")
        else:
            self.transport.close()  # connected and said nothing

    def _earlier_request_in_progress(self) -> bool:
        """A pipelined request waits (unread) while the one before it is served."""
        if self._reading_head:
            return self.cycle is not None and not self.cycle.response_complete
        return bool(self.pipeline)

    def _refuse(self, status: int, remark: str) -> None:
        self._disarm()
        if self.transport.is_closing():
            return
        _refusals.log(logging.INFO, f"HTTP connection from {_peer(self.client)} closed: {remark}")
        if self.cycle is None or not self.cycle.response_started:
            self.transport.write(error_response(status, ResponseCode.INVALID_PARAMETER, remark))
        self._close()

    def _close(self) -> None:
        if self.transport.is_closing() or self._linger is not None:
            return
        if self._reading_head and not self._head_bytes:
            self.transport.close()  # nothing of the client's is left unread
        else:
            self._linger = Linger(self.transport, self.loop)


class _GentleClose:
    """The transport as a request's response cycle sees it: ``close()`` is the protocol's gentle close."""

    def __init__(self, transport: asyncio.Transport, close: Callable[[], None]) -> None:
        self._transport = transport
        self.close = close

    def write(self, data: bytes) -> None:
        self._transport.write(data)

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def guarded_http(limits: HttpLimits) -> type[asyncio.Protocol]:
    return type("GuardedHttpProtocol", (GuardedHttpToolsProtocol,), {"limits": limits})


def _peer(client: tuple[str, int] | None) -> str:
    return f"{client[0]}:{client[1]}" if client else "?"


def uvicorn_options(limits: HttpLimits) -> dict[str, Any]:
    """uvicorn's own settings that the limits decide."""
    return {"timeout_keep_alive": limits.keep_alive_s, "ws_max_size": limits.ws_max_message_bytes,
            "h11_max_incomplete_event_size": limits.max_head_bytes}
