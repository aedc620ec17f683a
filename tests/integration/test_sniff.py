"""One port, two protocols (services/common/sniff.py): a real uvicorn server whose protocol is the sniffer
answers HTTP (and websockets) as before, hands connections that start with 0x00 to the binary protocol, and
closes a connection that says nothing."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn
import websockets.sync.client
from fastapi import FastAPI, WebSocket
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from mqctl.cluster.processes import free_port_span
from services.common.sniff import sniffing_protocol

pytestmark = pytest.mark.component


class Echo(asyncio.Protocol):
    def __init__(self, server_state: Any) -> None:
        self.server_state = server_state

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: Any = transport

    def data_received(self, data: bytes) -> None:
        self.transport.write(b"echo:" + data)


def free_port() -> int:
    """A free port below the kernel's ephemeral range (which an outgoing connection may take meanwhile)."""
    return free_port_span(1)


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    app = FastAPI()

    @app.get("/ping")
    async def ping() -> dict[str, str]:
        return {"pong": "yes"}

    @app.websocket("/ws")
    async def ws(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.send_text(await websocket.receive_text())
        await websocket.close()

    number = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=number, log_config=None, lifespan="off",
                            http=sniffing_protocol(HttpToolsProtocol, Echo, first_byte_timeout_s=0.5))
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    yield number
    server.should_exit = True
    thread.join(timeout=10)


def test_http_is_served(port: int) -> None:
    assert httpx.get(f"http://127.0.0.1:{port}/ping").json() == {"pong": "yes"}


def test_websockets_still_upgrade(port: int) -> None:
    with websockets.sync.client.connect(f"ws://127.0.0.1:{port}/ws") as ws:
        ws.send("hi")
        assert ws.recv(timeout=5) == "hi"


def test_a_connection_starting_with_zero_goes_to_the_binary_protocol(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"\x00\x00\x00\x02hi")
        assert sock.recv(100) == b"echo:\x00\x00\x00\x02hi"
        sock.sendall(b"more")
        assert sock.recv(100) == b"echo:more"


def test_garbage_gets_an_http_error(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"\x16\x03\x01garbage\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 400")


def test_a_silent_connection_is_closed(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        started = time.monotonic()
        assert sock.recv(100) == b""
        assert time.monotonic() - started < 4
