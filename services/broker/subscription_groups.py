"""The broker's subscription groups (RocketMQ's SubscriptionGroupManager): the settings of each consumer group
created with UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), listed by GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201),
removed by DELETE_SUBSCRIPTIONGROUP (207), and copied by a slave from its master (slave_sync.py).

What they change here: ``retryMaxTimes`` is how often a message a consumer sends back is retried before it
goes to the group's dead-letter queue when the consumer does not say (processor/send.py), and a group with
``consumeEnable=false`` may not pull (processor/pull.py). A group with no settings has RocketMQ's defaults;
unlike RocketMQ's broker (autoCreateSubscriptionGroup), a group's first heartbeat or pull creates none.

File: ``<storePathRootDir>/config/subscriptionGroup.json``, the SubscriptionGroupWrapper as 201 answers it,
written with fsync and atomic rename before a change is answered; an absent file is an empty table, a file
that does not read back as one is refused at start with one line naming it.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

from services.common.clock import Clock
from services.common.durable import atomic_write
from services.common.errors import MqctlError
from services.remoting.errors import BodyError, RemotingError
from services.remoting.namesrv_bodies import DataVersion
from services.remoting.subscription_bodies import (
    MAX_GROUPS,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
)

__all__ = ["MAX_FILE_BYTES", "GroupsDamaged", "GroupsFull", "SubscriptionGroups"]

#: The largest file read back (MAX_GROUPS groups of a few KiB each).
MAX_FILE_BYTES = 64 * 1024 * 1024
RECOVERY = "move it aside to start with no subscription groups (a slave copies them again from its master)"


class GroupsDamaged(MqctlError):
    """subscriptionGroup.json does not read back as a SubscriptionGroupWrapper."""


class GroupsFull(MqctlError):
    """MAX_GROUPS groups exist already."""


class SubscriptionGroups:
    """The groups' settings, on disk before a change returns. Thread-safe."""

    def __init__(self, path: Path, clock: Clock) -> None:
        self.path = path
        self.clock = clock
        self._wrapper = SubscriptionGroupWrapper()
        self._lock = threading.Lock()

    def load(self) -> None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            self._wrapper = SubscriptionGroupWrapper()
            return
        except OSError as exc:
            raise GroupsDamaged(f"{self.path} cannot be read ({exc.strerror}); {RECOVERY}") from None
        try:
            self._wrapper = SubscriptionGroupWrapper.decode(raw, max_bytes=MAX_FILE_BYTES)
        except (BodyError, RemotingError) as exc:
            raise GroupsDamaged(f"{self.path} is damaged ({exc}); {RECOVERY}") from None

    def wrapper(self) -> SubscriptionGroupWrapper:
        return self._wrapper

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        return self._wrapper.table.get(group)

    def update(self, config: SubscriptionGroupConfig) -> None:
        """Create or replace ``config``'s group. Raises GroupsFull at the bound."""
        with self._lock:
            table = dict(self._wrapper.table)
            if config.group_name not in table and len(table) >= MAX_GROUPS:
                raise GroupsFull(f"this broker already holds {MAX_GROUPS} subscription groups")
            table[config.group_name] = config
            self._write(table, self._next_version())

    def delete(self, group: str) -> bool:
        """Remove ``group``'s settings; False if it had none."""
        with self._lock:
            if group not in self._wrapper.table:
                return False
            table = {n: c for n, c in self._wrapper.table.items() if n != group}
            self._write(table, self._next_version())
            return True

    def copy(self, master: SubscriptionGroupWrapper) -> bool:
        """A slave takes its master's table and DataVersion whole (SlaveSynchronize.syncSubscriptionGroupConfig)
        when the versions differ; whether anything changed."""
        with self._lock:
            if master.data_version == self._wrapper.data_version:
                return False
            self._write(dict(master.table), master.data_version)
            return True

    def _next_version(self) -> DataVersion:
        version = self._wrapper.data_version
        return replace(version, timestamp=self.clock.now_ms(), counter=version.counter + 1)

    def _write(self, table: dict[str, SubscriptionGroupConfig], version: DataVersion) -> None:
        wrapper = SubscriptionGroupWrapper(dict(sorted(table.items())), version)
        atomic_write(self.path, wrapper.encode())
        self._wrapper = wrapper
