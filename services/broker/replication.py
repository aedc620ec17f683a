"""What the put path asks of replication. ``LocalOnly`` is used until master→slave replication runs
(and by a group of one): nothing is shipped, so only the master itself can acknowledge."""

from __future__ import annotations

import asyncio
from typing import Protocol

from services.broker.config import BrokerConfig
from services.broker.replicas_manager import RoleState
from services.broker.store import MessageStore


class Replication(Protocol):
    async def on_master(self, state: RoleState) -> None: ...

    async def on_slave(self, state: RoleState) -> None: ...

    def on_sync_state_set(self, state: RoleState) -> None: ...

    def in_sync_replicas_nums(self) -> int: ...

    def on_appended(self) -> None: ...

    async def wait_for_acks(self, next_offset: int) -> bool: ...

    async def stop(self) -> None: ...


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
