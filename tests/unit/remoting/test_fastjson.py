"""JSON as RocketMQ's fastjson 1.x writes it (services/remoting/fastjson.py): bare integer map keys are read,
nothing else outside RFC 8259 is, limits hold, and the writer produces fastjson's compact sorted form.

fastjson's behaviour followed here: a HashMap with Long keys is written with the keys unquoted
(BrokerData.brokerAddrs, RocketMQ 8fc57f1 remoting/.../route/BrokerData.java:39, ``{0:"host:port"}``);
SerializerFeature.BrowserCompatible (used by the name server's route answers for new clients,
namesrv/.../ClientRequestProcessor.java:84) quotes them and escapes non-ASCII characters.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.remoting import fastjson
from services.remoting.errors import BodyError
from services.remoting.fastjson import DEFAULT_MAX_DEPTH, WINDOW, JsonValue, _Parser, dumps, loads
from tests.support.examples import examples

# ----------------------------------------------------------------------------------------- reading


def test_bare_integer_keys_are_ints() -> None:
    assert loads(b'{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}}') == {
        "brokerAddrs": {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}}
    assert loads(b"{-1:true, 9223372036854775807 : null}") == {-1: True, 2**63 - 1: None}


def test_quoted_keys_stay_strings() -> None:
    assert loads(b'{"0":"a"}') == {"0": "a"}


def test_standard_json() -> None:
    text = b' {"a": [1, -2.5e3, 0.1, true, false, null, "x\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00"]}\n'
    assert loads(text) == json.loads(text)
    assert loads('"\u00e9\U0001f600"') == "\u00e9\U0001f600"


@pytest.mark.parametrize(("text", "match"), [
    (b"", "unexpected end"),
    (b"   ", "unexpected end"),
    (b"{} {}", "unexpected data after"),
    (b"NaN", "expected a value"),
    (b"Infinity", "expected a value"),
    (b"-Infinity", "malformed number"),
    (b'{"a":NaN}', "expected a value"),
    (b"/* c */ 1", "expected a value"),
    (b"[1,]", "expected a value"),
    (b'{"a":1,}', "expected a string or an integer key"),
    (b"[1 2]", "expected ']'"),
    (b'{"a" 1}', "expected ':'"),
    (b"{'a':1}", "expected a string or an integer key"),
    (b"{a:1}", "expected a string or an integer key"),
    (b"{01:1}", "expected a string or an integer key"),
    (b"{1.5:1}", "expected a string or an integer key"),
    (b"{1e3:1}", "expected a string or an integer key"),
    (b"{+1:1}", "expected a string or an integer key"),
    (b"01", "unexpected data after"),
    (b"1.", "unexpected data after"),
    (b".5", "expected a value"),
    (b"+1", "expected a value"),
    (b"tru", "expected a value"),
    (b'"a\x01b"', "control character"),
    (b'"a\\xb"', "bad escape"),
    (b'"\\u12"', "bad escape"),
    (b'"abc', "unterminated"),
    (b'"\\ud800"', "lone UTF-16 surrogate"),
    (b'"\\udc00\\ud800"', "lone UTF-16 surrogate"),
    (b'{"a":1,"a":2}', "duplicate key 'a'"),
    (b"{0:1,0:2}", "duplicate key 0"),
    (b"9223372036854775808", "outside int64"),
    (b"{-9223372036854775809:1}", "outside int64"),
    (b"1e400", "out of range"),
    (b"1" * 65, "longer than 64"),
    (b"1" * 5000, "longer than 64"),
    (b"\xef\xbb\xbf{}", "expected a value"),  # a byte-order mark is not JSON
    (b"\x0b{}", "expected a value"),
    (b"\xa0{}", "not UTF-8"),
    (b"\xff", "not UTF-8"),
])
def test_refused(text: bytes, match: str) -> None:
    with pytest.raises(BodyError, match=match):
        loads(text)


def test_error_names_what_and_where() -> None:
    with pytest.raises(BodyError, match=r"^SyncStateSet body is not valid JSON at offset 6: expected a value"):
        loads(b'{"a": }', what="SyncStateSet body")


def test_depth_limit() -> None:
    assert loads(b"[" * DEFAULT_MAX_DEPTH + b"]" * DEFAULT_MAX_DEPTH) is not None
    with pytest.raises(BodyError, match="nested deeper than 32"):
        loads(b"[" * (DEFAULT_MAX_DEPTH + 1) + b"]" * (DEFAULT_MAX_DEPTH + 1))
    with pytest.raises(BodyError, match="nested deeper"):
        loads(b"[" * 200_000)  # no RecursionError


def test_size_limit() -> None:
    with pytest.raises(BodyError, match="101 bytes, more than the limit of 100"):
        loads(b" " * 100 + b"1", max_bytes=100)


def test_long_unterminated_string_fails_fast() -> None:
    with pytest.raises(BodyError, match="unterminated"):
        loads(b'"' + b"a\\n" * 300_000)


TOKENS = ['{', '}', '[', ']', ':', ',', ' ', '"a"', '"b"', '0', '-1', '01', '1.5', '1e2', 'true', 'null',
          'NaN', "'x'", 'x', '"\\u0000"', '"\\ud800"', '"\x01"', '9223372036854775808', '\n']


@given(st.lists(st.sampled_from(TOKENS), max_size=25))
@settings(deadline=None, max_examples=examples(500))
def test_token_soup_is_json_or_refused(tokens: list[str]) -> None:
    """Whatever we accept is JSON that Python reads the same way, or uses bare integer keys."""
    text = "".join(tokens)
    try:
        ours = loads(text)
    except BodyError:
        return
    if "{" in text and _has_int_keys(ours):
        return
    assert json.loads(text) == ours


def full_parser(text: str) -> JsonValue | BodyError:
    try:
        return _Parser(text, DEFAULT_MAX_DEPTH, "body").document()
    except BodyError as exc:
        return exc


@given(st.lists(st.sampled_from([*TOKENS, '"\\ud83d\\ude00"', '1e400', '"a"', '2.5', '[[[[[[[[', ']]]]]]]]']),
                max_size=40))
@settings(deadline=None, max_examples=examples(500))
def test_fast_path_agrees_with_the_full_parser(tokens: list[str]) -> None:
    """loads tries Python's json first; whatever it returns, or refuses, the full parser does the same."""
    text = "".join(tokens)
    expected = full_parser(text)
    try:
        got: JsonValue | BodyError = loads(text)
    except BodyError as exc:
        got = exc
    if isinstance(expected, BodyError):
        assert isinstance(got, BodyError) and str(got) == str(expected)
    else:
        assert got == expected


@pytest.mark.parametrize("text", [
    '{"a":1,"a":2}', '[1e400]', '[NaN]', '"\\ud800"', '[' * 40 + ']' * 40, '[' + '1' * 70 + ']',
    '{"k":9223372036854775808}', '{0:"a"}', '[0.' + '1' * 70 + ']', '"\ud800"',
])
def test_fast_path_defers_to_the_full_parser(text: str) -> None:
    expected = full_parser(text)
    if isinstance(expected, BodyError):
        with pytest.raises(BodyError, match=re.escape(str(expected))):
            loads(text)
    else:
        assert loads(text) == expected


def _has_int_keys(value: JsonValue) -> bool:
    if isinstance(value, dict):
        return any(isinstance(k, int) or _has_int_keys(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_int_keys(v) for v in value)
    return False


@given(st.binary(max_size=200))
@settings(deadline=None)
def test_any_bytes_give_a_value_or_a_body_error(data: bytes) -> None:
    try:
        loads(data)
    except BodyError:
        pass


# ----------------------------------------------------------------------------------------- writing


def test_written_compact_and_sorted() -> None:
    assert dumps({"b": 1, "a": [True, None, "x"], "c": {}}) == '{"a":[true,null,"x"],"b":1,"c":{}}'


def test_int_keys_bare_and_numerically_sorted() -> None:
    assert dumps({10: "x", 2: "y", -1: "z"}) == '{-1:"z",2:"y",10:"x"}'


def test_standard_mode_quotes_int_keys_and_escapes_non_ascii() -> None:
    assert dumps({1: "é"}, standard=True) == '{"1":"\\u00e9"}'
    assert dumps({1: "é"}) == '{1:"é"}'


def test_null_entries_left_out_and_sets_sorted() -> None:
    assert dumps({"a": None, "b": frozenset({3, 1, 2}), "c": (1,)}) == '{"b":[1,2,3],"c":[1]}'


def test_escapes() -> None:
    assert dumps('"\\\n\x00/') == '"\\"\\\\\\n\\u0000/"'


@pytest.mark.parametrize("value", [b"x", object(), {1.5: 1}, {True: 1}, {None: 1}])
def test_unwritable_types(value: object) -> None:
    with pytest.raises(TypeError):
        dumps(value)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "\ud800"])
def test_unwritable_values(value: object) -> None:
    with pytest.raises(ValueError):
        dumps(value)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(
        st.characters(codec="utf-8")) | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.text(max_size=5), children.filter(lambda v: v is not None), max_size=4) | st.dictionaries(
        st.integers(-5, 5), children.filter(lambda v: v is not None), max_size=4),
    max_leaves=20)


@given(json_values)
@settings(deadline=None)
def test_round_trip(value: JsonValue) -> None:
    assert loads(dumps(value)) == value
    assert loads(dumps(value, standard=True).encode()) == _quote_keys(value)


def _quote_keys(value: JsonValue) -> JsonValue:
    if isinstance(value, dict):
        return {str(k): _quote_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_quote_keys(v) for v in value]
    return value


# ------------------------------------------------------------------- keys that name the same thing


@pytest.mark.parametrize(("text", "match"), [
    ('{1:"x","1":"y"}', r"duplicate key '1' \(the same name as 1\)"),
    ('{"1":"x",1:"y"}', r"duplicate key 1 \(the same name as '1'\)"),
    ('{"a":{-5:1,"-5":2}}', r"duplicate key '-5' \(the same name as -5\)"),
    ('{-0:"x"}', "bare key -0"),
    ('{0:"x",-0:"y"}', "bare key -0"),
    ('{"\\udfff1":0}', "lone UTF-16 surrogate"),
    ('{1:0,"\\udfff1":0}', "lone UTF-16 surrogate"),
])
@pytest.mark.parametrize("padding", [0, 70_000])
def test_keys_that_name_the_same_thing_are_duplicates(text: str, match: str, padding: int) -> None:
    """fastjson reads a bare key into a string map as its decimal text and a quoted one into a number map
    as its number, so 1 and "1" are one key; a bare key must be written as Java writes a number. Short
    texts and long ones (read in windows) alike."""
    with pytest.raises(BodyError, match=match):
        loads(text + " " * padding)


@pytest.mark.parametrize("text", ['{"-0":1,0:2}', '{"01":1,1:2}', '{"1.0":1,1:2}', '{" 1":1,1:2}', '{"+1":1,1:2}'])
def test_quoted_keys_that_are_not_a_numbers_text_are_other_names(text: str) -> None:
    """Only the text Java writes for a number is that number's name; other quoted keys are names of their
    own (a map keyed by number refuses them: bodies.py, broker_bodies.py)."""
    assert len(loads(text)) == 2  # type: ignore[arg-type]


def test_bare_keys_inside_strings_are_text() -> None:
    for text in ['{"a":"{1:2}"}', '{"a,1:":1}', '["{",1,":"]', '{"k":"\\",1:2"}', '["\\\\",{2:3}]']:
        assert loads(text) == json.loads(text.replace("{2:", '{"2":')) or _has_int_keys(loads(text))


# -------------------------------------------------------------------------- long texts, in windows


def test_a_long_text_reads_as_a_short_one_does() -> None:
    value = {"topicConfigTable": {f"T{i}": {"perm": 6, "readQueueNums": 8, "attributes": {}} for i in range(5000)},
             "brokerAddrs": {i: f"10.0.0.{i % 250}:10911" for i in range(3000)}, "list": list(range(20000))}
    text = dumps(value)
    assert len(text) > 4 * WINDOW
    assert loads(text.encode()) == value


def windowed(text: str) -> JsonValue | BodyError:
    """Read in windows of a few characters, so that a short text is cut everywhere a long one could be."""
    try:
        return fastjson._Windowed(text, DEFAULT_MAX_DEPTH, "body", widest=64, first=8).document()
    except BodyError as exc:
        return exc


WINDOW_TOKENS = [*TOKENS, '"a,b"', '"x:"', '{1:', '7:', ',', ',', '[[', ']]', '{"k":', '"\\\\"', '"\\""', '-3:']


@given(st.lists(st.sampled_from(WINDOW_TOKENS), max_size=60))
@settings(deadline=None, max_examples=examples(800))
def test_the_windowed_reader_agrees_with_the_full_parser(tokens: list[str]) -> None:
    """Same value or same error (same offset), whatever the windows cut."""
    text = "".join(tokens)
    expected, got = full_parser(text), windowed(text)
    if isinstance(expected, BodyError):
        assert isinstance(got, BodyError) and str(got) == str(expected)
    else:
        assert got == expected


@given(json_values)
@settings(deadline=None, max_examples=examples(300))
def test_the_windowed_reader_reads_what_is_written(value: JsonValue) -> None:
    assert windowed(dumps(value)) == value
    assert windowed(" " + dumps(value, standard=True) + "\n") == _quote_keys(value)


def test_a_long_malformed_text_is_refused_at_its_offset() -> None:
    text = '{"a":[' + "1," * 100_000 + "1]x"
    expected = full_parser(text)
    assert str(expected) == f"body is not valid JSON at offset {len(text) - 1}: expected '}}'"
    with pytest.raises(BodyError, match=re.escape(str(expected))):
        loads(text)


def test_a_reader_on_an_event_loop_gets_the_decoders_reason_for_a_long_malformed_text() -> None:
    text = "[" + "1," * 5_000 + "]"  # over the fallback limit, within one window
    with pytest.raises(BodyError, match=f"^body is not valid JSON at offset {len(text) - 1}: Expecting value$"):
        loads(text, fallback_limit=1024)
    with pytest.raises(BodyError, match=f"^body is not valid JSON at offset {len(text) - 1}: expected a value$"):
        loads(text)


def test_release_empties_every_container_and_keeps_what_is_held_elsewhere() -> None:
    kept = {"x": [1]}
    value: JsonValue = {"a": [{"b": [1, 2]}, kept], "c": {"d": {}}}
    inner = value["a"]  # type: ignore[index, call-overload]
    fastjson.release(value)
    assert value == {} and inner == [] and kept == {}
    shared = "text"
    listing: JsonValue = [shared]
    fastjson.release(listing)
    assert shared == "text"
