"""One listening port, two protocols: HTTP (served by uvicorn) and RocketMQ's remoting protocol, told apart
by the first byte a client sends.

A remoting frame starts with its length as a big-endian int32, and every frame we accept is far below
16 MiB, so its first byte is 0x00. An HTTP request starts with a method name (an ASCII letter). So a
connection whose first byte is 0x00 is handed to the remoting protocol; anything else goes to uvicorn's
HTTP protocol, whose parser answers 400 to garbage. Once chosen, the connection's transport is given to
that protocol, which sees the connection as if it had been its own from the start (``connection_made``,
then the bytes read so far). A connection that sends nothing is closed after ``first_byte_timeout_s``.

``sniffing_protocol(http_class, binary_factory)`` builds a class with uvicorn's protocol signature, to be
passed as ``uvicorn.Config(http=...)``: uvicorn then creates one per connection, as it would its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, cast

#: The first byte of every remoting frame we accept (the top byte of a length below 16 MiB).
REMOTING_FIRST_BYTE = 0x00

BinaryFactory = Callable[[Any], asyncio.Protocol]  # (uvicorn's server state) -> a protocol for one connection


class Sniffer(asyncio.Protocol):
    """Reads the first byte of a connection, then hands the connection to the protocol it belongs to."""

    def __init__(self, http: Callable[[], asyncio.Protocol], binary: Callable[[], asyncio.Protocol] | None,
                 first_byte_timeout_s: float, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._http, self._binary = http, binary
        self._timeout_s = first_byte_timeout_s
        self._loop = loop or asyncio.get_event_loop()
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's transports are not subclasses
        self._timer = self._loop.call_later(self._timeout_s, self._transport.abort)

    def data_received(self, data: bytes) -> None:
        assert self._transport is not None
        self._cancel_timer()
        binary = self._binary is not None and data[:1] == bytes([REMOTING_FIRST_BYTE])
        protocol = self._binary() if binary and self._binary is not None else self._http()
        self._transport.set_protocol(protocol)
        protocol.connection_made(self._transport)
        protocol.data_received(data)

    def eof_received(self) -> bool | None:
        return False  # closed before saying anything: close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timer()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def sniffing_protocol(http_class: type[asyncio.Protocol], binary_factory: BinaryFactory | None,
                      first_byte_timeout_s: float = 10.0) -> type[asyncio.Protocol]:
    """A protocol class for ``uvicorn.Config(http=...)``: HTTP connections get ``http_class`` (built with
    uvicorn's arguments, exactly as uvicorn would), remoting connections ``binary_factory(server_state)``."""

    class SniffingProtocol(Sniffer):
        def __init__(self, config: Any, server_state: Any, app_state: dict[str, Any],
                     _loop: asyncio.AbstractEventLoop | None = None) -> None:
            def http() -> asyncio.Protocol:
                return http_class(config=config, server_state=server_state, app_state=app_state,  # type: ignore[call-arg]
                                  _loop=_loop)

            def binary() -> asyncio.Protocol:
                assert binary_factory is not None
                return binary_factory(server_state)

            super().__init__(http, binary if binary_factory is not None else None, first_byte_timeout_s, _loop)

    return SniffingProtocol
