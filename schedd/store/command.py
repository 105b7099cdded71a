"""Commands: the Raft log's entries, encoded by us as versioned JSON (never pickle).

`type` is a wire name: never rename or reuse one; bump `v` before changing a body's meaning.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from schedd.errors import CorruptLog

FORMAT_VERSION = 1
# The command types this version applies, as a level: a node halts on a type it does not know,
# so a type added at level N is proposed only once every member reports N or more (/healthz
# `log_level`; a rolling upgrade runs old and new nodes side by side). Level 2: prune and
# set_retention (issue 14).
LOG_LEVEL = 2
LEVEL_OF_TYPE = {"prune": 2, "set_retention": 2}
BATCH = "batch"  # a group commit: body {"commands": [envelope, ...]}
# A handler's report of the (tenant_id, queue) pairs that got messages. An effect for the node
# (it wakes those queues' long polls), not a result: apply takes it out before the result is
# stored or answered, so results and digests stay what they were.
FED_QUEUES = "fed_queues"
# The largest encoded command (one log entry) a proposer sends: well under pysyncobj's
# appendEntriesBatchSizeBytes (4 MiB, node.py), past which entries take a path that misbehaves.
MAX_COMMAND_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    """One Raft log entry: what to do (`type`, `body`), its id and the proposer's clock."""

    type: str  # "create_jobs", "cancel_job", ...
    id: str  # proposer-made; applying the same id twice acts once
    ts_ms: int  # the proposer's clock: the only "now" apply may use
    body: Mapping[str, Any]


_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_CANONICAL = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def compact_json(value: Any) -> str:
    """JSON text without spaces; one shared encoder (json.dumps with options builds one a call)."""
    return _COMPACT.encode(value)


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted keys: the same text from any code version that builds the same
    value, so replicas' digests agree across a rolling upgrade."""
    return _CANONICAL.encode(value)


def envelope(cmd: Command) -> dict[str, Any]:
    """The JSON object of a command."""
    return {"v": FORMAT_VERSION, "type": cmd.type, "id": cmd.id, "ts": cmd.ts_ms, "body": cmd.body}


def encode(cmd: Command) -> bytes:
    """The bytes that enter the log."""
    text = json.dumps(envelope(cmd), separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.encode()


def encode_batch(blobs: list[bytes], *, id: str, ts_ms: int) -> bytes:
    """One log entry carrying several encoded commands (each keeps its own id for dedupe).

    Spliced as bytes: the commands are not encoded a second time.
    """
    head = json.dumps({"v": FORMAT_VERSION, "type": BATCH, "id": id, "ts": ts_ms})
    return head[:-1].encode() + b',"body":{"commands":[' + b",".join(blobs) + b"]}}"


def unbatch(cmd: Command, *, index: int) -> list[Command]:
    """The commands inside a batch entry; CorruptLog if they cannot be read."""
    try:
        return [_from_envelope(item) for item in cmd.body["commands"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptLog(f"undecodable batch at index {index}: {exc}") from None


def decode(blob: bytes, *, index: int) -> Command:
    """Parse a log entry; anything unreadable is a CorruptLog (the node halts)."""
    try:
        return _from_envelope(json.loads(blob))
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptLog(f"undecodable log entry at index {index}: {exc}") from None


def _from_envelope(item: Mapping[str, Any]) -> Command:
    if item["v"] != FORMAT_VERSION:
        raise ValueError(f"unknown command format version {item['v']!r}")
    cmd = Command(
        type=str(item["type"]), id=str(item["id"]), ts_ms=int(item["ts"]), body=item["body"]
    )
    if not isinstance(cmd.body, dict):
        raise ValueError("body is not an object")
    return cmd


def ok(**fields: Any) -> dict[str, Any]:
    """An apply result for a command that took effect."""
    return {"status": "ok", **fields}


def fed(pairs: set[tuple[str, str]]) -> dict[str, Any]:
    """The FED_QUEUES field of a result, for `ok(**fed(pairs))`; empty when nothing was fed."""
    return {FED_QUEUES: sorted(pairs)} if pairs else {}


def rejected(code: str, message: str) -> dict[str, Any]:
    """An apply result for a command refused by the state it met (a business outcome)."""
    return {"status": "rejected", "code": code, "message": message}
