"""Controller mode on the broker: registration, heartbeats, and taking the role the controller gives.

A broker starts **fenced** (it refuses writes). It registers (persistent id, see ``identity.py``),
retrying with backoff until the controller answers; then takes the role from the answer or asks to be
elected. Afterwards it heartbeats every controller, pulls ``replicaInfo`` every
``syncBrokerMetadataPeriod`` and accepts pushed role changes. A role change is applied only for a
masterEpoch higher than the one it holds, so a stale push or pull can never demote or promote it; and a
pushed notification is never trusted: it only makes the broker re-read its role from the controller.

Becoming master appends ``(newEpoch, maxOffset)`` to the epoch file — also when the same broker is
re-elected with no new data (RocketMQ issue #9689).
"""

from __future__ import annotations

import asyncio
import logging
import random
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Protocol

from services.broker.channel import LivenessChannels
from services.broker.config import BrokerConfig
from services.broker.controller_api import ControllerApi
from services.broker.identity import BrokerRegistrar, IdentityFiles
from services.broker.store import MessageStore
from services.common.clock import Clock
from services.common.codes import ResponseCode
from services.common.errors import ConfigError, MqctlError, RemoteError
from services.common.logsetup import CONTEXT
from services.controller import contract

log = logging.getLogger(__name__)


class Role(str, Enum):
    FENCED = "FENCED"
    MASTER = "MASTER"
    SLAVE = "SLAVE"


@dataclass(frozen=True)
class RoleState:
    role: Role = Role.FENCED
    master_epoch: int = 0
    master_broker_id: int | None = None
    master_address: str | None = None
    sync_state_set: frozenset[int] = field(default_factory=frozenset)
    sync_state_set_epoch: int = 0


class RoleListener(Protocol):
    async def on_master(self, state: RoleState) -> None: ...

    async def on_slave(self, state: RoleState) -> None: ...

    def on_sync_state_set(self, state: RoleState) -> None: ...

    def on_controller_view(self, ss_epoch: int) -> None: ...


class ReplicasManager:
    def __init__(self, config: BrokerConfig, store: MessageStore, api: ControllerApi, clock: Clock,
                 on_fatal: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.store = store
        self.api = api
        self.clock = clock
        self.listeners: list[RoleListener] = []  # told of every role change, in the order they listened
        self.on_fatal = on_fatal
        self.state = RoleState()
        self.registrar = BrokerRegistrar(IdentityFiles(config.identity_file), config.brokerClusterName,
                                         config.brokerName, config.address, api, clock.now_ms)
        self.broker_id: int | None = None
        self.registered = False
        self.role_changed_ms: int | None = None
        #: This process, to the controllers: what an earlier process reported is not credited to it.
        self.incarnation = secrets.randbelow(2**62) + 1
        self._lock = asyncio.Lock()
        self._confirming = False
        self._confirm_again = False
        self._epoch_refused: int | None = None  # the masterEpoch a full disk kept out of the epoch file
        self._tasks: list[asyncio.Task[None]] = []
        self.channels = LivenessChannels(api.addresses, config.brokerClusterName, config.brokerName, api.token)

    def listen(self, listener: RoleListener) -> None:
        self.listeners.append(listener)

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        self._tasks.append(asyncio.create_task(self._run(), name="replicas-manager"))

    async def stop(self) -> None:
        await self.channels.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)  # each ends, however it ends
        self._tasks.clear()

    async def _run(self) -> None:
        answer = await self._register_until_done()
        if answer is None:
            return
        await self.send_heartbeat()
        assert self.broker_id is not None
        if not self.api.channels_included:
            self.channels.start(self.broker_id)
        # Heartbeats and the metadata sync run whatever the first role change does: a first role change that
        # fails (a controller that went away, a disk that cannot take the new epoch) is retried by the sync.
        self._tasks.append(asyncio.create_task(self._every(self.config.brokerHeartbeatInterval,
                                                           self.send_heartbeat), name="heartbeats"))
        self._tasks.append(asyncio.create_task(self._every(self.config.syncBrokerMetadataPeriod,
                                                           self.sync_metadata), name="metadata-sync"))
        try:
            await self._first_role(answer)
        except Exception:  # never silently: the metadata sync tries again
            log.exception("taking a role after registering failed; the metadata sync tries again")

    async def _first_role(self, answer: contract.MasterView) -> None:
        async with self._lock:
            if answer.masterBrokerId is not None and answer.masterAddress \
                    and answer.masterBrokerId != self.broker_id:
                await self._change_role_locked(answer)
            else:
                # No master, or the controller still lists this broker as master from before it
                # restarted: ask for an election, where it wins only on merit (its log may have lost an
                # unflushed tail that the slaves hold).
                await self._elect_locked()

    async def _every(self, period_ms: int, action: Callable[[], Any]) -> None:
        name, failing = getattr(action, "__name__", str(action)), ""
        while True:
            await asyncio.sleep(period_ms / 1000)
            try:
                await action()
            except asyncio.CancelledError:
                raise
            except MqctlError as exc:  # the controllers unreachable or leaderless (a Raft or DLedger
                # election takes seconds): said when it starts and when it changes, not every period
                if str(exc) != failing:
                    log.warning("periodic task %s failed: %s", name, exc)
                failing = str(exc)
                continue
            except Exception:  # periodic tasks must survive anything (RocketMQ issue #7219)
                log.exception("periodic task %s failed", name)
                continue
            if failing:
                log.info("periodic task %s works again", name)
            failing = ""

    async def _register_until_done(self) -> contract.MasterView | None:
        delay = 0.5
        while True:
            try:
                answer = await self.registrar.register()
            except ConfigError as exc:
                log.error("cannot register: %s", exc.remark)
                if self.on_fatal is not None:
                    self.on_fatal(exc.remark)
                return None
            except MqctlError as exc:
                log.warning("registration with the controller (%s) failed at step %s: %s; retrying in %.1fs",
                            self.config.controllerAddr, self.registrar.state.value, exc, delay)
            except Exception as exc:  # never let registration die silently
                log.exception("registration failed unexpectedly")
                if self.on_fatal is not None:
                    self.on_fatal(f"registration failed: {type(exc).__name__}: {exc}")
                return None
            else:
                self.broker_id = self.registrar.broker_id
                self.registered = True
                CONTEXT["id"] = self.broker_id
                log.info("registered with the controller as %s/%s broker id %s", self.config.brokerClusterName,
                         self.config.brokerName, self.broker_id)
                return answer
            await asyncio.sleep(delay + random.random() * 0.2)
            delay = min(delay * 2, 5.0)

    # ------------------------------------------------------------------ heartbeats and metadata pull
    def heartbeat_body(self) -> contract.HeartbeatRequest:
        return contract.HeartbeatRequest(
            clusterName=self.config.brokerClusterName, brokerName=self.config.brokerName,
            brokerAddr=self.config.address, brokerId=self.broker_id, epoch=self.store.epochs.last_epoch(),
            maxOffset=self.store.max_offset, confirmOffset=self.store.confirm_offset,
            heartbeatTimeoutMills=self.config.controllerHeartBeatTimeoutMills,
            electionPriority=self.config.brokerElectionPriority, asyncLearner=self.config.asyncLearner,
            incarnation=self.incarnation)

    async def send_heartbeat(self) -> None:
        if self.broker_id is None:
            return
        answered = await self.api.heartbeat_all(self.heartbeat_body())
        if answered == 0:
            log.warning("no controller answered this broker's heartbeat (%s)", self.config.controllerAddr)

    async def sync_metadata(self) -> None:
        try:
            info = await self.api.get_replica_info(self.config.brokerName)
        except RemoteError as exc:
            if exc.code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST:
                log.warning("the controller has no metadata for %s; registering again", self.config.brokerName)
                try:
                    answer = await self.registrar.register()
                except RemoteError as again:
                    log.error("registering again failed: %s. If the controller's metadata for broker id %s was "
                              "cleaned on purpose, stop this broker and remove %s to register under a new id",
                              again, self.broker_id, self.config.identity_file)
                    return
                self.broker_id = self.registrar.broker_id
                async with self._lock:
                    if answer.masterBrokerId is not None:
                        await self._change_role_locked(answer)
                return
            raise
        async with self._lock:
            await self._apply_replica_info(info)

    async def _apply_replica_info(self, info: contract.MasterView) -> None:
        epoch = info.masterEpoch or 0
        restarted_master = info.masterBrokerId == self.broker_id and self.state.role is Role.FENCED
        if info.masterBrokerId is None or not info.masterAddress or restarted_master:
            await self._elect_locked()
        elif epoch > self.state.master_epoch:
            await self._change_role_locked(info)
        elif epoch == self.state.master_epoch and self.state.role is Role.MASTER:
            ss_epoch = info.syncStateSetEpoch or 0
            self.change_sync_state_set(info.syncStateSet, ss_epoch)
            for listener in self.listeners:
                listener.on_controller_view(ss_epoch)

    async def _elect_locked(self) -> None:
        assert self.broker_id is not None
        answer = await self.api.elect_self(self.config.brokerClusterName, self.config.brokerName, self.broker_id)
        if answer is not None:
            await self._change_role_locked(answer)

    # ------------------------------------------------------------------ role changes
    async def on_role_change_notified(self) -> None:
        """A role-change notification is only a hint that something changed: anyone who can reach this
        broker's port can send one, so what it says is never acted on. The broker re-reads its group's
        replica info from the controller leader and applies that (a burst of notifications costs one read
        in flight and at most one more after it)."""
        if self.broker_id is None:
            return  # not registered yet: the registration answer carries the role
        if self._confirming:
            self._confirm_again = True
            return
        self._confirming = True
        try:
            self._confirm_again = True
            while self._confirm_again:
                self._confirm_again = False
                try:
                    await self.sync_metadata()
                except MqctlError as exc:
                    log.warning("a role change was announced but the controller could not confirm it (%s); "
                                "the periodic metadata sync will retry", exc)
                    return
        finally:
            self._confirming = False

    async def _change_role_locked(self, info: contract.MasterView) -> None:
        master_id, address = info.masterBrokerId, info.masterAddress
        epoch = info.masterEpoch or 0
        if master_id is None or not address or self.broker_id is None:
            return
        if epoch <= self.state.master_epoch:
            log.debug("ignoring role information of masterEpoch %d (holding %d)", epoch, self.state.master_epoch)
            return
        members = frozenset(info.syncStateSet)
        ss_epoch = info.syncStateSetEpoch or 0
        if int(master_id) == self.broker_id:
            await self.change_to_master(epoch, ss_epoch, members)
        else:
            await self.change_to_slave(str(address), epoch, int(master_id))

    async def change_to_master(self, epoch: int, ss_epoch: int, members: frozenset[int]) -> None:
        epochs = self.store.epochs
        if epochs.last_epoch() > epoch:
            log.error("refusing to become master at epoch %d: the local epoch file already holds epoch %d. "
                      "The controller's metadata is older than this broker's log (was the controller store "
                      "wiped?). See docs/operations.md, 'epoch ahead of controller'.", epoch, epochs.last_epoch())
            return
        if epochs.last_epoch() < epoch:
            # Also when re-elected with no new data: the new epoch must be recorded (#9689).
            try:
                epochs.append(epoch, self.store.max_offset)
            except OSError as exc:
                if self._epoch_refused != epoch:  # once, not at every metadata sync
                    log.error("cannot become master at epoch %d: the epoch file %s cannot be written (%s); staying "
                              "fenced, and the metadata sync tries again (see docs/operations.md, 'Full disk')",
                              epoch, epochs.path, exc.strerror or exc)
                self._epoch_refused = epoch
                return
        self.state = RoleState(Role.MASTER, epoch, self.broker_id, self.config.address,
                               members or frozenset({self.broker_id or 0}), ss_epoch)
        CONTEXT.update(role="MASTER", epoch=epoch)
        self.role_changed_ms = self.clock.now_ms()
        log.info("now MASTER of %s at masterEpoch %d (syncStateSet %s, epoch %d)", self.config.brokerName,
                 epoch, sorted(self.state.sync_state_set), ss_epoch)
        for listener in self.listeners:
            await listener.on_master(self.state)

    async def change_to_slave(self, master_address: str, epoch: int, master_id: int) -> None:
        self.state = RoleState(Role.SLAVE, epoch, master_id, master_address)
        CONTEXT.update(role="SLAVE", epoch=epoch)
        self.role_changed_ms = self.clock.now_ms()
        log.info("now SLAVE of broker %d (%s) at masterEpoch %d", master_id, master_address, epoch)
        for listener in self.listeners:
            await listener.on_slave(self.state)

    def change_sync_state_set(self, members: list[int] | frozenset[int], ss_epoch: int) -> bool:
        """Apply a SyncStateSet the controller committed, if it is newer than ours."""
        if self.state.role is not Role.MASTER or ss_epoch <= self.state.sync_state_set_epoch:
            return False
        self.state = replace(self.state, sync_state_set=frozenset(int(i) for i in members),
                             sync_state_set_epoch=ss_epoch)
        log.info("syncStateSet of %s is now %s (epoch %d)", self.config.brokerName,
                 sorted(self.state.sync_state_set), ss_epoch)
        for listener in self.listeners:
            listener.on_sync_state_set(self.state)
        return True
