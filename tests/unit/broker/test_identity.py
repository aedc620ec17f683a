"""Persistent broker id: IdentityFiles formats and BrokerRegistrar (RocketMQ's ReplicasManagerRegisterTest,
ported to a fake controller), including the crash cases of the persistent-id design."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest

from services.broker import identity as identity_mod
from services.broker.identity import (
    BrokerRegistrar,
    Identity,
    IdentityFiles,
    RegisterState,
    fault_point,
)
from services.common.codes import ResponseCode
from services.common.errors import ConfigError, RemoteError, UnreachableError
from services.controller.contract import MasterView

CLUSTER = "default-cluster"
BROKER = "default-broker"
ADDR = "127.0.0.1:10911"


class FakeController:
    """The controller's broker-id rules (reference §3.4-3.6), with failure injection.

    ``fail_before[method]``: an exception raised before the call has any effect.
    ``fail_after[method]``: an exception raised after the call took effect (the reply is lost).
    Each injected failure fires once.
    """

    def __init__(self) -> None:
        self.sets: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: list[tuple[Any, ...]] = []
        self.fail_before: dict[str, Exception] = {}
        self.fail_after: dict[str, Exception] = {}
        self.stale_next: list[int] = []  # answers getNextBrokerId with these first (a stale read)

    def _maybe_fail(self, table: dict[str, Exception], method: str) -> None:
        exc = table.pop(method, None)
        if exc is not None:
            raise exc

    async def get_next_broker_id(self, cluster: str, broker_name: str) -> int:
        self.calls.append(("get_next_broker_id", cluster, broker_name))
        self._maybe_fail(self.fail_before, "get_next_broker_id")
        if self.stale_next:
            return self.stale_next.pop(0)
        bs = self.sets.get((cluster, broker_name))
        return 1 if bs is None else bs["next"]

    async def apply_broker_id(self, cluster: str, broker_name: str, broker_id: int, check_code: str) -> None:
        self.calls.append(("apply_broker_id", cluster, broker_name, broker_id, check_code))
        self._maybe_fail(self.fail_before, "apply_broker_id")
        bs = self.sets.get((cluster, broker_name))
        if bs is None:
            if broker_id != 1:
                raise RemoteError(ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                                  f"Broker-set: {broker_name} hasn't been registered in controller, but broker "
                                  f"try to apply brokerId: {broker_id}")
            bs = self.sets[(cluster, broker_name)] = {"ids": {}, "next": 1}
        owner = bs["ids"].get(broker_id)
        if owner is not None and owner[1] != check_code:
            raise RemoteError(ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                              f"Fail to apply brokerId: {broker_id} in broker-set: {broker_name}")
        if owner is None:
            bs["ids"][broker_id] = (check_code.split(";")[0], check_code)
            bs["next"] += 1
        self._maybe_fail(self.fail_after, "apply_broker_id")

    async def register_broker(self, cluster: str, broker_name: str, broker_id: int, address: str) -> MasterView:
        self.calls.append(("register_broker", cluster, broker_name, broker_id, address))
        self._maybe_fail(self.fail_before, "register_broker")
        bs = self.sets.get((cluster, broker_name))
        if bs is None or broker_id not in bs["ids"]:
            raise RemoteError(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "not registered")
        code = bs["ids"][broker_id][1]
        bs["ids"][broker_id] = (address, code)
        return MasterView(syncStateSet=[broker_id])

    def methods(self) -> list[str]:
        return [c[0] for c in self.calls]

    def ids_of(self, cluster: str = CLUSTER, broker_name: str = BROKER) -> dict[int, tuple[str, str]]:
        return dict(self.sets.get((cluster, broker_name), {"ids": {}})["ids"])


class Clock:
    def __init__(self) -> None:
        self._n = itertools.count(1_700_000_000_000)

    def __call__(self) -> int:
        return next(self._n)


@pytest.fixture
def files(tmp_path: Path) -> IdentityFiles:
    return IdentityFiles(tmp_path / "0" / "brokerIdentity")


@pytest.fixture
def ctrl() -> FakeController:
    return FakeController()


def registrar(files: IdentityFiles, ctrl: FakeController, cluster: str = CLUSTER, broker: str = BROKER,
              address: str = ADDR) -> BrokerRegistrar:
    """A fresh registrar, as after a (re)start: it knows only what the files say."""
    return BrokerRegistrar(IdentityFiles(files.path), cluster, broker, address, ctrl, Clock())


def assert_registered(reg: BrokerRegistrar, files: IdentityFiles, broker_id: int) -> None:
    assert reg.state is RegisterState.REGISTERED
    assert reg.broker_id == broker_id
    assert files.load() == Identity(CLUSTER, BROKER, broker_id)
    assert files.load_temp() is None
    assert not files.temp_path.exists()


# ------------------------------------------------------------------------------------- IdentityFiles


class TestIdentityFiles:
    def test_paths(self, files: IdentityFiles) -> None:
        assert files.path.name == "brokerIdentity"
        assert files.temp_path == files.path.with_name("brokerIdentity-temp")

    def test_formats(self, files: IdentityFiles) -> None:
        files.write(Identity("c1", "b1", 3))
        files.write_temp(Identity("c1", "b1", 4, "10.0.0.1:10911;1700000000000"))
        assert files.path.read_text() == "c1#b1#3"
        assert files.temp_path.read_text() == "c1#b1#4#10.0.0.1:10911;1700000000000"
        assert files.load() == Identity("c1", "b1", 3)
        assert files.load_temp() == Identity("c1", "b1", 4, "10.0.0.1:10911;1700000000000")
        files.delete_temp()
        assert not files.temp_path.exists()
        files.delete_temp()  # idempotent

    def test_missing_files(self, files: IdentityFiles) -> None:
        assert files.load() is None and files.load_temp() is None

    @pytest.mark.parametrize("text", ["", "c#b", "c#b#1#x", "#b#1", "c##1", "c#b#one"])
    def test_malformed_identity(self, files: IdentityFiles, text: str) -> None:
        files.path.parent.mkdir(parents=True, exist_ok=True)
        files.path.write_text(text)
        assert files.load() is None

    @pytest.mark.parametrize("text", ["c#b#1", "c#b#1#", "c#b#x#code", "#b#1#code"])
    def test_malformed_temp(self, files: IdentityFiles, text: str) -> None:
        files.temp_path.parent.mkdir(parents=True, exist_ok=True)
        files.temp_path.write_text(text)
        assert files.load_temp() is None

    def test_trailing_newline_tolerated(self, files: IdentityFiles) -> None:
        files.path.parent.mkdir(parents=True, exist_ok=True)
        files.path.write_text("c#b#7\n")
        assert files.load() == Identity("c", "b", 7)


def test_fault_point_is_inert_unless_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(identity_mod.FAULT_ENV, raising=False)
    fault_point("after_temp_file")
    monkeypatch.setenv(identity_mod.FAULT_ENV, "some_other_point")
    fault_point("after_temp_file")


# ------------------------------------------------------------------------------------- ReplicasManagerRegisterTest


class TestRegister:
    def test_broker_register_success(self, files: IdentityFiles, ctrl: FakeController) -> None:
        reg = registrar(files, ctrl)
        answer = asyncio.run(reg.register())
        assert answer.syncStateSet == [1]
        assert_registered(reg, files, 1)
        assert ctrl.methods() == ["get_next_broker_id", "apply_broker_id", "register_broker"]
        code = ctrl.calls[1][4]
        assert code == f"{ADDR};1700000000000"  # "<brokerAddress>;<currentTimeMillis>"
        assert ctrl.calls[2] == ("register_broker", CLUSTER, BROKER, 1, ADDR)
        assert ctrl.ids_of() == {1: (ADDR, code)}

    def test_normal_restart_only_registers(self, files: IdentityFiles, ctrl: FakeController) -> None:
        asyncio.run(registrar(files, ctrl).register())
        ctrl.calls.clear()
        reg = registrar(files, ctrl, address="10.0.0.9:10911")  # new address after a restart
        asyncio.run(reg.register())
        assert_registered(reg, files, 1)
        assert ctrl.calls == [("register_broker", CLUSTER, BROKER, 1, "10.0.0.9:10911")]

    def test_second_broker_gets_next_id(self, tmp_path: Path, ctrl: FakeController) -> None:
        a = IdentityFiles(tmp_path / "a" / "brokerIdentity")
        b = IdentityFiles(tmp_path / "b" / "brokerIdentity")
        asyncio.run(registrar(a, ctrl).register())
        reg_b = registrar(b, ctrl, address="127.0.0.1:20911")
        asyncio.run(reg_b.register())
        assert reg_b.broker_id == 2
        assert b.load() == Identity(CLUSTER, BROKER, 2)

    def test_restart_with_changed_broker_config_refused(self, files: IdentityFiles,
                                                        ctrl: FakeController) -> None:
        asyncio.run(registrar(files, ctrl).register())
        ctrl.calls.clear()
        before = files.path.read_bytes()
        for cluster, broker in ((CLUSTER, "default-broker1"), ("default-cluster1", BROKER)):
            reg = registrar(files, ctrl, cluster=cluster, broker=broker)
            with pytest.raises(ConfigError):
                asyncio.run(reg.register())
            assert reg.state is not RegisterState.REGISTERED
            assert reg.broker_id is None
        assert ctrl.calls == []  # refused before talking to the controller
        assert files.path.read_bytes() == before
        # Restoring the configuration works again.
        reg = registrar(files, ctrl)
        asyncio.run(reg.register())
        assert_registered(reg, files, 1)

    def test_temp_file_of_another_broker_refused(self, files: IdentityFiles, ctrl: FakeController) -> None:
        files.write_temp(Identity(CLUSTER, "other-broker", 1, f"{ADDR};1"))
        with pytest.raises(ConfigError):
            asyncio.run(registrar(files, ctrl).register())
        assert ctrl.calls == []
        assert files.load_temp() == Identity(CLUSTER, "other-broker", 1, f"{ADDR};1")

    def test_register_failed_at_get_next_broker_id(self, files: IdentityFiles, ctrl: FakeController) -> None:
        ctrl.fail_before["get_next_broker_id"] = UnreachableError("no controller", [ADDR])
        reg = registrar(files, ctrl)
        with pytest.raises(UnreachableError):
            asyncio.run(reg.register())
        assert reg.state is RegisterState.INITIAL
        assert reg.broker_id is None
        assert not files.path.exists() and not files.temp_path.exists()
        asyncio.run(reg.register())
        assert_registered(reg, files, 1)

    def test_register_failed_at_create_temp_file(self, files: IdentityFiles, ctrl: FakeController,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
        def broken(self: IdentityFiles, ident: Identity) -> None:
            raise OSError("disk full")

        monkeypatch.setattr(IdentityFiles, "write_temp", broken)
        reg = registrar(files, ctrl)
        with pytest.raises(OSError):
            asyncio.run(reg.register())
        assert reg.state is RegisterState.INITIAL
        assert reg.broker_id is None
        assert not files.path.exists() and not files.temp_path.exists()
        assert "apply_broker_id" not in ctrl.methods()
        monkeypatch.undo()
        reg = registrar(files, ctrl)
        asyncio.run(reg.register())
        assert_registered(reg, files, 1)

    def test_apply_definite_refusal_deletes_temp_and_starts_over(self, files: IdentityFiles,
                                                                  ctrl: FakeController) -> None:
        # Another broker took id 1 between our getNextBrokerId (a stale answer) and our apply.
        asyncio.run(ctrl.apply_broker_id(CLUSTER, BROKER, 1, "127.0.0.1:30911;1"))
        ctrl.stale_next = [1]
        ctrl.calls.clear()
        reg = registrar(files, ctrl)
        with pytest.raises(RemoteError) as info:
            asyncio.run(reg.register())
        assert info.value.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID == 2014
        assert reg.state is RegisterState.INITIAL
        assert reg.state not in (RegisterState.CREATE_METADATA_FILE_DONE, RegisterState.REGISTERED)
        assert reg.broker_id is None
        assert not files.temp_path.exists() and not files.path.exists()
        # The next attempt asks for a new id.
        ctrl.calls.clear()
        reg = registrar(files, ctrl)
        asyncio.run(reg.register())
        assert ctrl.methods() == ["get_next_broker_id", "apply_broker_id", "register_broker"]
        assert_registered(reg, files, 2)

    def test_apply_definite_refusal_same_instance_retry(self, files: IdentityFiles,
                                                        ctrl: FakeController) -> None:
        ctrl.fail_before["apply_broker_id"] = RemoteError(ResponseCode.CONTROLLER_BROKER_ID_INVALID, "taken")
        reg = registrar(files, ctrl)
        with pytest.raises(RemoteError):
            asyncio.run(reg.register())
        assert not files.temp_path.exists()
        asyncio.run(reg.register())
        assert ctrl.methods().count("get_next_broker_id") == 2
        assert_registered(reg, files, 1)

    @pytest.mark.parametrize("failure", [
        UnreachableError("timeout", [ADDR]),
        RemoteError(ResponseCode.CONTROLLER_NOT_LEADER, "not leader"),
    ], ids=["unreachable", "not-leader"])
    @pytest.mark.parametrize("effect", ["before", "after"], ids=["not-applied", "reply-lost"])
    def test_apply_transport_failure_keeps_temp_and_retries_same_id(
            self, files: IdentityFiles, ctrl: FakeController, failure: Exception, effect: str) -> None:
        (ctrl.fail_before if effect == "before" else ctrl.fail_after)["apply_broker_id"] = failure
        reg = registrar(files, ctrl)
        with pytest.raises(type(failure)):
            asyncio.run(reg.register())
        temp = files.load_temp()
        assert temp is not None and temp.broker_id == 1
        assert reg.state is RegisterState.CREATE_TEMP_METADATA_FILE_DONE
        assert reg.broker_id is None
        assert not files.path.exists()
        first_apply = ctrl.calls[-1]
        assert first_apply[0] == "apply_broker_id"

        ctrl.calls.clear()
        reg = registrar(files, ctrl)  # restart
        asyncio.run(reg.register())
        assert ctrl.methods() == ["apply_broker_id", "register_broker"]
        assert ctrl.calls[0] == first_apply  # same id, same check code
        assert_registered(reg, files, 1)
        assert ctrl.ids_of() == {1: (ADDR, temp.check_code)}
        assert asyncio.run(ctrl.get_next_broker_id(CLUSTER, BROKER)) == 2  # no id was wasted

    def test_apply_transport_failure_same_instance_retry(self, files: IdentityFiles,
                                                         ctrl: FakeController) -> None:
        ctrl.fail_after["apply_broker_id"] = UnreachableError("reply lost")
        reg = registrar(files, ctrl)
        with pytest.raises(UnreachableError):
            asyncio.run(reg.register())
        asyncio.run(reg.register())
        applies = [c for c in ctrl.calls if c[0] == "apply_broker_id"]
        assert len(applies) == 2 and applies[0] == applies[1]
        assert_registered(reg, files, 1)

    def test_register_failed_at_create_metadata_file(self, files: IdentityFiles, ctrl: FakeController,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
        def broken(self: IdentityFiles, ident: Identity) -> None:
            raise OSError("read-only file system")

        monkeypatch.setattr(IdentityFiles, "write", broken)
        reg = registrar(files, ctrl)
        with pytest.raises(OSError):
            asyncio.run(reg.register())
        assert reg.state is RegisterState.CREATE_TEMP_METADATA_FILE_DONE
        assert reg.broker_id is None
        temp = files.load_temp()
        assert temp is not None and temp.broker_id == 1
        assert not files.path.exists()
        first_apply = ctrl.calls[-1]

        monkeypatch.undo()
        ctrl.calls.clear()
        reg = registrar(files, ctrl)
        asyncio.run(reg.register())
        assert ctrl.calls[0] == first_apply  # retried apply with the same id and code, accepted
        assert ctrl.methods() == ["apply_broker_id", "register_broker"]
        assert_registered(reg, files, 1)

    def test_register_failed_at_register_broker(self, files: IdentityFiles, ctrl: FakeController) -> None:
        ctrl.fail_before["register_broker"] = UnreachableError("timeout")
        reg = registrar(files, ctrl)
        with pytest.raises(UnreachableError):
            asyncio.run(reg.register())
        assert reg.state is RegisterState.CREATE_METADATA_FILE_DONE
        assert reg.broker_id == 1
        assert files.load() == Identity(CLUSTER, BROKER, 1)
        assert not files.temp_path.exists()

        ctrl.calls.clear()
        reg = registrar(files, ctrl)
        asyncio.run(reg.register())
        assert ctrl.methods() == ["register_broker"]
        assert_registered(reg, files, 1)


# ------------------------------------------------------------------------------------- crash cases


class Crash(BaseException):
    """Stands in for SIGKILL at a fault point: nothing after it runs, only the files survive."""


class TestCrashCases:
    @pytest.mark.parametrize("point, resumed_calls", [
        ("after_temp_file", ["apply_broker_id", "register_broker"]),
        ("after_apply_broker_id", ["apply_broker_id", "register_broker"]),
        ("after_identity_file", ["register_broker"]),
    ])
    def test_crash_then_restart(self, files: IdentityFiles, ctrl: FakeController,
                                monkeypatch: pytest.MonkeyPatch, point: str, resumed_calls: list[str]) -> None:
        def crash_at(name: str) -> None:
            if name == point:
                raise Crash(name)

        monkeypatch.setattr(identity_mod, "fault_point", crash_at)
        with pytest.raises(Crash):
            asyncio.run(registrar(files, ctrl).register())
        check_code = files.load_temp().check_code if files.load_temp() else None  # type: ignore[union-attr]
        if point == "after_identity_file":
            assert files.load() == Identity(CLUSTER, BROKER, 1)
            assert files.temp_path.exists()  # the crash came before the temp file was deleted

        monkeypatch.undo()
        ctrl.calls.clear()
        reg = registrar(files, ctrl)
        asyncio.run(reg.register())
        assert ctrl.methods() == resumed_calls
        if check_code is not None and "apply_broker_id" in resumed_calls:
            assert ctrl.calls[0][3:] == (1, check_code)
        assert_registered(reg, files, 1)
        assert list(ctrl.ids_of()) == [1]  # exactly one id used for this broker

    def test_crash_before_temp_file_starts_over(self, files: IdentityFiles, ctrl: FakeController,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
        def crash(self: IdentityFiles, ident: Identity) -> None:
            raise Crash("before temp file")

        monkeypatch.setattr(IdentityFiles, "write_temp", crash)
        with pytest.raises(Crash):
            asyncio.run(registrar(files, ctrl).register())
        assert not files.temp_path.exists() and not files.path.exists()
        monkeypatch.undo()
        ctrl.calls.clear()
        reg = registrar(files, ctrl)
        asyncio.run(reg.register())
        assert ctrl.methods() == ["get_next_broker_id", "apply_broker_id", "register_broker"]
        assert_registered(reg, files, 1)

    def test_identity_and_temp_both_present_prefers_identity(self, files: IdentityFiles,
                                                             ctrl: FakeController) -> None:
        asyncio.run(registrar(files, ctrl).register())
        files.write_temp(Identity(CLUSTER, BROKER, 1, f"{ADDR};1700000000000"))
        ctrl.calls.clear()
        reg = registrar(files, ctrl)
        reg.confirm_state()
        assert reg.state is RegisterState.CREATE_METADATA_FILE_DONE and reg.broker_id == 1
        assert not files.temp_path.exists()
        asyncio.run(reg.register())
        assert ctrl.methods() == ["register_broker"]
