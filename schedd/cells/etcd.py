"""A small client of etcd's v3 HTTP/JSON gateway (`/v3/kv/range`, `/v3/kv/txn`; keys and values
base64, 64-bit numbers as strings): what the directory needs, over aiohttp. Every answer is read
as hostile input: bounded in size and time, its shape checked. Failures are `EtcdError`."""

from __future__ import annotations

import base64
import binascii
import json
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

MAX_ANSWER_BYTES = 4 * 1024 * 1024
MAX_KEYS = 1024  # a prefix read returns at most this many keys


class EtcdError(Exception):
    """etcd could not be reached, or answered something that is not a gateway answer."""


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: str
    value: bytes
    mod_revision: int


def _b64(text: str | bytes) -> str:
    raw = text.encode() if isinstance(text, str) else text
    return base64.b64encode(raw).decode()


def prefix_end(prefix: str) -> str:
    """The range_end that makes a range read every key starting with `prefix` (ASCII)."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


class Etcd:
    """Requests to the first endpoint that answers, in the order configured; https:// ones
    verified with `ssl_context` (a CA, a client certificate: tls.etcd_context), else with the
    system's trust store."""

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        timeout_s: float = 2.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._endpoints = list(endpoints)
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._ssl: ssl.SSLContext | bool = True if ssl_context is None else ssl_context
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def get(self, key: str) -> KeyValue | None:
        """The key, or None when it does not exist."""
        found = _kvs(await self._call("/v3/kv/range", {"key": _b64(key)}))
        return found[0] if found else None

    async def get_prefix(self, prefix: str) -> list[KeyValue]:
        body = {"key": _b64(prefix), "range_end": _b64(prefix_end(prefix)), "limit": MAX_KEYS}
        return _kvs(await self._call("/v3/kv/range", body))

    async def put_if(self, key: str, value: bytes, *, mod_revision: int) -> bool:
        """Put `value` if the key's mod_revision is still `mod_revision` (0: the key does not
        exist); False when it changed meanwhile."""
        body = {
            "compare": [
                {
                    "target": "MOD",
                    "key": _b64(key),
                    "mod_revision": str(mod_revision),
                    "result": "EQUAL",
                }
            ],
            "success": [{"request_put": {"key": _b64(key), "value": _b64(value)}}],
        }
        answer = await self._call("/v3/kv/txn", body)
        succeeded = answer.get("succeeded", False)  # proto3 JSON leaves a false out
        if not isinstance(succeeded, bool):
            raise EtcdError("etcd's txn answer has no boolean 'succeeded'")
        return succeeded

    async def _call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self._session is None:
            connector = aiohttp.TCPConnector(ssl=self._ssl)  # https://: verified, always
            self._session = aiohttp.ClientSession(timeout=self._timeout, connector=connector)
        problems = []
        for endpoint in self._endpoints:
            try:
                return await self._post(self._session, endpoint + path, body)
            except (aiohttp.ClientError, TimeoutError, EtcdError) as exc:
                problems.append(f"{endpoint}: {str(exc) or type(exc).__name__}")
        raise EtcdError("; ".join(problems) or "no etcd endpoint configured")

    async def _post(
        self, session: aiohttp.ClientSession, url: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        async with session.post(url, json=body) as response:
            raw = await response.content.read(MAX_ANSWER_BYTES + 1)
            if len(raw) > MAX_ANSWER_BYTES:
                raise EtcdError(f"answer over {MAX_ANSWER_BYTES} bytes")
            try:
                answer = json.loads(raw)
            except (ValueError, UnicodeDecodeError):
                raise EtcdError(f"HTTP {response.status}, not JSON") from None
            if not isinstance(answer, dict):
                raise EtcdError(f"HTTP {response.status}, not a JSON object")
            if response.status != 200:
                message = answer.get("message") or answer.get("error")
                raise EtcdError(f"HTTP {response.status}: {str(message)[:200]}")
            return answer


def _kvs(answer: dict[str, Any]) -> list[KeyValue]:
    items = answer.get("kvs", [])  # left out when there are none
    if not isinstance(items, list) or len(items) > MAX_KEYS:
        raise EtcdError("etcd's range answer has no list 'kvs'")
    found = []
    for item in items:
        if not isinstance(item, dict):
            raise EtcdError("etcd's range answer holds a kv that is not an object")
        try:
            key = base64.b64decode(item.get("key", ""), validate=True).decode()
            value = base64.b64decode(item.get("value", ""), validate=True)
            revision = int(item.get("mod_revision", "0"))
        except (binascii.Error, UnicodeDecodeError, ValueError, TypeError):
            raise EtcdError("etcd's range answer holds a kv that does not decode") from None
        found.append(KeyValue(key, value, revision))
    return found
