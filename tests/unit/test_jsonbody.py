"""Tests for schedd.jsonbody: the JSON that `json` accepts but the API contract refuses."""

from __future__ import annotations

import json
import math
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedd.errors import InvalidRequest
from schedd.jsonbody import (
    MAX_DEPTH,
    JSONValue,
    as_integer,
    check_value,
    dumps,
    loads_object,
    loads_strict,
)

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


def rejects(raw: bytes, *, field: str = "body") -> str:
    """The message loads_strict refuses `raw` with."""
    with pytest.raises(InvalidRequest) as caught:
        loads_strict(raw, field=field)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")
    return str(caught.value)


def nested(depth: int, *, opener: str = "[", closer: str = "]", inner: str = "1") -> bytes:
    return (opener * depth + inner + closer * depth).encode()


# Valid JSON for Python, refused by the contract.


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_rejected(constant: str) -> None:
    assert "NaN and Infinity are not JSON" in rejects(f'{{"a": [1, {constant}]}}'.encode())


def test_duplicate_key_is_rejected_and_named() -> None:
    message = rejects(b'{"name": "a", "x": 1, "name": "b"}')
    assert message == "body: duplicate key 'name' in an object"


def test_duplicate_key_in_a_nested_object_is_rejected() -> None:
    assert "duplicate key 'k'" in rejects(b'{"a": [{"k": 1, "k": 1}], "b": {"k": 2}}')


def test_duplicate_key_with_spaces_before_colons_is_rejected() -> None:
    assert "duplicate key 'k'" in rejects(b'{"k" :1, "k"\n\t:2}')


def test_duplicate_key_spelled_with_an_escape_is_rejected() -> None:
    assert "duplicate key 'k'" in rejects(b'{"k": 1, "\\u006b": 2}')


def test_same_key_in_different_objects_is_accepted() -> None:
    assert loads_strict(b'[{"k": 1}, {"k": 2}]') == [{"k": 1}, {"k": 2}]


def test_lone_high_surrogate_escape_is_rejected() -> None:
    assert "lone surrogate in a string" in rejects(b'{"name": "a\\ud800b"}')


def test_lone_low_surrogate_escape_is_rejected() -> None:
    assert "lone surrogate in a string" in rejects(b'["\\uDC00"]')


def test_lone_surrogate_in_a_key_is_rejected() -> None:
    assert "lone surrogate in a string" in rejects(b'{"\\ud83d": 1}')


def test_reversed_surrogate_pair_is_rejected() -> None:
    assert "lone surrogate" in rejects(b'"\\ude00\\ud83d"')


def test_surrogate_halves_split_by_an_escaped_backslash_are_rejected() -> None:
    assert "lone surrogate" in rejects(b'"\\ud83d\\\\\\ude00"')


def test_surrogate_pair_escape_is_accepted() -> None:
    assert loads_strict(b'{"emoji": "\\ud83d\\ude00 \\uD83D\\uDE00"}') == {
        "emoji": "\U0001f600 \U0001f600"
    }


def test_escaped_backslash_before_u_is_plain_text() -> None:
    assert loads_strict(b'["\\\\ud800", "\\\\u0000"]') == ["\\ud800", "\\u0000"]


def test_nul_escape_in_a_string_is_rejected() -> None:
    assert rejects(b'{"a": "x\\u0000y"}') == "body: NUL character in a string"


def test_nul_escape_in_a_key_is_rejected() -> None:
    assert "NUL character" in rejects(b'{"\\u0000": 1}')


def test_raw_nul_byte_is_rejected() -> None:
    assert "invalid JSON" in rejects(b'{"a": "x\x00y"}')


def test_int64_bounds_are_accepted() -> None:
    raw = f"[{INT64_MAX}, {INT64_MIN}]".encode()
    assert loads_strict(raw) == [INT64_MAX, INT64_MIN]


def test_int_just_beyond_int64_max_is_rejected() -> None:
    message = rejects(f'{{"n": {INT64_MAX + 1}}}'.encode())
    assert f"integer {INT64_MAX + 1} out of the 64-bit range" in message


def test_int_just_beyond_int64_min_is_rejected() -> None:
    assert "out of the 64-bit range" in rejects(str(INT64_MIN - 1).encode())


def test_huge_int_is_rejected_quickly_with_a_clipped_message() -> None:
    message = rejects(b"[" + b"9" * 100_000 + b"]")
    assert "out of the 64-bit range" in message
    assert len(message) < 120


def test_nineteen_digit_ids_that_fit_are_accepted() -> None:
    ids = [1_760_000_000_000_000_000 + i for i in range(50)]
    assert loads_strict(json.dumps({"ids": ids, "neg": [-i for i in ids]}).encode()) == {
        "ids": ids,
        "neg": [-i for i in ids],
    }


def test_long_digit_runs_in_strings_and_fractions_are_accepted() -> None:
    raw = b'{"s": "123456789012345678901234567890", "f": 0.12345678901234567890123}'
    assert loads_strict(raw) == {"s": "123456789012345678901234567890", "f": 0.123456789012345678}


@pytest.mark.parametrize("text", ["1e400", "-1E+309", "1" * 400 + ".5", "1" * 310])
def test_float_text_that_overflows_is_rejected(text: str) -> None:
    assert "out of the" in rejects(f"[{text}]".encode())


def test_large_and_tiny_finite_floats_are_accepted() -> None:
    assert loads_strict(b"[1.7976931348623157e308, 1e-400, 1E+100, 5e-324]") == [
        1.7976931348623157e308,
        0.0,
        1e100,
        5e-324,
    ]


@pytest.mark.parametrize(("opener", "closer"), [("[", "]"), ('{"a":', "}")])
def test_nesting_of_max_depth_is_accepted(opener: str, closer: str) -> None:
    value = loads_strict(nested(MAX_DEPTH, opener=opener, closer=closer))
    for _ in range(MAX_DEPTH):
        assert isinstance(value, list | dict)
        value = value[0] if isinstance(value, list) else value["a"]
    assert value == 1


@pytest.mark.parametrize(("opener", "closer"), [("[", "]"), ('{"a":', "}")])
def test_nesting_one_deeper_than_max_is_rejected(opener: str, closer: str) -> None:
    raw = nested(MAX_DEPTH + 1, opener=opener, closer=closer)
    assert rejects(raw) == "body: nesting deeper than 32 levels"


def test_mixed_nesting_one_deeper_than_max_is_rejected() -> None:
    raw = ('{"a":[' * 16 + "[0]" + "]}" * 16).encode()
    assert "nesting deeper" in rejects(raw)
    assert loads_strict(('{"a":[' * 16 + "0" + "]}" * 16).encode()) is not None


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    brackets = "[{" * 100 + '\\"' + "]}" * 3
    raw = f'{{"s": "{brackets}", "t": ["]]]]", "[[[[", ":::"]}}'.encode()
    assert loads_strict(raw) == {"s": brackets.replace('\\"', '"'), "t": ["]]]]", "[[[[", ":::"]}


@pytest.mark.parametrize("string", ['"\\""', '"\\\\"', '"\\\\\\""', '"[\\"]"', '"\\"{"'])
@pytest.mark.parametrize("padding", [0, 10_000], ids=["many-escapes", "few-escapes"])
def test_escaped_quotes_and_backslashes_do_not_hide_nesting(string: str, padding: int) -> None:
    pad = '"' + "x" * padding + '"'
    raw = f"[{pad}, {string}, {nested(MAX_DEPTH).decode()}, {string}]".encode()
    assert rejects(raw) == "body: nesting deeper than 32 levels"
    assert loads_strict(f"[{pad}, {string}, {nested(MAX_DEPTH - 1).decode()}, {string}]".encode())


def test_many_shallow_containers_are_accepted() -> None:
    value: JSONValue = [[{"a": [i]}] for i in range(10_000)]
    assert loads_strict(dumps(value).encode()) == value


@pytest.mark.parametrize(
    "raw",
    [b"[" * 100_000, b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 100_000 + b"1" + b"}" * 100_000],
    ids=["unclosed", "balanced", "objects"],
)
def test_100k_deep_body_is_rejected_quickly(raw: bytes) -> None:
    started = time.monotonic()
    assert "nesting deeper than 32 levels" in rejects(raw)
    assert time.monotonic() - started < 1.0


def test_unbalanced_shallow_brackets_are_invalid_json_not_too_deep() -> None:
    assert "invalid JSON" in rejects(b"[[[" + b"[]" * 40)


# Bytes and framing.


def test_invalid_utf8_is_rejected_with_the_byte_and_position() -> None:
    assert rejects(b'{"a\xff": 1}') == "body: not valid UTF-8 (byte 0xff at position 3)"


def test_utf8_encoded_surrogate_is_invalid_utf8() -> None:
    assert "not valid UTF-8 (byte 0xed" in rejects('"\ud800"'.encode("utf-8", "surrogatepass"))


def test_utf8_bom_is_rejected() -> None:
    assert "byte order mark" in rejects(b'\xef\xbb\xbf{"a": 1}')


@pytest.mark.parametrize("raw", [b"", b"  \r\n\t "])
def test_empty_body_is_rejected(raw: bytes) -> None:
    assert rejects(raw) == "body: must be a JSON value, got an empty body"
    with pytest.raises(InvalidRequest, match=r"^body: must be a JSON object, got an empty body$"):
        loads_object(raw)


def test_syntax_error_names_line_and_column() -> None:
    assert rejects(b'{\n  "a": }') == "body: invalid JSON at line 2 column 8: Expecting value"


def test_trailing_data_is_rejected() -> None:
    assert "Extra data" in rejects(b'{"a": 1} {"b": 2}')


def test_field_name_is_used_in_errors() -> None:
    assert rejects(b"[NaN]", field="payload") == "payload: NaN and Infinity are not JSON"


def test_non_ascii_text_is_accepted() -> None:
    assert loads_strict('{"name": "café ☕ \U0001f600"}'.encode()) == {"name": "café ☕ \U0001f600"}


# loads_object and dumps.


@pytest.mark.parametrize(
    ("raw", "kind"),
    [(b"[1]", "an array"), (b'"a"', "a string"), (b"3", "a number"), (b"null", "null")],
)
def test_loads_object_rejects_other_top_levels(raw: bytes, kind: str) -> None:
    with pytest.raises(InvalidRequest, match=f"^body: must be a JSON object, got {kind}$"):
        loads_object(raw)


def test_loads_object_returns_the_object() -> None:
    assert loads_object(b' {"a": [1, 2.5, "x", null, true]} ') == {"a": [1, 2.5, "x", None, True]}


def test_dumps_is_compact_and_keeps_non_ascii() -> None:
    assert dumps({"a": [1, 2.5, None], "é": "☕"}) == '{"a":[1,2.5,null],"é":"☕"}'


def test_dumps_refuses_nan() -> None:
    with pytest.raises(ValueError, match="Out of range float"):
        dumps({"a": math.nan})


# check_value: the same rules for a value built in Python.


def test_check_value_accepts_and_returns_json() -> None:
    value = {"a": [1, 2.5, "x", None, True, {"b": []}], "c": INT64_MIN}
    assert check_value(value, field="payload") is value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"a": [1, math.nan]}, "payload: NaN and Infinity are not JSON at a[1]"),
        ([math.inf], "payload: NaN and Infinity are not JSON at [0]"),
        ({"n": INT64_MAX + 1}, f"payload: integer {INT64_MAX + 1} out of the 64-bit range at n"),
        ([INT64_MIN - 1], "payload: integer -9223372036854775809 out of the 64-bit range at [0]"),
        ({"s": "a\ud800"}, "payload: lone surrogate in a string at s"),
        ({"s": ["\udc00"]}, "payload: lone surrogate in a string at s[0]"),
        ({"a b": "x\x00"}, "payload: NUL character in a string at ['a b']"),
        ({"k\x00": 1}, "payload: NUL character in a string at ['k\\x00']"),
        ({"\ud800": 1}, "payload: lone surrogate in a string at ['\\ud800']"),
        ({1: "a"}, "payload: object key 1 is not a string at [1]"),
        ({"t": (1, 2)}, "payload: a tuple is not a JSON value at t"),
        ({"s": {1}}, "payload: a set is not a JSON value at s"),
        (object(), "payload: a object is not a JSON value"),
        ("\U0001f600\ud83d", "payload: lone surrogate in a string"),
    ],
)
def test_check_value_rejects(value: object, message: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        check_value(value, field="payload")
    assert str(caught.value) == message
    assert caught.value.field == "payload"


def test_check_value_depth_limit() -> None:
    value: list[object] = [1]
    for _ in range(MAX_DEPTH - 1):
        value = [value]
    assert check_value(value, field="p") is value
    with pytest.raises(InvalidRequest, match="nesting deeper than 32 levels"):
        check_value([value], field="p")


def test_check_value_rejects_a_cycle() -> None:
    cycle: list[object] = []
    cycle.append(cycle)
    with pytest.raises(InvalidRequest, match="nesting deeper than 32 levels"):
        check_value(cycle, field="p")


# Properties.

TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"))
JSON_VALUES: st.SearchStrategy[JSONValue] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=INT64_MIN, max_value=INT64_MAX)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(TEXT, children, max_size=5),
    max_leaves=30,
)


@given(JSON_VALUES)
def test_round_trip_of_any_value_within_the_rules(value: JSONValue) -> None:
    assert loads_strict(dumps(value).encode()) == value
    assert dumps(loads_strict(dumps(value).encode())) == dumps(value)
    assert dumps(loads_strict(json.dumps(value, indent=1).encode())) == dumps(value)
    assert check_value(value, field="v") is value


def reference(raw: bytes) -> JSONValue:
    """A slow, obviously correct loads_strict: decode with every hook, then walk the value."""

    def pairs(items: list[tuple[str, JSONValue]]) -> dict[str, JSONValue]:
        if len({key for key, _ in items}) != len(items):
            raise InvalidRequest("body", "duplicate")
        return dict(items)

    def integer(text: str) -> int:
        if len(text) > 20 or not INT64_MIN <= int(text) <= INT64_MAX:
            raise InvalidRequest("body", "int")
        return int(text)

    def number(text: str) -> float:
        if not math.isfinite(float(text)):
            raise InvalidRequest("body", "float")
        return float(text)

    def constant(text: str) -> float:
        raise InvalidRequest("body", "constant")

    if raw.startswith(b"\xef\xbb\xbf"):
        raise InvalidRequest("body", "bom")
    try:
        value = json.loads(
            raw.decode("utf-8"),
            object_pairs_hook=pairs,
            parse_int=integer,
            parse_float=number,
            parse_constant=constant,
        )
    except (ValueError, RecursionError) as exc:
        raise InvalidRequest("body", "invalid") from exc
    return check_value(value, field="body")


def outcome(load: object, raw: bytes) -> str:
    assert callable(load)
    try:
        return dumps(load(raw))
    except InvalidRequest:
        return "rejected"


HEX_ESCAPES = st.sampled_from(
    ["\\u0041", "\\u00e9", "\\u0000", "\\ud800", "\\uDBFF", "\\udc00", "\\ud83d\\ude00", "\\u005c"]
)
STRING_PIECES = st.sampled_from(["a", "k", " ", "[", "]", "{", "}", ":", ",", "é", "1234567890"])
SIMPLE_ESCAPES = st.sampled_from(['\\"', "\\\\", "\\n", "\\/", "\\t"])
WHITESPACE = st.sampled_from(["", "", " ", "\n  ", "\t", "\r\n"])
NUMBERS = st.one_of(
    st.integers(min_value=-(2**66), max_value=2**66).map(str),
    st.sampled_from([str(INT64_MAX), str(INT64_MIN), str(INT64_MAX + 1), str(INT64_MIN - 1)]),
    st.builds(
        "{}{}e{}".format,
        st.sampled_from(["", "-"]),
        st.sampled_from(["1", "1.5", "12345678901234567890.0"]),
        st.integers(min_value=-400, max_value=400),
    ),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1E309", "0.1234567890123456789012"]),
)


@st.composite
def json_strings(draw: st.DrawFn) -> str:
    pieces = draw(st.lists(STRING_PIECES | SIMPLE_ESCAPES | HEX_ESCAPES, max_size=6))
    return '"' + "".join(pieces) + '"'


KEYS = st.sampled_from(['"k"', '"\\u006b"', '"a"']) | json_strings()


def json_members(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    member = st.tuples(KEYS, WHITESPACE, children).map(lambda m: f"{m[0]}{m[1]}:{m[2]}")
    return st.lists(member, max_size=4).map(lambda ms: "{" + ",".join(ms) + "}")


JSON_TEXTS = st.recursive(
    st.sampled_from(["null", "true", "false"]) | NUMBERS | json_strings(),
    lambda children: (
        st.lists(children, max_size=4).map(lambda items: "[" + ",".join(items) + "]")
        | json_members(children)
    ),
    max_leaves=12,
)


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    text = draw(JSON_TEXTS)
    depth = draw(st.integers(min_value=0, max_value=MAX_DEPTH + 3))
    for _ in range(depth):
        text = draw(st.sampled_from(["[{}]", '{{"d":{}}}', '[{},"]["]', '["\\"",{}]'])).format(text)
    return (draw(WHITESPACE) + text + draw(WHITESPACE)).encode()


@settings(max_examples=500)
@given(bodies())
def test_loads_strict_agrees_with_the_slow_reference(raw: bytes) -> None:
    assert outcome(loads_strict, raw) == outcome(reference, raw)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (5, 5),
        (5.0, 5),  # JSON Schema's integer: some encoders write every number as a float
        (1, 1),
        (10, 10),
        (0, None),
        (11, None),
        (5.5, None),
        (True, None),
        (False, None),
        ("5", None),
        (None, None),
        (float("inf"), None),
        (float("nan"), None),
        (1e300, None),
    ],
)
def test_as_integer(value: object, expected: int | None) -> None:
    result = as_integer(value, 1, 10)
    assert result == expected and (result is None or type(result) is int)
