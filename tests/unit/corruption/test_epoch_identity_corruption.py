"""Corrupted epoch files (epoch_file.py, store.py) and broker identity files (identity.py).

Epoch file: a main file whose count, CRC or entries do not match (or that is unreadable) is replaced
by ``<path>.bak``, the previous version, only when the .bak holds every entry the damaged file still
shows (and at least as many as its count says); otherwise, and when both are unreadable while the
commitlog holds data, the store refuses to open with one error naming the file. The commitlog is
untouched either way.

Identity files: a malformed ``brokerIdentity`` is ignored with an error naming it (the broker then
registers from the temp file, or from scratch); an identity of another broker is refused.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from services.broker.epoch_file import EpochFileCache, EpochFileDamaged, encode_epoch_file
from services.broker.ha.frames import MasterHandshake
from services.broker.ha.protocol import Unreconcilable, decide_truncation
from services.broker.identity import BrokerRegistrar, Identity, IdentityFiles, RegisterState
from services.broker.store import Message, MessageStore
from services.common.errors import ConfigError
from services.controller.contract import MasterView

GARBAGE = {
    "text": b"hello world\n",
    "bad-crc": b"2\n12345\n1-0\n2-100\n",
    "bad-count": b"3\n0\n1-0\n2-100\n",
    "torn": None,  # the real file cut in the middle of a line
    "empty": b"",
    "binary": b"\xff\xfe\x00\x81garbage\x00",
}


def epoch_file(tmp_path: Path, entries: list[tuple[int, int]]) -> Path:
    path = tmp_path / "epochFileCheckpoint"
    cache = EpochFileCache(path)
    for epoch, start in entries:
        assert cache.append(epoch, start)
    return path


def damage(path: Path, kind: str) -> None:
    content = GARBAGE[kind]
    if content is None:
        data = path.read_bytes()
        content = data[: len(data) - 3]
    path.write_bytes(content)


# ---------------------------------------------------------------------------------- epoch file
LOSSLESS = ["text", "bad-crc", "empty", "binary"]  # nothing readable in them is missing from the .bak
LOSSY = ["bad-count", "torn"]  # they show (or count) the newest entry, which the .bak lacks


@pytest.mark.parametrize("kind", LOSSLESS)
def test_damaged_main_epoch_file_falls_back_to_the_backup_when_that_loses_nothing(
    tmp_path: Path, kind: str
) -> None:
    path = epoch_file(tmp_path, [(1, 0), (2, 100)])  # .bak holds (1, 0)
    path.with_name(path.name + ".bak").write_text(path.read_text())  # ... here the same entries
    damage(path, kind)
    cache = EpochFileCache(path)
    assert cache.load(log_has_data=True)
    assert [(e.epoch, e.start_offset) for e in cache.entries()] == [(1, 0), (2, 100)]


@pytest.mark.parametrize("kind", LOSSY)
def test_damaged_main_epoch_file_is_refused_when_the_backup_lacks_its_newest_entry(
    tmp_path: Path, kind: str
) -> None:
    # It used to fall back with a warning, and epoch 3 was lost.
    path = epoch_file(tmp_path, [(1, 0), (2, 100), (3, 250)])  # .bak holds the previous version
    damage(path, kind)
    before = path.read_bytes()
    with pytest.raises(EpochFileDamaged) as err:
        EpochFileCache(path).load(log_has_data=True)
    assert str(path) in err.value.remark and "operations.md" in err.value.remark
    assert path.read_bytes() == before  # nothing rewritten


@pytest.mark.parametrize("kind", [k for k in GARBAGE if k != "binary"])
def test_damaged_backup_is_ignored_while_the_main_file_is_good(tmp_path: Path, kind: str) -> None:
    path = epoch_file(tmp_path, [(1, 0), (2, 100)])
    damage(path.with_name(path.name + ".bak"), kind)
    cache = EpochFileCache(path)
    assert cache.load() and [(e.epoch, e.start_offset) for e in cache.entries()] == [(1, 0), (2, 100)]


def test_missing_main_epoch_file_uses_the_backup(tmp_path: Path) -> None:
    path = epoch_file(tmp_path, [(1, 0), (2, 100), (3, 250)])
    path.unlink()
    cache = EpochFileCache(path)
    assert cache.load() and [(e.epoch, e.start_offset) for e in cache.entries()] == [(1, 0), (2, 100)]


def test_backup_with_no_epoch_cannot_stand_in_when_the_log_has_data(tmp_path: Path) -> None:
    path = epoch_file(tmp_path, [(1, 0)])
    cache = EpochFileCache(path)
    cache.load()
    cache.truncate_suffix_by_epoch(1)
    cache.append(2, 0)  # .bak: the empty list
    damage(path, "text")
    with pytest.raises(EpochFileDamaged, match="holds no epoch, but the commitlog holds data"):
        EpochFileCache(path).load(log_has_data=True)


def make_store(root: Path) -> int:
    store = MessageStore(root, "127.0.0.1:10911", segment_size=4096)
    store.open()
    store.epochs.append(1, 0)
    for i in range(5):
        store.append(Message("T", f"m{i}".encode(), queue_id=0), 1)
    store.epochs.append(2, store.max_offset)
    store.append(Message("T", b"m5", queue_id=0), 1)
    store.set_confirm_offset(store.max_offset)
    max_offset = store.max_offset
    store.close()
    return max_offset


@pytest.mark.parametrize("kind", [k for k in GARBAGE if k not in ("binary", "empty")])
def test_both_epoch_files_damaged_with_data_in_the_log_is_refused_with_an_error_naming_the_file(
    tmp_path: Path, kind: str
) -> None:
    # It used to start with no epochs: a replica that can then never reconcile, or a master whose
    # slaves cannot find a common epoch.
    root = tmp_path / "store"
    max_offset = make_store(root)
    main = root / "epochFileCheckpoint"
    damage(main, kind)
    damage(main.with_name(main.name + ".bak"), kind)
    store = MessageStore(root, "127.0.0.1:10911", segment_size=4096)
    with pytest.raises(EpochFileDamaged) as err:
        store.open()
    assert str(main) in err.value.remark and "\n" not in err.value.remark
    assert (root / "commitlog" / f"{0:020d}").stat().st_size == max_offset  # the log itself is untouched


def test_both_epoch_files_damaged_with_an_empty_log_opens_with_no_epochs_and_one_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "store"
    store = MessageStore(root, "127.0.0.1:10911", segment_size=4096)
    store.open()
    store.epochs.append(1, 0)
    store.epochs.append(2, 0)
    store.close()
    damage(root / "epochFileCheckpoint", "bad-crc")
    damage(root / "epochFileCheckpoint.bak", "bad-crc")
    store = MessageStore(root, "127.0.0.1:10911", segment_size=4096)
    with caplog.at_level(logging.ERROR):
        store.open()
    try:
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1 and str(store.epochs.path) in errors[0].getMessage()
        assert store.epochs.entries() == []
        # As a slave, it refuses to guess which of its data the master agrees with.
        with pytest.raises(Unreconcilable, match="no epoch entries"):
            decide_truncation([], 0, 100, MasterHandshake(100, 2, ((1, 0), (2, 50))))
    finally:
        store.close()


# ---------------------------------------------------------------------------------- identity
class _Controller:
    def __init__(self) -> None:
        self.ids: dict[int, str] = {1: "127.0.0.1:10911;1"}
        self.calls: list[tuple[str, int]] = []

    async def get_next_broker_id(self, cluster: str, broker_name: str) -> int:
        self.calls.append(("next", 0))
        return max(self.ids) + 1

    async def apply_broker_id(self, cluster: str, broker_name: str, broker_id: int, check_code: str) -> None:
        self.calls.append(("apply", broker_id))
        self.ids.setdefault(broker_id, check_code)

    async def register_broker(
        self, cluster: str, broker_name: str, broker_id: int, address: str
    ) -> MasterView:
        self.calls.append(("register", broker_id))
        if broker_id < 1:  # the controller API refuses ids below 1 (INVALID_PARAMETER)
            raise AssertionError(f"registerBroker with broker id {broker_id}")
        return MasterView()


def registrar(tmp_path: Path, ctrl: _Controller) -> BrokerRegistrar:
    return BrokerRegistrar(
        IdentityFiles(tmp_path / "brokerIdentity"),
        "DefaultCluster",
        "broker-a",
        "127.0.0.1:10911",
        ctrl,
        lambda: 1_700_000_000_000,
    )


@pytest.mark.parametrize(
    "text",
    [
        "",
        "garbage",
        "DefaultCluster#broker-a",
        "DefaultCluster#broker-a#x",
        "#broker-a#1",
        "DefaultCluster##1",
        "a#b#1#2#3",
    ],
)
def test_malformed_identity_is_ignored_with_an_error_naming_the_file(
    tmp_path: Path, text: str, caplog: pytest.LogCaptureFixture
) -> None:
    files = IdentityFiles(tmp_path / "brokerIdentity")
    files.path.write_text(text)
    with caplog.at_level(logging.ERROR):
        assert files.load() is None
    if text:
        assert str(files.path) in caplog.text


def test_malformed_identity_with_a_good_temp_file_resumes_from_the_temp_file(tmp_path: Path) -> None:
    ctrl = _Controller()
    reg = registrar(tmp_path, ctrl)
    reg.files.path.write_text("garbage")
    reg.files.write_temp(Identity("DefaultCluster", "broker-a", 2, "127.0.0.1:10911;5"))
    asyncio.run(reg.register())
    assert reg.broker_id == 2 and ctrl.calls == [("apply", 2), ("register", 2)]
    assert reg.files.path.read_text() == "DefaultCluster#broker-a#2"


def test_identity_of_another_broker_is_refused(tmp_path: Path) -> None:
    reg = registrar(tmp_path, _Controller())
    reg.files.path.write_text("DefaultCluster#broker-b#1")
    with pytest.raises(ConfigError, match="brokerIdentity"):
        asyncio.run(reg.register())
    assert reg.state is RegisterState.INITIAL


@pytest.mark.parametrize("which", ["identity", "temp"])
def test_binary_garbage_identity_file_is_treated_as_malformed(tmp_path: Path, which: str) -> None:
    files = IdentityFiles(tmp_path / "brokerIdentity")
    path = files.path if which == "identity" else files.temp_path
    path.write_bytes(b"\xff\xfe\x00\x81#broker-a#1")
    try:
        result = files.load() if which == "identity" else files.load_temp()
    except ConfigError as exc:  # refusing with a clear error naming the file is fine too
        assert str(path) in exc.remark
        return
    assert result is None


@pytest.mark.parametrize("broker_id", ["0", "-3"])
def test_identity_with_an_impossible_broker_id_is_malformed(tmp_path: Path, broker_id: str) -> None:
    files = IdentityFiles(tmp_path / "brokerIdentity")
    files.path.write_text(f"DefaultCluster#broker-a#{broker_id}")
    try:
        result = files.load()
    except ConfigError as exc:
        assert str(files.path) in exc.remark
        return
    assert result is None


def test_encode_epoch_file_round_trip_is_what_load_reads(tmp_path: Path) -> None:
    """Sanity for the damage helpers above: an intact file written by hand loads."""
    path = tmp_path / "epochFileCheckpoint"
    path.write_text(encode_epoch_file(EpochFileCache(None).entries()))
    assert EpochFileCache(path).load()
