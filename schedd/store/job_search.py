"""Filtered pages of a tenant's jobs (GET /v1/jobs with target, name or next-run filters).

No index covers these fields: each page examines jobs in job_id order after the cursor, at most
SCAN_ROWS of them and for about SCAN_BUDGET_S, so a page costs the same with 1,000,000 jobs as
with 10,000, and large payloads (the filters parse each spec) shorten the stretch, not the time.
Never writes.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from typing import Any

from schedd.store.queries import JOB_COLUMNS, job_to_json

SCAN_ROWS = 10_000  # jobs examined per filtered page at most, matching or not
CHUNK_ROWS = 250  # jobs examined per query: the budget is checked between chunks
SCAN_BUDGET_S = 0.1  # a page stops examining after the chunk that passes this


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


# The stored spec's fields a filter reads (schedd_* are store/sqlfunctions.py's).
_TYPE = "json_extract(spec, '$.target.type')"
_QUEUE = "json_extract(spec, '$.target.name')"
_HOST = "schedd_url_host(json_extract(spec, '$.target.url'))"
_NAME = "schedd_fold(json_extract(spec, '$.name'))"


def search_jobs(
    conn: sqlite3.Connection,
    tenant_id: str,
    where: JobFilter,
    *,
    after: str,
    limit: int,
    budget_s: float = SCAN_BUDGET_S,
) -> tuple[list[dict[str, Any]], str | None]:
    """Up to `limit` matching jobs after `after` (of `where.status` if given), examining
    CHUNK_ROWS jobs at a time until the page is full, SCAN_ROWS were examined, `budget_s` has
    passed, or the jobs end; and the job_id to continue after: the last job shown when the page
    is full, else the last job examined when jobs are left beyond it, else None.

    The budget bounds a page's cost whatever the jobs' size (the filters parse each job's spec,
    payload included); every page examines at least one chunk, so a scan always moves on."""
    scope = "tenant_id = ? AND job_id > ?" + ("" if where.status is None else " AND status = ?")

    def after_(job_id: str) -> list[Any]:  # the scope's arguments for jobs after job_id
        return [tenant_id, job_id] + ([] if where.status is None else [where.status])

    condition, args = where.conditions()
    found: list[tuple[Any, ...]] = []
    examined, cursor = 0, after
    deadline = time.monotonic() + budget_s
    # One read transaction: every chunk is read from the same state.
    conn.execute("BEGIN")
    try:
        while True:
            chunk = min(CHUNK_ROWS, SCAN_ROWS - examined)
            edge = conn.execute(  # the chunk's last job (index only), None past the end
                f"SELECT job_id FROM jobs WHERE {scope} ORDER BY job_id LIMIT 1 OFFSET ?",
                (*after_(cursor), chunk - 1),
            ).fetchone()
            bound, bound_args = ("", []) if edge is None else (" AND job_id <= ?", [edge[0]])
            found += conn.execute(
                f"SELECT {JOB_COLUMNS} FROM jobs WHERE {scope}{bound} AND {condition} "
                "ORDER BY job_id LIMIT ?",
                (*after_(cursor), *bound_args, *args, limit - len(found)),
            ).fetchall()
            if len(found) == limit:
                return _page(found, found[-1][0])
            if edge is None:
                return _page(found, None)
            examined, cursor = examined + chunk, edge[0]
            if examined >= SCAN_ROWS or time.monotonic() >= deadline:
                beyond = conn.execute(
                    f"SELECT 1 FROM jobs WHERE {scope} LIMIT 1", after_(cursor)
                ).fetchone()
                return _page(found, cursor if beyond else None)
    finally:
        conn.execute("COMMIT")


def _page(
    rows: list[tuple[Any, ...]], next_after: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    return [job_to_json(row) for row in rows], next_after
