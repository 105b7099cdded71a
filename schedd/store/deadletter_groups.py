"""A tenant's dead letters grouped by what failed them (issue 31): the newest GROUP_ROWS grouped
by error fingerprint (store/fingerprint.py), live and in history segments alike when given the
node's segment readers (log level 13), and a bounded scan for one group's dead letters (live
ones only). Never writes.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from schedd.store import history_reads, queries
from schedd.store.fingerprint import fingerprint
from schedd.timeformat import format_instant
from schedd.wire.deadletters import GROUPED, DeadLetterView, ErrorGroup, ErrorGroups

GROUP_ROWS = GROUPED  # the newest dead letters a grouping reads
SCAN_ROWS = 10_000  # dead letters a fingerprint filter examines per request, matching or not


@dataclass(slots=True, kw_only=True)
class _Group:
    example: str | None  # the newest dead letter's error, as it was
    count: int = 0
    first_ms: int = 0
    last_ms: int = 0


def group_deadletters(
    conn: sqlite3.Connection,
    tenant_id: str,
    *,
    limit: int,
    readers: history_reads.SegmentReaders | None = None,
    not_before_ms: int = 0,
) -> ErrorGroups:
    """The `limit` largest groups among the tenant's newest GROUP_ROWS dead letters (by when
    their runs died; with `readers`, the moved ones too, made at or after `not_before_ms`),
    largest first (then the most recent); `partial` when there are more, or a history segment
    that could hold some is not on this node."""
    if readers is None:
        rows = conn.execute(
            "SELECT error, created_at_ms FROM deadletters INDEXED BY deadletters_by_age "
            "WHERE tenant_id = ? ORDER BY created_at_ms DESC, id DESC LIMIT ?",
            (tenant_id, GROUP_ROWS + 1),
        ).fetchall()
        is_complete = True
    else:
        newest, is_complete = history_reads.newest_deadletters(
            conn, readers, tenant_id, most=GROUP_ROWS + 1, not_before_ms=not_before_ms
        )
        rows = [(error, created) for error, created, _ in newest]
    groups: dict[str, _Group] = {}
    for error, created in rows[:GROUP_ROWS]:  # newest first
        group = groups.get(key := fingerprint(error))
        if group is None:
            group = groups[key] = _Group(example=error, last_ms=created)
        group.count += 1
        group.first_ms = created
    ranked = sorted(groups.items(), key=lambda kv: (-kv[1].count, -kv[1].last_ms, kv[0]))
    return ErrorGroups(
        groups=[
            ErrorGroup(
                fingerprint=key,
                example=group.example,
                count=group.count,
                first_at=format_instant(group.first_ms),
                last_at=format_instant(group.last_ms),
            )
            for key, group in ranked[:limit]
        ],
        partial=len(rows) > GROUP_ROWS or not is_complete,
    )


@dataclass(slots=True)
class _Scan:
    matched: list[DeadLetterView] = field(default_factory=list)
    last: str | None = None  # the last dead letter examined


def with_fingerprint(
    conn: sqlite3.Connection, tenant_id: str, wanted: str, *, after: str, limit: int
) -> tuple[list[DeadLetterView], str | None]:
    """Up to `limit` of the tenant's dead letters after `after` (in id order) whose error has
    the fingerprint `wanted`, examining at most SCAN_ROWS; and the id to continue after: the
    last one shown when the page is full, else the last one examined when more are left, else
    None (as job_search's pages: a page may be short, or empty, with a cursor)."""
    rows = conn.execute(
        f"SELECT {queries.DEADLETTER_COLUMNS} FROM deadletters "
        "WHERE tenant_id = ? AND id > ? ORDER BY id LIMIT ?",
        (tenant_id, after, SCAN_ROWS),
    )
    scan = _Scan()
    for row in rows:
        scan.last = row[0]
        if fingerprint(row[4]) == wanted:
            scan.matched.append(queries.deadletter_view(row))
            if len(scan.matched) == limit:
                return scan.matched, scan.last
    if scan.last is None:
        return scan.matched, None
    beyond = conn.execute(
        "SELECT 1 FROM deadletters WHERE tenant_id = ? AND id > ? LIMIT 1", (tenant_id, scan.last)
    ).fetchone()
    return scan.matched, scan.last if beyond else None
