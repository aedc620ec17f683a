"""The connection cap of a client port (HTTP, websocket and remoting on one port, optionally inside TLS), and
who gets its slots.

Every connection is counted from the moment it is accepted: a TLS connection too, while it has not said
anything (its handshake must be over within ``HttpLimits.tls_handshake_timeout_s()``). Beyond the cap, a new
connection is answered ``503 SYSTEM_BUSY`` and closed (in TLS it is closed at once: there is no way to answer
before a handshake).

A connection is a **known peer's** when it comes from the address of a peer the node knows (a controller of
its group, a registered broker; for a broker its controllers and the replicas of its group: ``KnownPeers``).
Any other connection is a **stranger's**; in TLS it becomes a known peer's once its handshake shows a client
certificate the node's CA signed (at accept, nothing tells it from any other stranger's). Strangers hold at
most half the cap (``stranger_share``), so the other half is there for known peers whatever strangers do;
and a known peer that finds the cap full closes the oldest idle stranger (one with no request being served)
rather than be refused.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import ssl
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import cast

from services.common.codes import ResponseCode
from services.common.httpguard import Linger, Throttled, error_response

log = logging.getLogger(__name__)

__all__ = ["CappedProtocol", "ConnectionCap", "KnownPeers", "Slot", "capped", "normal_ip"]


def normal_ip(host: str) -> str:
    """An address as the cap compares it: an IPv4 address mapped into IPv6 is the IPv4 one."""
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return host.lower()
    mapped = getattr(ip, "ipv4_mapped", None)
    return str(mapped or ip)


def _peer_host(transport: asyncio.BaseTransport) -> str:
    peer = transport.get_extra_info("peername")
    return normal_ip(str(peer[0])) if isinstance(peer, tuple) and peer else "?"


@dataclass(eq=False)
class Slot:
    """One admitted connection: the transport accepted (what is counted) and, once its TLS handshake is
    over, the transport its protocols speak through."""

    transport: asyncio.BaseTransport
    host: str
    known: bool
    secure: asyncio.BaseTransport | None = None
    handshaking: bool = False

    def busy(self) -> bool:
        """A request is being served on it (the protocol in charge says so)."""
        if self.handshaking:
            return False
        protocol = (self.secure or self.transport).get_protocol()
        check = getattr(protocol, "busy", None)
        return bool(check()) if callable(check) else False


class KnownPeers:
    """The addresses whose connections are known peers': ``fixed`` ones (names resolved once, at start) and
    those ``current`` returns (read from the node's state at most every ``refresh_s``; IP addresses only)."""

    def __init__(self, fixed: Iterable[str] = (), current: Callable[[], Iterable[str]] | None = None,
                 refresh_s: float = 1.0) -> None:
        self.fixed = frozenset(_resolve(fixed))
        self.current = current
        self.refresh_s = refresh_s
        self._read_at = -refresh_s
        self._current: frozenset[str] = frozenset()

    def __call__(self, host: str) -> bool:
        if host in self.fixed:
            return True
        if self.current is None:
            return False
        now = time.monotonic()
        if now - self._read_at >= self.refresh_s:
            self._read_at = now
            try:
                self._current = frozenset(normal_ip(h) for h in self.current())
            except Exception:  # never let a failed read refuse or admit connections wholesale
                log.exception("cannot read the known peers' addresses; keeping the last ones")
        return host in self._current


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _resolve(names: Iterable[str]) -> set[str]:
    found: set[str] = set()
    for name in names:
        if _is_ip(name):
            found.add(normal_ip(name))
            continue
        try:
            found.update(normal_ip(str(info[4][0])) for info in socket.getaddrinfo(name, None))
        except OSError as exc:
            log.warning("cannot resolve %s (a known peer): %s; its connections count as strangers'", name, exc)
    return found


class ConnectionCap:
    """Open connections of one listener, in the order they were accepted, counted by the transport
    accepted. Closed ones are forgotten lazily, when a limit is reached, so admitting a connection is
    O(1) until the listener is nearly full."""

    def __init__(self, limit: int, strangers: int | None = None, known: Callable[[str], bool] | None = None) -> None:
        self.limit = limit
        self.strangers = min(limit, strangers if strangers is not None else limit)
        self.known = known or (lambda host: False)
        self._slots: dict[asyncio.BaseTransport, Slot] = {}
        self._stranger_count = 0
        self.warnings = Throttled(logger=log)
        self._evictions = Throttled(logger=log)

    def admit(self, transport: asyncio.BaseTransport) -> Slot | None:
        """A slot for a newly accepted connection, or None: refuse it."""
        host = _peer_host(transport)
        slot = Slot(transport, host, self.known(host))
        if not self._room_for(slot):
            self._forget_closed()
        if not self._room_for(slot) and slot.known:
            self._make_room(slot)
        if not self._room_for(slot):
            return None
        self._slots[transport] = slot
        self._stranger_count += not slot.known
        return slot

    def promote(self, slot: Slot) -> None:
        """``slot`` proved itself (a verified client certificate): a known peer's from now on."""
        if not slot.known and self._slots.get(slot.transport) is slot:
            self._stranger_count -= 1
        slot.known = True

    def open_count(self) -> int:
        return sum(1 for t in self._slots if not t.is_closing())

    def refusal(self, slot_known: bool) -> str:
        if slot_known or self._stranger_count < self.strangers:
            return f"too many open connections (the cap is {self.limit}); retry shortly"
        return f"too many connections from unknown addresses ({self.strangers}, half the cap); retry shortly"

    def _room_for(self, slot: Slot) -> bool:
        if len(self._slots) >= self.limit:
            return False
        return slot.known or self._stranger_count < self.strangers

    def _forget_closed(self) -> None:
        self._slots = {t: s for t, s in self._slots.items() if not t.is_closing()}
        self._stranger_count = sum(1 for s in self._slots.values() if not s.known)

    def _make_room(self, newcomer: Slot) -> None:
        """Close the oldest idle stranger (the first in accept order) for a known peer."""
        victim = next((s for s in self._slots.values() if not s.known and not s.busy()), None)
        if victim is None:
            return
        self._evictions.log(logging.INFO, f"connection from {victim.host} closed to make room for a known peer "
                                          f"({newcomer.host}): {self.limit} connections open, the oldest idle "
                                          "stranger's goes")
        cast(asyncio.Transport, victim.transport).abort()
        del self._slots[victim.transport]
        self._stranger_count -= 1


#: Handshakes under way (a task must be referenced until it ends).
_HANDSHAKES: set[asyncio.Task[None]] = set()


def capped(protocol_class: type[asyncio.Protocol], cap: ConnectionCap, tls: ssl.SSLContext | None = None,
           handshake_timeout_s: float = 5.0) -> type[asyncio.Protocol]:
    """``protocol_class`` (uvicorn's constructor signature) counted by ``cap`` from accept; with ``tls``, the
    connection's TLS handshake is made here, within ``handshake_timeout_s``, before ``protocol_class`` sees
    the connection (through the TLS transport)."""
    settings = {"cap": cap, "tls": tls, "handshake_timeout_s": handshake_timeout_s}
    return type(f"Capped{protocol_class.__name__}", (CappedProtocol, protocol_class), settings)


class CappedProtocol(asyncio.Protocol):
    """Put in front of a protocol class by ``capped``, which sets the class attributes."""

    cap: ConnectionCap
    tls: ssl.SSLContext | None = None
    handshake_timeout_s: float = 5.0
    _refused: Linger | None = None
    #: In TLS: what arrives between the handshake's end and the protocol taking the connection.
    _early: list[bytes] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        raw = cast(asyncio.Transport, transport)
        slot = self.cap.admit(raw)
        if slot is None:
            self._refuse(raw)
        elif self.tls is None:
            super().connection_made(raw)
        else:
            self._early, slot.handshaking = [], True
            task = asyncio.get_running_loop().create_task(self._handshake(raw, slot, self.tls))
            _HANDSHAKES.add(task)
            task.add_done_callback(_HANDSHAKES.discard)

    async def _handshake(self, transport: asyncio.Transport, slot: Slot, context: ssl.SSLContext) -> None:
        try:
            secure = await self._start_tls(transport, context)
        except (OSError, RuntimeError, ValueError) as exc:  # ssl.SSLError is an OSError
            _handshake_failed(slot, exc, self.handshake_timeout_s)
            transport.abort()
            return
        if secure is None or secure.is_closing():
            return
        slot.secure, slot.handshaking = secure, False
        if secure.get_extra_info("peercert"):
            self.cap.promote(slot)  # a client certificate the CA signed
        super().connection_made(secure)
        early, self._early = self._early or [], None
        for data in early:
            super().data_received(data)

    async def _start_tls(self, transport: asyncio.Transport, context: ssl.SSLContext) -> asyncio.Transport | None:
        """``loop.start_tls``, with what the connection sent before it began (uvloop starts reading as soon as
        ``connection_made`` returns, so the ClientHello may already be here) given to TLS ahead of the rest.

        Reading is paused first; start_tls's first step puts its TLS protocol on the transport and schedules
        its start and the resumption of reading; the bytes already read are handed to it in between (both
        asyncio's and uvloop's TLS protocols buffer bytes given before they start)."""
        transport.pause_reading()
        loop = asyncio.get_running_loop()
        starting = asyncio.ensure_future(loop.start_tls(transport, self, context, server_side=True,
                                                        ssl_handshake_timeout=self.handshake_timeout_s))
        await asyncio.sleep(0)  # start_tls's first step runs now, before this coroutine goes on
        taken = transport.get_protocol()
        early = b"".join(self._early or [])
        if early and taken is not self:
            self._early = []
            _feed(taken, early)
        return await starting

    def _refuse(self, transport: asyncio.Transport) -> None:
        host = _peer_host(transport)
        remark = self.cap.refusal(self.cap.known(host))
        self.cap.warnings.log(logging.WARNING, f"connection from {host} refused: {remark}")
        if self.tls is not None:
            transport.abort()  # nothing can be said before a handshake
            return
        transport.write(error_response(503, ResponseCode.SYSTEM_BUSY, remark))
        self._refused = Linger(transport, asyncio.get_running_loop())

    def data_received(self, data: bytes) -> None:
        if self._early is not None:
            self._early.append(data)
        elif self._refused is None:
            super().data_received(data)

    def eof_received(self) -> bool | None:
        if self._refused is None:
            return super().eof_received()
        self._refused.peer_closed()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._refused is None:
            super().connection_lost(exc)
        else:
            self._refused.ended()


def _feed(protocol: asyncio.BaseProtocol, data: bytes) -> None:
    """Give ``data`` to ``protocol`` as the transport would."""
    if not hasattr(protocol, "get_buffer"):
        cast(asyncio.Protocol, protocol).data_received(data)
        return
    buffered = cast(asyncio.BufferedProtocol, protocol)
    view = memoryview(data)
    while view:
        buffer = memoryview(buffered.get_buffer(len(view)))
        size = min(len(buffer), len(view))
        buffer[:size] = view[:size]
        buffered.buffer_updated(size)
        view = view[size:]


def _handshake_failed(slot: Slot, exc: BaseException, timeout_s: float) -> None:
    if isinstance(exc, ConnectionAbortedError):
        _LATE_HANDSHAKES.log(logging.INFO, f"connection from {slot.host} closed: TLS handshake not finished "
                                           f"within {timeout_s:g} s")
    else:
        reason = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
        _FAILED_HANDSHAKES.log(logging.INFO, f"connection from {slot.host} closed: TLS handshake failed ({reason})")


_LATE_HANDSHAKES = Throttled(logger=log)
_FAILED_HANDSHAKES = Throttled(logger=log)
