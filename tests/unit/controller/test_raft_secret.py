"""Every controller has a Raft password: configured, read from a private file, or (single node only)
generated once and kept with mode 0600."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from services.common.errors import ConfigError
from services.controller.config import BLACK_LIST, ControllerConfig, config_from_properties
from services.controller.raft_secret import GENERATED_FILE, resolve_password, write_password_file

THREE_LOOPBACK = "n0-127.0.0.1:9878;n1-127.0.0.1:9868;n2-127.0.0.1:9858"


def single(tmp_path: Path, **props: str) -> ControllerConfig:
    return config_from_properties({"controllerStorePath": str(tmp_path / "store"), **props})


def group(**props: str) -> ControllerConfig:
    return config_from_properties({"controllerDLegerPeers": THREE_LOOPBACK, **props})


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("listen", ["", "0.0.0.0"])
def test_a_group_without_a_password_refuses_to_start_and_says_how_to_fix_it(listen: str) -> None:
    # Loopback peers used to pass without a password, even with the Raft port on every interface.
    config = group(listenAddress=listen)
    with pytest.raises(ConfigError, match="3 nodes and no Raft password: set controllerRaftPasswordFile") as err:
        config.validate()
    assert "chmod 600" in err.value.remark and "same secret on every node" in err.value.remark


def test_a_group_with_a_password_or_a_password_file_starts() -> None:
    group(controllerRaftPassword="s3cret").validate()
    group(controllerRaftPasswordFile="/etc/mqctl/raft.password").validate()


def test_password_and_password_file_together_are_refused() -> None:
    with pytest.raises(ConfigError, match="not both"):
        group(controllerRaftPassword="a", controllerRaftPasswordFile="/x").validate()


def test_a_single_node_generates_its_password_once_with_mode_0600(tmp_path: Path) -> None:
    config = single(tmp_path)
    config.validate()
    password, source = resolve_password(config)
    path = tmp_path / "store" / GENERATED_FILE
    assert mode(path) == 0o600 and path.read_text().strip() == password and len(password) >= 40
    assert source == f"generated file {path} (new)" and password not in source
    assert resolve_password(config) == (password, f"generated file {path}")


def test_a_configured_password_wins_and_nothing_is_generated(tmp_path: Path) -> None:
    assert resolve_password(single(tmp_path, controllerRaftPassword="given")) == ("given", "controllerRaftPassword")
    assert not (tmp_path / "store" / GENERATED_FILE).exists()


def test_the_password_file_is_read_whole_and_trimmed(tmp_path: Path) -> None:
    path = tmp_path / "raft.password"
    write_password_file(path, "  from a file  ")
    config = single(tmp_path, controllerRaftPasswordFile=str(path))
    assert resolve_password(config) == ("from a file", f"controllerRaftPasswordFile {path}")


def test_the_password_file_may_be_a_symbolic_link(tmp_path: Path) -> None:
    target = tmp_path / "secret"
    write_password_file(target, "linked")
    link = tmp_path / "raft.password"
    link.symlink_to(target)
    assert resolve_password(single(tmp_path, controllerRaftPasswordFile=str(link)))[0] == "linked"


@pytest.mark.parametrize("bits", [0o640, 0o604, 0o620])
def test_a_password_file_others_can_access_is_refused(tmp_path: Path, bits: int) -> None:
    path = tmp_path / "raft.password"
    write_password_file(path, "secret")
    os.chmod(path, bits)
    with pytest.raises(ConfigError, match=f"accessible to other users \\(mode {bits:o}\\).*run chmod 600 {path}"):
        resolve_password(single(tmp_path, controllerRaftPasswordFile=str(path)))


def test_the_generated_file_is_checked_like_any_other(tmp_path: Path) -> None:
    config = single(tmp_path)
    resolve_password(config)
    path = tmp_path / "store" / GENERATED_FILE
    os.chmod(path, 0o644)
    with pytest.raises(ConfigError, match="generated Raft password.*chmod 600"):
        resolve_password(config)


def test_a_symbolic_link_in_place_of_the_generated_file_is_refused(tmp_path: Path) -> None:
    config = single(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    write_password_file(elsewhere, "planted")
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / GENERATED_FILE).symlink_to(elsewhere)
    with pytest.raises(ConfigError, match="cannot open"):
        resolve_password(config)


@pytest.mark.parametrize(("content", "message"), [
    (b"", "is empty"), (b" \n\t\n", "is empty"), (b"\xff\xfe", "not UTF-8 text"),
    (b"x" * 5000, "larger than 4096 bytes"),
])
def test_a_bad_password_file_gets_a_clear_error(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "raft.password"
    path.write_bytes(content)
    os.chmod(path, 0o600)
    with pytest.raises(ConfigError, match=message):
        resolve_password(single(tmp_path, controllerRaftPasswordFile=str(path)))


def test_a_missing_password_file_or_a_directory_gets_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        resolve_password(single(tmp_path, controllerRaftPasswordFile=str(tmp_path / "nope")))
    with pytest.raises(ConfigError, match="not a regular file|cannot open"):
        resolve_password(single(tmp_path, controllerRaftPasswordFile=str(tmp_path)))


def test_a_group_that_skipped_validation_still_gets_no_generated_password(tmp_path: Path) -> None:
    config = replace(group(), controllerStorePath=str(tmp_path))
    with pytest.raises(ConfigError, match="no Raft password"):
        resolve_password(config)
    assert not (tmp_path / GENERATED_FILE).exists()


def test_the_password_is_masked_and_neither_setting_can_be_changed_remotely(tmp_path: Path) -> None:
    shown = single(tmp_path, controllerRaftPassword="hidden").as_properties()
    assert shown["controllerRaftPassword"] == "******" and "hidden" not in repr(shown)
    assert single(tmp_path, controllerRaftPasswordFile="/p").as_properties()["controllerRaftPasswordFile"] == "/p"
    assert {"controllerRaftPassword", "controllerRaftPasswordFile"} <= BLACK_LIST
