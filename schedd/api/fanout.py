"""Ask every other registered node the same GET, with the admin token, and gather the answers.

For routes whose answer is the whole cluster's (`/v1/stats?scope=cluster`, the consumers of
`/v1/queues`): the web console may ask only the node it is served from. Peers' answers are
untrusted bytes: a short timeout, a capped read, no redirects, JSON objects only; a node that
fails costs only its own answer."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import msgspec

from schedd.addresses import reachable_api_url

log = logging.getLogger(__name__)
TIMEOUT_S = 2.0
MAX_ANSWER_BYTES = 1024 * 1024  # a stats ring is ~60 KB, a tenant's consumers ~250 KB


@dataclass(frozen=True, slots=True, kw_only=True)
class PeerAnswer:
    """One node's answer: its JSON object, or why there is none."""

    node_id: str
    body: dict[str, Any] | None = None
    error: str | None = None


async def ask_peers(
    nodes: Sequence[tuple[str, str, str]],
    self_id: str,
    path: str,
    *,
    admin_token: str,
    tls: ssl.SSLContext | None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = TIMEOUT_S,
) -> list[PeerAnswer]:
    """GET `path` (with its query) from every node of `nodes` ((node_id, api, raft) rows, as
    queries.list_nodes gives them) but `self_id`, concurrently; answers in the rows' order."""
    peers = [(node_id, reachable_api_url(api, raft)) for node_id, api, raft in nodes]
    sent = {
        "Authorization": f"Bearer {admin_token}",
        "Accept-Encoding": "identity",  # a compressed answer could expand past the cap
        **(headers or {}),
    }
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with aiohttp.ClientSession(
        timeout=timeout, auto_decompress=False, headers=sent
    ) as session:
        return list(
            await asyncio.gather(
                *(
                    _ask(session, node_id, api + path, tls)
                    for node_id, api in peers
                    if node_id != self_id
                )
            )
        )


async def _ask(
    session: aiohttp.ClientSession, node_id: str, url: str, tls: ssl.SSLContext | None
) -> PeerAnswer:
    try:
        async with session.get(url, allow_redirects=False, ssl=tls or True) as response:
            if response.status != 200:
                return PeerAnswer(node_id=node_id, error=f"answered HTTP {response.status}")
            data = await _read_capped(response)
    except TimeoutError:
        return PeerAnswer(node_id=node_id, error="no answer within the timeout")
    except (aiohttp.ClientError, OSError, ValueError) as exc:
        log.debug("fan-out: no answer node=%s error=%s", node_id, exc)  # the answer says it
        return PeerAnswer(node_id=node_id, error=_failure(exc))
    try:
        body = msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return PeerAnswer(node_id=node_id, error="its answer is not JSON")
    if not isinstance(body, dict):
        return PeerAnswer(node_id=node_id, error="its answer is not a JSON object")
    return PeerAnswer(node_id=node_id, body=body)


async def _read_capped(response: aiohttp.ClientResponse) -> bytes:
    if (response.content_length or 0) > MAX_ANSWER_BYTES:
        raise ValueError(f"answer over {MAX_ANSWER_BYTES} bytes")
    chunks, size = [], 0
    async for chunk in response.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise ValueError(f"answer over {MAX_ANSWER_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _failure(exc: Exception) -> str:
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return "its certificate cannot be verified (set [api] tls_ca)"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "connection refused or unreachable"
    if isinstance(exc, ValueError):
        return str(exc)
    return f"request failed ({type(exc).__name__})"
