"""Commands: the Raft log's entries, encoded by us as versioned JSON (never pickle); and what
apply answers for each (Applied or Rejected).

The envelope lives here; the command types and their bodies are the catalogue, commands.py
(where the rule on wire names is written).
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import msgspec

from schedd.errors import CorruptLog
from schedd.jsonbody import JSONObject
from schedd.store.commands import DECODERS, LogCommand
from schedd.store.events import Event

FORMAT_VERSION = 1
BATCH = "batch"  # a group commit: body {"commands": [envelope, ...]}
# The largest encoded command (one log entry) a proposer sends: well under pysyncobj's
# appendEntriesBatchSizeBytes (4 MiB, node.py), past which entries take a path that misbehaves.
MAX_COMMAND_BYTES = 1024 * 1024


B = TypeVar("B", covariant=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class Command(Generic[B]):
    """One Raft log entry: what to do (`type`, `body`), its id and the proposer's clock. On the
    wire the body is a JSON object; apply sees it as its catalogue type (`typed`)."""

    type: str  # "create_jobs", "cancel_job", ...: the catalogue's TYPE
    id: str  # proposer-made; applying the same id twice acts once
    ts_ms: int  # the proposer's clock: the only "now" apply may use
    body: B


Wire = Command[Mapping[str, Any]]  # a body as a JSON object: tests and the fixture writer


def typed(cmd: Command[Any], *, index: int) -> Command[LogCommand[Any]]:
    """The entry with its body read as its catalogue type; CorruptLog if the type is unknown
    or the body does not fit it (an undecodable entry: the node halts). The body is the raw
    JSON of a decoded entry, or a JSON object already parsed."""
    decoder = DECODERS.get(cmd.type)
    if decoder is None:
        raise CorruptLog(f"unknown command type {cmd.type!r} at index {index}")
    try:
        if isinstance(cmd.body, msgspec.Raw):
            body = decoder.decode(cmd.body)
        else:
            body = msgspec.convert(cmd.body, decoder.type)
    except msgspec.DecodeError as exc:  # ValidationError included
        raise CorruptLog(f"undecodable {cmd.type} body at index {index}: {exc}") from None
    return Command(type=cmd.type, id=cmd.id, ts_ms=cmd.ts_ms, body=body)


_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_CANONICAL = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def stored_json(text: str | bytes) -> Any:
    """A JSON text the store holds (written by compact_json or canonical_json), read at C speed:
    the same values json.loads gives (the store never holds NaN or lone surrogates), several
    times faster on the claim and receive paths, which read one spec or payload per run."""
    return msgspec.json.decode(text)


def compact_json(value: Any) -> str:
    """JSON text without spaces; one shared encoder (json.dumps with options builds one a call)."""
    return _COMPACT.encode(value)


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted keys: the same text from any code version that builds the same
    value, so replicas' digests agree across a rolling upgrade."""
    return _CANONICAL.encode(value)


def _float_text(text: str) -> msgspec.Raw:
    """A float as canonical_json writes it (its repr; msgspec writes 1e16 where it writes
    1e+16), kept as raw JSON text."""
    value = float(text)
    return msgspec.Raw((repr(value) if math.isfinite(value) else _CANONICAL.encode(value)).encode())


_STORED_FOR_CANONICAL = msgspec.json.Decoder(float_hook=_float_text)
_SORTED = msgspec.json.Encoder(order="sorted")


def stored_json_as_canonical(text: str | bytes) -> Any:
    """`stored_json` for a value that `fast_canonical_json` writes: its floats held as the
    text canonical_json gives them."""
    return _STORED_FOR_CANONICAL.decode(text)


def fast_canonical_json(value: Any) -> str:
    """canonical_json's very text, written by msgspec (ten times faster: a receive keeps 100
    deliveries), for a value whose only floats were read by stored_json_as_canonical: both
    write keys in code point order, escape strings alike and write integers in full."""
    return _SORTED.encode(value).decode()


def envelope(cmd: Wire) -> JSONObject:
    """The JSON object of a command."""
    body = dict(cmd.body)
    return {"v": FORMAT_VERSION, "type": cmd.type, "id": cmd.id, "ts": cmd.ts_ms, "body": body}


def encode(cmd: Wire) -> bytes:
    """The bytes of a log entry whose body is given as a JSON object (json, as the code before
    the typed catalogue wrote them: tests and tools/fixtures use it; nodes use encode_command)."""
    text = json.dumps(envelope(cmd), separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.encode()


class _Envelope(msgspec.Struct, frozen=True):
    """A log entry on the wire; its body stays raw JSON until its type is known."""

    v: int
    type: str
    id: str
    ts: int
    body: msgspec.Raw


class _Outgoing(msgspec.Struct, frozen=True):
    """A typed command's log entry, encoded by msgspec in one pass."""

    v: int
    type: str
    id: str
    ts: int
    body: LogCommand[Any]


class _Batch(msgspec.Struct, frozen=True):
    commands: list[_Envelope]


_ENCODER = msgspec.json.Encoder()
_ENVELOPE = msgspec.json.Decoder(_Envelope)
_BATCH = msgspec.json.Decoder(_Batch)


def encode_command(cmd: LogCommand[Any], *, id: str, ts_ms: int) -> bytes:
    """The bytes that enter the log for a typed command (the same JSON as `encode` of its
    body, without building the body's objects).

    msgspec checks types when it decodes, not when a struct is built: a producer that put a
    float in an int field would write an entry every replica halts on (CorruptLog, at every
    restart). So the bytes are read back as apply will read them, here, before they can enter
    the log; a command that does not fit its type is a TypeError in its producer."""
    blob = _ENCODER.encode(_Outgoing(v=FORMAT_VERSION, type=cmd.TYPE, id=id, ts=ts_ms, body=cmd))
    try:
        DECODERS[cmd.TYPE].decode(_ENVELOPE.decode(blob).body)
    except msgspec.DecodeError as exc:
        raise TypeError(f"{cmd.TYPE} does not fit its type: {exc}") from None
    return blob


def encode_batch(blobs: list[bytes], *, id: str, ts_ms: int) -> bytes:
    """One log entry carrying several encoded commands (each keeps its own id for dedupe).

    Spliced as bytes: the commands are not encoded a second time.
    """
    head = json.dumps({"v": FORMAT_VERSION, "type": BATCH, "id": id, "ts": ts_ms})
    return head[:-1].encode() + b',"body":{"commands":[' + b",".join(blobs) + b"]}}"


def unbatch(cmd: Command[Any], *, index: int) -> list[Command[Any]]:
    """The commands inside a batch entry (bodies still raw); CorruptLog if unreadable."""
    try:
        batch = _BATCH.decode(cmd.body) if isinstance(cmd.body, msgspec.Raw) else None
        if batch is None:
            batch = msgspec.convert(cmd.body, _Batch)
        return [_from_envelope(item) for item in batch.commands]
    except (ValueError, msgspec.DecodeError) as exc:
        raise CorruptLog(f"undecodable batch at index {index}: {exc}") from None


def decode(blob: bytes, *, index: int) -> Command[Any]:
    """Parse a log entry's envelope (its body stays raw JSON: `typed` reads it); anything
    unreadable is a CorruptLog (the node halts)."""
    try:
        return _from_envelope(_ENVELOPE.decode(blob))
    except (ValueError, msgspec.DecodeError) as exc:
        raise CorruptLog(f"undecodable log entry at index {index}: {exc}") from None


def _from_envelope(item: _Envelope) -> Command[Any]:
    if item.v != FORMAT_VERSION:
        raise ValueError(f"unknown command format version {item.v!r}")
    return Command(type=item.type, id=item.id, ts_ms=item.ts, body=item.body)


@dataclass(frozen=True, slots=True)
class Applied:
    """A command took effect: its result fields (as proposers and applied_commands see them)
    and the events the node routes once the entry committed (never stored, never answered).
    `kept`: the result's canonical_json text when the apply function wrote it already."""

    fields: Mapping[str, Any] = field(default_factory=dict)
    events: tuple[Event, ...] = ()
    kept: str | None = None

    def to_json(self) -> JSONObject:
        return {"status": "ok", **self.fields}


@dataclass(frozen=True, slots=True)
class Rejected:
    """A command refused by the state it met (a business outcome); `code` is one SchedError
    class's code (errors.py BY_CODE). It changed nothing, so it reports no event."""

    code: str
    message: str

    def to_json(self) -> JSONObject:
        return {"status": "rejected", "code": self.code, "message": self.message}


Result = Applied | Rejected
# An apply function: (the transaction, the typed command) -> its result. Registered by wire
# name in the apply modules' HANDLERS.
Handler = Callable[[sqlite3.Connection, Any], Result]


def ok(*events: Event, **fields: Any) -> Applied:
    """The result of a command that took effect, with the events it reports."""
    return Applied(fields, events)


def rejected(code: str, message: str) -> Rejected:
    """The result of a command refused by the state it met (a business outcome)."""
    return Rejected(code, message)
