"""Which requests a web page can make a node accept (services/common/hostguard.py): the rules on Host and
Origin in memory, and the middleware's 403 answers over plain ASGI calls."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from services.common.hostguard import HostGuard, refusal
from services.common.httplimits import HttpLimits

LIMITS = HttpLimits(host_names=frozenset({"ctrl-1.internal"}), extra_hosts=frozenset({"mq.example.net"}))


def scope(kind: str = "http", method: str = "POST", host: str | None = "127.0.0.1:9878",
          origin: str | None = None, scheme: str = "http") -> dict[str, Any]:
    headers = [(b"host", host.encode())] if host is not None else []
    headers += [(b"origin", origin.encode())] if origin is not None else []
    return {"type": kind, "method": method, "scheme": scheme, "headers": headers, "path": "/x", "client": ("1.2.3.4", 5)}


@pytest.mark.parametrize("host", ["127.0.0.1:9878", "10.0.0.7", "[::1]:9878", "localhost:9878", "LOCALHOST.",
                                  "ctrl-1.internal:9878", "Ctrl-1.Internal", "mq.example.net", None])
def test_hosts_that_name_the_node(host: str | None) -> None:
    assert refusal(scope(method="GET", host=host), LIMITS) is None


@pytest.mark.parametrize("host", ["rebound.attacker.example:9878", "x", "ctrl-2.internal:9878", "127.0.0.1.nip.io"])
def test_other_names_are_refused_naming_the_host(host: str) -> None:
    reason = refusal(scope(method="GET", host=host), LIMITS)
    assert reason is not None and f"Host {host!r}" in reason and "httpAllowedHosts" in reason


@pytest.mark.parametrize("origin, host, scheme", [
    ("http://127.0.0.1:9878", "127.0.0.1:9878", "http"),
    ("https://ctrl-1.internal", "ctrl-1.internal:443", "https"),
    ("http://localhost", "localhost", "ws"),
    ("https://mq.example.net", "10.0.0.1:9878", "http"),  # a reverse proxy named in httpAllowedHosts
])
def test_the_nodes_own_console(origin: str, host: str, scheme: str) -> None:
    assert refusal(scope(origin=origin, host=host, scheme=scheme), LIMITS) is None
    assert refusal(scope("websocket", origin=origin, host=host, scheme=scheme), LIMITS) is None


@pytest.mark.parametrize("origin", ["http://attacker.example", "null", "http://127.0.0.1:1", "https://127.0.0.1:9878",
                                    "http://localhost:9878", "file://", "http://127.0.0.1:bad", "chrome-extension://x"])
def test_foreign_origins_are_refused_on_writes_and_websockets(origin: str) -> None:
    for kind, method in (("http", "POST"), ("http", "DELETE"), ("websocket", "GET")):
        reason = refusal(scope(kind, method, origin=origin), LIMITS)
        assert reason is not None and f"Origin {origin} is not this node's console" in reason


def test_reads_and_programs_without_an_origin_pass() -> None:
    assert refusal(scope(method="GET", origin="http://attacker.example"), LIMITS) is None
    assert refusal(scope(method="POST"), LIMITS) is None
    assert refusal(scope("websocket"), LIMITS) is None


def call(guard: HostGuard, request: dict[str, Any], extensions: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(guard({**request, "extensions": extensions or {}}, receive, send))
    return sent


def test_the_middleware_answers_403_with_the_envelope() -> None:
    reached: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        reached.append(scope["type"])

    guard = HostGuard(app, LIMITS)
    answer = call(guard, scope(origin="http://attacker.example"))
    assert answer[0]["status"] == 403
    body = json.loads(answer[1]["body"])
    assert body["codeName"] == "NO_PERMISSION" and "attacker.example" in body["remark"]
    ws = call(guard, scope("websocket", origin="null"), {"websocket.http.response": {}})
    assert ws[0]["type"] == "websocket.http.response.start" and ws[0]["status"] == 403
    assert json.loads(ws[1]["body"])["codeName"] == "NO_PERMISSION"
    assert call(guard, scope("websocket", origin="null")) == [{"type": "websocket.close", "code": 1008}]
    assert call(guard, scope(origin="http://127.0.0.1:9878")) == [] and reached == ["http"]
