"""Encryption at rest of job payloads (AES-256-GCM, from `cryptography`).

When an operator configures keys, the API seals each payload before proposing it, so the Raft
log, the snapshots and every SQLite replica hold only ciphertext; the payload is opened where it
leaves the cluster (API answers, queue receives, HTTP callbacks). A sealed payload is a JSON
string `"schedd:sealed:v1:<key id>:<base64(nonce + ciphertext)>"`; the key id is also the
associated data, so a ciphertext cannot be passed off under another key. A tenant's own string
that starts with that prefix is stored with an empty key id, `"schedd:sealed:v1::<string>"`
(verbatim), so it can never pass for ciphertext; no key id is empty, and nothing readable was
ever stored in that form, so old data reads as it did.

Key file: one key per line, `<key id> <base64 of 32 bytes>`; the first line seals, every line
opens (see docs/operations: adding a key, promoting it, retiring the old one).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from schedd.errors import ConfigError, SchedError

PREFIX = "schedd:sealed:v1:"
VERBATIM = PREFIX + ":"  # the empty key id: a plain string that starts with PREFIX
NONCE_BYTES = 12
KEY_BYTES = 32
_KEY_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class PayloadUnreadable(SchedError):
    """A sealed payload that none of the configured keys opens."""

    code = "payload_unreadable"
    http_status = 500


class PayloadKeys:
    """The node's payload keys; with none configured, payloads pass through unchanged."""

    def __init__(self, keys: Sequence[tuple[str, bytes]] = ()) -> None:
        self._ciphers = {key_id: AESGCM(key) for key_id, key in keys}
        self._current = keys[0][0] if keys else None

    @property
    def enabled(self) -> bool:
        return self._current is not None

    @classmethod
    def from_file(cls, path: Path) -> PayloadKeys:
        """Read a key file; a ConfigError names the line that is wrong (never a key)."""
        try:
            lines = path.read_text().splitlines()
        except OSError as exc:
            raise ConfigError(f"encryption.payload_keys_file: cannot read {path}: {exc}") from None
        keys: list[tuple[str, bytes]] = []
        for number, line in enumerate(lines, start=1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            keys.append(_parse_key_line(path, number, line))
        if not keys:
            raise ConfigError(f"encryption.payload_keys_file: {path} holds no key")
        if len({key_id for key_id, _ in keys}) != len(keys):
            raise ConfigError(f"encryption.payload_keys_file: {path} names a key id twice")
        return cls(keys)

    def seal(self, payload: Any) -> Any:
        """The payload as stored: sealed with the current key, or as it is without keys."""
        if self._current is None:
            return _verbatim(payload)
        plain = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[self._current].encrypt(nonce, plain, self._current.encode())
        return f"{PREFIX}{self._current}:{base64.b64encode(nonce + sealed).decode()}"

    def open(self, stored: Any) -> Any:
        """The payload as the tenant sent it (unsealed values pass through)."""
        if not isinstance(stored, str) or not stored.startswith(PREFIX):
            return stored
        if stored.startswith(VERBATIM):
            return stored[len(VERBATIM) :]
        key_id, has_separator, text = stored[len(PREFIX) :].partition(":")
        if not has_separator or not _KEY_ID.fullmatch(key_id):
            # seal() never wrote this: a tenant's string stored raw before VERBATIM existed.
            return stored
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise PayloadUnreadable(f"the payload was sealed with key {key_id!r}, not configured")
        try:
            blob = base64.b64decode(text, validate=True)
            plain = cipher.decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], key_id.encode())
        except (InvalidTag, binascii.Error, ValueError):
            raise PayloadUnreadable(f"the payload sealed with key {key_id!r} is damaged") from None
        return json.loads(plain)

    def open_text(self, stored_json: str) -> str:
        """`open` for a payload kept as JSON text (queue messages, outbox rows)."""
        if not stored_json.startswith('"' + PREFIX):
            return stored_json
        stored = json.loads(stored_json)
        opened = self.open(stored)
        if opened is stored:
            return stored_json
        return json.dumps(opened, separators=(",", ":"), ensure_ascii=False)


def _verbatim(payload: Any) -> Any:
    """A plain payload as stored: a string in the sealed form's namespace is marked verbatim."""
    if isinstance(payload, str) and payload.startswith(PREFIX):
        return VERBATIM + payload
    return payload


def _parse_key_line(path: Path, number: int, line: str) -> tuple[str, bytes]:
    where = f"encryption.payload_keys_file: {path} line {number}"
    parts = line.split()
    if len(parts) != 2 or not _KEY_ID.fullmatch(parts[0]):
        raise ConfigError(f"{where}: expected '<key id> <base64 of {KEY_BYTES} bytes>'")
    try:
        key = base64.b64decode(parts[1], validate=True)
    except binascii.Error:
        raise ConfigError(f"{where}: the key is not base64") from None
    if len(key) != KEY_BYTES:
        raise ConfigError(f"{where}: the key must be {KEY_BYTES} bytes, got {len(key)}")
    return parts[0], key


def new_key_line(key_id: str) -> str:
    """A fresh key line for the key file (used by `schedd keygen`-style tooling and tests)."""
    if not _KEY_ID.fullmatch(key_id):
        raise ValueError("a key id is 1-64 of [A-Za-z0-9_.-]")
    return f"{key_id} {base64.b64encode(os.urandom(KEY_BYTES)).decode()}"
