"""Client for the controller that finds and follows the Raft leader (over HTTP, or over remoting for a
controller that speaks only that: see wire.py).

Give it any subset of the controller addresses: a follower answers ``CONTROLLER_NOT_LEADER`` with the
leader's address and the client goes there; a dead node is skipped. During an election (no leader known
anywhere) it retries until its deadline. Transport errors become :class:`UnreachableError`, non-SUCCESS
answers :class:`RemoteError` — translated once, here.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Self

import httpx
from pydantic import BaseModel

from services.common import tls
from services.common.addresses import (
    ADDRESS_EXAMPLE,
    DEFAULT_CONTROLLER_ADDR,
    ENV_CONTROLLER_ADDR,
    address_key,
    check_address,
    http_url,
    join_address,
    parse_addresses,
    split_address,
)
from services.common.answers import checked
from services.common.auth import auth_headers
from services.common.codes import ResponseCode, code_name
from services.common.errors import AddressError, MqctlError, RemoteError, UnreachableError
from services.common.wire import MAX_ANSWER_BYTES, Envelope, Wire, exchange, exchange_async
from services.controller import contract

__all__ = ["ADDRESS_EXAMPLE", "DEFAULT_CONTROLLER_ADDR", "ENV_CONTROLLER_ADDR", "MAX_ANSWER_BYTES",
           "AsyncControllerClient", "ControllerClient",
           "Envelope", "address_key", "check_address", "exchange", "http_url", "join_address", "parse_addresses",
           "split_address"]


class ControllerClient:
    """Leader-following client. The auth token goes only to the configured ``addresses`` and to the peers
    those controllers list (``/v1/controller/metadata``), never to an address merely named in an answer."""

    def __init__(self, addresses: list[str], timeout: float = 5.0,
                 transport: httpx.BaseTransport | None = None, token: str | None = None,
                 protocol: str = "auto") -> None:
        self.addresses = list(addresses)
        self.timeout = timeout
        self.wire = Wire(timeout, transport, protocol)
        self._token = token
        self._trusted = {key for key in map(address_key, self.addresses) if key is not None}
        self._peers_known = False
        self.leader: str | None = None
        self.last_failure = ""  # why the last unreachable node was, for the error when none answers
        self.last_refusal = ""  # a node's own reason for not leading (a full disk), for the same error

    def close(self) -> None:
        self.wire.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ single node
    def request_node(self, address: str, method: str, path: str, *, json: Any = None,
                     params: Any = None) -> Envelope:
        headers = auth_headers(self._token) if self._token and self.vouched(address) else {}
        env = self.wire.exchange(address, method, path, what="controller", headers=headers,
                                 deadline=time.monotonic() + self.timeout, json=json, params=params)
        if env.code == ResponseCode.NO_PERMISSION and self._token and not headers:
            raise RemoteError(env.code, f"controller {address} asks for the auth token, which is sent only to the "
                                        "controllers given with -a (or $MQCTL_CONTROLLER_ADDR) and the peers they "
                                        f"list; add {address} to -a")
        return env

    # ------------------------------------------------------------------ where the token may go
    def vouched(self, address: str) -> bool:
        """A configured address, or a peer that a configured controller lists (asked once, when needed)."""
        key = address_key(address)
        if key is None:
            return False
        if key not in self._trusted and not self._peers_known:
            self._learn_peers()
        return key in self._trusted

    def _learn_peers(self) -> None:
        for address in self.addresses:
            try:
                env = self.wire.exchange(address, "GET", contract.METADATA, what="controller",
                                         headers={}, deadline=time.monotonic() + self.timeout)
            except (UnreachableError, RemoteError):
                continue
            keys = peer_keys(env)
            if keys is None:
                continue
            self._trusted |= keys
            self._peers_known = True
            return

    # ------------------------------------------------------------------ leader-following
    def call(self, method: str, path: str, *, json: Any = None, params: Any = None,
             accept: tuple[int, ...] = ()) -> Envelope:
        """Send to the leader. Returns the envelope if SUCCESS or its code is in ``accept``."""
        deadline = time.monotonic() + self.timeout
        unreachable: list[str] = []
        not_leader = False
        self.last_refusal = ""
        while True:
            env, refused = self._one_pass(method, path, json, params, unreachable)
            if env is not None:
                return self.check(env, accept)
            not_leader = not_leader or refused
            if time.monotonic() + 0.2 >= deadline:
                break
            time.sleep(0.2)
        raise no_leader(self.addresses, unreachable, not_leader, self.last_failure, self.last_refusal)

    def _one_pass(self, method: str, path: str, json: Any, params: Any,
                  unreachable: list[str]) -> tuple[Envelope | None, bool]:
        """Try the known leader, then each listed node, following leader hints. Returns the leader's
        envelope (or None), and whether some node answered CONTROLLER_NOT_LEADER."""
        candidates = self._candidates()
        tried: set[str] = set()
        not_leader = False
        while candidates:
            address = candidates.pop(0)
            if address in tried:
                continue
            tried.add(address)
            try:
                env = self.request_node(address, method, path, json=json, params=params)
            except (UnreachableError, AddressError) as exc:  # a dead node, or a hint that is no address
                self.last_failure = exc.remark
                if address not in unreachable:
                    unreachable.append(address)
                if self.leader == address:
                    self.leader = None
                continue
            if env.code != ResponseCode.CONTROLLER_NOT_LEADER:
                self.leader = address
                return env, not_leader
            not_leader = True
            self.last_refusal = refusal(address, env) or self.last_refusal
            hint = env.data.get("controllerLeaderAddress") if isinstance(env.data, dict) else None
            if hint and str(hint) not in tried:
                candidates.insert(0, str(hint))
        return None, not_leader

    def sync_state_data(self, broker_names: list[str] | tuple[str, ...] = (),
                        cluster: str | None = None) -> contract.SyncStateData:
        """The groups' masters and replicas (by name, or every group of ``cluster``), checked against the
        contract: an answer that breaks it is a RemoteError, whoever wrote it (our controller, or a
        RocketMQ one over remoting)."""
        params: dict[str, Any] = {"brokerName": list(broker_names)} if broker_names else {"clusterName": cluster}
        env = self.call("GET", contract.SYNC_STATE_DATA, params=params)
        return checked(contract.SyncStateData, env.data, f"controller {env.address}")

    # The typed calls: requests built from the contract's models, answers checked against them.
    def metadata(self, address: str | None = None) -> contract.Metadata:
        """The group's metadata, from ``address`` or from any node that answers."""
        env = self.check(self.request_node(address, "GET", contract.METADATA), ()) if address \
            else self.call_any("GET", contract.METADATA)
        return checked(contract.Metadata, env.data, f"controller {env.address}")

    def elect_master(self, cluster: str, broker_name: str, broker_id: int) -> contract.Elected:
        """An admin election of ``broker_id`` (designateElect)."""
        env = self.call("POST", contract.ELECT_MASTER, json=_body(contract.ElectMasterBody(
            clusterName=cluster, brokerName=broker_name, brokerId=broker_id, designateElect=True)))
        return checked(contract.Elected, env.data, f"controller {env.address}")

    def clean_broker_data(self, cluster: str | None, broker_name: str, ids: str | None, clean_living: bool) -> None:
        self.call("POST", contract.CLEAN_BROKER_DATA, json=_body(contract.CleanBrokerDataRequest(
            clusterName=cluster, brokerName=broker_name, brokerControllerIdsToClean=ids,
            isCleanLivingBroker=clean_living)))

    def events(self, from_index: int, limit: int) -> contract.EventsPage:
        env = self.call("GET", contract.EVENTS, params={"fromIndex": from_index, "limit": limit})
        return checked(contract.EventsPage, env.data, f"controller {env.address}")

    def config_of(self, address: str) -> dict[str, Any]:
        """One node's configuration (each node has its own)."""
        env = self.check(self.request_node(address, "GET", contract.CONFIG), ())
        return checked(contract.ControllerConfig, env.data, f"controller {address}").config

    def update_config_of(self, address: str, key: str, value: str) -> None:
        self.check(self.request_node(address, "POST", contract.CONFIG, json={key: value}), ())

    def call_any(self, method: str, path: str, *, json: Any = None, params: Any = None) -> Envelope:
        """Send to the first node that answers (for requests any node serves)."""
        errors: list[str] = []
        for address in self.addresses:
            try:
                return self.check(self.request_node(address, method, path, json=json, params=params), ())
            except UnreachableError as exc:
                errors.append(address)
                self.last_failure = exc.remark
        raise UnreachableError(f"no controller reachable at {';'.join(self.addresses)}{_last(self.last_failure)}",
                               errors)

    def _candidates(self) -> list[str]:
        return leader_first(self.leader, self.addresses)

    @staticmethod
    def check(env: Envelope, accept: tuple[int, ...]) -> Envelope:
        if env.ok or env.code in accept:
            return env
        raise RemoteError(env.code, env.remark or code_name(env.code),
                          env.data if isinstance(env.data, dict) else None)



def _body(request: BaseModel) -> dict[str, Any]:
    """A request model as the JSON body it is sent as (fields left unset are left out)."""
    return request.model_dump(exclude_none=True)


def peer_keys(env: Envelope) -> set[tuple[str, int]] | None:
    """The address keys of the peers a metadata answer lists (``"<id>:<host>:<port>"``), or None."""
    peers = env.data.get("peers") if env.ok and isinstance(env.data, dict) else None
    if not isinstance(peers, list):
        return None
    return {k for k in (address_key(str(p).partition(":")[2]) for p in peers) if k is not None}


def leader_first(leader: str | None, addresses: list[str]) -> list[str]:
    """The order to try controllers in: the known leader, then every listed node."""
    return ([leader] if leader else []) + [a for a in addresses if a != leader]


def _last(failure: str) -> str:
    """The last node's error, where it says more than that nothing listens there (a TLS mismatch, say)."""
    plain = not failure or failure.endswith(("connection refused", "timed out", "connection failed"))
    return "" if plain else f" (last error: {failure})"


#: What a controller that is simply not the leader says (RocketMQ's words); anything else is a reason worth showing.
NOT_LEADER_REMARK = "The controller is not in leader state"


def refusal(address: str, env: Envelope) -> str:
    """A CONTROLLER_NOT_LEADER answer's own reason (a node sitting out with a full disk), or ""."""
    remark = env.remark or ""
    return f"{address}: {remark}" if remark and remark != NOT_LEADER_REMARK else ""


def no_leader(addresses: list[str], unreachable: list[str], not_leader: bool, last_failure: str = "",
              last_refusal: str = "") -> MqctlError:
    """What a leader-following call raises when no pass found a leader before its deadline."""
    if not_leader:
        reason = f" ({last_refusal})" if last_refusal else ""
        return RemoteError(int(ResponseCode.CONTROLLER_NOT_LEADER),
                           f"no controller leader is reachable (tried {', '.join(sorted(set(addresses) | set(unreachable)))}); "
                           f"the controller group may have lost its majority{reason}")
    return UnreachableError(f"no controller reachable at {';'.join(addresses)}{_last(last_failure)}", unreachable)


class AsyncControllerClient:
    """``ControllerClient`` for asyncio code (the broker): the same leader following, token rule, retries and
    errors, over one ``httpx.AsyncClient`` whose transport can be injected (``httpx.MockTransport`` in unit
    tests). HTTP only: a broker that talks remoting uses services/broker/controller_remoting.py."""

    def __init__(self, addresses: list[str], timeout: float = 5.0,
                 transport: httpx.AsyncBaseTransport | None = None, token: str | None = None) -> None:
        self.addresses = list(addresses)
        self.timeout = timeout
        self.http = httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=min(timeout, 2.0)), transport=transport,
                                      verify=tls.httpx_verify())
        self.last_refusal = ""
        self._token = token
        self._trusted = {key for key in map(address_key, self.addresses) if key is not None}
        self._peers_known = False
        self.leader: str | None = None
        self.last_failure = ""  # why the last unreachable node was, for the error when none answers

    async def aclose(self) -> None:
        await self.http.aclose()

    async def request_node(self, address: str, method: str, path: str, *, json: Any = None, params: Any = None,
                           timeout: float | None = None) -> Envelope:
        headers = auth_headers(self._token) if self._token and await self._vouched(address) else {}
        return await exchange_async(self.http, address, method, path, what="controller", headers=headers,
                                    deadline=time.monotonic() + (timeout or self.timeout), json=json, params=params)

    async def _vouched(self, address: str) -> bool:
        key = address_key(address)
        if key is None:
            return False
        if key not in self._trusted and not self._peers_known:
            for configured in self.addresses:
                try:
                    env = await exchange_async(self.http, configured, "GET", contract.METADATA,
                                               what="controller", headers={}, deadline=time.monotonic() + self.timeout)
                except (UnreachableError, RemoteError):
                    continue
                keys = peer_keys(env)
                if keys is not None:
                    self._trusted |= keys
                    self._peers_known = True
                    break
        return key in self._trusted

    async def call(self, method: str, path: str, *, json: Any = None, params: Any = None,
                   accept: tuple[int, ...] = ()) -> Envelope:
        """Send to the leader (found and followed as ``ControllerClient.call`` does)."""
        deadline = time.monotonic() + self.timeout
        unreachable: list[str] = []
        not_leader = False
        self.last_refusal = ""
        while True:
            candidates = leader_first(self.leader, self.addresses)
            tried: set[str] = set()
            while candidates:
                address = candidates.pop(0)
                if address in tried:
                    continue
                tried.add(address)
                try:
                    env = await self.request_node(address, method, path, json=json, params=params)
                except (UnreachableError, AddressError) as exc:
                    self.last_failure = exc.remark
                    unreachable += [address] if address not in unreachable else []
                    self.leader = None if self.leader == address else self.leader
                    continue
                if env.code != ResponseCode.CONTROLLER_NOT_LEADER:
                    self.leader = address
                    return ControllerClient.check(env, accept)
                not_leader = True
                self.last_refusal = refusal(address, env) or self.last_refusal
                hint = env.data.get("controllerLeaderAddress") if isinstance(env.data, dict) else None
                if hint and str(hint) not in tried:
                    candidates.insert(0, str(hint))
            if time.monotonic() + 0.2 >= deadline:
                break
            await asyncio.sleep(0.2)
        raise no_leader(self.addresses, unreachable, not_leader, self.last_failure, self.last_refusal)
