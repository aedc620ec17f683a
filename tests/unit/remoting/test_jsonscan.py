"""Python's C decoder held to fastjson.py's rules (services/remoting/jsonscan.py): bare keys quoted and
marked by a rewrite that takes strings whole, duplicates by name, lone surrogate escapes told from pairs
and from escaped backslashes, nesting measured on the text, and nothing accepted that the rules refuse."""

from __future__ import annotations

import pytest

from services.remoting.jsonscan import Refused, alias, decode, scan


@pytest.mark.parametrize(("text", "value"), [
    ('{0:"a",-12:"b"}', {0: "a", -12: "b"}),
    ('{"k":"{1:2}",3:4}', {"k": "{1:2}", 3: 4}),  # key-like text inside a string stays text
    ('{"a,1:":1, 2 :[{3:{}}]}', {"a,1:": 1, 2: [{3: {}}]}),
    ('{"\\\\":0,"\\"":{5:6}}', {"\\": 0, '"': {5: 6}}),  # escaped backslash and quote before a bare key
    ('"\\ud83d\\ude00"', "\U0001f600"),  # an escaped pair is one character
    ('"\\\\ud800"', "\\ud800"),  # an escaped backslash, then text: no surrogate
    (" [1, 2.5, true, null] \n", [1, 2.5, True, None]),
])
def test_decoded_as_the_rules_read_it(text: str, value: object) -> None:
    assert decode(text, 32) == value


@pytest.mark.parametrize(("text", "reason"), [
    ('{1:"x","1":"y"}', "duplicate key"),
    ('{"a":1,"a":2}', "duplicate key 'a'"),
    ('{-0:1}', "Expecting property name"),
    ('{01:1}', "Expecting property name"),
    ('"\\ud800"', "lone UTF-16 surrogate"),
    ('"\\\\\\ud800"', "lone UTF-16 surrogate"),  # an escaped backslash, then a real escape
    ('"\\ude00\\ud83d"', "lone UTF-16 surrogate"),  # the halves in the wrong order
    ('["\\ud83d","\\ude00"]', "lone UTF-16 surrogate"),  # halves in two strings
    ('{"\\udfff1":0}', "lone UTF-16 surrogate"),  # what the mark looks like, from outside
    ("[NaN]", "NaN is not JSON"),
    ("[1e400]", "out of range"),
    ("9223372036854775808", "outside int64"),
    ("[" + "1" * 65 + "]", "longer than 64"),
    ("[[[[]]]]", "nested deeper"),
    ("[1] 2", "unexpected data after the value"),
])
def test_refused(text: str, reason: str) -> None:
    with pytest.raises(Refused, match=reason):
        decode(text, 3)


def test_a_refusal_has_the_offset_in_the_original_text() -> None:
    with pytest.raises(Refused) as refused:
        decode('{1:2,3:4,"k" 5}', 32)
    assert refused.value.offset == 13  # where it is in the text given, not in the rewritten one


def test_scan_reads_one_value_and_says_where_it_ends() -> None:
    assert scan('{1:[2]} trailing', 2) == ({1: [2]}, 7)
    with pytest.raises(Refused, match="nested deeper"):
        scan("[[1]]", 1)


def test_alias_is_the_other_spelling_of_a_number_key() -> None:
    assert (alias(7), alias(-7), alias("7"), alias("-7")) == ("7", "-7", 7, -7)
    assert [alias(k) for k in ("07", "-0", "+7", "7.0", " 7", "9223372036854775808", "x")] == [None] * 7
