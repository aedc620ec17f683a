"""What the put path asks of replication. ``LocalOnly`` is used until master→slave replication runs
(and by a group of one): nothing is shipped, so only the master itself can acknowledge."""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Protocol

from services.broker.config import BrokerConfig
from services.broker.ha.master import HAService
from services.broker.ha.slave import HAClient, MasterIdentity
from services.broker.replicas_manager import RoleState
from services.broker.store import MessageStore

if TYPE_CHECKING:
    from services.broker.controller_api import ControllerApi
    from services.broker.flush import FlushService
    from services.broker.ha.auth import BrokerKey
    from services.broker.replicas_manager import ReplicasManager
    from services.common.clock import Clock


class Replication(Protocol):
    async def on_master(self, state: RoleState) -> None: ...

    async def on_slave(self, state: RoleState) -> None: ...

    def on_sync_state_set(self, state: RoleState) -> None: ...

    def in_sync_replicas_nums(self) -> int: ...

    def on_appended(self) -> None: ...

    async def wait_for_acks(self, next_offset: int) -> bool: ...

    async def stop(self) -> None: ...

    async def start(self) -> None: ...

    def on_controller_view(self, ss_epoch: int) -> None: ...

    def status(self) -> dict[str, object]: ...

    def quorum_unreachable(self) -> str | None: ...

    def retention_floor(self) -> int | None:
        """The lowest commitlog offset a connected slave still needs (None: no slave is connected)."""

    def slave_hosts(self) -> set[str]:
        """The addresses of the slaves connected to this master that proved who they are."""


class LocalOnly:
    def __init__(self, config: BrokerConfig, store: MessageStore) -> None:
        self.config = config
        self.store = store
        self.state = RoleState()

    async def on_master(self, state: RoleState) -> None:
        self.state = state
        self.on_appended()

    async def on_slave(self, state: RoleState) -> None:
        self.state = state

    def on_sync_state_set(self, state: RoleState) -> None:
        self.state = state

    def on_controller_view(self, ss_epoch: int) -> None:
        return None

    def status(self) -> dict[str, object]:
        return {"role": self.state.role.value}

    def quorum_unreachable(self) -> str | None:
        return None

    def retention_floor(self) -> int | None:
        return None

    def slave_hosts(self) -> set[str]:
        return set()

    async def start(self) -> None:
        return None

    def in_sync_replicas_nums(self) -> int:
        return len(self.state.sync_state_set)

    def on_appended(self) -> None:
        if len(self.state.sync_state_set) <= 1 or not self.config.allAckInSyncStateSet:
            self.store.set_confirm_offset(self.store.max_offset)

    async def wait_for_acks(self, next_offset: int) -> bool:
        others = len(self.state.sync_state_set) - 1
        needed = others if self.config.allAckInSyncStateSet else self.config.inSyncReplicas - 1
        if needed <= 0:
            return True
        await asyncio.sleep(self.config.slaveTimeout / 1000)
        return False

    async def stop(self) -> None:
        return None


class AutoSwitchReplication:
    """Replication in controller mode: the HA master service while master, the HA client while slave."""

    def __init__(self, config: BrokerConfig, store: MessageStore, api: ControllerApi, clock: Clock,
                 io_lock: threading.Lock, flush: FlushService, replicas: ReplicasManager, key: BrokerKey) -> None:
        self.config = config
        self.api = api
        self.key = key
        self.store = store
        self.clock = clock
        self.io_lock = io_lock
        self._flush = flush
        self._replicas = replicas
        self.ha = HAService(config, store, api, clock, key, apply_committed=replicas.change_sync_state_set)
        self.client: HAClient | None = None
        self.state = RoleState()

    async def start(self) -> None:
        await self.ha.start_server()

    async def on_master(self, state: RoleState) -> None:
        self.state = state
        await self._stop_client()
        assert state.master_broker_id is not None
        await self.ha.become_master(state.master_broker_id, state.master_epoch, state.sync_state_set,
                                    state.sync_state_set_epoch)

    async def on_slave(self, state: RoleState) -> None:
        self.state = state
        await self.ha.become_inactive()
        await self._stop_client()
        replicas = self._replicas
        assert replicas.broker_id is not None and state.master_address is not None
        assert state.master_broker_id is not None
        master = MasterIdentity(state.master_broker_id, state.master_address, state.master_epoch, self.key,
                                self._public_keys)
        self.client = HAClient(self.config, self.store, self.clock, replicas.broker_id, master,
                               self.io_lock, self._wait_flushed, self._truncated)
        self.client.start()

    async def _public_keys(self) -> dict[int, str]:
        return await self.api.broker_keys(self.config.brokerName)

    async def _wait_flushed(self, offset: int, timeout_ms: int) -> bool:
        return await self._flush.wait_flushed(offset, timeout_ms)

    def _truncated(self, offset: int) -> None:
        self._flush.note_truncated(offset)

    async def _stop_client(self) -> None:
        if self.client is not None:
            await self.client.stop()
            self.client = None

    def on_sync_state_set(self, state: RoleState) -> None:
        self.state = state
        self.ha.on_committed(state.sync_state_set, state.sync_state_set_epoch)

    def on_controller_view(self, ss_epoch: int) -> None:
        self.ha.resolve_unknown_alter(ss_epoch)

    def quorum_unreachable(self) -> str | None:
        return self.ha.quorum_unreachable()

    def retention_floor(self) -> int | None:
        return self.ha.retention_floor()

    def slave_hosts(self) -> set[str]:
        return {conn.peer.rpartition(":")[0] for conn in self.ha.connections.values()} if self.ha.active else set()

    def in_sync_replicas_nums(self) -> int:
        return self.ha.tracker.in_sync_nums() if self.ha.active else 0

    def on_appended(self) -> None:
        self.ha.update_confirm()
        self.ha.notify_new_data()
        self.ha.release_waiters()

    async def wait_for_acks(self, next_offset: int) -> bool:
        return await self.ha.wait_for_acks(next_offset)

    async def stop(self) -> None:
        await self._stop_client()
        await self.ha.stop()

    def status(self) -> dict[str, object]:
        if self.ha.active:
            return {"role": "MASTER", "syncStateSet": sorted(self.ha.tracker.local),
                    "proposedSyncStateSet": sorted(self.ha.tracker.remote) if self.ha.tracker.remote else None,
                    "inSyncSlaveNums": len(self.ha.tracker.local) - 1, "slaves": self.ha.status()}
        if self.client is not None:
            return {"role": "SLAVE", **self.client.status()}
        return {"role": self.state.role.value}
