"""Mutual authentication of the replication link, without I/O.

Theory of operation
-------------------
Every broker holds an Ed25519 signing key of its own (:class:`BrokerKey`, a 0600 file beside its
identity file) and gives the controller the public half when it applies for its broker id (or, for a
broker that registered before keys existed, on its first registration: trust on first use). The
controller never accepts a different key for that id afterwards, and anyone may read the public keys.

A replication connection is accepted only when both ends prove they hold the key the controller has
for the broker id they claim:

1. slave → master: handshake (its broker id), then a hello carrying a fresh 32-byte nonce ``ns``;
2. master → slave: a challenge carrying the master's broker id, its masterEpoch, a fresh nonce ``nm``
   and the master's signature over the *binding* (label ``master``, group, both ids, epoch, both nonces);
3. the slave checks the master id is the master the controller named, and the signature with that
   broker's public key from the controller; then answers with its own signature over the same binding
   under the label ``slave``;
4. the master checks it with the public key the controller holds for the claimed slave id. Only then
   does it send its epoch entries, count the slave's acks, or let the connection replace an older one
   from the same id.

Both nonces and both ids are in what each side signs, and the labels differ, so a signature can be
neither replayed on another connection nor reflected back to its signer. What this does not give is
integrity of the stream after the handshake: a machine on the path could still inject bytes into an
established TCP connection (encrypting the link is the job of TLS; see docs/security.md).

Under controllers that hold no keys (RocketMQ's: ``brokerKeySource=authToken``), every broker of a group
derives one key from the cluster's ``authToken`` and the group's name (:meth:`BrokerKey.from_token`) and
takes it as the key of every id the controllers list for the group: a connection then proves that both
ends hold the token, and the ids still come from the controllers.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from services.common.durable import atomic_write
from services.common.errors import ConfigError
from services.common.signing import SIGNATURE_SIZE, alter_message, valid_public_key, verify

__all__ = ["NONCE_SIZE", "SIGNATURE_SIZE", "Binding", "BrokerKey", "master_proof_ok", "new_nonce",
           "slave_proof_ok", "valid_public_key", "verify"]

NONCE_SIZE = 32

MASTER_LABEL = b"mqctl-ha-master-v1"
GROUP_KEY_LABEL = b"mqctl-ha-group-key-v1"
SLAVE_LABEL = b"mqctl-ha-slave-v1"


def new_nonce() -> bytes:
    return os.urandom(NONCE_SIZE)


@dataclass(frozen=True)
class Binding:
    """What one replication connection is: who, in which group and epoch, with which nonces."""

    broker_name: str
    master_id: int
    slave_id: int
    master_epoch: int
    master_nonce: bytes
    slave_nonce: bytes

    def message(self, label: bytes) -> bytes:
        name = self.broker_name.encode("utf-8")
        return (label + struct.pack(">qqiH", self.master_id, self.slave_id, self.master_epoch, len(name)) + name
                + self.master_nonce + self.slave_nonce)


class BrokerKey:
    """A broker's signing key and the file that keeps it."""

    def __init__(self, private: Ed25519PrivateKey) -> None:
        self._private = private
        self.public_hex = private.public_key().public_bytes_raw().hex()

    @classmethod
    def generate(cls) -> BrokerKey:
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_token(cls, token: str, cluster: str, broker_name: str) -> BrokerKey:
        """The group's key, the same for every broker holding ``token``: its seed is an HMAC of the
        cluster and group names (each with its length, so no two pairs give one seed) under the token."""
        names = b"".join(struct.pack(">H", len(n)) + n for n in (cluster.encode(), broker_name.encode()))
        seed = hmac.new(token.encode("utf-8"), GROUP_KEY_LABEL + names, hashlib.sha256).digest()
        return cls(Ed25519PrivateKey.from_private_bytes(seed))

    @classmethod
    def load_or_create(cls, path: Path) -> BrokerKey:
        """The key in ``path``; a new one (written durably, mode 0600) when the file does not exist.
        A file that exists but is not a key, or that others can read, stops the broker: a replaced key
        would no longer match the one the controller holds for this broker."""
        try:
            mode = path.stat().st_mode
        except FileNotFoundError:
            key = cls.generate()
            atomic_write(path, key._private.private_bytes_raw().hex() + "\n", mode=0o600)
            return key
        if mode & 0o077:
            raise ConfigError(f"the broker key {path} is readable by other users (mode {mode & 0o777:o}); "
                              f"run: chmod 600 {path}")
        try:
            raw = bytes.fromhex(path.read_text("ascii").strip())
            return cls(Ed25519PrivateKey.from_private_bytes(raw))
        except (UnicodeDecodeError, ValueError) as exc:
            raise ConfigError(f"the broker key {path} is damaged ({exc}). See docs/operations.md, "
                              "'broker key damaged or lost'") from None

    def sign(self, message: bytes) -> bytes:
        return self._private.sign(message)

    def sign_as_master(self, binding: Binding) -> bytes:
        return self.sign(binding.message(MASTER_LABEL))

    def sign_as_slave(self, binding: Binding) -> bytes:
        return self.sign(binding.message(SLAVE_LABEL))

    def sign_alter(self, broker_name: str, master_id: int, master_epoch: int, members: list[int],
                   sync_state_set_epoch: int) -> str:
        """This master's signature (hex) over a SyncStateSet change it asks the controller for."""
        return self.sign(alter_message(broker_name, master_id, master_epoch, members, sync_state_set_epoch)).hex()


def master_proof_ok(public_key_hex: str, binding: Binding, signature: bytes) -> bool:
    return verify(public_key_hex, signature, binding.message(MASTER_LABEL))


def slave_proof_ok(public_key_hex: str, binding: Binding, signature: bytes) -> bool:
    return verify(public_key_hex, signature, binding.message(SLAVE_LABEL))
