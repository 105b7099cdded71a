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


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    """One Raft log entry: what to do (`type`, `body`), its id and the proposer's clock."""

    type: str  # "create_jobs", "cancel_job", ...
    id: str  # proposer-made; applying the same id twice acts once
    ts_ms: int  # the proposer's clock: the only "now" apply may use
    body: Mapping[str, Any]


def encode(cmd: Command) -> bytes:
    """The bytes that enter the log."""
    envelope = {
        "v": FORMAT_VERSION,
        "type": cmd.type,
        "id": cmd.id,
        "ts": cmd.ts_ms,
        "body": cmd.body,
    }
    return json.dumps(envelope, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def decode(blob: bytes, *, index: int) -> Command:
    """Parse a log entry; anything unreadable is a CorruptLog (the node halts)."""
    try:
        envelope = json.loads(blob)
        if envelope["v"] != FORMAT_VERSION:
            raise ValueError(f"unknown command format version {envelope['v']!r}")
        cmd = Command(
            type=str(envelope["type"]),
            id=str(envelope["id"]),
            ts_ms=int(envelope["ts"]),
            body=envelope["body"],
        )
        if not isinstance(cmd.body, dict):
            raise ValueError("body is not an object")
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptLog(f"undecodable log entry at index {index}: {exc}") from None
    return cmd


def ok(**fields: Any) -> dict[str, Any]:
    """An apply result for a command that took effect."""
    return {"status": "ok", **fields}


def rejected(code: str, message: str) -> dict[str, Any]:
    """An apply result for a command refused by the state it met (a business outcome)."""
    return {"status": "rejected", "code": code, "message": message}
