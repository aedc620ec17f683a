"""Replication-link authentication (ha/auth.py): signatures bind both ids, the epoch and both nonces,
cannot be reflected between roles, and the key file is private and durable."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from services.broker.ha.auth import (
    Binding,
    BrokerKey,
    master_proof_ok,
    slave_proof_ok,
    valid_public_key,
    verify,
)
from services.common.errors import ConfigError

MASTER, SLAVE = BrokerKey.generate(), BrokerKey.generate()
BINDING = Binding("broker-a", 1, 2, 7, b"m" * 32, b"s" * 32)


def test_each_side_proves_itself_with_its_own_key() -> None:
    assert master_proof_ok(MASTER.public_hex, BINDING, MASTER.sign_as_master(BINDING))
    assert slave_proof_ok(SLAVE.public_hex, BINDING, SLAVE.sign_as_slave(BINDING))
    assert not slave_proof_ok(SLAVE.public_hex, BINDING, MASTER.sign_as_slave(BINDING))


def test_a_signature_cannot_be_reflected_to_the_other_role() -> None:
    # A slave key that signed as master (e.g. the same broker when it was master) proves nothing as slave.
    assert not slave_proof_ok(SLAVE.public_hex, BINDING, SLAVE.sign_as_master(BINDING))
    assert not master_proof_ok(MASTER.public_hex, BINDING, MASTER.sign_as_slave(BINDING))


@pytest.mark.parametrize("change", [
    {"broker_name": "broker-b"}, {"master_id": 3}, {"slave_id": 3}, {"master_epoch": 8},
    {"master_nonce": b"x" * 32}, {"slave_nonce": b"x" * 32},
])
def test_a_signature_is_bound_to_every_field(change: dict[str, object]) -> None:
    signature = SLAVE.sign_as_slave(BINDING)
    assert not slave_proof_ok(SLAVE.public_hex, replace(BINDING, **change), signature)  # type: ignore[arg-type]


def test_malformed_keys_and_signatures_are_refused_not_raised() -> None:
    signature = SLAVE.sign_as_slave(BINDING)
    for key in ("", "zz" * 32, SLAVE.public_hex.upper(), SLAVE.public_hex[:-2], "00" * 32):
        assert not slave_proof_ok(key, BINDING, signature)
    assert not verify(SLAVE.public_hex, signature[:-1], b"x")
    assert valid_public_key(SLAVE.public_hex) and not valid_public_key(SLAVE.public_hex + "0")


def test_the_key_file_is_created_private_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "store" / "brokerIdentity.key"
    key = BrokerKey.load_or_create(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert BrokerKey.load_or_create(path).public_hex == key.public_hex


def test_a_key_file_others_can_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "brokerIdentity.key"
    BrokerKey.load_or_create(path)
    os.chmod(path, 0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        BrokerKey.load_or_create(path)


@pytest.mark.parametrize("content", [b"", b"not hex\n", b"00" * 31, b"\xff\xfe", b"11" * 33])
def test_a_damaged_key_file_is_refused_with_the_way_out(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "brokerIdentity.key"
    path.write_bytes(content)
    os.chmod(path, 0o600)
    with pytest.raises(ConfigError, match="broker key damaged or lost"):
        BrokerKey.load_or_create(path)


def test_a_group_key_from_the_token_is_the_same_for_every_holder_and_only_for_them() -> None:
    key = BrokerKey.from_token("s3cret", "DefaultCluster", "broker-a")
    assert BrokerKey.from_token("s3cret", "DefaultCluster", "broker-a").public_hex == key.public_hex
    others = {BrokerKey.from_token(*names).public_hex for names in (
        ("other", "DefaultCluster", "broker-a"), ("s3cret", "DefaultCluster", "broker-b"),
        ("s3cret", "DefaultClusterb", "roker-a"), ("s3cret", "DefaultCluste", "rbroker-a"))}
    assert key.public_hex not in others and len(others) == 4
    binding = Binding("broker-a", 1, 2, 3, b"m" * 32, b"s" * 32)
    assert slave_proof_ok(key.public_hex, binding, key.sign_as_slave(binding))
