"""Filtered pages of a tenant's jobs (GET /v1/jobs with target, name or next-run filters).

No index covers these fields: each page examines at most SCAN_ROWS jobs in job_id order after
the cursor, so a page costs the same with 1,000,000 jobs as with 10,000. Never writes.
"""

from __future__ import annotations

import functools
import sqlite3
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from schedd.store.queries import JOB_COLUMNS, job_to_json

SCAN_ROWS = 10_000  # jobs examined per filtered page, matching or not


@dataclass(frozen=True, slots=True, kw_only=True)
class JobFilter:
    """What a listed job must match (every given field: AND). `host` is lowercase, `name`
    casefolded; next-run bounds are half-open: after <= next_run_at_ms < before."""

    status: str | None = None
    target_type: str | None = None
    queue: str | None = None
    host: str | None = None
    name: str | None = None
    next_run_after_ms: int | None = None
    next_run_before_ms: int | None = None

    @property
    def is_scanning(self) -> bool:
        """Whether a page needs the bounded scan (status alone is an index range)."""
        return any(
            value is not None
            for value in (
                self.target_type,
                self.queue,
                self.host,
                self.name,
                self.next_run_after_ms,
                self.next_run_before_ms,
            )
        )

    def conditions(self) -> tuple[str, list[Any]]:
        """The SQL condition on a jobs row (cheapest terms first) and its arguments."""
        terms: list[tuple[str, tuple[Any, ...]]] = []
        if self.next_run_after_ms is not None:
            terms.append(("next_run_at_ms >= ?", (self.next_run_after_ms,)))
        if self.next_run_before_ms is not None:
            terms.append(("next_run_at_ms < ?", (self.next_run_before_ms,)))
        if self.target_type is not None:
            terms.append((f"{_TYPE} = ?", (self.target_type,)))
        if self.queue is not None:
            terms.append((f"{_TYPE} = 'queue' AND {_QUEUE} = ?", (self.queue,)))
        if self.host is not None:
            terms.append((f"{_TYPE} = 'http' AND {_HOST} = ?", (self.host,)))
        if self.name is not None:
            terms.append((f"instr({_NAME}, ?) > 0", (self.name,)))
        sql = " AND ".join(term for term, _ in terms) or "1"
        return sql, [arg for _, args in terms for arg in args]


# The stored spec's fields a filter reads (schedd_* are functions search_jobs registers).
_TYPE = "json_extract(spec, '$.target.type')"
_QUEUE = "json_extract(spec, '$.target.name')"
_HOST = "schedd_url_host(json_extract(spec, '$.target.url'))"
_NAME = "schedd_fold(json_extract(spec, '$.name'))"


@functools.lru_cache(maxsize=4096)  # a tenant's jobs share a few callback URLs
def _url_host(url: object) -> str | None:
    """The lowercase host of a URL (no brackets around IPv6), or None."""
    if not isinstance(url, str):
        return None
    try:
        return urlsplit(url).hostname
    except ValueError:
        return None


def _fold(text: object) -> str | None:
    return text.casefold() if isinstance(text, str) else None


def search_jobs(
    conn: sqlite3.Connection, tenant_id: str, where: JobFilter, *, after: str, limit: int
) -> tuple[list[dict[str, Any]], str | None]:
    """Up to `limit` matching jobs among the next SCAN_ROWS after `after` (of `where.status`
    if given), and the job_id to continue after: the last job shown when the page is full,
    else the last job examined when the scan stopped short of the end, else None."""
    conn.create_function("schedd_url_host", 1, _url_host, deterministic=True)
    conn.create_function("schedd_fold", 1, _fold, deterministic=True)
    scope, scope_args = "tenant_id = ? AND job_id > ?", [tenant_id, after]
    if where.status is not None:
        scope += " AND status = ?"
        scope_args.append(where.status)
    condition, args = where.conditions()
    # One read transaction: the scan's end must be the same rows the page was chosen from.
    conn.execute("BEGIN")
    try:
        # No outer ORDER BY: it would sort (a temp b-tree) before the first row; SQLite reads
        # a subquery with ORDER BY and LIMIT as a co-routine, in its order.
        rows = conn.execute(
            f"SELECT {JOB_COLUMNS} FROM (SELECT {JOB_COLUMNS} FROM jobs WHERE {scope} "
            f"ORDER BY job_id LIMIT ?) WHERE {condition} LIMIT ?",
            (*scope_args, SCAN_ROWS, *args, limit),
        ).fetchall()
        if len(rows) == limit:
            next_after = rows[-1][0]
        else:  # the last row examined, if one more exists beyond it
            edge = conn.execute(
                f"SELECT job_id FROM jobs WHERE {scope} ORDER BY job_id LIMIT 2 OFFSET ?",
                (*scope_args, SCAN_ROWS - 1),
            ).fetchall()
            next_after = edge[0][0] if len(edge) == 2 else None
    finally:
        conn.execute("COMMIT")
    return [job_to_json(row) for row in rows], next_after
