"""The HTTP listener guards (services/common/httpguard.py) on a real uvicorn server in this process, on a
loopback port, with short limits: slow or silent clients are closed, oversized heads and bodies are
refused before they are read, the connection cap holds and recovers, and a websocket outlives the request
deadlines (issue 19, items 10 and 12)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import websockets
from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse

from mqctl.cluster.processes import free_port_span
from services.common.bodylimit import BodyLimit
from services.common.envelope import install_error_handlers, respond
from services.common.httplimits import HttpLimits
from services.common.httpserver import GracefulServer, make_server

pytestmark = pytest.mark.component

LIMITS = HttpLimits(max_connections=64, header_timeout_s=0.5, body_timeout_s=0.5, max_body_bytes=10_000,
                    route_body_bytes={"/big": 200_000}, body_budget_bytes=500_000)


def echo_app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/ping")
    async def ping() -> JSONResponse:
        return respond(0, None, {"pong": True})

    @app.post("/echo")
    @app.post("/big")
    async def echo(request: Request) -> JSONResponse:
        return respond(0, None, {"size": len(await request.body())})

    @app.websocket("/ws")
    async def ws(websocket: WebSocket) -> None:
        await websocket.accept()
        try:
            while True:
                await websocket.send_text(await websocket.receive_text())
        except WebSocketDisconnect:
            pass

    return app


@contextlib.contextmanager
def running(limits: HttpLimits, app: FastAPI | None = None) -> Iterator[tuple[str, int]]:
    port = free_port_span(1)  # below the kernel's ephemeral range

    async def nothing() -> None:
        return None

    srv: GracefulServer = make_server(app or echo_app(), "127.0.0.1", port, nothing, nothing, limits=limits)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.02)
    try:
        yield "127.0.0.1", port
    finally:
        srv.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, int]]:
    with running(LIMITS) as address:
        yield address


def answered(address: tuple[str, int]) -> bool:
    response = httpx.get(f"http://{address[0]}:{address[1]}/ping", timeout=5)
    return bool(response.json()["data"]["pong"])


def read_all(sock: socket.socket, deadline_s: float) -> bytes:
    """Everything the server sends until it closes (failing after ``deadline_s``)."""
    sock.settimeout(deadline_s)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


class Collector(asyncio.Protocol):
    """A client connection that keeps what the server sends and notes when the server closes it."""

    def __init__(self) -> None:
        self.data = b""
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.data += data

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


def envelope_of(raw: bytes) -> tuple[int, dict[str, Any]]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), json.loads(body)


# ---------------------------------------------------------------------------------- slow and silent clients
def test_many_slowloris_connections_are_closed_and_the_server_keeps_answering(server: tuple[str, int]) -> None:
    """40 clients each send a request one byte every 0.1 s: every one is answered 408 and closed once
    its head is 0.5 s late, and the server answers others meanwhile."""

    async def slow(index: int) -> bytes:
        loop = asyncio.get_running_loop()
        transport, client = await loop.create_connection(Collector, *server)
        request = f"GET /ping?client={index} HTTP/1.1\r\nHost: localhost\r\nX-Padding: {'p' * 200}\r\n\r\n".encode()
        for byte in request:
            if transport.is_closing():
                break
            transport.write(bytes([byte]))
            await asyncio.sleep(0.1)
        await asyncio.wait_for(client.closed, 10)
        return client.data

    async def attack() -> list[bytes]:
        clients = [asyncio.create_task(slow(i)) for i in range(40)]
        while not all(c.done() for c in clients):
            assert await asyncio.to_thread(answered, server)
            await asyncio.sleep(0.1)
        return [c.result() for c in clients]

    answers = asyncio.run(asyncio.wait_for(attack(), 30))
    for raw in answers:
        status, body = envelope_of(raw)
        assert status == 408 and "request headers not received within 0.5 s" in body["remark"], raw


def test_a_silent_connection_is_closed(server: tuple[str, int]) -> None:
    with socket.create_connection(server) as sock:
        assert read_all(sock, 10) == b""


def test_a_body_that_never_comes_is_answered_408(server: tuple[str, int]) -> None:
    with socket.create_connection(server) as sock:
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{")
        status, body = envelope_of(read_all(sock, 10))
    assert status == 408 and "body not received within 0.5 s" in body["remark"]


def test_keep_alive_requests_inside_the_deadlines_are_served(server: tuple[str, int]) -> None:
    with httpx.Client(base_url=f"http://{server[0]}:{server[1]}", timeout=5) as client:
        for _ in range(5):
            assert client.post("/echo", content=b"x" * 5000).json()["data"]["size"] == 5000
            time.sleep(0.3)  # below the keep-alive timeout and the deadlines: the connection is reused


# ---------------------------------------------------------------------------------- sizes
def test_an_oversized_head_is_refused_before_it_is_read(server: tuple[str, int]) -> None:
    with socket.create_connection(server) as sock:
        sock.sendall(b"GET /ping HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * (LIMITS.max_head_bytes + 10))
        status, body = envelope_of(read_all(sock, 10))
    assert status == 431 and body["codeName"] == "INVALID_PARAMETER"


def test_a_declared_50_mib_body_is_refused_without_reading_it(server: tuple[str, int]) -> None:
    with socket.create_connection(server) as sock:
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 52428800\r\n\r\n")
        status, body = envelope_of(read_all(sock, 10))
    assert status == 413 and body["codeName"] == "INVALID_PARAMETER"
    assert "52428800 bytes is over the limit of 10000 bytes for POST /echo" in body["remark"]


def test_a_chunked_body_is_refused_once_it_passes_the_limit(server: tuple[str, int]) -> None:
    sent = 0
    with socket.create_connection(server) as sock:
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n")
        sock.settimeout(0.05)
        raw = b""
        while sent < 5_000_000 and not raw:
            try:
                sock.sendall(b"1000\r\n" + b"z" * 0x1000 + b"\r\n")
                sent += 0x1000
                raw = sock.recv(65536)
            except TimeoutError:
                continue
            except ConnectionError:
                break
        raw += read_all(sock, 10)
    status, body = envelope_of(raw)
    assert status == 413 and "is over the limit of 10000 bytes" in body["remark"]
    assert sent < 5_000_000  # refused long before the client was done


def body_limit_of(app: FastAPI) -> BodyLimit:
    layer: Any = app.middleware_stack
    while not isinstance(layer, BodyLimit):
        layer = layer.app
    return layer


def test_route_limits_and_the_shared_budget() -> None:
    """/big takes 200 000 bytes; bodies being read at once share 500 000: a third declared 200 000-byte
    body, while two are held unsent, is answered SYSTEM_BUSY; once they are gone it is accepted."""
    app = echo_app()
    limits = HttpLimits(body_timeout_s=30, route_body_bytes={"/big": 200_000}, body_budget_bytes=500_000)
    head = b"POST /big HTTP/1.1\r\nHost: localhost\r\nContent-Length: 200000\r\n\r\n"
    with running(limits, app) as server:
        holders = [socket.create_connection(server) for _ in range(2)]
        try:
            for holder in holders:
                holder.sendall(head + b"a")
            deadline = time.monotonic() + 10
            while app.middleware_stack is None or body_limit_of(app).in_flight < 400_000:
                assert time.monotonic() < deadline, "the server did not take both bodies"
                time.sleep(0.02)
            with socket.create_connection(server) as third:
                third.sendall(head)
                status, body = envelope_of(read_all(third, 10))
            assert status == 503 and body["codeName"] == "SYSTEM_BUSY"
        finally:
            for holder in holders:
                holder.close()
        deadline = time.monotonic() + 10
        while body_limit_of(app).in_flight:
            assert time.monotonic() < deadline, "the held bodies were not released"
            time.sleep(0.02)
        response = httpx.post(f"http://{server[0]}:{server[1]}/big", content=b"b" * 200_000, timeout=5)
        assert response.json()["data"]["size"] == 200_000


# ---------------------------------------------------------------------------------- connection cap
def test_connections_beyond_the_cap_are_refused_and_the_cap_recovers() -> None:
    limits = HttpLimits(max_connections=16, header_timeout_s=30)  # the held connections outlive the test
    with running(limits) as server:
        held = [socket.create_connection(server) for _ in range(limits.max_connections)]
        try:
            for sock in held:
                sock.sendall(b"G")  # past the first-byte sniffing: a request begun, never finished
            refused = []
            for _ in range(5):
                with socket.create_connection(server) as extra:
                    extra.sendall(b"GET /ping HTTP/1.1\r\nHost: localhost\r\n\r\n")
                    refused.append(envelope_of(read_all(extra, 10)))
            assert all(status == 503 and body["codeName"] == "SYSTEM_BUSY" for status, body in refused), refused
        finally:
            for sock in held:
                sock.close()
        recovered(server)


def recovered(server: tuple[str, int]) -> None:
    deadline = time.monotonic() + 10
    while True:
        try:
            if answered(server):
                break
        except (httpx.HTTPError, KeyError, ValueError):
            pass
        assert time.monotonic() < deadline, "the server did not accept connections again"
        time.sleep(0.1)


# ---------------------------------------------------------------------------------- websockets
def test_a_websocket_outlives_the_request_deadlines(server: tuple[str, int]) -> None:
    async def talk() -> list[str]:
        async with websockets.connect(f"ws://{server[0]}:{server[1]}/ws") as ws:
            got = []
            for i in range(3):
                await asyncio.sleep(0.6)  # longer than the head and body deadlines
                await ws.send(f"m{i}")
                got.append(str(await asyncio.wait_for(ws.recv(), 5)))
            return got

    assert asyncio.run(asyncio.wait_for(talk(), 20)) == ["m0", "m1", "m2"]
