"""Persistent broker id: the ``brokerIdentity`` / ``brokerIdentity-temp`` files and the register steps.

Files (RocketMQ's format):

- ``brokerIdentity``: ``<clusterName>#<brokerName>#<brokerId>``
- ``brokerIdentity-temp``: ``<clusterName>#<brokerName>#<brokerId>#<registerCheckCode>``, where the
  check code is ``<brokerAddress>;<currentTimeMillis>``

Steps, each durable before the next (a crash anywhere resumes from the files):

1. INITIAL: ask the controller ``getNextBrokerId``; write the temp file with that id and a new check code.
2. CREATE_TEMP_METADATA_FILE_DONE: ``applyBrokerId(id, checkCode)``. The controller accepts a retry with
   the same check code, so a lost reply or a crash after the apply just retries. A definite refusal (the
   id was taken by someone else) deletes the temp file and starts over at 1. Then write the identity file
   and delete the temp file.
3. CREATE_METADATA_FILE_DONE: ``registerBroker(id, address)``; the answer carries the group's master.
4. REGISTERED.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

from services.common.codes import ResponseCode
from services.common.durable import atomic_write, durable_unlink
from services.common.errors import ConfigError, RemoteError
from services.common.faults import FAULT_ENV, fault_point  # noqa: F401  (tests patch identity.fault_point)
from services.controller.contract import MasterView

log = logging.getLogger(__name__)



class RegisterState(Enum):
    INITIAL = "INITIAL"
    CREATE_TEMP_METADATA_FILE_DONE = "CREATE_TEMP_METADATA_FILE_DONE"
    CREATE_METADATA_FILE_DONE = "CREATE_METADATA_FILE_DONE"
    REGISTERED = "REGISTERED"


@dataclass(frozen=True)
class Identity:
    cluster: str
    broker_name: str
    broker_id: int
    check_code: str = ""


class IdentityFiles:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.temp_path = path.with_name(path.name + "-temp")

    @staticmethod
    def _parse(path: Path, parts_wanted: int) -> Identity | None:
        try:
            parts = path.read_bytes().decode("utf-8").strip().split("#")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            log.error("ignoring unreadable identity file %s: %s", path, exc)
            return None
        if len(parts) != parts_wanted or not parts[0] or not parts[1]:
            log.error("ignoring malformed identity file %s", path)
            return None
        try:
            broker_id = int(parts[2])
        except ValueError:
            broker_id = 0
        if broker_id < 1:
            log.error("ignoring identity file %s: bad broker id %r", path, parts[2])
            return None
        check = parts[3] if parts_wanted == 4 else ""
        if parts_wanted == 4 and not check:
            return None
        return Identity(parts[0], parts[1], broker_id, check)

    def load(self) -> Identity | None:
        return self._parse(self.path, 3)

    def load_temp(self) -> Identity | None:
        return self._parse(self.temp_path, 4)

    def write(self, ident: Identity) -> None:
        atomic_write(self.path, f"{ident.cluster}#{ident.broker_name}#{ident.broker_id}")

    def write_temp(self, ident: Identity) -> None:
        atomic_write(self.temp_path, f"{ident.cluster}#{ident.broker_name}#{ident.broker_id}#{ident.check_code}")

    def delete_temp(self) -> None:
        durable_unlink(self.temp_path)


class RegistrationApi(Protocol):
    """What registration asks of the controller (a part of services/broker/controller_api.ControllerApi)."""

    async def get_next_broker_id(self, cluster: str, broker_name: str) -> int: ...

    async def apply_broker_id(self, cluster: str, broker_name: str, broker_id: int, check_code: str) -> None: ...

    async def register_broker(self, cluster: str, broker_name: str, broker_id: int,
                              address: str) -> MasterView: ...


class BrokerRegistrar:
    def __init__(self, files: IdentityFiles, cluster: str, broker_name: str, address: str,
                 controller: RegistrationApi, now_ms: Any) -> None:
        self.files = files
        self.cluster = cluster
        self.broker_name = broker_name
        self.address = address
        self.controller = controller
        self.now_ms = now_ms
        self.state = RegisterState.INITIAL
        self.broker_id: int | None = None
        self._temp: Identity | None = None

    def confirm_state(self) -> None:
        """Work out where a previous run stopped, from the files alone."""
        ident = self.files.load()
        if ident is not None:
            self._check_matches(ident, self.files.path)
            self.state, self.broker_id = RegisterState.CREATE_METADATA_FILE_DONE, ident.broker_id
            if self.files.temp_path.exists():
                self.files.delete_temp()
            return
        temp = self.files.load_temp()
        if temp is not None:
            self._check_matches(temp, self.files.temp_path)
            self.state, self._temp = RegisterState.CREATE_TEMP_METADATA_FILE_DONE, temp
            return
        self.state = RegisterState.INITIAL

    def _check_matches(self, ident: Identity, path: Path) -> None:
        if (ident.cluster, ident.broker_name) != (self.cluster, self.broker_name):
            raise ConfigError(
                f"{path} belongs to cluster {ident.cluster!r} broker {ident.broker_name!r}, but this broker is "
                f"configured as cluster {self.cluster!r} broker {self.broker_name!r}. Fix brokerClusterName/"
                "brokerName, or use another storePathRootDir for a different broker")

    async def register(self) -> MasterView:
        """Run the remaining steps; returns the registerBroker answer. Raises on failure (the state
        and files say where to resume)."""
        self.confirm_state()
        if self.state is RegisterState.INITIAL:
            await self._create_temp()
        if self.state is RegisterState.CREATE_TEMP_METADATA_FILE_DONE:
            await self._apply()
        assert self.state is RegisterState.CREATE_METADATA_FILE_DONE and self.broker_id is not None
        answer = await self.controller.register_broker(self.cluster, self.broker_name, self.broker_id, self.address)
        self.state = RegisterState.REGISTERED
        return answer

    async def _create_temp(self) -> None:
        next_id = await self.controller.get_next_broker_id(self.cluster, self.broker_name)
        temp = Identity(self.cluster, self.broker_name, next_id, f"{self.address};{self.now_ms()}")
        self.files.write_temp(temp)
        fault_point("after_temp_file")
        self.state, self._temp = RegisterState.CREATE_TEMP_METADATA_FILE_DONE, temp

    async def _apply(self) -> None:
        temp = self._temp
        assert temp is not None
        try:
            await self.controller.apply_broker_id(self.cluster, self.broker_name, temp.broker_id, temp.check_code)
        except RemoteError as exc:
            if exc.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID:
                log.warning("broker id %d was refused (%s); asking the controller for another", temp.broker_id,
                            exc.remark)
                self.files.delete_temp()
                self.state, self._temp = RegisterState.INITIAL, None
            raise
        fault_point("after_apply_broker_id")
        self.files.write(Identity(self.cluster, self.broker_name, temp.broker_id))
        fault_point("after_identity_file")
        self.files.delete_temp()
        self.state, self.broker_id, self._temp = RegisterState.CREATE_METADATA_FILE_DONE, temp.broker_id, None
