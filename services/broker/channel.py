"""The broker side of the liveness channels: one websocket held open to every controller.

Nothing flows but an occasional ping; the point is the TCP connection itself. When this process dies,
the kernel closes the sockets and every controller learns at once that the broker is gone (the
heartbeat timeout remains the detector for a process that hangs or a network that drops packets).
"""

from __future__ import annotations

import asyncio
import logging

import websockets

from services.common import tls
from services.common.auth import auth_headers

log = logging.getLogger(__name__)


class LivenessChannels:
    def __init__(self, controller_addresses: list[str], cluster: str, broker_name: str,
                 token: str | None = None) -> None:
        self.addresses = controller_addresses
        self.token = token
        self.cluster = cluster
        self.broker_name = broker_name
        self._tasks: list[asyncio.Task[None]] = []

    def start(self, broker_id: int) -> None:
        for address in self.addresses:
            self._tasks.append(asyncio.create_task(self._hold(address, broker_id), name=f"channel-{address}"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=2.0)
        self._tasks.clear()

    async def _hold(self, address: str, broker_id: int) -> None:
        url = (f"{tls.ws_scheme()}://{address}/v1/controller/channel?clusterName={self.cluster}&brokerName={self.broker_name}"
               f"&brokerId={broker_id}")
        while True:
            try:
                async with websockets.connect(url, open_timeout=3, ping_interval=5, ping_timeout=20,
                                              additional_headers=auth_headers(self.token),
                                              ssl=tls.client_tls()) as ws:
                    await ws.wait_closed()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001  any failure: retry; the channel is an optimisation
                log.debug("liveness channel to %s: %s", address, exc)
            await asyncio.sleep(1.0)  # a cancellation here must end the task: shutdown waits for it
