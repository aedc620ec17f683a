"""Requests signed with the cluster's auth token, in the shape of RocketMQ's ACL signatures (sans-I/O).

Over HTTP the token travels in a header. The remoting protocol has no place for a bearer token, but
RocketMQ's ACL signs a request with a secret key instead: ``AccessKey`` and ``Signature`` extFields, the
signature ``base64(HmacSHA1(secretKey, content))`` where ``content`` is the values of every other
extField in the order of their names (``AclUtils.combineRequestContent``) followed by the body. mqctl
signs the same way with the token as the secret key, so the token itself never leaves the process.

RocketMQ's scheme leaves two holes that matter for a controller: the signature does not cover the
request code, and nothing stops a captured request from being sent again (a replayed heartbeat of a
dead master would keep it "alive" and hold off the failover). So every signed request also carries
``mqctlSigned = "<code>:<epoch millis>"`` (signed like any extField): the verifier refuses a signature
made for another code, one older or newer than ``window_ms`` from its own clock, and any signature it
has already accepted (:class:`ReplayGuard`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import replace

from services.remoting.command import RemotingCommand

__all__ = ["ACCESS_KEY", "DEFAULT_WINDOW_MS", "SIGNATURE", "SIGNED", "ReplayGuard", "Verifier", "content",
           "sign", "signature"]

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SIGNED = "mqctlSigned"
#: The access key mqctl's own clients name (RocketMQ's ACL needs one; the secret is what counts).
MQCTL_ACCESS_KEY = "mqctl"
#: How far a signing time may be from the verifier's clock (hosts' clocks differ a little).
DEFAULT_WINDOW_MS = 60_000
#: Signatures remembered at most; beyond this the oldest are forgotten and the window shrinks to match.
MAX_REMEMBERED = 200_000
#: The longest signature text accepted (base64 of a 20-byte HMAC is 28 characters).
MAX_SIGNATURE = 64


def content(ext_fields: Mapping[str, str], body: bytes) -> bytes:
    """What is signed: every extField value but the signature, in the order of the names, then the body."""
    text = "".join(ext_fields[k] for k in sorted(ext_fields) if k != SIGNATURE)
    return text.encode("utf-8") + body


def signature(secret: str, ext_fields: Mapping[str, str], body: bytes) -> str:
    mac = hmac.new(secret.encode("utf-8"), content(ext_fields, body), hashlib.sha1).digest()
    return base64.b64encode(mac).decode("ascii")


def sign(request: RemotingCommand, secret: str, now_ms: int, access_key: str = MQCTL_ACCESS_KEY) -> RemotingCommand:
    """``request`` with AccessKey, mqctlSigned and Signature added (any earlier ones replaced)."""
    ext = {k: v for k, v in request.ext_fields.items() if k not in (ACCESS_KEY, SIGNATURE, SIGNED)}
    ext[ACCESS_KEY] = access_key
    ext[SIGNED] = f"{request.code}:{now_ms}"
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

    def admit(self, sig: str, signed_ms: int, now_ms: int) -> str | None:
        """None if accepted (and now remembered), else why not."""
        if abs(now_ms - signed_ms) > self.window_ms:
            return (f"the request was signed at {signed_ms}, {abs(now_ms - signed_ms)} ms from this server's clock "
                    f"(at most {self.window_ms} ms are accepted: check the hosts' clocks)")
        self._expire(now_ms)
        if signed_ms <= self._floor_ms:
            return "the request was signed too long ago for this server to tell it from a replay; send it again"
        if sig in self._seen:
            return "this signed request was already received once (a replay)"
        self._seen[sig] = signed_ms
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
    """Checks a request's signature with the token; one per server (its replay memory is shared)."""

    def __init__(self, secret: str, window_ms: int = DEFAULT_WINDOW_MS, capacity: int = MAX_REMEMBERED) -> None:
        self.secret = secret
        self.guard = ReplayGuard(window_ms, capacity)

    def check(self, request: RemotingCommand, now_ms: int) -> str | None:
        """None if ``request`` is signed with the token, fresh and not seen before; else why it is refused."""
        ext = request.ext_fields
        given = ext.get(SIGNATURE)
        stamp = ext.get(SIGNED)
        if not given or stamp is None or ACCESS_KEY not in ext:
            return ("this server requires requests signed with its auth token (AccessKey, Signature and "
                    f"{SIGNED} extFields)")
        code_text, _, time_text = stamp.partition(":")
        if not (code_text.isdigit() and time_text.isdigit() and len(code_text) <= 6 and len(time_text) <= 16):
            return f"{SIGNED} must be <request code>:<epoch millis>, got {stamp[:40]!r}"
        if int(code_text) != request.code:
            return f"the signature was made for request code {code_text}, not {request.code}"
        if len(given) > MAX_SIGNATURE or not hmac.compare_digest(
                given.encode("ascii", "replace"), signature(self.secret, ext, request.body).encode("ascii")):
            return "the signature does not match: the auth token differs, or the request was changed"
        return self.guard.admit(given, int(time_text), now_ms)
