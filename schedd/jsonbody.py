"""Strict JSON for request bodies and the log: refuse what `json` accepts but our contract does not.

Decodes, checks and encodes JSON values only; it knows nothing of jobs, fields or HTTP.
"""

from __future__ import annotations

import array
import codecs
import itertools
import json
import math
import re
from collections.abc import Callable
from typing import NoReturn, TypeAlias, cast

from schedd.errors import InvalidRequest

JSONValue: TypeAlias = bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"] | None
JSONObject: TypeAlias = dict[str, JSONValue]  # a JSON object built or read whole

MAX_DEPTH = 32
INT_MIN = -(2**63)
INT_MAX = 2**63 - 1

# Bodies are checked with whole-buffer operations in C (translate, replace, split, count, a few
# regexes), never a Python loop over characters: loads_strict stays within about 2x json.loads.
_STRUCTURE_DELETE = bytes(sorted(set(range(256)) - set(b'"[]{}:')))
_QUOTING_ESCAPE = re.compile(rb'\\[\\"]')
_NESTING_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # +1 and -1 as signed bytes
_TOO_DEEP = b"\x01" * (MAX_DEPTH + 1)
# Numbers reduced to their shape, position by position: digits 0, exponent marks e, signs s.
_NUMBER_SHAPE = bytes.maketrans(
    b"0123456789eE+-." + bytes(sorted(set(range(256)) - set(b"0123456789eE+-."))),
    b"0000000000eess." + b" " * (256 - 15),
)
_LONG_EXPONENT = re.compile(rb"es?000")  # below 1e100 no float overflows
_TOO_LONG_INT = b"0" * 20  # 20 digits never fit 64 bits, 18 always do
_INT_MAX_DIGITS = str(INT_MAX).encode()
_NINETEEN_FROM_NINE = re.compile(rb"9(?<![0-9.]9)[0-9]{18}(?![0-9])")  # the other 19 digits fit
# The text is strict UTF-8 and json refuses raw control characters: only \u escapes can put a
# surrogate or a NUL into a decoded string.
_SUSPECT_ESCAPE = re.compile(rb"\\u(?:[dD][89a-fA-F][0-9a-fA-F]{2}|0000)")
_LONE_ESCAPE = re.compile(  # once escaped backslashes are masked: json pairs the same way
    rb"\\u(?:0000"
    rb"|[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])"
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2}\\u)[dD][c-fC-F][0-9a-fA-F]{2})"
)
_SURROGATE = re.compile("[\ud800-\udfff]")
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


class _Rejected(Exception):
    """A rule broken inside json's hooks or a value walk; `path` is filled in on the way out."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path: list[str] = []


def loads_strict(raw: bytes, *, field: str = "body") -> JSONValue:
    """Decode a request body by the contract's rules, or raise InvalidRequest naming `field`."""
    return _loads(raw, field, expected="a JSON value")


def loads_object(raw: bytes, *, field: str = "body") -> dict[str, JSONValue]:
    """Decode a request body that must be a JSON object."""
    value = _loads(raw, field, expected="a JSON object")
    if not isinstance(value, dict):
        raise InvalidRequest(field, f"must be a JSON object, got {_kind(value)}")
    return value


def dumps(value: JSONValue) -> str:
    """Encode compactly, keeping non-ASCII text as is; NaN and Infinity raise ValueError."""
    return _ENCODER.encode(value)


def as_integer(value: object, low: int, high: int) -> int | None:
    """`value` as an int in [low, high], or None. Like JSON Schema's "integer", 5.0 counts as 5
    (some encoders write every number as a float); true and false never count."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return None
    return value


def check_value(value: object, *, field: str) -> JSONValue:
    """Check an already-decoded value by the same rules as loads_strict and return it."""
    try:
        _check(value, 0)
    except _Rejected as exc:
        where = "".join(reversed(exc.path)).lstrip(".")
        raise InvalidRequest(field, f"{exc.reason} at {where}" if where else exc.reason) from None
    return cast("JSONValue", value)


def _loads(raw: bytes, field: str, *, expected: str) -> JSONValue:
    text = _decode(raw, field, expected=expected)
    structure = _structure(raw)
    if _nesting_exceeds(structure.translate(_NESTING_STEPS, b":")):
        raise InvalidRequest(field, f"nesting deeper than {MAX_DEPTH} levels")
    value, members = _parse(text, field, check_numbers=_may_overflow(raw))
    # One colon per member in the text; a duplicate key leaves its object one member short.
    if members != structure.count(b":"):
        _run_decoder(text, field, object_pairs_hook=_object, check_numbers=True)
    if b"\\u" in raw:
        _check_escapes(raw, field)
    return value


def _decode(raw: bytes, field: str, *, expected: str) -> str:
    if raw.startswith(codecs.BOM_UTF8):
        raise InvalidRequest(field, "starts with a UTF-8 byte order mark: send plain UTF-8")
    try:
        text = raw.decode("utf-8", "strict")
    except UnicodeDecodeError as exc:
        bad = f"byte 0x{raw[exc.start]:02x} at position {exc.start}"
        raise InvalidRequest(field, f"not valid UTF-8 ({bad})") from None
    if not text.strip(" \t\r\n"):
        raise InvalidRequest(field, f"must be {expected}, got an empty body")
    return text


def _structure(raw: bytes) -> bytes:
    """The brackets and colons of a JSON text that stand outside its strings."""
    if b'\\"' in raw:
        raw = _drop_quoting_escapes(raw)
    skeleton = raw.translate(None, _STRUCTURE_DELETE)
    # Two adjacent quotes close an empty stretch, inside or outside a string: dropping them keeps
    # the rest alternating, and most strings hold no bracket or colon, so few quotes are left.
    skeleton = skeleton.replace(b'""', b"")
    if b'"' in skeleton:
        skeleton = b"".join(skeleton.split(b'"')[::2])
    return skeleton


def _drop_quoting_escapes(raw: bytes) -> bytes:
    """Drop escaped backslashes and quotes, so that every quote left delimits a string."""
    if raw.count(b"\\") < len(raw) >> 5:
        return _QUOTING_ESCAPE.sub(b"", raw)  # one pass, but a cost per match
    # Pairwise from the left, as json reads a run of backslashes; then the quotes.
    return raw.replace(b"\\\\", b"").replace(b'\\"', b"")


def _nesting_exceeds(steps: bytes) -> bool:
    """Whether the running sum of +1 (opening) and -1 (closing) steps ever exceeds MAX_DEPTH."""
    if steps.count(1) <= MAX_DEPTH:
        return False
    if _TOO_DEEP in steps:
        return True
    return max(itertools.accumulate(array.array("b", steps))) > MAX_DEPTH


def _may_overflow(raw: bytes) -> bool:
    """Whether a number may not fit 64 bits or a float (a false hit only costs hooks)."""
    shape = raw.translate(_NUMBER_SHAPE)
    if _LONG_EXPONENT.search(shape) or shape.startswith(_TOO_LONG_INT):
        return True
    if b" " + _TOO_LONG_INT in shape or b"s" + _TOO_LONG_INT in shape:
        return True
    nineteen = _NINETEEN_FROM_NINE.findall(raw)
    return bool(nineteen) and max(nineteen) > _INT_MAX_DIGITS


def _parse(text: str, field: str, *, check_numbers: bool) -> tuple[JSONValue, int]:
    """Decode `text` and count the members of all its objects."""
    members = 0

    def count_members(obj: dict[str, JSONValue]) -> dict[str, JSONValue]:
        nonlocal members
        members += len(obj)
        return obj

    value = _run_decoder(text, field, object_hook=count_members, check_numbers=check_numbers)
    return value, members


def _run_decoder(
    text: str,
    field: str,
    *,
    check_numbers: bool,
    object_hook: Callable[[dict[str, JSONValue]], JSONValue] | None = None,
    object_pairs_hook: Callable[[list[tuple[str, JSONValue]]], JSONValue] | None = None,
) -> JSONValue:
    try:
        value: JSONValue = json.loads(
            text,
            object_hook=object_hook,
            object_pairs_hook=object_pairs_hook,
            parse_constant=_reject_constant,
            parse_int=_parse_int if check_numbers else None,
            parse_float=_parse_float if check_numbers else None,
        )
    except _Rejected as exc:
        raise InvalidRequest(field, exc.reason) from None
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise InvalidRequest(field, f"invalid JSON at {where}: {exc.msg}") from None
    except RecursionError:
        raise InvalidRequest(field, f"nesting deeper than {MAX_DEPTH} levels") from None
    return value


def _check_escapes(raw: bytes, field: str) -> None:
    """Refuse \\u escapes that decode to NUL or to half of a surrogate pair."""
    if not _SUSPECT_ESCAPE.search(raw):
        return
    # Masked, not removed (that could join two halves into a false pair): then every backslash
    # left starts an escape.
    found = _LONE_ESCAPE.search(raw.replace(b"\\\\", b"__"))
    if found is None:
        return
    if found[0] == b"\\u0000":
        raise InvalidRequest(field, "NUL character in a string")
    raise InvalidRequest(field, f"lone surrogate in a string ({found[0].decode()})")


def _object(pairs: list[tuple[str, JSONValue]]) -> dict[str, JSONValue]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _Rejected(f"duplicate key {_clip(repr(_first_duplicate(pairs)))} in an object")
    return obj


def _first_duplicate(pairs: list[tuple[str, JSONValue]]) -> str:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            return key
        seen.add(key)
    raise AssertionError("no duplicate key")


def _reject_constant(name: str) -> NoReturn:
    raise _Rejected("NaN and Infinity are not JSON")


def _parse_int(text: str) -> int:
    # Length first: int() of thousands of digits is slow, then refused by Python itself.
    if len(text) <= 20:  # len("-9223372036854775808")
        value = int(text)
        if INT_MIN <= value <= INT_MAX:
            return value
    raise _Rejected(f"integer {_clip(text)} out of the 64-bit range")


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Rejected(f"number {_clip(text)} out of the float range")
    return value


def _check(value: object, depth: int) -> None:
    if isinstance(value, str):
        _check_text(value)
    elif isinstance(value, list | dict):
        if depth == MAX_DEPTH:
            raise _Rejected(f"nesting deeper than {MAX_DEPTH} levels")
        if isinstance(value, list):
            _check_items(value, depth + 1)
        else:
            _check_pairs(value, depth + 1)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise _Rejected("NaN and Infinity are not JSON")
    elif isinstance(value, int):  # bool included: always in range
        if not INT_MIN <= value <= INT_MAX:
            raise _Rejected(f"integer {_clip(str(value))} out of the 64-bit range")
    elif value is not None:
        raise _Rejected(f"a {type(value).__name__} is not a JSON value")


def _check_items(items: list[object], depth: int) -> None:
    for index, item in enumerate(items):
        try:
            _check(item, depth)
        except _Rejected as exc:
            exc.path.append(f"[{index}]")
            raise


def _check_pairs(obj: dict[object, object], depth: int) -> None:
    for key, item in obj.items():
        try:
            if not isinstance(key, str):
                raise _Rejected(f"object key {_clip(repr(key))} is not a string")
            _check_text(key)
            _check(item, depth)
        except _Rejected as exc:
            exc.path.append(_step(key))
            raise


def _step(key: object) -> str:
    return f".{key}" if isinstance(key, str) and key.isidentifier() else f"[{_clip(repr(key))}]"


def _check_text(text: str) -> None:
    if "\x00" in text:
        raise _Rejected("NUL character in a string")
    if not text.isascii() and _SURROGATE.search(text):
        raise _Rejected("lone surrogate in a string")


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _kind(value: JSONValue) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "a string" if isinstance(value, str) else "an array"
