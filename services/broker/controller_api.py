"""The broker's calls to the controller (blocking; the broker runs them in worker threads), over HTTP
(:class:`BrokerControllerApi`) or RocketMQ's remoting protocol (``controller_remoting.py``), chosen by
the broker's ``controllerProtocol``. Both give the broker the same answers, as dicts in the HTTP API's
field names."""

from __future__ import annotations

import logging
from typing import Any, Protocol

import httpx

from services.common.auth import auth_headers
from services.common.codes import ResponseCode
from services.common.controller_client import ControllerClient, parse_addresses
from services.common.errors import ConfigError, RemoteError

log = logging.getLogger(__name__)


class ControllerApi(Protocol):
    """What the broker asks of the controllers."""

    addresses: list[str]
    token: str | None
    public_key: str
    #: Whether the connections carrying the heartbeats tell the controllers at once when this broker's
    #: process dies (remoting, as RocketMQ's channels do); else the broker holds liveness websockets.
    channels_included: bool

    @property
    def leader(self) -> str | None: ...
    def close(self) -> None: ...
    def get_next_broker_id(self, cluster: str, broker_name: str) -> int: ...
    def apply_broker_id(self, cluster: str, broker_name: str, broker_id: int, check_code: str) -> None: ...
    def register_broker(self, cluster: str, broker_name: str, broker_id: int, address: str) -> dict[str, Any]: ...
    def broker_keys(self, broker_name: str) -> dict[int, str]: ...
    def get_replica_info(self, broker_name: str) -> dict[str, Any]: ...
    def registered_replicas(self, broker_name: str) -> int: ...
    def elect_self(self, cluster: str, broker_name: str, broker_id: int) -> dict[str, Any] | None: ...
    def alter_sync_state_set(self, broker_name: str, master_id: int, master_epoch: int, members: list[int],
                             sync_state_set_epoch: int, signature: str = "") -> dict[str, Any]: ...
    def heartbeat_all(self, body: dict[str, Any]) -> int: ...


def key_refused(broker_id: int, broker_name: str, remark: str) -> ConfigError:
    return ConfigError(
        f"the controller holds another key for broker id {broker_id} of {broker_name} ({remark}): "
        "this store's broker key is not the one this broker registered with. See docs/operations.md, "
        "'broker key damaged or lost'")


class BrokerControllerApi:
    channels_included = False

    def __init__(self, controller_addr: str, timeout: float = 3.0, token: str | None = None,
                 public_key: str = "") -> None:
        self.addresses = parse_addresses(controller_addr)
        self.token = token
        self.public_key = public_key  # this broker's key, given to the controller with its id (ha/auth.py)
        self.client = ControllerClient(self.addresses, timeout=timeout, token=token)
        self._heartbeat_client = httpx.Client(timeout=1.0, headers=auth_headers(token))

    def close(self) -> None:
        self.client.close()
        self._heartbeat_client.close()

    @property
    def leader(self) -> str | None:
        return self.client.leader

    def get_next_broker_id(self, cluster: str, broker_name: str) -> int:
        env = self.client.call("POST", "/v1/controller/getNextBrokerId",
                               json={"clusterName": cluster, "brokerName": broker_name})
        return int(env.data["nextBrokerId"])

    def apply_broker_id(self, cluster: str, broker_name: str, broker_id: int, check_code: str) -> None:
        self.client.call("POST", "/v1/controller/applyBrokerId", json={
            "clusterName": cluster, "brokerName": broker_name, "appliedBrokerId": broker_id,
            "registerCheckCode": check_code, "publicKey": self.public_key})

    def register_broker(self, cluster: str, broker_name: str, broker_id: int, address: str) -> dict[str, Any]:
        try:
            env = self.client.call("POST", "/v1/controller/registerBroker", json={
                "clusterName": cluster, "brokerName": broker_name, "brokerId": broker_id, "brokerAddress": address,
                "publicKey": self.public_key})
        except RemoteError as exc:
            if exc.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID:
                raise key_refused(broker_id, broker_name, exc.remark) from None
            raise
        return dict(env.data)

    def broker_keys(self, broker_name: str) -> dict[int, str]:
        """The public key of every broker id of ``broker_name``, as the controller holds them."""
        env = self.client.call("GET", "/v1/controller/brokerKeys", params={"brokerName": broker_name})
        return {int(k["brokerId"]): str(k["publicKey"]) for k in env.data["keys"]}

    def get_replica_info(self, broker_name: str) -> dict[str, Any]:
        env = self.client.call("GET", "/v1/controller/replicaInfo", params={"brokerName": broker_name})
        return dict(env.data)

    def registered_replicas(self, broker_name: str) -> int:
        """How many replicas of ``broker_name`` the controller knows (in sync or not)."""
        env = self.client.call("GET", "/v1/controller/syncStateData", params={"brokerName": [broker_name]})
        return sum(len(e["inSyncReplicas"]) + len(e["notInSyncReplicas"]) for e in env.data["brokers"])

    def elect_self(self, cluster: str, broker_name: str, broker_id: int) -> dict[str, Any] | None:
        """Broker-triggered election; the answer (SUCCESS or MASTER_STILL_EXIST) or None if nobody won."""
        env = self.client.call("POST", "/v1/controller/electMaster", json={
            "clusterName": cluster, "brokerName": broker_name, "brokerId": broker_id, "designateElect": False},
            accept=(ResponseCode.CONTROLLER_MASTER_STILL_EXIST, ResponseCode.CONTROLLER_ELECT_MASTER_FAILED,
                    ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE))
        if env.data is None or env.data.get("masterBrokerId") is None or not env.data.get("masterAddress"):
            log.info("election for %s elected nobody: %s", broker_name, env.remark)
            return None
        return dict(env.data)

    def alter_sync_state_set(self, broker_name: str, master_id: int, master_epoch: int, members: list[int],
                             sync_state_set_epoch: int, signature: str = "") -> dict[str, Any]:
        """``signature``: this master's, over the change (the controller refuses an unsigned alter for a
        master that registered a key)."""
        env = self.client.call("POST", "/v1/controller/alterSyncStateSet", json={
            "brokerName": broker_name, "masterBrokerId": master_id, "masterEpoch": master_epoch,
            "newSyncStateSet": members, "syncStateSetEpoch": sync_state_set_epoch, "signature": signature})
        return dict(env.data)

    def heartbeat_all(self, body: dict[str, Any]) -> int:
        """Send one heartbeat to every controller (not only the leader); returns how many answered."""
        answered = 0
        for address in self.addresses:
            try:
                response = self._heartbeat_client.post(f"http://{address}/v1/controller/heartbeat", json=body)
                answered += response.status_code == 200
            except httpx.HTTPError:
                continue
        return answered
