"""What a web browser may do with a node: nothing it did not come for from the node's own console.

Two attacks go through an operator's browser. A page on another site can open a websocket or send a POST to
any address the browser reaches (a browser sends such requests; it only hides the answer): it could open
and close the liveness channel for the master's id and fail it over, or post an election. And a page whose
DNS name is rebound to the node's address becomes "same-origin" with it, and reads its answers too.

So, on every request (an ASGI middleware, ahead of everything else):

- **Host** must name this node: an IP address (no DNS answer makes a browser send one), ``localhost``, one
  of the names it is configured under (``HttpLimits.host_names``) or one listed in ``httpAllowedHosts``
  (``HttpLimits.extra_hosts``). The port is not compared: a forwarder or a NAT may change it.
- **Origin**, on every websocket and every request that is not GET, HEAD or OPTIONS, if the request has one
  (brokers, mqctl and other programs send none), must be the node's own: the same scheme, host and port
  as the request (the console's page calls the node that served it), or a name in ``httpAllowedHosts``.

A refusal is ``403`` with the JSON envelope (``NO_PERMISSION``) naming the header at fault, and a log line.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from services.common.codes import ResponseCode
from services.common.envelope import envelope
from services.common.httpguard import Throttled
from services.common.httplimits import HttpLimits

__all__ = ["HostGuard", "host_allowed", "refusal"]

log = logging.getLogger(__name__)

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_DEFAULT_PORTS = {"http": 80, "ws": 80, "https": 443, "wss": 443}
_PAGE_SCHEME = {"ws": "http", "wss": "https"}  # a websocket's scheme as its page's origin spells it
_refusals = Throttled(logger=log)

Scope = dict[str, Any]  # an ASGI scope: the server's plain dict
Receive = Callable[[], Awaitable[Any]]
Send = Callable[[Any], Awaitable[None]]


def _split_host(value: str) -> tuple[str, int | None]:
    """``host[:port]`` / ``[v6][:port]`` → (the host, lower-cased without a final dot or brackets; the port)."""
    host, port = value, None
    if value.startswith("["):
        inner, _, rest = value[1:].partition("]")
        host, port_text = inner, rest.removeprefix(":")
    else:
        head, sep, port_text = value.rpartition(":")
        if sep and ":" not in head:
            host = head
        else:
            port_text = ""
    if port_text:
        port = int(port_text) if port_text.isdigit() else -1
    return host.lower().rstrip("."), port


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def host_allowed(host: str, limits: HttpLimits) -> bool:
    return _is_ip(host) or host == "localhost" or host in limits.host_names or host in limits.extra_hosts


def _origin_allowed(origin: str, host_header: str, scheme: str, limits: HttpLimits) -> bool:
    try:
        parts = urlsplit(origin)
        origin_port = parts.port
    except ValueError:
        return False
    name = (parts.hostname or "").rstrip(".")
    if not name or parts.scheme not in ("http", "https"):
        return False
    if name in limits.extra_hosts:
        return True
    own_scheme = _PAGE_SCHEME.get(scheme, scheme)
    host, port = _split_host(host_header)
    return (parts.scheme == own_scheme and name == host
            and (origin_port or _DEFAULT_PORTS[parts.scheme]) == (port or _DEFAULT_PORTS[own_scheme]))


def refusal(scope: Scope, limits: HttpLimits) -> str | None:
    """Why the request of ``scope`` is refused, or None."""
    headers = {k.decode(): v.decode("latin-1") for k, v in scope.get("headers", []) if k in (b"host", b"origin")}
    host_header = headers.get("host")
    if host_header is not None and not host_allowed(_split_host(host_header)[0], limits):
        return (f"Host {host_header!r} is not a name of this node (a DNS name rebound to its address?): use its "
                "address, or list the name in httpAllowedHosts")
    origin = headers.get("origin")
    if origin is None or (scope["type"] == "http" and scope.get("method") in SAFE_METHODS):
        return None
    if _origin_allowed(origin, host_header or "", scope.get("scheme", "http"), limits):
        return None
    scheme = scope.get("scheme", "http")
    own = f"{_PAGE_SCHEME.get(scheme, scheme)}://{host_header}"
    return f"Origin {origin} is not this node's console ({own}): cross-site requests are refused"


class HostGuard:
    """ASGI middleware: ``refusal`` for every HTTP request and websocket, answered 403."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], limits: HttpLimits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        reason = refusal(scope, self.limits) if scope["type"] in ("http", "websocket") else None
        if reason is None:
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        _refusals.log(logging.INFO, f"{'websocket' if scope['type'] == 'websocket' else 'HTTP request'} from "
                                    f"{client[0] if client else '?'} refused: {reason}")
        body = json.dumps(envelope(ResponseCode.NO_PERMISSION, reason), separators=(",", ":")).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 403, "headers": headers})
            await send({"type": "http.response.body", "body": body})
        else:
            await _refuse_websocket(scope, receive, send, headers, body)


async def _refuse_websocket(scope: Scope, receive: Receive, send: Send, headers: list[tuple[bytes, bytes]],
                            body: bytes) -> None:
    await receive()  # websocket.connect
    if "websocket.http.response" in scope.get("extensions", {}):
        await send({"type": "websocket.http.response.start", "status": 403, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": body})
    else:
        await send({"type": "websocket.close", "code": 1008})
