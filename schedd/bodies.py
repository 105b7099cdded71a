"""Request bodies as msgspec structs: each rule (type, bound, pattern) written once, in the struct,
enforced by msgspec and published by tools/gen_openapi.py from the same struct.

A body is read by `schedd.jsonbody` first (our JSON rules: duplicate keys, NUL, depth, 64-bit
integers), then converted here with unknown fields refused. msgspec's messages (`Expected `int`
>= 0 - at `$.max_active_jobs``) become the contract's InvalidRequest naming the field as the
user typed it. What msgspec cannot express (a duration...) is a `Checked` type: its own
validator, called by msgspec from this one place, and its own schema.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any, ClassVar, Self, TypeVar

import msgspec
import msgspec.inspect

from schedd.errors import InvalidRequest
from schedd.timeformat import MAX_DURATION_MS, format_duration, parse_duration

T = TypeVar("T")

UNKNOWN_FIELD = "is not a known field"
_AT = re.compile(r"^(?P<reason>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<key>.*)`$", re.DOTALL)
_MISSING = re.compile(r"^Object missing required field `(?P<key>.*)`$", re.DOTALL)
_JSON_TYPES = {
    "`str`": "a string",
    "`int`": "an integer",
    "`float`": "a number",
    "`bool`": "a boolean",
    "`object`": "an object",
    "`array`": "an array",
    "`null`": "null",
}


class Body(msgspec.Struct, forbid_unknown_fields=True):
    """A request body: unknown fields refused (400). `field_messages` keeps a field's sentence (the
    one the API answered before msgspec; `{value!r}` stands for what the body gave);
    `unknown_field` may list what is allowed, with `{fields}` standing for the struct's field
    names."""

    field_messages: ClassVar[Mapping[str, str]] = {}
    unknown_field: ClassVar[str] = UNKNOWN_FIELD
    # The field an unknown key is reported under (None: the key itself), for a body whose
    # contract names its one field then (`{"ids": [...]}` alone).
    unknown_field_at: ClassVar[str | None] = None


class Checked:
    """A field type msgspec cannot express (a duration's text, ...): `check` turns the JSON
    value into the type or raises InvalidRequest (the field is named by `convert_body`);
    `json_schema` is what OpenAPI says of it (tools/gen_openapi.py)."""

    @classmethod
    def check(cls, value: object) -> Self:
        raise NotImplementedError

    @classmethod
    def json_schema(cls) -> dict[str, object]:
        raise NotImplementedError


# OpenAPI's DurationText component: the text timeformat.parse_duration reads (a number of
# seconds, surrounding spaces allowed; or units), that DurationMs's schema refers to.
DURATION_TEXT: Mapping[str, object] = {
    "anyOf": [
        {"type": "string", "pattern": r"^\s*[0-9]{1,15}(\.[0-9]{1,9})?\s*$"},
        {
            "type": "string",
            "maxLength": 64,
            "pattern": r"^([0-9]{1,15}(\.[0-9]{1,9})?(ms|s|m|h|d))+$",
        },
    ],
    "examples": ["90s", "10m", "1h30m"],
}


class DurationMs(int, Checked):
    """Milliseconds, sent as "250ms", "90s", "10m", "2h", "1d", "1h30m" or a number of
    seconds (timeformat.parse_duration); subclasses set the range."""

    minimum_ms: ClassVar[int] = 0
    maximum_ms: ClassVar[int] = MAX_DURATION_MS  # parse_duration's bound, published: not a knob

    @classmethod
    def check(cls, value: object) -> Self:
        ms = parse_duration(value, field="", minimum_ms=cls.minimum_ms)
        if ms > cls.maximum_ms:  # a subclass's own bound (parse_duration refuses its own)
            raise InvalidRequest(
                "", f"must be at most {format_duration(cls.maximum_ms)}, got {value!r}"
            )
        return cls(ms)

    @classmethod
    def json_schema(cls) -> dict[str, object]:
        """Its docstring, then the duration's forms and bounds in seconds."""
        low, high = cls.minimum_ms // 1000, cls.maximum_ms // 1000
        return {
            "description": f"{(cls.__doc__ or '').strip()} A duration: "
            '"250ms", "90s", "10m", "2h", "1d", "1h30m" or a number of seconds; from '
            f"{low:,} s to {high:,} s.",
            "anyOf": [
                {"$ref": "#/components/schemas/DurationText"},
                {"type": "number", "minimum": low, "maximum": high},
            ],
        }


def ms_or(value: DurationMs | msgspec.UnsetType, default_ms: int) -> int:
    """A duration a body gave, else its default (a default in the struct would be published
    as a number of milliseconds, not as the duration text a client sends)."""
    return default_ms if value is msgspec.UNSET else int(value)


def convert_body(body: object, kind: type[T], *, field: str = "") -> T:
    """`body` (decoded by jsonbody) as the struct `kind`, or InvalidRequest naming the field,
    prefixed with `field` when given (`body.runs`)."""
    try:
        converted = msgspec.convert(body, kind, dec_hook=_check)
    except msgspec.ValidationError:
        # Perhaps only a whole float where an int goes: copying every body cost an ack of 100
        # receipts 10 of its 11 us, so the copy is made for a refused body alone.
        converted = _converted_again(body, kind, field)
    check_whole_patterns(converted, kind, field, body)
    return converted


def _converted_again(body: object, kind: type[T], prefix: str) -> T:
    try:
        return msgspec.convert(_integral(body), kind, dec_hook=_check)
    except msgspec.ValidationError as exc:
        raise _invalid(str(exc), kind, prefix, body) from None


def check_whole_patterns(converted: object, kind: type, prefix: str, body: object) -> None:
    """msgspec searches a pattern, and Python's `$` also matches before a final newline: a
    top-level field's pattern that ends in `$` must match the whole value (convert_body calls
    this; so does a caller whose struct msgspec converted inside another)."""
    for name, whole in _whole_patterns(kind):
        value = getattr(converted, name)
        # Without a final newline `$` is `\Z`: msgspec's match stands (the common case, cheap).
        if isinstance(value, str) and value.endswith("\n") and not whole.search(value):
            text = f"Expected `str` matching regex {whole.pattern[:-2] + '$'!r} - at `$.{name}`"
            raise _invalid(text, kind, prefix, body)


@functools.cache
def _whole_patterns(kind: type) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """The str fields of a struct whose pattern ends in `$`, that pattern ending in `\\Z`."""
    if not (isinstance(kind, type) and issubclass(kind, msgspec.Struct)):
        return ()
    found = []
    for field in msgspec.inspect.type_info(kind).fields:  # type: ignore[attr-defined]
        for member in _members(field.type):
            pattern = member.pattern if isinstance(member, msgspec.inspect.StrType) else None
            if pattern is not None and pattern.endswith("$"):
                found.append((field.name, re.compile(pattern[:-1] + r"\Z")))
    return tuple(found)


def _members(kind: msgspec.inspect.Type) -> list[msgspec.inspect.Type]:
    """A field type's alternatives (a union's), each without its metadata."""
    kinds = kind.types if isinstance(kind, msgspec.inspect.UnionType) else (kind,)
    return [k.type if isinstance(k, msgspec.inspect.Metadata) else k for k in kinds]


def _integral(value: object) -> object:
    """5.0 counts as 5, as JSON Schema's "integer" does (some encoders write every number as a
    float): msgspec takes an int wherever a float goes, never the reverse."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _integral(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral(item) for item in value]
    return value


def _check(kind: type, value: Any) -> Any:
    if isinstance(kind, type) and issubclass(kind, Checked):
        try:
            return kind.check(value)
        except InvalidRequest as exc:
            raise ValueError(exc.reason) from None  # msgspec adds where: ` - at `$.runs``
    raise NotImplementedError(f"no decoder for {kind!r}")


def _invalid(text: str, kind: type, prefix: str, body: object) -> InvalidRequest:
    found = _AT.fullmatch(text)
    reason, path = (found["reason"], found["path"] or "") if found else (text, "")
    if unknown := _UNKNOWN.fullmatch(reason):
        path, reason = _unknown_path(kind, path, unknown["key"]), _unknown_message(kind)
    elif missing := _MISSING.fullmatch(reason):
        path, reason = f"{path}.{missing['key']}", "is required"
    else:  # a field's own sentence is about the whole field (allowed_hosts, not an item)
        top = re.split(r"[.\[]", path.lstrip("."), maxsplit=1)[0]
        if message := _messages(kind).get(top):
            path, reason = top, _with_value(message, body, top)
        else:
            reason = _plain(reason)
    name = path.lstrip(".")
    return InvalidRequest(".".join(part for part in (prefix, name) if part) or "body", reason)


def _with_value(message: str, body: object, key: str) -> str:
    """A field's sentence with the value the body gave where it says `{value!r}` (clipped)."""
    if "{value!r}" not in message:
        return message  # it may hold other braces: a pattern's {1,128}
    return message.replace("{value!r}", excerpt(body.get(key) if isinstance(body, dict) else None))


def excerpt(value: object) -> str:
    """A value for an error message, its repr clipped at 80 characters (input can be long)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _messages(kind: type) -> Mapping[str, str]:
    return kind.field_messages if isinstance(kind, type) and issubclass(kind, Body) else {}


def _unknown_path(kind: type, path: str, key: str) -> str:
    named = kind.unknown_field_at if isinstance(kind, type) and issubclass(kind, Body) else None
    return named or f"{path}.{key}"


def _unknown_message(kind: type) -> str:
    if not (isinstance(kind, type) and issubclass(kind, Body)):
        return UNKNOWN_FIELD
    return kind.unknown_field.format(fields=", ".join(kind.__struct_fields__))


def _plain(reason: str) -> str:
    """msgspec's "Expected `int` >= 0, got `str`" as a sentence of the contract."""
    if reason.startswith("Expected "):
        reason = "must be " + reason.removeprefix("Expected ")
    for name, words in _JSON_TYPES.items():
        reason = reason.replace(name, words)
    return reason.replace("`", "")
