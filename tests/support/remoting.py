"""One remoting request from a test: a fresh client, the answer, the client closed."""

from __future__ import annotations

import asyncio

from services.common.remoting_client import RemotingClient
from services.remoting.command import RemotingCommand


def ask(address: str, request: RemotingCommand, timeout_s: float = 5.0) -> RemotingCommand:
    async def go() -> RemotingCommand:
        client = RemotingClient(timeout_s=timeout_s)
        try:
            return await client.call(address, request)
        finally:
            await client.close()
    return asyncio.run(go())


def ask_all(address: str, requests: list[RemotingCommand], timeout_s: float = 5.0) -> list[RemotingCommand]:
    """Each request in turn on one connection (what a client that stays connected sees)."""
    async def go() -> list[RemotingCommand]:
        client = RemotingClient(timeout_s=timeout_s)
        try:
            return [await client.call(address, request) for request in requests]
        finally:
            await client.close()
    return asyncio.run(go())
