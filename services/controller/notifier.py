"""Role-change notifications: after an election commits, the leader tells the group's live brokers, over
HTTP (``POST /v1/broker/notifyRoleChanged``) or, to a broker that registered over remoting, as RocketMQ's
controller does (``NOTIFY_BROKER_ROLE_CHANGED``, 1008, oneway; signed with the auth token when there is
one). A notification is only a hint: a broker re-reads its role from the leader. Failures are logged at
DEBUG and forgotten; the brokers' periodic metadata pull catches up."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import httpx

from services.common import tls
from services.common.auth import auth_headers
from services.common.errors import MqctlError
from services.common.remoting_client import RemotingClient
from services.common.tasks import TaskSet
from services.remoting.acl import sign

__all__ = ["RoleChangeNotifier"]

log = logging.getLogger(__name__)

#: The fields of an election's result a notification carries.
PAYLOAD_FIELDS = ("clusterName", "brokerName", "masterBrokerId", "masterAddress", "masterEpoch",
                  "syncStateSetEpoch", "syncStateSet")


class RoleChangeNotifier:
    def __init__(self, token: str, now_ms: Callable[[], int]) -> None:
        self.token = token
        self.now_ms = now_ms
        #: Brokers that registered over the remoting protocol: role changes are pushed to them in it.
        self.remoting_brokers: set[tuple[str, int]] = set()
        self._tasks = TaskSet()  # notifications in flight
        self._http: httpx.AsyncClient | None = None
        self._remoting: RemotingClient | None = None

    def start(self) -> None:
        self._http = httpx.AsyncClient(timeout=3.0, headers=auth_headers(self.token or None), verify=tls.httpx_verify())
        token = self.token
        self._remoting = RemotingClient(
            timeout_s=3.0, signer=(lambda r: sign(r, token, self.now_ms())) if token else None)

    async def stop(self) -> None:
        await self._tasks.close()
        if self._http is not None:
            await self._http.aclose()
        if self._remoting is not None:
            await self._remoting.close()

    def notify(self, data: dict[str, Any], active: Callable[[str, int], bool]) -> None:
        """Tell every member of the elected group that ``active(brokerName, brokerId)`` holds for."""
        payload = {k: data.get(k) for k in PAYLOAD_FIELDS}
        name = str(data.get("brokerName"))
        for member in data.get("brokers", []):
            broker_id, address = int(member["brokerId"]), str(member["brokerAddress"])
            if not active(name, broker_id):
                continue
            if (name, broker_id) in self.remoting_brokers:
                self._tasks.spawn(self._over_remoting(address, payload))
            else:
                self._tasks.spawn(self._over_http(address, payload))

    async def _over_http(self, address: str, payload: dict[str, Any]) -> None:
        if self._http is None:
            return
        try:
            await self._http.post(f"{tls.scheme()}://{address}/v1/broker/notifyRoleChanged", json=payload)
        except httpx.HTTPError as exc:
            log.debug("role-change notification to %s failed: %s", address, exc)

    async def _over_remoting(self, address: str, payload: dict[str, Any]) -> None:
        from services.controller.remoting import role_change_request

        if self._remoting is None:
            return
        try:
            await self._remoting.oneway(address, role_change_request(payload))
        except MqctlError as exc:
            log.debug("role-change notification to %s failed: %s", address, exc)
