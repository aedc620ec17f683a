"""HTTP client for brokers, and locating them through the controller (there is no name server)."""

from __future__ import annotations

from typing import Any

import httpx

from services.common.auth import auth_headers
from services.common.codes import ResponseCode, code_name
from services.common.controller_client import ControllerClient, Envelope
from services.common.errors import RemoteError, UnreachableError, UsageError


class BrokerClient:
    def __init__(self, timeout: float = 5.0, transport: httpx.BaseTransport | None = None,
                 token: str | None = None) -> None:
        self._client = httpx.Client(timeout=httpx.Timeout(timeout, connect=min(timeout, 2.0)),
                                    transport=transport, headers=auth_headers(token))

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> BrokerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, address: str, method: str, path: str, *, json: Any = None, params: Any = None,
                accept: tuple[int, ...] = ()) -> Envelope:
        try:
            response = self._client.request(method, f"http://{address}{path}", json=json, params=params)
        except httpx.TimeoutException as exc:
            raise UnreachableError(f"broker {address} timed out", [address]) from exc
        except httpx.HTTPError as exc:
            raise UnreachableError(f"broker {address} is unreachable: connection failed", [address]) from exc
        try:
            body = response.json()
            env = Envelope(int(body["code"]), str(body.get("remark") or ""), body.get("data"), address)
        except (ValueError, KeyError, TypeError):
            raise RemoteError(int(ResponseCode.SYSTEM_ERROR),
                              f"{address} answered HTTP {response.status_code} without an envelope; "
                              "is it a broker?") from None
        if env.ok or env.code in accept:
            return env
        raise RemoteError(env.code, env.remark or code_name(env.code), env.data if isinstance(env.data, dict) else None)


def broker_sets(controller: ControllerClient, broker_name: str | None, cluster: str | None) -> list[dict[str, Any]]:
    """Replica views (master, in-sync and other replicas with addresses) from the controller."""
    if not broker_name and not cluster:
        raise UsageError("give -b brokerName or -c clusterName")
    params: dict[str, Any] = {"brokerName": [broker_name]} if broker_name else {"clusterName": cluster}
    brokers = list(controller.call("GET", "/v1/controller/syncStateData", params=params).data["brokers"])
    if not brokers:
        what = f"broker-set {broker_name}" if broker_name else f"cluster {cluster}"
        raise UsageError(f"{what} is not known to the controller")
    return brokers


def master_address(controller: ControllerClient, broker_name: str | None, cluster: str | None) -> str:
    for bs in broker_sets(controller, broker_name, cluster):
        if bs.get("masterAddress") and bs.get("masterBrokerId") is not None:
            return str(bs["masterAddress"])
    target = broker_name or cluster
    raise RemoteError(int(ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE), f"{target} has no master right now")


def replica_addresses(bs: dict[str, Any]) -> list[tuple[int, str]]:
    rows = [*(bs.get("inSyncReplicas") or []), *(bs.get("notInSyncReplicas") or [])]
    return sorted((int(r["brokerId"]), str(r["brokerAddress"])) for r in rows)
