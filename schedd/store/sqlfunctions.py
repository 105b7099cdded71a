"""Python functions every schedd SQLite connection has (db.connect registers them): what the
filtered job list (job_search) compares, and the job's newest runs (recent_runs) read, that SQL
alone cannot say."""

from __future__ import annotations

import functools
import sqlite3
from urllib.parse import urlsplit


@functools.lru_cache(maxsize=4096)  # a tenant's jobs share a few callback URLs
def url_host(url: object) -> str | None:
    """The lowercase host of a URL (no brackets around IPv6), or None."""
    if not isinstance(url, str):
        return None
    try:
        return urlsplit(url).hostname
    except ValueError:
        return None


def fold(text: object) -> str | None:
    """Text casefolded (caseless matching, as str.casefold), or None."""
    return text.casefold() if isinstance(text, str) else None


def int64_le(data: object) -> int | None:
    """A little-endian signed 64-bit integer from 8 bytes (a batch's times), or None."""
    if not isinstance(data, bytes) or len(data) != 8:
        return None
    return int.from_bytes(data, "little", signed=True)


def register(conn: sqlite3.Connection) -> None:
    conn.create_function("schedd_url_host", 1, url_host, deterministic=True)
    conn.create_function("schedd_fold", 1, fold, deterministic=True)
    conn.create_function("schedd_int64_le", 1, int64_le, deterministic=True)
