"""Requests signed with the cluster's auth token (sans-I/O).

Over HTTP the token travels in a header. The remoting protocol has no place for a bearer token; RocketMQ's
ACL signs a request with a secret key instead: ``AccessKey`` and ``Signature`` extFields, the signature
``base64(HmacSHA1(secretKey, content))`` where ``content`` is the values of every other extField in the
order of their names (``AclUtils.combineRequestContent``) followed by the body.

That content is ambiguous: the values are joined with nothing between them and without their names, so
``brokerId=1, brokerName=2x`` and ``brokerId=12, brokerName=x`` sign the same bytes, and whoever sits on the
path can move characters between neighbouring fields without breaking the signature (a heartbeat's epoch 1
becomes 130 by taking "30" from the timeout after it). Nor does it cover the request code or a time.

So mqctl signs its own requests over a canonical encoding (:func:`canonical`), in ``mqctlSignature``
(HMAC-SHA256 with the token as the key, base64): a label, the request code, the number of fields, each
extField as (length, name, length, value) in name order, then the body's length and the body. Nothing can
move from one field to another, or between the fields and the body. The fields include
``mqctlSigned = "<code>:<epoch millis>"``, so the time is covered as well. The verifier refuses a signature
made for another code, one older or newer than ``window_ms`` from its own clock, and any signature it has
already accepted (:class:`ReplayGuard`); the token itself never leaves the process.

Every signed request still carries RocketMQ's ``Signature`` too (over all the other fields, the new ones
included), for a RocketMQ server with ACL, which checks only that one (a RocketMQ broker receiving a
controller's 1008, or mqctl's requests to it): what such a server accepts stays as malleable as RocketMQ
made it. mqctl's servers never accept RocketMQ's signature alone (it binds no code and no time, so a captured
request would be good forever); mqctl's own older form (RocketMQ's signature plus ``mqctlSigned``, without
``mqctlSignature``) only when told to (``accept_legacy``, for the time of an upgrade).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import replace

from services.remoting.command import RemotingCommand

__all__ = ["ACCESS_KEY", "BOUND", "DEFAULT_WINDOW_MS", "SIGNATURE", "SIGNED", "ReplayGuard", "Verifier",
           "bound_signature", "canonical", "content", "sign", "signature"]

ACCESS_KEY = "AccessKey"
#: RocketMQ's ACL signature (malleable; kept for RocketMQ servers that check it).
SIGNATURE = "Signature"
SIGNED = "mqctlSigned"
#: mqctl's signature over :func:`canonical`: what mqctl's servers check.
BOUND = "mqctlSignature"
#: The access key mqctl's own clients name (RocketMQ's ACL needs one; the secret is what counts).
MQCTL_ACCESS_KEY = "mqctl"
#: How far a signing time may be from the verifier's clock (hosts' clocks differ a little).
DEFAULT_WINDOW_MS = 60_000
#: Signatures remembered at most; beyond this the oldest are forgotten and the window shrinks to match.
MAX_REMEMBERED = 200_000
#: The longest signature text accepted (base64 of a 32-byte HMAC is 44 characters).
MAX_SIGNATURE = 64
#: Starts what :func:`canonical` encodes, so that no other message signed with the token reads the same.
LABEL = b"mqctl-remoting-request-v2\x00"
_NOT_SIGNED_FIELDS = (SIGNATURE, BOUND)


def content(ext_fields: Mapping[str, str], body: bytes) -> bytes:
    """RocketMQ's content: every extField value but the signature, in the order of the names, then the body."""
    text = "".join(ext_fields[k] for k in sorted(ext_fields) if k != SIGNATURE)
    return text.encode("utf-8", "surrogatepass") + body


def signature(secret: str, ext_fields: Mapping[str, str], body: bytes) -> str:
    """RocketMQ's ACL signature: base64 of HmacSHA1 over :func:`content`."""
    mac = hmac.new(secret.encode("utf-8"), content(ext_fields, body), hashlib.sha1).digest()
    return base64.b64encode(mac).decode("ascii")


def _text(value: str) -> bytes:
    encoded = value.encode("utf-8", "surrogatepass")  # any str a header may hold, never an exception
    return struct.pack(">I", len(encoded)) + encoded


def canonical(code: int, ext_fields: Mapping[str, str], body: bytes) -> bytes:
    """What ``mqctlSignature`` signs, every length big-endian::

        LABEL | code (int32) | n (uint32) | n x [ len (uint32) | name | len (uint32) | value ] | len (uint64) | body

    The fields are every extField but the two signatures, in the order of their names (UTF-8)."""
    names = sorted(k for k in ext_fields if k not in _NOT_SIGNED_FIELDS)
    parts = [LABEL, struct.pack(">iI", code, len(names))]
    for name in names:
        parts += (_text(name), _text(ext_fields[name]))
    parts += (struct.pack(">Q", len(body)), body)
    return b"".join(parts)


def bound_signature(secret: str, code: int, ext_fields: Mapping[str, str], body: bytes) -> str:
    mac = hmac.new(secret.encode("utf-8"), canonical(code, ext_fields, body), hashlib.sha256).digest()
    return base64.b64encode(mac).decode("ascii")


def sign(request: RemotingCommand, secret: str, now_ms: int, access_key: str = MQCTL_ACCESS_KEY) -> RemotingCommand:
    """``request`` with AccessKey, mqctlSigned, mqctlSignature and RocketMQ's Signature added (any earlier
    ones replaced)."""
    ext = {k: v for k, v in request.ext_fields.items() if k not in (ACCESS_KEY, SIGNED, *_NOT_SIGNED_FIELDS)}
    ext[ACCESS_KEY] = access_key
    ext[SIGNED] = f"{request.code}:{now_ms}"
    ext[BOUND] = bound_signature(secret, request.code, ext, request.body)
    ext[SIGNATURE] = signature(secret, ext, request.body)
    return replace(request, ext_fields=ext)


class ReplayGuard:
    """The signatures accepted within the window, so none is accepted twice. Bounded: when full, the
    oldest are forgotten and anything signed no later than the newest forgotten one is refused."""

    def __init__(self, window_ms: int = DEFAULT_WINDOW_MS, capacity: int = MAX_REMEMBERED) -> None:
        self.window_ms = window_ms
        self.capacity = capacity
        self._seen: OrderedDict[str, int] = OrderedDict()  # signature -> signing time, oldest first
        self._floor_ms = -(2**63)

    def admit(self, sig: str, signed_ms: int, now_ms: int, also: str = "") -> str | None:
        """None if accepted (and now remembered), else why not. ``also``: another signature the same request
        carries, remembered with it (and refused if seen)."""
        if abs(now_ms - signed_ms) > self.window_ms:
            return (f"the request was signed at {signed_ms}, {abs(now_ms - signed_ms)} ms from this server's clock "
                    f"(at most {self.window_ms} ms are accepted: check the hosts' clocks)")
        self._expire(now_ms)
        if signed_ms <= self._floor_ms:
            return "the request was signed too long ago for this server to tell it from a replay; send it again"
        keys = (sig, also) if also else (sig,)
        if any(key in self._seen for key in keys):
            return "this signed request was already received once (a replay)"
        for key in keys:
            self._seen[key] = signed_ms
        while len(self._seen) > self.capacity:
            _, forgotten = self._seen.popitem(last=False)
            self._floor_ms = max(self._floor_ms, forgotten)
        return None

    def _expire(self, now_ms: int) -> None:
        # Entries arrive roughly in signing order; an out-of-order one just lives a little longer.
        while self._seen:
            sig, signed_ms = next(iter(self._seen.items()))
            if signed_ms >= now_ms - self.window_ms:
                break
            del self._seen[sig]

    def __len__(self) -> int:
        return len(self._seen)


class Verifier:
    """Checks a request's signature with the token; one per server (its replay memory is shared).
    ``accept_legacy``: also take mqctl's older form (RocketMQ's signature plus ``mqctlSigned``), malleable,
    while a cluster is upgraded."""

    def __init__(self, secret: str, window_ms: int = DEFAULT_WINDOW_MS, capacity: int = MAX_REMEMBERED,
                 accept_legacy: bool = False) -> None:
        self.secret = secret
        self.accept_legacy = accept_legacy
        self.guard = ReplayGuard(window_ms, capacity)

    def check(self, request: RemotingCommand, now_ms: int) -> str | None:
        """None if ``request`` is signed with the token, fresh and not seen before; else why it is refused."""
        ext = request.ext_fields
        stamp = ext.get(SIGNED)
        if stamp is None or ACCESS_KEY not in ext:
            return _unsigned_reason(ext)
        signed_ms, problem = _read_stamp(stamp, request.code)
        if problem is not None:
            return problem
        if BOUND in ext:
            expected, given, also = bound_signature(self.secret, request.code, ext, request.body), ext[BOUND], ""
            if self.accept_legacy:
                also = ext.get(SIGNATURE, "")  # the same request stripped to the older form is a replay too
        elif self.accept_legacy and ext.get(SIGNATURE):
            expected, given, also = signature(self.secret, ext, request.body), ext[SIGNATURE], ""
        else:
            return LEGACY_REFUSED
        if len(given) > MAX_SIGNATURE or not hmac.compare_digest(given.encode("ascii", "replace"),
                                                                 expected.encode("ascii")):
            return "the signature does not match: the auth token differs, or the request was changed"
        return self.guard.admit(given, signed_ms, now_ms, also)


LEGACY_REFUSED = (f"the request is signed in mqctl's older form (RocketMQ's {SIGNATURE} with {SIGNED}, no {BOUND}), "
                  "which does not tie values to field names: upgrade the sender (a controller takes the older form "
                  "while acceptLegacySignatures=true, for the time of an upgrade)")


def _unsigned_reason(ext: Mapping[str, str]) -> str:
    if ext.get(SIGNATURE) and ACCESS_KEY in ext:
        return (f"RocketMQ's ACL signature alone ({ACCESS_KEY}, {SIGNATURE}) is not accepted: it covers neither the "
                "request code nor a time and does not tie values to field names, so it could be replayed or "
                f"rewritten; sign the request as mqctl does ({SIGNED} and {BOUND}) with this server's auth token")
    return (f"this server requires requests signed with its auth token ({ACCESS_KEY}, {SIGNED} and {BOUND} "
            "extFields, as mqctl signs them)")


def _read_stamp(stamp: str, code: int) -> tuple[int, str | None]:
    """The signing time in ``mqctlSigned``, or why the stamp is refused."""
    code_text, _, time_text = stamp.partition(":")
    if not (code_text.isdigit() and time_text.isdigit() and len(code_text) <= 6 and len(time_text) <= 16):
        return 0, f"{SIGNED} must be <request code>:<epoch millis>, got {stamp[:40]!r}"
    if int(code_text) != code:
        return 0, f"the signature was made for request code {code_text}, not {code}"
    return int(time_text), None
