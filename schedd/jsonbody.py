"""Strict JSON for request bodies and the log: refuse what `json` accepts but our contract does not.

Decodes, checks and encodes JSON values only; it knows nothing of jobs, fields or HTTP.
"""

from __future__ import annotations

import codecs
import json
import math
import re
from typing import NoReturn, TypeAlias, cast

from schedd.errors import InvalidRequest

JSONValue: TypeAlias = bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"] | None

MAX_DEPTH = 32
INT_MIN = -(2**63)
INT_MAX = 2**63 - 1

_DEPTH_KEEP = b'"[]{}'
_DEPTH_DELETE = bytes(sorted(set(range(256)) - set(_DEPTH_KEEP)))
_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_SAME_BRACKETS = bytes.maketrans(b"{}", b"[]")
# The text is strict UTF-8 and json refuses raw control characters, so only these escapes can
# put a surrogate or a NUL into a decoded string; a false hit (an escaped backslash) costs a walk.
_SUSPECT_ESCAPE = re.compile(rb"\\u(?:[dD][89a-fA-F][0-9a-fA-F]{2}|0000)")
# Numbers reduced to their shape: digits become 0, exponent marks e, signs vanish, the rest spaces.
_SURROGATE_PAIR = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_NUMBER_SHAPE = bytes.maketrans(
    b"0123456789eE." + bytes(sorted(set(range(256)) - set(b"0123456789eE.+-"))),
    b"0000000000ee." + b" " * (256 - 15),
)
_LONG_INT = b"0" * 19  # 18 digits always fit 64 bits
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
    if _too_deep(raw):
        raise InvalidRequest(field, f"nesting deeper than {MAX_DEPTH} levels")
    value = _parse(text, field, has_big_numbers=_has_big_numbers(raw))
    if b"\\u" in raw:
        _check_escapes(raw, field)
    return value


def _check_escapes(raw: bytes, field: str) -> None:
    """Refuse \\u escapes that decode to NUL or to half of a surrogate pair."""
    if not _SUSPECT_ESCAPE.search(raw):
        return
    # Without escaped backslashes every backslash left starts an escape; drop the valid pairs.
    escapes = _SURROGATE_PAIR.sub(b"", raw.replace(b"\\\\", b""))
    found = _SUSPECT_ESCAPE.search(escapes)
    if found is None:
        return
    if found[0] == b"\\u0000":
        raise InvalidRequest(field, "NUL character in a string")
    raise InvalidRequest(field, f"lone surrogate in a string ({found[0].decode()})")


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


def _too_deep(raw: bytes) -> bool:
    """Whether brackets outside strings nest deeper than MAX_DEPTH, without recursing."""
    if b'\\"' in raw:
        raw = _ESCAPE.sub(b"", raw)  # then every quote left opens or closes a string
    skeleton = raw.translate(None, _DEPTH_DELETE)
    if skeleton.count(b"[") + skeleton.count(b"{") <= MAX_DEPTH:
        return False
    return _nesting_exceeds(_outside_strings(skeleton).translate(_SAME_BRACKETS))


def _outside_strings(skeleton: bytes) -> bytes:
    """Drop the strings from quotes and brackets, keeping the brackets between them."""
    # A string holding no bracket leaves two adjacent quotes, and pairs go left to right; one
    # that holds a bracket leaves an odd run of quotes before it, so a quote survives.
    shorter = skeleton.replace(b'""', b"")
    if b'"' not in shorter:
        return shorter
    return b"".join(skeleton.split(b'"')[::2])


def _nesting_exceeds(skeleton: bytes) -> bool:
    # Each pass removes exactly one level of a balanced run of brackets.
    for _ in range(MAX_DEPTH):
        shorter = skeleton.replace(b"[]", b"")
        if len(shorter) == len(skeleton):
            return False  # empty, or unbalanced: json.loads says where
        skeleton = shorter
    return b"[]" in skeleton


def _has_big_numbers(raw: bytes) -> bool:
    """Whether a number may overflow: 19 integer digits or a 3-digit exponent (or a false hit)."""
    shape = raw.translate(_NUMBER_SHAPE, b"+-")
    return shape.startswith(_LONG_INT) or b" " + _LONG_INT in shape or b"e000" in shape


def _parse(text: str, field: str, *, has_big_numbers: bool) -> JSONValue:
    try:
        value: JSONValue = json.loads(
            text,
            object_pairs_hook=_object,
            parse_constant=_reject_constant,
            parse_int=_parse_int if has_big_numbers else None,
            parse_float=_parse_float if has_big_numbers else None,
        )
    except _Rejected as exc:
        raise InvalidRequest(field, exc.reason) from None
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise InvalidRequest(field, f"invalid JSON at {where}: {exc.msg}") from None
    except RecursionError:
        raise InvalidRequest(field, f"nesting deeper than {MAX_DEPTH} levels") from None
    return value


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
    if len(text) <= len(str(INT_MIN)):
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
        _check_text(value, "a string")
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
            _check_text(key, "a string")
            _check(item, depth)
        except _Rejected as exc:
            exc.path.append(_step(key))
            raise


def _step(key: object) -> str:
    return f".{key}" if isinstance(key, str) and key.isidentifier() else f"[{_clip(repr(key))}]"


def _check_text(text: str, what: str) -> None:
    if "\x00" in text:
        raise _Rejected(f"NUL character in {what}")
    if not text.isascii() and _SURROGATE.search(text):
        raise _Rejected(f"lone surrogate in {what}")


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
