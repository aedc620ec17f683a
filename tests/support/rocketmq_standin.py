"""A stand-in for RocketMQ 5's Java servers that speaks only remoting, written from RocketMQ's source and
independent of our codec: frames are cut and built here with ``struct``, request headers read with the
standard ``json`` module, and every answer's header and body is the literal text Java's fastjson writes
(fields sorted by name, ``Map<Long, String>`` keys unquoted, booleans and numbers as fastjson prints them).

Like RocketMQ's Netty decoder, a first frame whose length field exceeds 16 MiB closes the connection: an
HTTP request (``GET /...`` reads as a length of over a gigabyte) gets no answer at all.

``StandIn(answers)`` serves ``answers``: request code -> ``Reply`` (or a function of the request giving
one); any other code gets REQUEST_CODE_NOT_SUPPORTED with RocketMQ's remark.
"""

from __future__ import annotations

import json
import socket
import socketserver
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MAX_FRAME = 16 * 1024 * 1024


@dataclass(frozen=True)
class Request:
    code: int
    opaque: int
    ext_fields: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Reply:
    """``ext_fields`` is the header's extFields as fastjson writes them (a JSON object text, keys sorted);
    ``body`` the literal body bytes."""

    code: int = 0
    remark: str | None = None
    ext_fields: str = "{}"
    body: bytes = b""


Answer = Reply | Callable[[Request], Reply]


@dataclass
class StandIn:
    answers: dict[int, Answer]
    requests: list[Request] = field(default_factory=list)
    http_connections: int = 0

    def __post_init__(self) -> None:
        standin = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                standin._serve(self.request)

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
        self._server.daemon_threads = True
        self._server.allow_reuse_address = True
        self._server.server_bind()
        self._server.server_activate()
        self.port = self._server.server_address[1]
        self.address = f"127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # ------------------------------------------------------------------ one connection
    def _serve(self, sock: socket.socket) -> None:
        buffer = b""
        while True:
            try:
                data = sock.recv(65536)
            except OSError:
                return
            if not data:
                return
            buffer += data
            while len(buffer) >= 4:
                (length,) = struct.unpack(">i", buffer[:4])
                if length > MAX_FRAME or length < 4:  # NettyDecoder: TooLongFrameException, channel closed
                    self.http_connections += buffer.startswith((b"GET ", b"POST"))
                    sock.close()
                    return
                if len(buffer) < 4 + length:
                    break
                frame, buffer = buffer[4:4 + length], buffer[4 + length:]
                reply = self._reply(frame)
                if reply is not None:
                    sock.sendall(reply)

    def _reply(self, frame: bytes) -> bytes | None:
        (mark,) = struct.unpack(">i", frame[:4])
        header_length = mark & 0xFFFFFF
        assert mark >> 24 == 0, "the stand-in reads JSON headers only"
        header: dict[str, Any] = json.loads(frame[4:4 + header_length])
        request = Request(int(header["code"]), int(header["opaque"]), dict(header.get("extFields") or {}),
                          frame[4 + header_length:])
        self.requests.append(request)
        if int(header.get("flag", 0)) & 2:  # oneway
            return None
        answer = self.answers.get(request.code)
        if answer is None:
            reply = Reply(3, f" request type {request.code} not supported")
        else:
            reply = answer(request) if callable(answer) else answer
        return frame_of(reply, request.opaque)


def frame_of(reply: Reply, opaque: int) -> bytes:
    """A response frame as RocketMQ's Java ``RemotingCommand.encode`` writes it (JSON header)."""
    remark = "" if reply.remark is None else f'"remark":{json.dumps(reply.remark)},'
    header = (f'{{"code":{reply.code},"extFields":{reply.ext_fields},"flag":1,"language":"JAVA",'
              f'"opaque":{opaque},{remark}"serializeTypeCurrentRPC":"JSON","version":479}}').encode()
    return struct.pack(">ii", 4 + len(header) + len(reply.body), len(header)) + header + reply.body


def java_long_map(entries: dict[int, str]) -> str:
    """A fastjson ``Map<Long, String>``: keys unquoted."""
    return "{" + ",".join(f"{k}:{json.dumps(v)}" for k, v in entries.items()) + "}"
