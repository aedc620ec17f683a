"""The I/O shell of a remoting server connection: bytes from the socket go through a ``FrameDecoder``,
each request is handled in its own task (many in flight on one connection, answered by ``opaque`` in
whatever order they finish), and answers are written in the request's serialize type.

What is bounded: one frame (``max_frame_size``, checked from its length prefix), its header and, by the
request's code, its body (``limits``, services/remoting/limits.py: a body larger than its code admits is
skipped unread and the request answered with the refusal its server chose), requests in flight on one
connection (``max_in_flight``; reading pauses beyond it), the time a frame takes to arrive (its length, mark
and header within ``head_timeout_s`` of its first byte, the rest within ``frame_timeout_s`` of its header:
the listener's HTTP head and body deadlines, so a byte now and then cannot hold a connection for ever), and
silence between frames (``idle_timeout_s`` without a whole frame closes the connection). A malformed frame
or an oversized header closes the connection, with a log line; a handler that raises is answered
``SYSTEM_ERROR`` without its details, and logged. When the connection ends, the requests in flight that
wait for an answer are cancelled (nobody is left to read it), while a oneway one (an END_TRANSACTION, a oneway
send) is carried out: its sender wrote it and went, as a producer does, and counts on it. Such orphans are
bounded for the whole process (``MAX_ORPHANED_ONEWAY``): a stranger who writes slow oneway requests and
reconnects, again and again, gets the ones beyond the bound cancelled, with a log line. ``on_closed`` runs
once when the connection ends, so a server can treat a broker's connection closing as that broker going away, as RocketMQ's controller does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, cast

from services.common.codes import ResponseCode
from services.common.httplimits import DEFAULT_BODY_TIMEOUT_MS, DEFAULT_HEADER_TIMEOUT_MS
from services.remoting.codec import MAX_FRAME_SIZE, encode
from services.remoting.command import RemotingCommand, make_response
from services.remoting.errors import RemotingProtocolError
from services.remoting.limits import BodyLimit, Oversized, RequestDecoder, RequestLimits

log = logging.getLogger(__name__)

#: A handler answers one request (None for a oneway request, or to send nothing).
Handler = Callable[[RemotingCommand, "RemotingConnection"], Awaitable[RemotingCommand | None]]
#: A connection silent this long is closed (Netty's serverChannelMaxIdleTimeSeconds in RocketMQ).
IDLE_TIMEOUT_S = 120.0
#: The bounds of a server that sets none of its own: any code, any body up to the frame limit.
OPEN_LIMITS = RequestLimits({}, BodyLimit(MAX_FRAME_SIZE, ResponseCode.SYSTEM_ERROR))
#: A front handler takes a request without a task of its own, or declines it (False: it goes to ``handler``).
#: A request it takes counts as in flight until it calls ``conn.finish(request, answer)``.
FrontHandler = Callable[[RemotingCommand, "RemotingConnection"], bool]
#: Oneway requests still being carried out after their connections closed, in this process, at most.
MAX_ORPHANED_ONEWAY = 1024
_orphans: set[asyncio.Task[None]] = set()


def orphaned_oneway() -> int:
    """How many oneway requests are being carried out for connections that closed."""
    return len(_orphans)


def _adopt(tasks: set[asyncio.Task[None]], peer: str) -> None:
    """Carry the oneway requests of a closed connection on, up to the process's bound; cancel the rest."""
    dropped = 0
    for task in tasks:
        if task.done():
            continue
        if len(_orphans) < MAX_ORPHANED_ONEWAY:
            _orphans.add(task)
            task.add_done_callback(_orphans.discard)
        else:
            task.cancel()
            dropped += 1
    if dropped:
        log.warning("remoting connection from %s closed with %d oneway requests in flight beyond the bound of %d "
                    "carried on for closed connections: cancelled", peer, dropped, MAX_ORPHANED_ONEWAY)


class RemotingConnection(asyncio.Protocol):
    def __init__(self, handler: Handler, *, max_frame_size: int = MAX_FRAME_SIZE, max_in_flight: int = 256,
                 idle_timeout_s: float = IDLE_TIMEOUT_S, on_closed: Callable[[RemotingConnection], None] | None = None,
                 server_state: Any = None, front: FrontHandler | None = None,
                 head_timeout_s: float = DEFAULT_HEADER_TIMEOUT_MS / 1000,
                 frame_timeout_s: float = DEFAULT_BODY_TIMEOUT_MS / 1000,
                 limits: RequestLimits = OPEN_LIMITS) -> None:
        self.handler = handler
        self.front = front
        self.decoder = RequestDecoder(limits, max_frame_size)
        self.max_in_flight = max_in_flight
        self.idle_timeout_s = idle_timeout_s
        self.head_timeout_s, self.frame_timeout_s = head_timeout_s, frame_timeout_s
        self.on_closed = on_closed
        self.server_state = server_state
        self.peer = "?"
        self.attributes: dict[str, Any] = {}  # what a handler learns about its peer (e.g. a broker's id)
        self._transport: asyncio.Transport | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._oneway: set[asyncio.Task[None]] = set()  # finished even when the connection goes (see connection_lost)
        self._taken = 0  # requests the front handler took and has not finished
        self._paused = False
        self._closed = False
        self._idle: asyncio.TimerHandle | None = None
        self._frame: asyncio.TimerHandle | None = None  # the deadline of the frame being read
        self._head_in = False  # the frame being read has its header
        self._out: list[bytes] = []  # answers encoded in this turn of the event loop, written together

    # ------------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        if self.server_state is not None:
            self.server_state.connections.add(self)
        self._arm_idle()

    def data_received(self, data: bytes) -> None:
        try:
            commands = self.decoder.feed(data)
        except RemotingProtocolError as exc:
            log.info("remoting connection from %s closed: %s", self.peer, exc)
            self.close()
            return
        if commands:
            self._arm_idle()
        self._watch_frame(bool(commands))
        for command in commands:
            if isinstance(command, Oversized):
                self._refuse(command)
                continue
            if command.is_response:
                continue  # this server sends no requests of its own on an accepted connection
            if self.front is not None and self._front(command):
                continue
            task = asyncio.get_running_loop().create_task(self._serve(command))
            self._tasks.add(task)
            if command.is_oneway:
                self._oneway.add(task)
            task.add_done_callback(self._done)
        if self.in_flight >= self.max_in_flight and not self._paused and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        for timer in (self._idle, self._frame):
            if timer is not None:
                timer.cancel()
        for task in self._tasks - self._oneway:
            task.cancel()  # nobody is left to answer; a oneway request expects no answer and is carried out
        _adopt(self._oneway, self.peer)
        if self.server_state is not None:
            self.server_state.connections.discard(self)
        if self.on_closed is not None:
            self.on_closed(self)

    # ------------------------------------------------------------------ uvicorn's shutdown hook
    def shutdown(self) -> None:
        self.close()

    # ------------------------------------------------------------------ internals
    def close(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    def send(self, command: RemotingCommand) -> None:
        """Queue an answer (or a request of ours); the answers of one turn of the event loop go out in one
        write, so many requests in flight cost one system call, not one each."""
        if self._transport is None or self._transport.is_closing():
            return
        self.send_frame(encode(command, self.decoder.max_frame_size))  # may raise: nothing is queued then

    def send_frame(self, frame: bytes) -> None:
        """Queue a whole frame (see ``send``)."""
        if self._transport is None or self._transport.is_closing():
            return
        if not self._out:
            asyncio.get_running_loop().call_soon(self._flush)
        self._out.append(frame)

    def _flush(self) -> None:
        out, self._out = self._out, []
        if out and self._transport is not None and not self._transport.is_closing():
            self._transport.write(b"".join(out))

    @property
    def in_flight(self) -> int:
        return len(self._tasks) + self._taken

    def busy(self) -> bool:
        """Requests are being served (the connection cap does not close this connection to make room)."""
        return self.in_flight > 0

    def _front(self, request: RemotingCommand) -> bool:
        assert self.front is not None
        self._taken += 1
        try:
            taken = self.front(request, self)
        except Exception:
            log.exception("remoting request %d from %s failed", request.code, self.peer)
            self.finish(request, None if request.is_oneway else make_response(
                request, ResponseCode.SYSTEM_ERROR, "internal error while serving the request"))
            return True
        if not taken:
            self._taken -= 1
        return taken

    def finish(self, request: RemotingCommand, answer: RemotingCommand | bytes | None) -> None:
        """A request the front handler took is done: send its answer (if any: a command, or its whole frame
        already encoded) and count it out."""
        self._taken -= 1
        self._resume_if_drained()
        if answer is None or request.is_oneway or self._closed:
            return
        if isinstance(answer, bytes):
            self.send_frame(answer)
            return
        try:
            self.send(answer)
        except ValueError as exc:
            log.error("cannot answer remoting request %d from %s: %s", request.code, self.peer, exc)
            self.send(make_response(request, ResponseCode.SYSTEM_ERROR, "the answer cannot be encoded"))

    def _refuse(self, oversized: Oversized) -> None:
        """A request whose body was larger than its code admits: it was skipped unread; answer why."""
        request = oversized.request
        log.info("remoting request %d from %s refused unread: %s", request.code, self.peer, oversized.remark())
        if request.is_oneway or request.is_response:
            return
        remark = (f" request type {request.code} not supported"
                  if oversized.limit.refusal == ResponseCode.REQUEST_CODE_NOT_SUPPORTED else oversized.remark())
        self.send(make_response(request, oversized.limit.refusal, remark))

    def _arm_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
        self._idle = asyncio.get_running_loop().call_later(self.idle_timeout_s, self._idle_out)

    def _idle_out(self) -> None:
        if not self.in_flight and self.decoder.idle:  # a frame on its way has a deadline of its own
            log.info("remoting connection from %s closed: idle for %.0f s", self.peer, self.idle_timeout_s)
            self.close()
        else:
            self._arm_idle()

    def _watch_frame(self, completed: bool) -> None:
        """Arm the deadline of the frame being read: for its head when it starts, for the rest once its
        header is in; none between frames."""
        if self.decoder.idle:
            self._set_frame_deadline(None)
            return
        if completed or self._frame is None:
            self._head_in = False
            self._set_frame_deadline(self.head_timeout_s)
        if not self._head_in and self.decoder.head_received:
            self._head_in = True
            self._set_frame_deadline(self.frame_timeout_s)

    def _set_frame_deadline(self, seconds: float | None) -> None:
        if self._frame is not None:
            self._frame.cancel()
        self._frame = None if seconds is None else asyncio.get_running_loop().call_later(seconds, self._frame_late)

    def _frame_late(self) -> None:
        self._frame = None
        if self._paused:  # we stopped reading it (requests in flight): the slow party is us
            self._set_frame_deadline(self.head_timeout_s)
            return
        what, seconds = (("frame not received whole", self.frame_timeout_s) if self._head_in
                         else ("frame header not received", self.head_timeout_s))
        log.info("remoting connection from %s closed: %s within %g s", self.peer, what, seconds)
        self.close()

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._oneway.discard(task)
        self._resume_if_drained()

    def _resume_if_drained(self) -> None:
        if self._paused and self.in_flight < self.max_in_flight // 2 and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()

    async def _serve(self, request: RemotingCommand) -> None:
        try:
            answer = await self.handler(request, self)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("remoting request %d from %s failed", request.code, self.peer)
            answer = None if request.is_oneway else make_response(
                request, ResponseCode.SYSTEM_ERROR, "internal error while serving the request")
        if answer is None or request.is_oneway or self._closed:
            return
        try:
            self.send(answer)
        except ValueError as exc:  # an answer too large for a frame, or not encodable
            log.error("cannot answer remoting request %d from %s: %s", request.code, self.peer, exc)
            self.send(make_response(request, ResponseCode.SYSTEM_ERROR, "the answer cannot be encoded"))
