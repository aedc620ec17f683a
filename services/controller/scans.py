"""The leader's two periodic scans (RocketMQ's ``scanNotActiveBroker`` and the inactive-master scan): a
broker whose heartbeats expired is marked inactive, and a group whose master is gone gets an election.
Both are level-triggered (RocketMQ issue #5009): a failed election is found again on the next round, and a
round that raises is logged and the loop goes on."""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import TYPE_CHECKING

from services.controller.heartbeat import TICK_MS
from services.controller.state_machine import BrokerSet, ReplicasInfoManager

if TYPE_CHECKING:
    from services.controller.controller import ControllerManager

__all__ = ["Scans"]

log = logging.getLogger(__name__)


class Scans:
    def __init__(self, manager: ControllerManager) -> None:
        self.m = manager
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self.m.heartbeats.start_noting()
        self._tasks = [asyncio.create_task(self._ticker(), name="running-ticker"),
                       asyncio.create_task(self._heartbeat_loop(), name="heartbeat-scan"),
                       asyncio.create_task(self._inactive_master_loop(), name="inactive-master-scan")]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)  # each ends, however it ends
        self._tasks.clear()

    async def _ticker(self) -> None:
        """Notes that this controller runs (heartbeat.py: a pause of its own is not counted against brokers)."""
        while True:
            self.m.heartbeats.note_running()
            await asyncio.sleep(TICK_MS / 1000)

    async def _heartbeat_loop(self) -> None:
        await asyncio.sleep(min(2.0, self.m.config.scanNotActiveBrokerInterval / 1000))
        while True:
            try:
                await self.not_active_brokers()
            except Exception:  # the scan must survive anything
                log.exception("heartbeat scan failed")
            await asyncio.sleep(self.m.config.scanNotActiveBrokerInterval / 1000)

    async def not_active_brokers(self) -> None:
        m = self.m
        for info in m.heartbeats.scan_expired():
            log.warning("broker %s/%s id %d (%s) missed its heartbeats for %d ms; marked inactive",
                        info.clusterName, info.brokerName, info.brokerId, info.brokerAddr,
                        info.heartbeatTimeoutMs)
            if not m.serving or m.raft is None:
                continue
            replica = m.raft.read(functools.partial(_broker_set, name=info.brokerName))
            if replica is not None and replica.masterBrokerId == info.brokerId:
                await m.trigger_elect_master(info.brokerName)

    async def _inactive_master_loop(self) -> None:
        while True:
            await asyncio.sleep(self.m.config.scanInactiveMasterInterval / 1000)
            try:
                await self.inactive_masters()
            except Exception:
                log.exception("inactive-master scan failed")

    async def inactive_masters(self) -> None:
        m = self.m
        if not m.serving or m.raft is None or m.in_heartbeat_grace():
            return
        names = m.raft.read(lambda machine: machine.scan_need_reelect(
            m.alive, m.policy(), m.config.enableElectUncleanMaster))
        for name in names:
            log.info("broker-set %s has no live master; electing", name)
            await m.trigger_elect_master(name)


def _broker_set(machine: ReplicasInfoManager, name: str) -> BrokerSet | None:
    return machine.broker_sets.get(name)
