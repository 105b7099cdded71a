"""Fetch one closed segment file from one peer into a `.part` file, resuming at the length
already there (HTTP Range), never reading past the size the peer's manifest offered.

The peer is untrusted: no redirects, a timeout on every read, a Content-Range that must
name exactly the bytes asked for, and at most `offer.size` bytes written in all. A transfer
cut short keeps its part, so the next try asks only for the rest."""

from __future__ import annotations

import re
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from http.client import HTTPException, HTTPResponse
from pathlib import Path
from typing import IO, cast

from schedd.store.files import sync_file
from schedd.worker.client import no_redirect_opener

CHUNK = 1024 * 1024
# A peer that trickles bytes keeps every read within the timeout: the whole copy has a deadline
# too, of the timeout plus the bytes at this rate (a node's disk and network do far better).
MIN_BYTES_PER_S = 1024 * 1024
_CONTENT_RANGE = re.compile(r"bytes (\d{1,15})-(\d{1,15})/(\d{1,15})")


@dataclass(frozen=True, slots=True)
class Offer:
    """A closed segment as one peer offers it: its size and the sha256 of its bytes."""

    name: str
    size: int
    sha256: str


class TransferFailed(Exception):
    """This peer did not deliver the file; the message says why (another peer may)."""


OpenUrl = Callable[[urllib.request.Request, float], HTTPResponse]


def opener(tls: ssl.SSLContext | None) -> OpenUrl:
    """Open a request with a timeout, following no redirect, checking peers' certificates with
    `tls`."""
    director = no_redirect_opener(tls)

    def open_url(request: urllib.request.Request, timeout_s: float) -> HTTPResponse:
        return cast(HTTPResponse, director.open(request, timeout=timeout_s))

    return open_url


def segment_url(api_url: str, name: str) -> str:
    return f"{api_url.rstrip('/')}/v1/admin/segments/{name}"


def download(
    open_url: OpenUrl,
    api_url: str,
    offer: Offer,
    part: Path,
    *,
    token: str,
    timeout_s: float,
    should_stop: Callable[[], bool] = lambda: False,
) -> None:
    """Bring `part` to `offer.size` bytes from the peer at `api_url` and fsync it; its content is
    the verifier's to check. Raises TransferFailed (the part keeps what arrived)."""
    have = part.stat().st_size if part.exists() else 0
    if have > offer.size:
        part.unlink()
        have = 0
    if have < offer.size:
        headers = {"Authorization": f"Bearer {token}", "Accept-Encoding": "identity"}
        if have:
            headers["Range"] = f"bytes={have}-"
        request = urllib.request.Request(segment_url(api_url, offer.name), headers=headers)
        try:
            with open_url(request, timeout_s) as answer:
                start = _start_of(answer, have, offer.size)
                deadline = time.monotonic() + timeout_s + (offer.size - start) / MIN_BYTES_PER_S
                with part.open("r+b" if part.exists() else "wb") as out:
                    out.truncate(start)
                    out.seek(start)
                    _copy(answer, out, offer.size - start, should_stop, deadline)
        except urllib.error.HTTPError as exc:
            raise TransferFailed(f"answered HTTP {exc.code}") from None
        except (urllib.error.URLError, HTTPException, OSError) as exc:
            raise TransferFailed(f"transfer failed: {exc}") from None
    sync_file(part)


def _start_of(answer: HTTPResponse, have: int, size: int) -> int:
    """Where the answer's bytes go in the file: `have` for a 206 naming exactly that range, 0
    for a 200 (the whole file again)."""
    if answer.status == 200:
        return 0
    if answer.status != 206:
        raise TransferFailed(f"answered HTTP {answer.status}")
    match = _CONTENT_RANGE.fullmatch(answer.headers.get("Content-Range", ""))
    if match is None or [int(g) for g in match.groups()] != [have, size - 1, size]:
        raise TransferFailed(
            f"answered Content-Range {answer.headers.get('Content-Range')!r} for bytes "
            f"{have}-{size - 1}/{size}"
        )
    return have


def _copy(
    answer: HTTPResponse,
    out: IO[bytes],
    remaining: int,
    should_stop: Callable[[], bool],
    deadline: float,
) -> None:
    while remaining > 0:
        if should_stop():
            raise TransferFailed("the node is stopping")
        if time.monotonic() > deadline:
            raise TransferFailed(
                f"the peer sends slower than {MIN_BYTES_PER_S // 1024:,} KiB/s: given up"
            )
        chunk = answer.read1(min(CHUNK, remaining))  # what has arrived: the checks above run
        if not chunk:
            raise TransferFailed(f"the answer ended {remaining:,} bytes short")
        out.write(chunk)
        remaining -= len(chunk)
    if answer.read(1):
        raise TransferFailed("the answer is longer than the size offered")
