"""HTTP client for the controller that finds and follows the Raft leader.

Give it any subset of the controller addresses: a follower answers ``CONTROLLER_NOT_LEADER`` with the
leader's address and the client goes there; a dead node is skipped. During an election (no leader known
anywhere) it retries until its deadline. Transport errors become :class:`UnreachableError`, non-SUCCESS
answers :class:`RemoteError` — translated once, here.
"""

from __future__ import annotations

import ipaddress
import json as _json
import os
import re
import time
from dataclasses import dataclass
from typing import Any, Self

import httpx

from services.common.auth import auth_headers
from services.common.codes import ResponseCode, code_name
from services.common.errors import AddressError, RemoteError, UnreachableError, UsageError

DEFAULT_CONTROLLER_ADDR = "127.0.0.1:9878"
ENV_CONTROLLER_ADDR = "MQCTL_CONTROLLER_ADDR"

#: A DNS name or IPv4 address: dot-separated labels of letters, digits, '-' and '_' (ASCII only).
_HOST_NAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,62})(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,62}))*\.?")
_DOTTED_QUAD = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+")
_PORT = re.compile(r"[0-9]{1,10}")
ADDRESS_EXAMPLE = "e.g. 127.0.0.1:9878 or [::1]:9878"


def split_address(text: str, *, lenient: bool = False) -> tuple[str, int]:
    """``host:port`` or ``[ipv6]:port`` → (host, port), the IPv6 host without brackets.

    Raises ValueError saying what is wrong. ``lenient`` also reads an unbracketed IPv6 address whose last
    group is the port (``::1:10911``), as a server may report its own address; an operator must write
    brackets, because ``::1:19878`` is itself a valid IPv6 address and the port would be a guess."""
    if text.startswith("["):
        inner, sep, port = text[1:].partition("]:")
        if not sep:
            raise ValueError(f"expected [ipv6]:port, {ADDRESS_EXAMPLE}")
        _check_ipv6(inner, f"{inner!r} is not an IPv6 address")
        return inner, _port(port)
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise ValueError(f"expected host:port, {ADDRESS_EXAMPLE}")
    if ":" in host:
        _check_ipv6(host, f"expected host:port, {ADDRESS_EXAMPLE}")
        if not lenient:
            raise ValueError(f"write an IPv6 address in brackets, e.g. [{host}]:{port}")
        return host, _port(port)
    if len(host) > 253 or not _HOST_NAME.fullmatch(host):
        raise ValueError(f"a host name holds only letters, digits, '.', '-' and '_' ({ADDRESS_EXAMPLE})")
    if _DOTTED_QUAD.fullmatch(host):  # read as IPv4 by URL parsers, so it must be one
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise ValueError(f"{host!r} is not an IPv4 address") from None
    return host, _port(port)


def _check_ipv6(host: str, problem: str) -> None:
    try:
        ipaddress.IPv6Address(host)
    except ValueError:
        raise ValueError(problem) from None
    if "%" in host:
        raise ValueError("IPv6 zone ids (%eth0) are not supported")


def _port(text: str) -> int:
    if not _PORT.fullmatch(text) or not 0 < int(text) < 65536:
        raise ValueError(f"the port must be a number from 1 to 65535 ({ADDRESS_EXAMPLE})")
    return int(text)


def join_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def address_key(address: str) -> tuple[str, int] | None:
    """What identifies an address for comparisons: the lower-cased host and the port (None if malformed)."""
    try:
        host, port = split_address(address, lenient=True)
    except ValueError:
        return None
    return host.lower(), port


def http_url(address: str, path: str, what: str = "server") -> str:
    """``http://host:port/path`` for a checked address (IPv6 hosts in brackets); AddressError if malformed."""
    try:
        host, port = split_address(address, lenient=True)
    except ValueError as exc:
        raise AddressError(f"bad {what} address {address!r}: {exc}") from None
    return f"http://{join_address(host, port)}{path}"


def check_address(text: str, what: str) -> str:
    """An operator's ``host:port``, stripped; AddressError (a usage error) naming it if malformed."""
    item = text.strip()
    try:
        split_address(item)
    except ValueError as exc:
        raise AddressError(f"bad {what} address {item!r}: {exc}") from None
    return item


def parse_addresses(spec: str | None) -> list[str]:
    """``host:port;host:port`` → list; falls back to $MQCTL_CONTROLLER_ADDR, then 127.0.0.1:9878.

    ``,`` also separates, and a leading ``http://`` and trailing ``/`` are tolerated. Hosts are names,
    IPv4 addresses or bracketed IPv6 addresses (``[::1]:9878``)."""
    text = spec if spec else os.environ.get(ENV_CONTROLLER_ADDR) or DEFAULT_CONTROLLER_ADDR
    result = []
    for item in text.replace(",", ";").split(";"):
        item = item.strip()
        for prefix in ("http://", "https://"):
            item = item.removeprefix(prefix)
        item = item.rstrip("/")
        if item:
            result.append(check_address(item, "controller"))
    if not result:
        raise UsageError("no controller address given")
    return result


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
    except httpx.TimeoutException as exc:
        raise UnreachableError(f"{what} {address} timed out", [address]) from exc
    except httpx.HTTPError as exc:
        reason = _reason(exc) if what == "controller" else "connection failed"
        raise UnreachableError(f"{what} {address} is unreachable: {reason}", [address]) from exc
    try:
        body = _json.loads(content)
        return Envelope(int(body["code"]), str(body.get("remark") or ""), body.get("data"), address)
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        raise RemoteError(int(ResponseCode.SYSTEM_ERROR),
                          f"{address} answered HTTP {response.status_code} without "
                          f"{'a controller' if what == 'controller' else 'an'} envelope; is it a {what}?") from None


def _read_bounded(response: httpx.Response, address: str, what: str, deadline: float) -> bytes:
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise RemoteError(int(ResponseCode.SYSTEM_ERROR),
                              f"{what} {address} answered more than {MAX_ANSWER_BYTES // 2**20} MiB; refused")
        if time.monotonic() > deadline:
            raise httpx.ReadTimeout(f"{what} {address} answered too slowly")
        chunks.append(chunk)
    return b"".join(chunks)


class ControllerClient:
    """Leader-following client. The auth token goes only to the configured ``addresses`` and to the peers
    those controllers list (``/v1/controller/metadata``), never to an address merely named in an answer."""

    def __init__(self, addresses: list[str], timeout: float = 5.0,
                 transport: httpx.BaseTransport | None = None, token: str | None = None) -> None:
        self.addresses = list(addresses)
        self.timeout = timeout
        self._client = httpx.Client(timeout=httpx.Timeout(timeout, connect=min(timeout, 2.0)),
                                    transport=transport)
        self._token = token
        self._trusted = {key for key in map(address_key, self.addresses) if key is not None}
        self._peers_known = False
        self.leader: str | None = None

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ single node
    def request_node(self, address: str, method: str, path: str, *, json: Any = None,
                     params: Any = None) -> Envelope:
        headers = auth_headers(self._token) if self._token and self.vouched(address) else {}
        env = exchange(self._client, address, method, path, what="controller", headers=headers,
                       deadline=time.monotonic() + self.timeout, json=json, params=params)
        if env.code == ResponseCode.NO_PERMISSION and self._token and not headers:
            raise RemoteError(env.code, f"controller {address} asks for the auth token, which is sent only to the "
                                        "controllers given with -a (or $MQCTL_CONTROLLER_ADDR) and the peers they "
                                        f"list; add {address} to -a")
        return env

    # ------------------------------------------------------------------ where the token may go
    def vouched(self, address: str) -> bool:
        """A configured address, or a peer that a configured controller lists (asked once, when needed)."""
        key = address_key(address)
        if key is None:
            return False
        if key not in self._trusted and not self._peers_known:
            self._learn_peers()
        return key in self._trusted

    def _learn_peers(self) -> None:
        for address in self.addresses:
            try:
                env = exchange(self._client, address, "GET", "/v1/controller/metadata", what="controller",
                               headers={}, deadline=time.monotonic() + self.timeout)
            except (UnreachableError, RemoteError):
                continue
            peers = env.data.get("peers") if env.ok and isinstance(env.data, dict) else None
            if not isinstance(peers, list):
                continue
            for peer in peers:  # "<id>:<host>:<port>"
                key = address_key(str(peer).partition(":")[2])
                if key is not None:
                    self._trusted.add(key)
            self._peers_known = True
            return

    # ------------------------------------------------------------------ leader-following
    def call(self, method: str, path: str, *, json: Any = None, params: Any = None,
             accept: tuple[int, ...] = ()) -> Envelope:
        """Send to the leader. Returns the envelope if SUCCESS or its code is in ``accept``."""
        deadline = time.monotonic() + self.timeout
        unreachable: list[str] = []
        not_leader = False
        while True:
            env, refused = self._one_pass(method, path, json, params, unreachable)
            if env is not None:
                return self.check(env, accept)
            not_leader = not_leader or refused
            if time.monotonic() + 0.2 >= deadline:
                break
            time.sleep(0.2)
        if not_leader:
            raise RemoteError(int(ResponseCode.CONTROLLER_NOT_LEADER),
                              "no controller leader is reachable (tried "
                              f"{', '.join(sorted(set(self.addresses) | set(unreachable)))}); the controller "
                              "group may have lost its majority")
        raise UnreachableError(f"no controller reachable at {';'.join(self.addresses)}", unreachable)

    def _one_pass(self, method: str, path: str, json: Any, params: Any,
                  unreachable: list[str]) -> tuple[Envelope | None, bool]:
        """Try the known leader, then each listed node, following leader hints. Returns the leader's
        envelope (or None), and whether some node answered CONTROLLER_NOT_LEADER."""
        candidates = self._candidates()
        tried: set[str] = set()
        not_leader = False
        while candidates:
            address = candidates.pop(0)
            if address in tried:
                continue
            tried.add(address)
            try:
                env = self.request_node(address, method, path, json=json, params=params)
            except (UnreachableError, AddressError):  # a dead node, or a hint that is no address
                if address not in unreachable:
                    unreachable.append(address)
                if self.leader == address:
                    self.leader = None
                continue
            if env.code != ResponseCode.CONTROLLER_NOT_LEADER:
                self.leader = address
                return env, not_leader
            not_leader = True
            hint = env.data.get("controllerLeaderAddress") if isinstance(env.data, dict) else None
            if hint and str(hint) not in tried:
                candidates.insert(0, str(hint))
        return None, not_leader

    def call_any(self, method: str, path: str, *, json: Any = None, params: Any = None) -> Envelope:
        """Send to the first node that answers (for requests any node serves)."""
        errors: list[str] = []
        for address in self.addresses:
            try:
                return self.check(self.request_node(address, method, path, json=json, params=params), ())
            except UnreachableError:
                errors.append(address)
        raise UnreachableError(f"no controller reachable at {';'.join(self.addresses)}", errors)

    def _candidates(self) -> list[str]:
        ordered = [self.leader] if self.leader else []
        return ordered + [a for a in self.addresses if a != self.leader]

    @staticmethod
    def check(env: Envelope, accept: tuple[int, ...]) -> Envelope:
        if env.ok or env.code in accept:
            return env
        raise RemoteError(env.code, env.remark or code_name(env.code),
                          env.data if isinstance(env.data, dict) else None)


def _reason(exc: httpx.HTTPError) -> str:
    text = str(exc) or type(exc).__name__
    if "Connection refused" in text or "connect" in text.lower():
        return "connection refused"
    return text
