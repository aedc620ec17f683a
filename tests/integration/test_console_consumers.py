"""The console's questions to the masters (console_brokers.py) over real sockets on loopback, through the real
remoting client: a server that answers RocketMQ's 28, 201 and 208 as a broker does is read; a server that speaks
HTTP only, one that sends a frame beyond the bound, one that never answers and a port with nothing behind it are
each shown as ``n/a`` within the round's deadline, and the round goes on."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from services.controller import console_brokers
from services.controller.console_brokers import ConsumerWatch, Master
from services.controller.console_consumers import NOT_AVAILABLE, OK
from services.remoting import admin_bodies as ab
from services.remoting import admin_headers as ah
from services.remoting.bodies import KVTable
from services.remoting.broker_bodies import MessageQueue
from services.remoting.codec import FrameDecoder, encode
from services.remoting.command import RemotingCommand, make_response
from services.remoting.subscription_bodies import SubscriptionGroupConfig, SubscriptionGroupWrapper

pytestmark = pytest.mark.component

def broker_answer(request: RemotingCommand) -> RemotingCommand:
    if request.code == ah.GET_BROKER_RUNTIME_INFO:
        return make_response(request, 0, body=KVTable({"putTps": "3.0 2.0 1.0", "getTransferredTps": "1.5"}).encode())
    if request.code == ah.GET_ALL_SUBSCRIPTIONGROUP_CONFIG:
        return make_response(request, 0, body=SubscriptionGroupWrapper({"orders": SubscriptionGroupConfig("orders")})
                             .encode())
    table = {MessageQueue("T", "broker-a", 0): ab.OffsetWrapper(12, 5, 5, 1_700_000_000_000)}
    return make_response(request, 0, body=ab.ConsumeStats(table, 0.5).encode())


async def a_broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    decoder = FrameDecoder()
    while data := await reader.read(65536):
        for request in decoder.feed(data):
            writer.write(encode(broker_answer(request)))
    writer.close()


async def http_only(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(1024)
    writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    await writer.drain()
    writer.close()


async def huge_frame(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(1024)
    writer.write((console_brokers.MAX_ANSWER_BYTES + 1).to_bytes(4, "big") + b"\x00" * 65536)
    await writer.drain()
    await asyncio.sleep(5)
    writer.close()


async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await asyncio.sleep(30)
    writer.close()


@asynccontextmanager
async def serving(handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter], object]) -> AsyncIterator[str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)  # type: ignore[arg-type]
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.close()


async def free_port() -> str:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    return f"127.0.0.1:{port}"


def test_a_round_reads_a_broker_and_shows_every_other_server_as_not_available() -> None:
    async def run() -> tuple[dict[str, dict[str, object]], list[dict[str, object]], float]:
        async with serving(a_broker) as good, serving(http_only) as http, serving(huge_frame) as huge, \
                serving(silent) as quiet:
            nobody = await free_port()
            masters = [Master("c", name, address) for name, address in (
                ("broker-a", good), ("http-only", http), ("huge", huge), ("silent", quiet), ("nobody", nobody))]
            watch = ConsumerWatch(clock=time.time, interval_s=0.05)
            rounds = [0]

            def running() -> bool:
                rounds[0] += 1
                return rounds[0] <= 2  # two rounds: the second gives the rates

            started = time.monotonic()
            await watch.run(lambda: masters, running)
            took = time.monotonic() - started
        brokers = {b["brokerName"]: b for b in watch.view["brokers"]}
        return brokers, watch.view["groups"], took

    brokers, groups, took = asyncio.run(run())
    assert brokers["broker-a"]["status"] == OK and brokers["broker-a"]["putTps"] == 3.0
    for name in ("http-only", "huge", "silent", "nobody"):
        assert brokers[name]["status"] == NOT_AVAILABLE, brokers[name]
    assert "did not answer request 28 within 1.0 s" in str(brokers["silent"]["remark"])
    assert took < 2 * (console_brokers.BROKER_DEADLINE_S + 1)  # each round bounded, whatever the servers do
    [orders] = groups
    assert orders["group"] == "orders" and orders["lag"] == 7 and orders["brokers"] == ["broker-a"]
    assert orders["consumeRate"] == 0.0 and len(orders["history"]) == 2  # type: ignore[arg-type]
