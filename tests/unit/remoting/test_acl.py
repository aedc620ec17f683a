"""Signed remoting requests (services/remoting/acl.py): mqctl's signature over a canonical encoding (names,
lengths, code, time, body), RocketMQ's ACL signature beside it, and the time and replay checks."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from services.remoting.acl import (
    ACCESS_KEY,
    BOUND,
    LABEL,
    SIGNATURE,
    SIGNED,
    ReplayGuard,
    Verifier,
    canonical,
    content,
    sign,
    signature,
)
from services.remoting.bodies import SyncStateSet
from services.remoting.command import RemotingCommand, RequestCode, make_request
from services.remoting.mqctl_ext import BrokerExtension, BrokerKeys

NOW = 1_790_000_000_000
SECRET = "s3cret"


def heartbeat(**fields: str) -> RemotingCommand:
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
    assert len(request.ext_fields[BOUND]) == 44  # base64 of HMAC-SHA256
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
    huge = replace(bad_stamp, ext_fields={**bad_stamp.ext_fields, BOUND: "A" * 10_000})
    assert "does not match" in (verifier.check(huge, NOW) or "")
    unicode = replace(bad_stamp, ext_fields={**bad_stamp.ext_fields, BOUND: "é" * 44})
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


def shifted(request: RemotingCommand, left: str, right: str, count: int) -> RemotingCommand:
    """The first ``count`` characters of ``right`` moved to the end of its neighbour ``left``."""
    ext = dict(request.ext_fields)
    ext[left], ext[right] = ext[left] + ext[right][:count], ext[right][count:]
    return replace(request, ext_fields=ext)


def full_heartbeat(now: int = NOW) -> RemotingCommand:
    return sign(make_request(RequestCode.BROKER_HEARTBEAT, 7, {
        "clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911", "brokerId": "1",
        "epoch": "1", "heartbeatTimeoutMills": "30000", "maxOffset": "0"}, oneway=True), SECRET, now)


def test_moving_characters_between_neighbouring_fields_keeps_rocketmqs_content_but_is_refused() -> None:
    request = full_heartbeat()
    forged = shifted(request, "epoch", "heartbeatTimeoutMills", 2)  # the epoch 1 -> 130
    assert (forged.ext_fields["epoch"], forged.ext_fields["heartbeatTimeoutMills"]) == ("130", "000")
    assert content(forged.ext_fields, b"") == content(request.ext_fields, b"")  # RocketMQ's check cannot tell
    assert signature(SECRET, forged.ext_fields, b"") == forged.ext_fields[SIGNATURE]
    assert "does not match" in (Verifier(SECRET).check(forged, NOW) or "")
    assert Verifier(SECRET).check(request, NOW) is None


def test_moving_bytes_between_the_last_field_and_the_body_is_refused() -> None:
    request = sign(make_request(RequestCode.QUERY_DATA_VERSION, 1, {"brokerName": "b", "zz": "ab"}, b"cd"), SECRET,
                   NOW)
    assert max(request.ext_fields) == "zz"  # the field whose value RocketMQ's content puts before the body
    moved = replace(request, ext_fields={**request.ext_fields, "zz": "a"}, body=b"bcd")
    assert content(moved.ext_fields, moved.body) == content(request.ext_fields, request.body)
    assert "does not match" in (Verifier(SECRET).check(moved, NOW) or "")


def test_the_canonical_encoding_names_every_field_with_lengths() -> None:
    encoded = canonical(904, {"b": "xy", "a": "", SIGNATURE: "ignored", BOUND: "ignored"}, b"BODY")
    assert encoded == (LABEL + b"\x00\x00\x03\x88" + b"\x00\x00\x00\x02"
                       + b"\x00\x00\x00\x01a" + b"\x00\x00\x00\x00"
                       + b"\x00\x00\x00\x01b" + b"\x00\x00\x00\x02xy"
                       + b"\x00\x00\x00\x00\x00\x00\x00\x04BODY")


fields_strategy = st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=4)


@given(fields_strategy, st.binary(max_size=8), fields_strategy, st.binary(max_size=8))
def test_different_fields_or_bodies_never_encode_alike(a: dict[str, str], body_a: bytes, b: dict[str, str],
                                                      body_b: bytes) -> None:
    a = {k: v for k, v in a.items() if k not in (SIGNATURE, BOUND)}
    b = {k: v for k, v in b.items() if k not in (SIGNATURE, BOUND)}
    if (a, body_a) != (b, body_b):
        assert canonical(1, a, body_a) != canonical(1, b, body_b)
    assert canonical(1, a, body_a) != canonical(2, a, body_a)


def test_a_signed_request_still_carries_rocketmqs_signature_over_every_other_field() -> None:
    request = full_heartbeat()
    others = {k: v for k, v in request.ext_fields.items() if k != SIGNATURE}
    assert BOUND in others and request.ext_fields[SIGNATURE] == signature(SECRET, others, b"")


def legacy(request: RemotingCommand) -> RemotingCommand:
    """``request`` as mqctl signed before mqctlSignature: RocketMQ's signature and mqctlSigned."""
    ext = {k: v for k, v in request.ext_fields.items() if k not in (BOUND, SIGNATURE)}
    return replace(request, ext_fields={**ext, SIGNATURE: signature(SECRET, ext, request.body)})


def test_rocketmqs_signature_alone_is_never_accepted_and_mqctls_older_form_only_when_told() -> None:
    rocketmq = replace(heartbeat(), ext_fields={**heartbeat().ext_fields, ACCESS_KEY: "rocketmq"})
    rocketmq = replace(rocketmq, ext_fields={**rocketmq.ext_fields, SIGNATURE: signature(SECRET, rocketmq.ext_fields,
                                                                                         b"")})
    for verifier in (Verifier(SECRET), Verifier(SECRET, accept_legacy=True)):
        assert "RocketMQ's ACL signature alone" in (verifier.check(rocketmq, NOW) or "")
    older = legacy(full_heartbeat())
    assert "acceptLegacySignatures" in (Verifier(SECRET).check(older, NOW) or "")
    tolerant = Verifier(SECRET, accept_legacy=True)
    assert tolerant.check(older, NOW) is None
    assert "replay" in (tolerant.check(older, NOW) or "")
    changed = replace(older, ext_fields={**older.ext_fields, "brokerId": "2"})
    assert "does not match" in (tolerant.check(changed, NOW) or "")


def test_with_the_older_form_accepted_a_new_request_and_its_stripped_copy_count_as_one() -> None:
    tolerant = Verifier(SECRET, accept_legacy=True)
    request = full_heartbeat()
    assert tolerant.check(request, NOW) is None
    # mqctlSignature removed and its text appended to the field before it: RocketMQ's content is unchanged
    ext = {k: v for k, v in request.ext_fields.items() if k != BOUND}
    ext["maxOffset"] += request.ext_fields[BOUND]
    stripped = replace(request, ext_fields=ext)
    assert signature(SECRET, ext, b"") == ext[SIGNATURE]
    assert "replay" in (tolerant.check(stripped, NOW) or "")
