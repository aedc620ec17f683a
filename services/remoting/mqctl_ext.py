"""What mqctl's brokers add to RocketMQ's controller requests: fields and one request that RocketMQ does not
have, for the safety features RocketMQ lacks (see docs/security.md).

* ``publicKey`` on 1013 CONTROLLER_APPLY_BROKER_ID and 1003 CONTROLLER_REGISTER_BROKER: the broker's
  Ed25519 key, bound to its id by the controller (services/common/signing.py);
* ``signature`` on 1001 CONTROLLER_ALTER_SYNC_STATE_SET: the master's signature over the change;
* ``signature`` and ``signedAt`` on 103 REGISTER_BROKER: the broker's signature over its registration
  (services/common/signing.request_message), so that a name server that holds its key knows it is the
  broker's (a RocketMQ name server ignores both);
* ``asyncLearner`` on 904 BROKER_HEARTBEAT: the broker replicates but never joins the SyncStateSet;
* ``incarnation`` on 904: which process of the broker sends it (controller/heartbeat.py);
* 88001 GET_BROKER_KEYS: the keys the controller holds for a group (a slave checks its master's with it);
* 88002 GET_TRANSACTION_PROGRESS (broker to broker): the master's transaction check progress, which its slaves
  copy (services/broker/transaction/progress.py).

Extra extFields are ignored by RocketMQ's header decoding, so a RocketMQ controller reads these requests
as its own; a RocketMQ broker sends none of them and our controller treats it as a broker without a key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from services.remoting.bodies import Body, _broker_addrs, _Obj
from services.remoting.errors import BodyError, HeaderFieldError
from services.remoting.headers import CustomHeader, RegisterBrokerRequestHeader, _bool, _long, _string

__all__ = ["GET_BROKER_KEYS", "GET_TRANSACTION_PROGRESS", "REGISTRATION_SIGNED_FIELDS", "SIGNED_AT", "BrokerExtension", "BrokerKeys",
           "BrokerKeysRequestHeader"]

#: mqctl's own request code (RocketMQ's codes leave 88001 unused).
GET_BROKER_KEYS = 88001
GET_TRANSACTION_PROGRESS = 88002

SIGNED_AT = "signedAt"
#: What a broker's key signs in a registration (103): every field a name server reads (MixAll.ZONE_NAME
#: included) and the signing time.
REGISTRATION_SIGNED_FIELDS = (*RegisterBrokerRequestHeader.wire_names(), "__ZONE_NAME", SIGNED_AT)

_PUBLIC_KEY = re.compile(r"([0-9a-f]{64})?")
_SIGNATURE = re.compile(r"([0-9a-f]{128})?")


@dataclass(frozen=True, kw_only=True)
class BrokerExtension(CustomHeader):
    """The fields an mqctl broker adds to RocketMQ's controller requests (each absent from RocketMQ's)."""

    public_key: str | None = _string("publicKey")
    signature: str | None = _string("signature")
    async_learner: bool = _bool("asyncLearner", default=False)
    incarnation: int | None = _long("incarnation")
    signed_at: int | None = _long(SIGNED_AT)

    def _check(self) -> None:
        if self.public_key is not None and not _PUBLIC_KEY.fullmatch(self.public_key):
            raise HeaderFieldError(type(self).__name__, "publicKey", "must be 64 lower-case hex characters")
        if self.signature is not None and not _SIGNATURE.fullmatch(self.signature):
            raise HeaderFieldError(type(self).__name__, "signature", "must be 128 lower-case hex characters")
        if self.incarnation is not None and self.incarnation < 0:
            raise HeaderFieldError(type(self).__name__, "incarnation", "must not be negative")


@dataclass(frozen=True, kw_only=True)
class BrokerKeysRequestHeader(CustomHeader):
    broker_name: str = _string("brokerName", required=True, default="")


@dataclass(frozen=True)
class BrokerKeys(Body):
    """The answer's body: ``{"brokerKeys":{1:"<hex>",2:""}}``, broker id to public key ("" for none)."""

    keys: dict[int, str]

    def to_json(self) -> dict[str, Any]:
        return {"brokerKeys": self.keys}

    @classmethod
    def read(cls, obj: _Obj) -> BrokerKeys:
        keys = _broker_addrs(obj, "brokerKeys")
        for broker_id, key in keys.items():
            if not _PUBLIC_KEY.fullmatch(key):
                raise BodyError(f"brokerKeys: the key of broker id {broker_id} is not 64 lower-case hex characters")
        return cls(keys)
