"""The request-body guard of the services' HTTP listeners (see services/common/httpguard.py for the
connection-level ones): an ASGI middleware that refuses a body over its route's limit before reading it
(from its Content-Length, or as soon as a chunked body passes the limit), and a request whose body would
take the bodies being read at once beyond their shared budget. A refusal closes the connection, so the
rest of the body is never read."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from services.common.codes import ResponseCode
from services.common.envelope import envelope
from services.common.httplimits import HttpLimits

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class BodyLimit:
    """ASGI middleware: refuses a request body over its route's limit, or beyond the shared budget."""

    def __init__(self, app: Any, limits: HttpLimits) -> None:
        self.app = app
        self.limits = limits
        self.in_flight = 0  # bytes of bodies being read or held by requests in progress

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limits.body_limit(scope["path"])
        declared = _header(scope, b"content-length")
        if declared is not None:
            await self._declared(scope, receive, send, declared, limit)
        elif (_header(scope, b"transfer-encoding") or b"").lower().endswith(b"chunked"):
            await self._streamed(scope, receive, send, limit)
        else:
            await self.app(scope, receive, send)  # no body

    async def _declared(self, scope: Scope, receive: Receive, send: Send, declared: bytes, limit: int) -> None:
        size = int(declared) if declared.isdigit() else -1
        if size < 0:
            await _refuse(send, 400, ResponseCode.INVALID_PARAMETER, "malformed Content-Length")
        elif size > limit:
            await _refuse(send, 413, ResponseCode.INVALID_PARAMETER, _too_large(scope, size, limit))
        elif not self._reserve(size):
            await _refuse(send, 503, ResponseCode.SYSTEM_BUSY, _busy())
        else:
            try:
                await self.app(scope, receive, send)  # the parser delivers exactly `size` bytes
            finally:
                self.in_flight -= size

    async def _streamed(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        """A chunked body is read here, counted as it comes, and given to the app whole."""
        chunks: list[bytes] = []
        size = 0
        try:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                chunk = bytes(message.get("body", b""))
                if size + len(chunk) > limit:
                    await _refuse(send, 413, ResponseCode.INVALID_PARAMETER, _too_large(scope, None, limit))
                    return
                if not self._reserve(len(chunk)):
                    await _refuse(send, 503, ResponseCode.SYSTEM_BUSY, _busy())
                    return
                size += len(chunk)
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
            await self.app(scope, _replay(b"".join(chunks), receive), send)
        finally:
            self.in_flight -= size

    def _reserve(self, size: int) -> bool:
        if size and self.in_flight + size > self.limits.body_budget_bytes:
            return False
        self.in_flight += size
        return True


def _replay(body: bytes, receive: Receive) -> Receive:
    given = False

    async def replay() -> MutableMapping[str, Any]:
        nonlocal given
        if given:
            return await receive()  # after the body: only the disconnect is left to wait for
        given = True
        return {"type": "http.request", "body": body, "more_body": False}
    return replay


def _header(scope: Scope, name: bytes) -> bytes | None:
    return next((bytes(v) for k, v in scope["headers"] if k == name), None)


def _too_large(scope: Scope, size: int | None, limit: int) -> str:
    what = f"of {size} bytes " if size is not None else ""
    return (f"request body {what}is over the limit of {limit} bytes for {scope['method']} {scope['path']} "
            "(docs/api.md, 'Limits')")


def _busy() -> str:
    return "the server is reading too many large requests at once; retry shortly"


async def _refuse(send: Send, status: int, code: int, remark: str) -> None:
    body = json.dumps(envelope(code, remark), separators=(",", ":")).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body, "more_body": False})
