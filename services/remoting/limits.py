"""How much each request may carry, by its code, and the decoder that holds a server to it (no I/O).

RocketMQ's servers read any frame up to 16 MiB, whatever its code asks. A server here knows what each
request it serves carries: most carry nothing in their body, a heartbeat describes one client (kilobytes),
a name-server registration lists a broker's topics (a few MiB for tens of thousands of topics). So a
server's ``RequestDecoder`` reads each frame's header first, and keeps the body only if the request's code
admits its size. A larger body is skipped as it arrives, never held, which keeps the stream in step: the
request gets an answer (the code its server chose, and a remark giving both sizes) and the connection goes
on. The header itself is bounded (``MAX_HEADER``) before any of it is read; a larger one closes the
connection, since without reading it there is no opaque to answer.

The sizes below are what RocketMQ's clients and brokers send, with room to spare; docs/remoting.md has
the table and the reasoning behind each.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from services.remoting.codec import MAX_FRAME_SIZE, decode_header, read_mark
from services.remoting.command import INT32_MAX, RESPONSE_FLAG, RemotingCommand, SerializeType
from services.remoting.errors import RemotingProtocolError

__all__ = ["BROKER_NAMES_BODY", "HEARTBEAT_BODY", "MAX_HEADER", "NO_BODY", "REGISTRATION_BODY", "SMALL_BODY",
           "BodyLimit", "Oversized", "RequestDecoder", "RequestLimits", "server_limits"]

#: The largest header: a send's carries the message's properties, which RocketMQ stores in at most 32 KiB
#: (each \x01 and \x02 separator escaped as six characters in a JSON header).
MAX_HEADER = 64 * 1024
#: A request whose body is unused (RocketMQ sends none): anything more is not from a RocketMQ client.
NO_BODY = 4 * 1024
#: A small JSON body: a SyncStateSet, a DataVersion, a controller's properties text.
SMALL_BODY = 64 * 1024
#: A client's heartbeat (HeartbeatData): a client with hundreds of consumer groups and thousands of
#: subscriptions writes a few hundred KiB.
HEARTBEAT_BODY = 1024 * 1024
#: 1006's list of broker names: every group of a cluster of thousands, names of up to 255 characters.
BROKER_NAMES_BODY = 1024 * 1024
#: A broker's registration with the name servers lists every topic it holds: RocketMQ sends it whole
#: (about 400 bytes a topic in JSON, far less compressed), so only the frame limit bounds it.
REGISTRATION_BODY = MAX_FRAME_SIZE


@dataclass(frozen=True)
class BodyLimit:
    """The largest body a request code may carry, and the response code that refuses a larger one."""

    max_bytes: int
    refusal: int
    #: The setting that decides ``max_bytes``, if one does (named in the refusal).
    setting: str = ""


@dataclass(frozen=True)
class RequestLimits:
    """One server's bounds: its codes' bodies, the bodies of codes it does not serve, and headers."""

    bodies: Mapping[int, BodyLimit]
    other: BodyLimit
    max_header: int = MAX_HEADER

    def body(self, code: int) -> BodyLimit:
        return self.bodies.get(code, self.other)


def server_limits(served: Iterable[int], bodies: Mapping[int, BodyLimit], refusal: int,
                  not_served: int) -> RequestLimits:
    """The bounds of a server: each code it serves carries no body (``NO_BODY``, refused with ``refusal``)
    unless ``bodies`` gives its own; a code it does not serve is refused with ``not_served`` beyond NO_BODY
    (it would be refused whatever its body)."""
    table = {code: BodyLimit(NO_BODY, refusal) for code in served}
    table.update(bodies)
    return RequestLimits(table, BodyLimit(NO_BODY, not_served))


@dataclass(frozen=True)
class Oversized:
    """A request whose body is larger than its code admits: the command as its header reads (no body),
    and the size of the body that was skipped unread."""

    request: RemotingCommand
    body_size: int
    limit: BodyLimit

    def remark(self) -> str:
        setting = f" ({self.limit.setting})" if self.limit.setting else ""
        return (f"request {self.request.code} carries a body of {self.body_size} bytes; this server takes at "
                f"most {self.limit.max_bytes}{setting} for it")


@dataclass
class _Frame:
    length: int  # what follows the length field: mark, header, body
    serialize_type: SerializeType
    header_length: int
    fields: dict[str, Any] | None = field(default=None)

    @property
    def body_length(self) -> int:
        return self.length - 4 - self.header_length


class RequestDecoder:
    """``FrameDecoder`` for a server: ``feed`` bytes, get the requests they complete and the ``Oversized``
    ones (in stream order). Raises ``RemotingProtocolError`` on a malformed frame or a header over the
    limit, and again on every later call: the stream cannot be resynchronised."""

    def __init__(self, limits: RequestLimits, max_frame_size: int = MAX_FRAME_SIZE) -> None:
        if not 8 <= max_frame_size <= INT32_MAX:
            raise ValueError(f"max_frame_size must be between 8 and {INT32_MAX}")
        self.limits = limits
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._length: int | None = None  # the frame's length, read before its mark
        self._frame: _Frame | None = None
        self._skip = 0  # bytes of a refused body still to come
        self._failed: RemotingProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes held for a frame not yet complete (never a refused body)."""
        return len(self._buf)

    @property
    def idle(self) -> bool:
        """True between frames (no part of a frame held, no refused body still to pass)."""
        return self._length is None and self._frame is None and not self._buf and not self._skip

    @property
    def head_received(self) -> bool:
        """True once the current frame's header is in (its body, kept or skipped, may still be coming)."""
        return bool(self._skip) or (self._frame is not None and self._frame.fields is not None)

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand | Oversized]:
        if self._failed is not None:
            raise RemotingProtocolError(f"the stream already failed: {self._failed}")
        try:
            return self._feed(memoryview(data).cast("B"))
        except RemotingProtocolError as exc:
            self._failed, self._buf, self._frame, self._length = exc, bytearray(), None, None
            raise

    def _feed(self, view: memoryview) -> list[RemotingCommand | Oversized]:
        items: list[RemotingCommand | Oversized] = []
        while view:
            if self._skip:
                count = min(self._skip, len(view))
                self._skip -= count
                view = view[count:]
                continue
            if self._frame is None and self._length is None and not self._buf and len(view) >= 8:
                whole = self._whole(view)  # the usual case: a whole small frame in one read
                if whole is not None:
                    items.append(whole[0])
                    view = whole[1]
                    continue
            piece, view = self._piece(view)
            if piece is None:
                break
            item = self._step(piece)
            if item is not None:
                items.append(item)
        return items

    def _whole(self, view: memoryview) -> tuple[RemotingCommand | Oversized, memoryview] | None:
        """The frame at the start of ``view`` and what follows it, if all of it is there."""
        length = self._check_length(view[:4])
        if len(view) < 4 + length:
            return None  # read part by part
        frame = self._open(length, view[4:8])
        end = 8 + frame.header_length
        frame.fields = decode_header(frame.serialize_type, bytes(view[8:end]))
        refused = self._refused(frame)
        if refused is not None:
            self._skip = 0  # the body is here already: passed over at once
            return refused, view[4 + length:]
        command = RemotingCommand.decoded(**frame.fields, body=bytes(view[end:4 + length]),
                                          serialize_type=frame.serialize_type)
        return command, view[4 + length:]

    def _wanted(self) -> int:
        if self._frame is None:
            return 4  # the length field, then the mark
        return self._frame.header_length if self._frame.fields is None else self._frame.body_length

    def _piece(self, view: memoryview) -> tuple[memoryview | bytearray | None, memoryview]:
        """The next part of the frame once it is all here (taken from ``view`` without a copy when it can
        be), and what is left of ``view``."""
        size = self._wanted()
        if not self._buf and len(view) >= size:
            return view[:size], view[size:]
        count = size - len(self._buf)
        self._buf += view[:count]
        if len(self._buf) < size:
            return None, view[count:]
        piece, self._buf = self._buf, bytearray()
        return piece, view[count:]

    def _step(self, piece: memoryview | bytearray) -> RemotingCommand | Oversized | None:
        """Take one part of the frame; a part of no bytes (an empty header or body) is taken at once."""
        frame = self._frame
        if frame is None:
            if self._length is None:
                self._length = self._check_length(piece)
                return None
            frame, self._length = self._open(self._length, piece), None
            self._frame = frame
            if frame.header_length:
                return None
            piece = bytearray()
        if frame.fields is None:
            frame.fields = decode_header(frame.serialize_type, bytes(piece))
            refused = self._refused(frame)
            if refused is not None or frame.body_length:
                return refused
            piece = bytearray()
        self._frame = None
        return RemotingCommand.decoded(**frame.fields, body=bytes(piece), serialize_type=frame.serialize_type)

    def _check_length(self, prefix: memoryview | bytearray) -> int:
        length = int.from_bytes(prefix, "big", signed=True)
        if length < 4:
            raise RemotingProtocolError(f"frame length {length} is less than the 4 bytes of its mark")
        if length + 4 > self.max_frame_size:
            raise RemotingProtocolError(f"frame of {length + 4} bytes is more than the limit of {self.max_frame_size}")
        return length

    def _open(self, length: int, mark: memoryview | bytearray) -> _Frame:
        serialize_type, header_length = read_mark(mark, length - 4)
        if header_length > self.limits.max_header:
            raise RemotingProtocolError(
                f"header of {header_length} bytes is more than the limit of {self.limits.max_header}")
        return _Frame(length, serialize_type, header_length)

    def _refused(self, frame: _Frame) -> Oversized | None:
        """The request, if its body is larger than its code admits: the body is then skipped."""
        assert frame.fields is not None
        is_response = frame.fields["flag"] & RESPONSE_FLAG
        limit = self.limits.other if is_response else self.limits.body(frame.fields["code"])
        if frame.body_length <= limit.max_bytes:
            return None
        self._frame, self._skip = None, frame.body_length
        request = RemotingCommand.decoded(**frame.fields, body=b"", serialize_type=frame.serialize_type)
        return Oversized(request, frame.body_length, limit)
