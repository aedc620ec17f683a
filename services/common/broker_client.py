"""Client for brokers (HTTP, or remoting for a broker that speaks only that), and locating them through
the controller."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, Self

import httpx

from services.broker import contract as bc
from services.common.addresses import address_key
from services.common.answers import checked
from services.common.auth import auth_headers
from services.common.codes import ResponseCode, code_name
from services.common.controller_client import ControllerClient
from services.common.errors import MqctlError, RemoteError, UsageError
from services.common.wire import Envelope, Wire


class BrokerClient:
    """The auth token goes only to ``trusted`` addresses: the ones the operator gave (``--brokerAddr``).
    A broker address learned from the controller never receives it: anyone who can register a broker
    (every caller, when the cluster has no token) could otherwise collect it."""

    def __init__(self, timeout: float = 5.0, transport: httpx.BaseTransport | None = None,
                 token: str | None = None, trusted: Iterable[str] = (), protocol: str = "auto") -> None:
        self.timeout = timeout
        self.wire = Wire(timeout, transport, protocol)
        self._token = token
        self._trusted = {key for key in map(address_key, trusted) if key is not None}

    def close(self) -> None:
        self.wire.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, address: str, method: str, path: str, *, json: Any = None, params: Any = None,
                accept: tuple[int, ...] = ()) -> Envelope:
        headers = auth_headers(self._token) if self._token and address_key(address) in self._trusted else {}
        env = self.wire.exchange(address, method, path, what="broker", headers=headers,
                                 deadline=time.monotonic() + self.timeout, json=json, params=params)
        if env.ok or env.code in accept:
            return env
        remark = env.remark or code_name(env.code)
        if env.code == ResponseCode.NO_PERMISSION and self._token and not headers:
            remark = (f"broker {address} asks for the auth token, which is sent only to a broker address given "
                      f"explicitly: run the command again with --brokerAddr {address}")
        raise RemoteError(env.code, remark, env.data if isinstance(env.data, dict) else None)

    # The typed reads: each answer checked against the broker's contract (services/broker/contract.py).
    def runtime_info(self, address: str) -> bc.RuntimeInfo:
        return checked(bc.RuntimeInfo, self.request(address, "GET", bc.RUNTIME_INFO).data, f"broker {address}")

    def epoch_cache(self, address: str) -> bc.EpochCache:
        return checked(bc.EpochCache, self.request(address, "GET", bc.EPOCH_CACHE).data, f"broker {address}")

    def ha_status(self, address: str) -> bc.HaStatus:
        return checked(bc.HaStatus, self.request(address, "GET", bc.HA_STATUS).data, f"broker {address}")

    def topics(self, address: str) -> bc.Topics:
        return checked(bc.Topics, self.request(address, "GET", bc.TOPICS).data, f"broker {address}")

    def pull(self, address: str, topic: str, queue_id: int, queue_offset: int, max_nums: int) -> bc.PullResult:
        env = self.request(address, "GET", bc.PULL_MESSAGE, params={
            "topic": topic, "queueId": queue_id, "queueOffset": queue_offset, "maxNums": max_nums})
        return checked(bc.PullResult, env.data, f"broker {address}")


def broker_sets(controller: ControllerClient, broker_name: str | None, cluster: str | None) -> list[dict[str, Any]]:
    """Replica views (master, in-sync and other replicas with addresses) from the controller."""
    if not broker_name and not cluster:
        raise UsageError("give -b brokerName or -c clusterName")
    data = controller.sync_state_data([broker_name] if broker_name else [], cluster)
    brokers = [b.model_dump() for b in data.brokers]
    if not brokers:
        what = f"broker-set {broker_name}" if broker_name else f"cluster {cluster}"
        raise UsageError(f"{what} is not known to the controller")
    return brokers


def master_address(controller: ControllerClient, broker_name: str | None, cluster: str | None) -> str:
    return master_of(controller, broker_name, cluster)[1]


def master_of(controller: ControllerClient, broker_name: str | None, cluster: str | None) -> tuple[str, str]:
    """The name and the master's address of the broker-set (the first with a master, of a cluster)."""
    for bs in broker_sets(controller, broker_name, cluster):
        if bs.get("masterAddress") and bs.get("masterBrokerId") is not None:
            address = str(bs["masterAddress"])
            if address_key(address) is None:
                raise MqctlError(f"the controller lists {address!r} as the master of {bs.get('brokerName')}, which "
                                 "is not host:port; give the master's address with --brokerAddr")
            return str(bs.get("brokerName")), address
    target = broker_name or cluster
    raise RemoteError(int(ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE), f"{target} has no master right now")


def replica_addresses(bs: dict[str, Any]) -> list[tuple[int, str]]:
    rows = [*(bs.get("inSyncReplicas") or []), *(bs.get("notInSyncReplicas") or [])]
    return sorted((int(r["brokerId"]), str(r["brokerAddress"])) for r in rows)
