"""The broker's calls to the controller over RocketMQ's remoting protocol (``controllerProtocol=remoting``),
the requests a RocketMQ broker in controller mode sends: 1012 → 1013 → 1003 to register, oneway 904
heartbeats to every controller, 1004 to follow its group, 1002 to ask for an election, 1001 to alter the
SyncStateSet, plus mqctl's own fields and 88001 (services/remoting/mqctl_ext.py).

One connection per controller carries everything, held open as RocketMQ's broker holds its channel:
when this process dies the kernel closes it and each controller treats the broker as gone at once (the
heartbeat timeout still catches a process that hangs). So no liveness websocket is needed.

The leader is found as RocketMQ's broker finds it: the configured address that does not answer
CONTROLLER_NOT_LEADER (never an address named in an answer). With ``authToken`` set, every request is
signed with it (services/remoting/acl.py).

Its methods are coroutines on the broker's event loop, like
:class:`~services.broker.controller_api.BrokerControllerApi`'s; the client is injectable (a test can hand it
one that talks to an in-process server).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from services.broker.controller_api import ELECT_ANSWERS, HEARTBEAT_TIMEOUT_S, elected, key_refused
from services.common.addresses import parse_addresses
from services.common.codes import ResponseCode, code_name
from services.common.errors import MqctlError, RemoteError, UnreachableError
from services.common.remoting_client import RemotingClient, RemotingTimeout
from services.controller import contract
from services.remoting import bodies
from services.remoting import headers as h
from services.remoting import mqctl_ext as ext
from services.remoting.acl import sign
from services.remoting.command import RemotingCommand, RequestCode, make_request
from services.remoting.errors import RemotingError

log = logging.getLogger(__name__)

RC = RequestCode


class RemotingControllerApi:
    channels_included = True

    def __init__(self, controller_addr: str, timeout: float = 3.0, token: str | None = None,
                 public_key: str = "", client: RemotingClient | None = None, group_key: str = "") -> None:
        self.addresses = parse_addresses(controller_addr)
        self.timeout = timeout
        self.token = token
        self.public_key = public_key
        #: With ``brokerKeySource=authToken``: the key of every id of the group (ha/auth.py), so 88001,
        #: which RocketMQ's controllers do not serve, is never asked.
        self.group_key = group_key
        self._leader: str | None = None
        secret = token
        self._client = client or RemotingClient(
            timeout_s=timeout, signer=(lambda r: sign(r, secret, time.time_ns() // 1_000_000)) if secret else None)

    @property
    def leader(self) -> str | None:
        return self._leader

    async def aclose(self) -> None:
        await self._client.close()

    # ------------------------------------------------------------------ leader-following
    async def _call(self, request: RemotingCommand, accept: tuple[int, ...] = ()) -> RemotingCommand:
        """Send to the leader: the configured address that does not answer CONTROLLER_NOT_LEADER."""
        deadline = time.monotonic() + self.timeout
        unreachable: list[str] = []
        not_leader = False
        while True:
            for address in self._candidates():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    answer = await self._client.call(address, request, timeout_s=left)
                except (UnreachableError, RemotingTimeout):
                    if address not in unreachable:
                        unreachable.append(address)
                    if self._leader == address:
                        self._leader = None
                    continue
                if answer.code == ResponseCode.CONTROLLER_NOT_LEADER:
                    not_leader = True
                    if self._leader == address:
                        self._leader = None
                    continue
                self._leader = address
                if answer.code == ResponseCode.SUCCESS or answer.code in accept:
                    return answer
                raise RemoteError(answer.code, answer.remark or code_name(answer.code))
            if deadline - time.monotonic() < 0.2:
                break
            await asyncio.sleep(0.2)
        if not_leader:
            raise RemoteError(int(ResponseCode.CONTROLLER_NOT_LEADER),
                              f"no controller leader among {';'.join(self.addresses)}; the controller group may "
                              "have lost its majority")
        raise UnreachableError(f"no controller reachable at {';'.join(self.addresses)}", unreachable)

    def _candidates(self) -> list[str]:
        first = [self._leader] if self._leader else []
        return first + [a for a in self.addresses if a != self._leader]

    # ------------------------------------------------------------------ registration
    async def get_next_broker_id(self, cluster: str, broker_name: str) -> int:
        header = h.GetNextBrokerIdRequestHeader(cluster_name=cluster, broker_name=broker_name)
        answer = await self._call(make_request(RC.CONTROLLER_GET_NEXT_BROKER_ID, 0, header.to_ext_fields()))
        with _answer_checked(answer):
            next_id = h.GetNextBrokerIdResponseHeader.from_ext_fields(answer.ext_fields).next_broker_id
        if next_id is None or next_id < 1:
            raise _malformed(answer, f"nextBrokerId is {next_id}")
        return next_id

    async def apply_broker_id(self, cluster: str, broker_name: str, broker_id: int, check_code: str) -> None:
        header = h.ApplyBrokerIdRequestHeader(cluster_name=cluster, broker_name=broker_name,
                                              applied_broker_id=broker_id, register_check_code=check_code)
        await self._call(make_request(RC.CONTROLLER_APPLY_BROKER_ID, 0, {**header.to_ext_fields(), **self._key()}))

    async def register_broker(self, cluster: str, broker_name: str, broker_id: int,
                              address: str) -> contract.MasterView:
        header = h.RegisterBrokerToControllerRequestHeader(
            cluster_name=cluster, broker_name=broker_name, broker_id=broker_id, broker_address=address,
            invoke_time=time.time_ns() // 1_000_000)
        try:
            answer = await self._call(make_request(RC.CONTROLLER_REGISTER_BROKER, 0,
                                             {**header.to_ext_fields(), **self._key()}))
        except RemoteError as exc:
            if exc.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID:
                raise key_refused(broker_id, broker_name, exc.remark) from None
            raise
        with _answer_checked(answer):
            result = h.RegisterBrokerToControllerResponseHeader.from_ext_fields(answer.ext_fields)
            members = bodies.SyncStateSet.decode(answer.body) if answer.body else bodies.SyncStateSet(frozenset())
        return contract.MasterView(masterBrokerId=result.master_broker_id, masterAddress=result.master_address,
                                   masterEpoch=result.master_epoch, syncStateSetEpoch=members.sync_state_set_epoch,
                                   syncStateSet=sorted(members.sync_state_set))

    async def broker_keys(self, broker_name: str) -> dict[int, str]:
        if self.group_key:
            return dict.fromkeys(await self._registered_ids(broker_name), self.group_key)
        header = ext.BrokerKeysRequestHeader(broker_name=broker_name)
        answer = await self._call(make_request(ext.GET_BROKER_KEYS, 0, header.to_ext_fields()))
        with _answer_checked(answer):
            return ext.BrokerKeys.decode(answer.body).keys

    # ------------------------------------------------------------------ the group's master and set
    async def get_replica_info(self, broker_name: str) -> contract.MasterView:
        header = h.GetReplicaInfoRequestHeader(broker_name=broker_name)
        answer = await self._call(make_request(RC.CONTROLLER_GET_REPLICA_INFO, 0, header.to_ext_fields()))
        with _answer_checked(answer):
            result = h.GetReplicaInfoResponseHeader.from_ext_fields(answer.ext_fields)
            members = bodies.SyncStateSet.decode(answer.body) if answer.body else bodies.SyncStateSet(frozenset())
        return contract.MasterView(masterBrokerId=result.master_broker_id, masterAddress=result.master_address,
                                   masterEpoch=result.master_epoch, syncStateSetEpoch=members.sync_state_set_epoch,
                                   syncStateSet=sorted(members.sync_state_set))

    async def registered_replicas(self, broker_name: str) -> int:
        return len(await self._registered_ids(broker_name))

    async def _registered_ids(self, broker_name: str) -> list[int]:
        """Every id the controllers have for the group, in sync or not (1006, which both kinds serve)."""
        return list(await self.replica_addresses(broker_name))

    async def replica_addresses(self, broker_name: str) -> dict[int, str]:
        """The address the controllers have for every broker id of ``broker_name``, in sync or not."""
        answer = await self._call(make_request(RC.CONTROLLER_GET_SYNC_STATE_DATA, 0, None,
                                         bodies.encode_broker_names([broker_name])))
        with _answer_checked(answer):
            table = bodies.BrokerReplicasInfo.decode(answer.body).replicas_info_table if answer.body else {}
        info = table.get(broker_name)
        if info is None:
            return {}
        return {r.broker_id: r.broker_address or "" for r in (*info.in_sync_replicas, *info.not_in_sync_replicas)
                if r.broker_id is not None}

    async def elect_self(self, cluster: str, broker_name: str, broker_id: int) -> contract.MasterView | None:
        header = h.ElectMasterRequestHeader(cluster_name=cluster, broker_name=broker_name, broker_id=broker_id,
                                            designate_elect=False, invoke_time=time.time_ns() // 1_000_000)
        answer = await self._call(make_request(RC.CONTROLLER_ELECT_MASTER, 0, header.to_ext_fields()), ELECT_ANSWERS)
        with _answer_checked(answer):
            result = h.ElectMasterResponseHeader.from_ext_fields(answer.ext_fields)
            body = bodies.ElectMasterResponseBody.decode(answer.body) if answer.body else None
        view = contract.MasterView(masterBrokerId=result.master_broker_id, masterAddress=result.master_address,
                                   masterEpoch=result.master_epoch, syncStateSetEpoch=result.sync_state_set_epoch,
                                   syncStateSet=sorted(body.sync_state_set) if body is not None else [])
        return elected(view, broker_name, answer.remark or "")

    async def alter_sync_state_set(self, broker_name: str, master_id: int, master_epoch: int, members: list[int],
                                   sync_state_set_epoch: int, signature: str = "") -> contract.AlterResult:
        header = h.AlterSyncStateSetRequestHeader(broker_name=broker_name, master_broker_id=master_id,
                                                  master_epoch=master_epoch, invoke_time=time.time_ns() // 1_000_000)
        fields = header.to_ext_fields()
        if signature:
            fields["signature"] = signature
        body = bodies.SyncStateSet(frozenset(members), sync_state_set_epoch).encode()
        answer = await self._call(make_request(RC.CONTROLLER_ALTER_SYNC_STATE_SET, 0, fields, body))
        with _answer_checked(answer):
            result = h.AlterSyncStateSetResponseHeader.from_ext_fields(answer.ext_fields)
            committed = bodies.SyncStateSet.decode(answer.body) if answer.body else None
        return contract.AlterResult(newSyncStateSetEpoch=result.new_sync_state_set_epoch,
                                    syncStateSet=sorted(committed.sync_state_set) if committed else sorted(members))

    # ------------------------------------------------------------------ heartbeats
    async def heartbeat_all(self, beat: contract.HeartbeatRequest) -> int:
        """One oneway 904 to every controller; returns to how many it could be written."""
        header = h.BrokerHeartbeatRequestHeader(
            cluster_name=beat.clusterName, broker_addr=beat.brokerAddr, broker_name=beat.brokerName,
            broker_id=beat.brokerId, epoch=beat.epoch, max_offset=beat.maxOffset, confirm_offset=beat.confirmOffset,
            heartbeat_timeout_mills=beat.heartbeatTimeoutMills, election_priority=beat.electionPriority)
        fields = header.to_ext_fields()
        if beat.asyncLearner:
            fields["asyncLearner"] = "true"
        if beat.incarnation:
            fields["incarnation"] = str(beat.incarnation)
        request = make_request(RC.BROKER_HEARTBEAT, 0, fields, oneway=True)

        async def one(address: str) -> bool:
            try:
                await asyncio.wait_for(self._client.oneway(address, request), HEARTBEAT_TIMEOUT_S)
            except (MqctlError, TimeoutError, OSError):
                return False
            return True
        return sum(await asyncio.gather(*(one(a) for a in self.addresses)))

    def _key(self) -> dict[str, str]:
        return {"publicKey": self.public_key} if self.public_key else {}


@contextmanager
def _answer_checked(answer: RemotingCommand) -> Iterator[None]:
    """Turns a malformed answer (a bad header field or body) into a RemoteError."""
    try:
        yield
    except RemotingError as exc:
        raise _malformed(answer, str(exc)) from None


def _malformed(answer: RemotingCommand, problem: str) -> RemoteError:
    return RemoteError(int(ResponseCode.SYSTEM_ERROR), f"the controller's answer is malformed: {problem}")


__all__ = ["RemotingControllerApi"]
