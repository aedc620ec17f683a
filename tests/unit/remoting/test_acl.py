"""Signed remoting requests (services/remoting/acl.py): RocketMQ's ACL signature, plus code, time and replay
checks."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from services.remoting.acl import (
    ACCESS_KEY,
    SIGNATURE,
    SIGNED,
    ReplayGuard,
    Verifier,
    content,
    sign,
    signature,
)
from services.remoting.bodies import SyncStateSet
from services.remoting.command import RequestCode, make_request
from services.remoting.mqctl_ext import BrokerExtension, BrokerKeys

NOW = 1_790_000_000_000
SECRET = "s3cret"


def heartbeat(**fields: str) -> object:
    return make_request(RequestCode.BROKER_HEARTBEAT, 7, {"brokerName": "broker-a", "brokerId": "1", **fields},
                        oneway=True)


def test_the_signature_is_rocketmqs_hmac_sha1_in_base64() -> None:
    # AclSignerTest.calSignatureTest: calSignature("RocketMQ", "12345678")
    assert signature("12345678", {}, b"RocketMQ") == "IUc8rrO/0gDch8CjObLQsW2rsiA="


def test_the_content_is_the_values_in_name_order_without_the_signature_then_the_body() -> None:
    ext = {"topic": "T", "AccessKey": "ak", "Signature": "x", "consumerGroup": "g", "queueId": "1"}
    assert content(ext, b"BODY") == b"akg1TBODY"  # AccessKey, consumerGroup, queueId, topic


def test_a_signed_request_is_accepted_once() -> None:
    verifier = Verifier(SECRET)
    request = sign(heartbeat(), SECRET, NOW)
    assert request.ext_fields[ACCESS_KEY] == "mqctl" and request.ext_fields[SIGNED] == f"904:{NOW}"
    assert verifier.check(request, NOW + 5) is None
    replayed = verifier.check(replace(request, opaque=99), NOW + 10)
    assert replayed is not None and "replay" in replayed
    assert verifier.check(sign(heartbeat(), SECRET, NOW + 1), NOW + 10) is None  # a new one is fine


def test_a_changed_field_body_or_code_or_the_wrong_secret_is_refused() -> None:
    verifier = Verifier(SECRET)
    request = sign(make_request(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, 1, {"brokerName": "broker-a"},
                                SyncStateSet(frozenset({1, 2}), 3).encode()), SECRET, NOW)
    changed = replace(request, ext_fields={**request.ext_fields, "brokerName": "broker-b"})
    assert "does not match" in (verifier.check(changed, NOW) or "")
    other_body = replace(request, body=SyncStateSet(frozenset({1}), 3).encode())
    assert "does not match" in (verifier.check(other_body, NOW) or "")
    other_code = replace(request, code=RequestCode.CONTROLLER_ELECT_MASTER)
    assert "made for request code 1001, not 1002" in (verifier.check(other_code, NOW) or "")
    assert "does not match" in (Verifier("other").check(request, NOW) or "")
    assert verifier.check(request, NOW) is None  # the untouched one still passes


def test_unsigned_stale_future_and_malformed_requests_are_refused_with_a_reason() -> None:
    verifier = Verifier(SECRET, window_ms=60_000)
    assert "requires requests signed" in (verifier.check(heartbeat(), NOW) or "")
    assert "clock" in (verifier.check(sign(heartbeat(), SECRET, NOW - 61_000), NOW) or "")
    assert "clock" in (verifier.check(sign(heartbeat(), SECRET, NOW + 61_000), NOW) or "")
    bad_stamp = sign(heartbeat(), SECRET, NOW)
    for stamp in ("904", "x:1", "904:-5", "904:" + "9" * 40, ":"):
        forged = replace(bad_stamp, ext_fields={**bad_stamp.ext_fields, SIGNED: stamp})
        assert SIGNED in (verifier.check(forged, NOW) or ""), stamp
    huge = replace(bad_stamp, ext_fields={**bad_stamp.ext_fields, SIGNATURE: "A" * 10_000})
    assert "does not match" in (verifier.check(huge, NOW) or "")
    unicode = replace(bad_stamp, ext_fields={**bad_stamp.ext_fields, SIGNATURE: "é" * 28})
    assert "does not match" in (verifier.check(unicode, NOW) or "")


def test_the_replay_memory_is_bounded_and_never_forgets_into_a_hole() -> None:
    guard = ReplayGuard(window_ms=60_000, capacity=3)
    for i in range(5):
        assert guard.admit(f"s{i}", NOW + i, NOW + i) is None
    assert len(guard) == 3
    # s0 and s1 were forgotten: anything signed no later than s1 is refused, even if it looks new
    assert "too long ago" in (guard.admit("s0", NOW, NOW + 10) or "")
    assert "too long ago" in (guard.admit("fresh-but-old", NOW + 1, NOW + 10) or "")
    assert guard.admit("s5", NOW + 5, NOW + 10) is None
    # signatures leave the memory when they leave the window
    assert guard.admit("late", NOW + 100_000, NOW + 100_000) is None
    assert len(guard) == 1


@given(st.dictionaries(st.text(max_size=12), st.text(max_size=40), max_size=8), st.binary(max_size=64),
       st.integers(min_value=0, max_value=2**40))
def test_any_fields_get_an_answer_never_an_exception(ext: dict[str, str], body: bytes, now: int) -> None:
    request = make_request(RequestCode.BROKER_HEARTBEAT, 1, ext, body)
    verdict = Verifier(SECRET).check(request, now)
    assert verdict is None or isinstance(verdict, str)


def test_the_broker_extension_fields_are_checked_and_the_keys_body_round_trips() -> None:
    key = "ab" * 32
    fields = BrokerExtension(public_key=key, signature="cd" * 64, async_learner=True).to_ext_fields()
    assert fields == {"publicKey": key, "signature": "cd" * 64, "asyncLearner": "true"}
    assert BrokerExtension.from_ext_fields({"brokerName": "x"}) == BrokerExtension()
    for bad in ({"publicKey": "AB" * 32}, {"signature": "zz"}, {"asyncLearner": "maybe"}):
        try:
            BrokerExtension.from_ext_fields(bad)
        except ValueError:
            continue
        raise AssertionError(bad)
    body = BrokerKeys({1: key, 2: ""}).encode()
    assert body == b'{"brokerKeys":{1:"' + key.encode() + b'",2:""}}'
    assert BrokerKeys.decode(body).keys == {1: key, 2: ""}
