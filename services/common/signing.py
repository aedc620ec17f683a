"""Ed25519 signatures by broker keys, checked wherever a broker's identity matters: on the replication link
(services/broker/ha/auth.py) and by the controller for the writes only a group's master may make.

A broker's public key is 64 lower-case hex characters; the controller binds it to the broker's id once
(see ``ReplicasInfoManager.apply_broker_id``). Each signed message starts with a label naming its purpose,
so a signature made for one purpose never verifies for another.
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Iterable, Mapping

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

SIGNATURE_SIZE = 64
PUBLIC_KEY_HEX = re.compile(r"[0-9a-f]{64}")
SIGNATURE_HEX = re.compile(r"[0-9a-f]{128}")

ALTER_LABEL = b"mqctl-alter-sync-state-set-v1"
#: A broker's registration with a name server (103), signed with its key.
REGISTER_LABEL = b"mqctl-namesrv-register-v1"


def valid_public_key(text: str) -> bool:
    """64 lower-case hex characters: the raw 32-byte Ed25519 public key."""
    return bool(PUBLIC_KEY_HEX.fullmatch(text))


def verify(public_key_hex: str, signature: bytes, message: bytes) -> bool:
    if not valid_public_key(public_key_hex) or len(signature) != SIGNATURE_SIZE:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_key_hex)).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def alter_message(broker_name: str, master_id: int, master_epoch: int, members: Iterable[int],
                  sync_state_set_epoch: int) -> bytes:
    """What a master signs to alter its SyncStateSet. The set epoch it names changes with every committed
    alter, so a signature cannot be replayed once its alter (or any other) has committed."""
    name = broker_name.encode("utf-8")
    ids = sorted(set(members))
    return (ALTER_LABEL + struct.pack(">qiiH", master_id, master_epoch, sync_state_set_epoch, len(name)) + name
            + struct.pack(f">{len(ids)}q", *ids))


def alter_signature_ok(public_key_hex: str, signature_hex: str, broker_name: str, master_id: int,
                       master_epoch: int, members: Iterable[int], sync_state_set_epoch: int) -> bool:
    if not SIGNATURE_HEX.fullmatch(signature_hex):
        return False
    message = alter_message(broker_name, master_id, master_epoch, members, sync_state_set_epoch)
    return verify(public_key_hex, bytes.fromhex(signature_hex), message)


def request_message(label: bytes, code: int, ext_fields: Mapping[str, str], names: Iterable[str],
                    body: bytes) -> bytes:
    """A remoting request as a broker signs it: the label, the request code, each of ``names`` (sorted) with
    its value or a mark for its absence, every string preceded by its length, then the body's SHA-256.
    No two different requests give the same bytes, so nothing can be moved from one field to another."""
    out = [label, struct.pack(">i", code)]
    for name in sorted(set(names)):
        value = ext_fields.get(name)
        out.append(_text(name))
        out.append(b"\x00" if value is None else b"\x01" + _text(value))
    out.append(hashlib.sha256(body).digest())
    return b"".join(out)


def _text(value: str) -> bytes:
    raw = value.encode("utf-8", "surrogatepass")
    return struct.pack(">I", len(raw)) + raw


def signature_ok(public_key_hex: str, signature_hex: str, message: bytes) -> bool:
    return bool(SIGNATURE_HEX.fullmatch(signature_hex)) and verify(public_key_hex, bytes.fromhex(signature_hex),
                                                                  message)
