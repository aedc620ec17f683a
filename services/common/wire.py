"""The one place a command-line request goes out: over HTTP to an mqctl server, or over RocketMQ's remoting
protocol to a server that speaks only that.

An address's protocol is found on first contact and remembered: a request goes out as HTTP; a server that
takes the connection but closes it without an HTTP answer (RocketMQ's servers read ``GET /`` as a frame
length of over a gigabyte and close at once) is asked again over remoting, through
``remoting_admin.translate``. ``protocol="http"`` or ``"remoting"`` skips the probe.
"""

from __future__ import annotations

import json as _json
import ssl
import time
from dataclasses import dataclass
from typing import Any

import httpx

from services.common import tls
from services.common.addresses import address_key, http_url, split_address
from services.common.auth import bearer_token
from services.common.codes import ResponseCode
from services.common.errors import AddressError, RemoteError, UnreachableError
from services.common.remoting_admin import NotOverRemoting, translate
from services.common.remoting_blocking import BlockingRemoting, signer
from services.remoting.command import RemotingCommand

__all__ = ["MAX_ANSWER_BYTES", "PROTOCOLS", "Envelope", "NoHttpAnswer", "Wire", "exchange", "exchange_async"]

#: ``auto``: HTTP first, remoting for an address that gives no HTTP answer.
PROTOCOLS = ("auto", "http", "remoting")


class NoHttpAnswer(UnreachableError):
    """The server took the connection and closed it (or reset it) without an HTTP answer."""


@dataclass(frozen=True)
class Envelope:
    code: int
    remark: str
    data: Any
    address: str

    @property
    def ok(self) -> bool:
        return self.code == ResponseCode.SUCCESS


#: The most bytes read of one answer: the largest legitimate one (a page of events) is far smaller.
MAX_ANSWER_BYTES = 32 * 1024 * 1024


def exchange(client: httpx.Client, address: str, method: str, path: str, *, what: str, deadline: float,
             headers: dict[str, str], json: Any = None, params: Any = None) -> Envelope:
    """One request to ``address`` and its envelope. The answer is hostile until checked: its size is
    bounded, it must arrive before ``deadline`` and it must be an envelope. Transport errors become
    UnreachableError, a malformed answer RemoteError(SYSTEM_ERROR), a malformed address AddressError."""
    url = http_url(address, path, what)
    try:
        with client.stream(method, url, json=json, params=params, headers=headers) as response:
            content = _read_bounded(response, address, what, deadline)
    except httpx.HTTPError as exc:
        raise _transport_error(exc, address, what) from exc
    return _envelope(content, response.status_code, address, what)


async def exchange_async(client: httpx.AsyncClient, address: str, method: str, path: str, *, what: str,
                         deadline: float, headers: dict[str, str], json: Any = None, params: Any = None) -> Envelope:
    """``exchange`` on an asyncio client (the same checks and errors)."""
    url = http_url(address, path, what)
    try:
        async with client.stream(method, url, json=json, params=params, headers=headers) as response:
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.aiter_bytes():
                size = _bounded(size + len(chunk), address, what, deadline)
                chunks.append(chunk)
    except httpx.HTTPError as exc:
        raise _transport_error(exc, address, what) from exc
    return _envelope(b"".join(chunks), response.status_code, address, what)


def _transport_error(exc: httpx.HTTPError, address: str, what: str) -> UnreachableError:
    if isinstance(exc, httpx.TimeoutException):
        return UnreachableError(f"{what} {address} timed out", [address])
    failed = _ssl_error(exc)
    if failed is not None:
        return UnreachableError(f"{what} {address}: TLS handshake failed: {tls.handshake_reason(failed)}", [address])
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
        return NoHttpAnswer(f"{what} {address} is unreachable: {_reason(exc)}{tls.closed_hint()}", [address])
    reason = _reason(exc) if what == "controller" else "connection failed"
    return UnreachableError(f"{what} {address} is unreachable: {reason}", [address])


def _envelope(content: bytes, status: int, address: str, what: str) -> Envelope:
    try:
        body = _json.loads(content)
        return Envelope(int(body["code"]), str(body.get("remark") or ""), body.get("data"), address)
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        raise RemoteError(int(ResponseCode.SYSTEM_ERROR),
                          f"{address} answered HTTP {status} without "
                          f"{'a controller' if what == 'controller' else 'an'} envelope; is it a {what}?") from None


def _read_bounded(response: httpx.Response, address: str, what: str, deadline: float) -> bytes:
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size = _bounded(size + len(chunk), address, what, deadline)
        chunks.append(chunk)
    return b"".join(chunks)


def _bounded(size: int, address: str, what: str, deadline: float) -> int:
    """``size`` of the answer so far, if still within bounds (its size and its deadline)."""
    if size > MAX_ANSWER_BYTES:
        raise RemoteError(int(ResponseCode.SYSTEM_ERROR),
                          f"{what} {address} answered more than {MAX_ANSWER_BYTES // 2**20} MiB; refused")
    if time.monotonic() > deadline:
        raise httpx.ReadTimeout(f"{what} {address} answered too slowly")
    return size


def _ssl_error(exc: BaseException) -> BaseException | None:
    """The TLS error under an httpx error, if that is what it is."""
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return None
        if isinstance(seen, ssl.SSLError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _reason(exc: httpx.HTTPError) -> str:
    text = str(exc) or type(exc).__name__
    if "disconnected" in text.lower():
        return "it closed the connection without an answer"
    if "Connection refused" in text or "connect" in text.lower():
        return "connection refused"
    return text


class Wire:
    """HTTP or remoting per address (see the module's text). Not thread-safe: one per command."""

    def __init__(self, timeout: float, transport: httpx.BaseTransport | None = None, protocol: str = "auto") -> None:
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}")
        self.http = httpx.Client(timeout=httpx.Timeout(timeout, connect=min(timeout, 2.0)), transport=transport,
                                 verify=tls.httpx_verify())
        self.remoting = BlockingRemoting()
        self.protocol = protocol
        self._speaks: dict[tuple[str, int], str] = {}

    def close(self) -> None:
        self.http.close()
        self.remoting.close()

    def speaks(self, address: str) -> str:
        """``http``, ``remoting``, or ``auto`` while not yet known."""
        key = address_key(address)
        return self._speaks.get(key, self.protocol) if key is not None else self.protocol

    def exchange(self, address: str, method: str, path: str, *, what: str, deadline: float,
                 headers: dict[str, str], json: Any = None, params: Any = None) -> Envelope:
        mode = self.speaks(address)
        if mode == "remoting":
            return self._remoting(address, method, path, what, deadline, json, params, headers)
        try:
            return exchange(self.http, address, method, path, what=what, deadline=deadline, headers=headers,
                            json=json, params=params)
        except NoHttpAnswer as exc:
            if mode == "http":
                raise
            try:
                env = self._remoting(address, method, path, what, deadline, json, params, headers)
            except NotOverRemoting as refused:
                raise NotOverRemoting(f"{what} {address} gives no HTTP answer; if it is a RocketMQ server: "
                                      f"{refused}") from None
            except UnreachableError:
                raise exc from None
            key = address_key(address)
            if key is not None:
                self._speaks[key] = "remoting"
            return env

    def _remoting(self, address: str, method: str, path: str, what: str, deadline: float, json: Any,
                  params: Any, headers: dict[str, str]) -> Envelope:
        """The HTTP call carried over remoting; the token the HTTP call would carry signs each request
        instead (services/remoting/acl.py)."""
        try:
            host, port = split_address(address, lenient=True)
        except ValueError as exc:
            raise AddressError(f"bad {what} address {address!r}: {exc}") from None
        sign_with = signer(bearer_token(headers))

        def call(request: RemotingCommand) -> RemotingCommand:
            return self.remoting.call(host, port, sign_with(request) if sign_with else request, deadline)

        answer = translate(call, method, path, json, params)
        return Envelope(answer.code, answer.remark, answer.data, address)
