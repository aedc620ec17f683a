"""The broker's one way to the controllers: :class:`ControllerApi`, asyncio methods that give the broker the
same answers (the contract's models, services/controller/contract.py) over HTTP (:class:`BrokerControllerApi`, here) or over
RocketMQ's remoting protocol (``controller_remoting.py``), chosen by the broker's ``controllerProtocol``.
Registration, heartbeats to every controller, the group's replica info, elections, SyncStateSet alters and
the group's keys all go through it; each implementation takes an injectable transport, so the broker's
dealings with the controller are unit-tested without processes."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol, TypeVar

import httpx
from pydantic import BaseModel

from services.common.answers import checked as check_answer
from services.common.codes import ResponseCode
from services.common.controller_client import AsyncControllerClient, parse_addresses
from services.common.errors import ConfigError, MqctlError, RemoteError
from services.controller import contract

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

#: Answers that are decisions, not failures, for a broker's own election request.
ELECT_ANSWERS = (ResponseCode.CONTROLLER_MASTER_STILL_EXIST, ResponseCode.CONTROLLER_ELECT_MASTER_FAILED,
                 ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE)
#: How long one heartbeat to one controller may take (they are sent every brokerHeartbeatInterval).
HEARTBEAT_TIMEOUT_S = 1.0


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
    async def aclose(self) -> None: ...
    async def get_next_broker_id(self, cluster: str, broker_name: str) -> int: ...
    async def apply_broker_id(self, cluster: str, broker_name: str, broker_id: int, check_code: str) -> None: ...
    async def register_broker(self, cluster: str, broker_name: str, broker_id: int,
                              address: str) -> contract.MasterView: ...
    async def broker_keys(self, broker_name: str) -> dict[int, str]: ...

    async def replica_addresses(self, broker_name: str) -> dict[int, str]: ...
    async def get_replica_info(self, broker_name: str) -> contract.MasterView: ...
    async def registered_replicas(self, broker_name: str) -> int: ...
    async def elect_self(self, cluster: str, broker_name: str, broker_id: int) -> contract.MasterView | None: ...
    async def alter_sync_state_set(self, broker_name: str, master_id: int, master_epoch: int, members: list[int],
                                   sync_state_set_epoch: int, signature: str = "") -> contract.AlterResult: ...
    async def heartbeat_all(self, body: contract.HeartbeatRequest) -> int: ...


def checked(model: type[M], data: Any) -> M:
    """An answer's ``data`` checked against the contract's model; a malformed one is a RemoteError."""
    return check_answer(model, data, "the controller")


def key_refused(broker_id: int, broker_name: str, remark: str) -> ConfigError:
    return ConfigError(
        f"the controller holds another key for broker id {broker_id} of {broker_name} ({remark}): "
        "this store's broker key is not the one this broker registered with. See docs/operations.md, "
        "'broker key damaged or lost'")


def elected(view: contract.MasterView | None, broker_name: str, remark: str) -> contract.MasterView | None:
    """An election's answer, or None if it named no master."""
    if view is None or view.masterBrokerId is None or not view.masterAddress:
        log.info("election for %s elected nobody: %s", broker_name, remark)
        return None
    return view


def body(request: BaseModel) -> dict[str, Any]:
    """A request model as the JSON body it is sent as (fields left unset are left out)."""
    return request.model_dump(exclude_none=True)


class BrokerControllerApi:
    """Over the controllers' HTTP API."""

    channels_included = False

    def __init__(self, controller_addr: str, timeout: float = 3.0, token: str | None = None,
                 public_key: str = "", transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.addresses = parse_addresses(controller_addr)
        self.token = token
        self.public_key = public_key  # this broker's key, given to the controller with its id (ha/auth.py)
        self.client = AsyncControllerClient(self.addresses, timeout=timeout, transport=transport, token=token)

    async def aclose(self) -> None:
        await self.client.aclose()

    @property
    def leader(self) -> str | None:
        return self.client.leader

    async def get_next_broker_id(self, cluster: str, broker_name: str) -> int:
        env = await self.client.call("POST", contract.GET_NEXT_BROKER_ID,
                                     json={"clusterName": cluster, "brokerName": broker_name})
        return checked(contract.NextBrokerId, env.data).nextBrokerId

    async def apply_broker_id(self, cluster: str, broker_name: str, broker_id: int, check_code: str) -> None:
        await self.client.call("POST", contract.APPLY_BROKER_ID, json=body(contract.ApplyBrokerIdRequest(
            clusterName=cluster, brokerName=broker_name, appliedBrokerId=broker_id, registerCheckCode=check_code,
            publicKey=self.public_key)))

    async def register_broker(self, cluster: str, broker_name: str, broker_id: int,
                              address: str) -> contract.MasterView:
        try:
            env = await self.client.call("POST", contract.REGISTER_BROKER, json=body(contract.RegisterBrokerRequest(
                clusterName=cluster, brokerName=broker_name, brokerId=broker_id, brokerAddress=address,
                publicKey=self.public_key)))
        except RemoteError as exc:
            if exc.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID:
                raise key_refused(broker_id, broker_name, exc.remark) from None
            raise
        return checked(contract.MasterView, env.data)

    async def broker_keys(self, broker_name: str) -> dict[int, str]:
        """The public key of every broker id of ``broker_name``, as the controller holds them."""
        env = await self.client.call("GET", contract.BROKER_KEYS, params={"brokerName": broker_name})
        return {k.brokerId: k.publicKey for k in checked(contract.BrokerKeys, env.data).keys}

    async def replica_addresses(self, broker_name: str) -> dict[int, str]:
        """The address the controller has for every broker id of ``broker_name``, in sync or not."""
        env = await self.client.call("GET", contract.SYNC_STATE_DATA, params={"brokerName": [broker_name]})
        data = checked(contract.SyncStateData, env.data)
        return {r.brokerId: r.brokerAddress for e in data.brokers if e.brokerName == broker_name
                for r in (*e.inSyncReplicas, *e.notInSyncReplicas)}

    async def get_replica_info(self, broker_name: str) -> contract.MasterView:
        env = await self.client.call("GET", contract.REPLICA_INFO, params={"brokerName": broker_name})
        return checked(contract.MasterView, env.data)

    async def registered_replicas(self, broker_name: str) -> int:
        """How many replicas of ``broker_name`` the controller knows (in sync or not)."""
        env = await self.client.call("GET", contract.SYNC_STATE_DATA, params={"brokerName": [broker_name]})
        data = checked(contract.SyncStateData, env.data)
        return sum(len(e.inSyncReplicas) + len(e.notInSyncReplicas) for e in data.brokers)

    async def elect_self(self, cluster: str, broker_name: str, broker_id: int) -> contract.MasterView | None:
        """Broker-triggered election; the answer (SUCCESS or MASTER_STILL_EXIST) or None if nobody won."""
        env = await self.client.call("POST", contract.ELECT_MASTER, json=body(contract.ElectMasterBody(
            clusterName=cluster, brokerName=broker_name, brokerId=broker_id, designateElect=False)),
            accept=ELECT_ANSWERS)
        view = checked(contract.MasterView, env.data) if env.data is not None else None
        return elected(view, broker_name, env.remark)

    async def alter_sync_state_set(self, broker_name: str, master_id: int, master_epoch: int, members: list[int],
                                   sync_state_set_epoch: int, signature: str = "") -> contract.AlterResult:
        """``signature``: this master's, over the change (the controller refuses an unsigned alter for a
        master that registered a key)."""
        env = await self.client.call("POST", contract.ALTER_SYNC_STATE_SET, json=body(
            contract.AlterSyncStateSetRequest(brokerName=broker_name, masterBrokerId=master_id,
                                              masterEpoch=master_epoch, newSyncStateSet=members,
                                              syncStateSetEpoch=sync_state_set_epoch, signature=signature)))
        return checked(contract.AlterResult, env.data)

    async def heartbeat_all(self, beat: contract.HeartbeatRequest) -> int:
        """Send one heartbeat to every controller (not only the leader); returns how many answered."""
        payload = body(beat)

        async def one(address: str) -> bool:
            try:
                env = await self.client.request_node(address, "POST", contract.HEARTBEAT, json=payload,
                                                     timeout=HEARTBEAT_TIMEOUT_S)
            except MqctlError:
                return False
            return env.ok
        return sum(await asyncio.gather(*(one(a) for a in self.addresses)))
