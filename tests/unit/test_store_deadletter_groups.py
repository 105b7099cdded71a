"""Dead letters grouped by error (store/deadletter_groups.py): counts, first and last seen, the
newest one's error as example, the bound on what is read, one tenant's only; and the bounded scan
for one group's dead letters."""

from __future__ import annotations

import pytest

from schedd.store import deadletter_groups
from schedd.store.db import Database
from schedd.store.deadletter_groups import group_deadletters, with_fingerprint
from schedd.store.fingerprint import fingerprint
from schedd.timeformat import format_instant
from tests.conftest import NOW_MS

REFUSED = "connect to 10.0.0.{} refused"
MISSING = "order {} not found"


def bury(db: Database, tenant_id: str, errors: list[str | None], *, start: int = 0) -> list[str]:
    """Dead letters of `tenant_id` with these errors, the k-th dead at NOW_MS + k seconds."""
    rows = [
        (
            f"job_{tenant_id}:{start + k:06d}",
            tenant_id,
            f"job_{tenant_id}",
            start + k,
            error,
            NOW_MS + (start + k) * 1000,
        )
        for k, error in enumerate(errors)
    ]
    db.conn.executemany(
        'INSERT INTO deadletters VALUES (?, ?, ?, ?, 1, ?, \'{"type": "queue", "name": "q"}\', '
        "'null', ?)",
        rows,
    )
    return [row[0] for row in rows]


def test_groups_count_alike_errors_largest_first_with_the_newest_as_example(db: Database) -> None:
    bury(db, "t", [REFUSED.format(1), MISSING.format(7), REFUSED.format(2), REFUSED.format(3)])
    bury(db, "t", [MISSING.format(8), None], start=4)
    bury(db, "other", [REFUSED.format(9)] * 5)
    answer = group_deadletters(db.conn, "t", limit=10)
    assert not answer.partial
    assert [(g.fingerprint, g.example, g.count, g.first_at, g.last_at) for g in answer.groups] == [
        (fingerprint(REFUSED.format(0)), REFUSED.format(3), 3, _at(0), _at(3)),
        (fingerprint(MISSING.format(0)), MISSING.format(8), 2, _at(1), _at(4)),
        (fingerprint(None), None, 1, _at(5), _at(5)),
    ]
    assert [g.count for g in group_deadletters(db.conn, "t", limit=1).groups] == [3]
    assert group_deadletters(db.conn, "nobody", limit=10).groups == []


def _at(k: int) -> str:
    return format_instant(NOW_MS + k * 1000)


def test_only_the_newest_are_grouped_and_the_answer_says_so(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deadletter_groups, "GROUP_ROWS", 3)
    bury(db, "t", [MISSING.format(1), MISSING.format(2), REFUSED.format(1), REFUSED.format(2)])
    answer = group_deadletters(db.conn, "t", limit=10)
    assert answer.partial
    assert [(g.example, g.count) for g in answer.groups] == [
        (REFUSED.format(2), 2),
        (MISSING.format(2), 1),
    ]
    bury(db, "u", [MISSING.format(1)] * 3)
    assert not group_deadletters(db.conn, "u", limit=10).partial


def test_grouping_reads_the_tenants_newest_dead_letters_by_index(db: Database) -> None:
    statements: list[str] = []
    db.conn.set_trace_callback(statements.append)
    group_deadletters(db.conn, "t", limit=10)
    db.conn.set_trace_callback(None)
    plan = db.conn.execute(f"EXPLAIN QUERY PLAN {statements[-1]}").fetchall()
    assert [row[-1] for row in plan] == [
        "SEARCH deadletters USING INDEX deadletters_by_age (tenant_id=?)"
    ]


def test_a_groups_dead_letters_page_by_id_and_a_stretch_may_be_short(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    errors = [REFUSED.format(k) if k % 3 == 0 else MISSING.format(k) for k in range(10)]
    ids = bury(db, "t", errors)
    bury(db, "other", [REFUSED.format(1)])
    wanted = fingerprint(REFUSED.format(0))
    refused = [dl_id for dl_id, error in zip(ids, errors, strict=True) if error.startswith("c")]
    page, cursor = with_fingerprint(db.conn, "t", wanted, after="", limit=2)
    assert [d.id for d in page] == refused[:2] and cursor == refused[1]
    page, cursor = with_fingerprint(db.conn, "t", wanted, after=cursor, limit=10)
    assert [d.id for d in page] == refused[2:] and cursor is None
    assert page[0].error == REFUSED.format(6)

    monkeypatch.setattr(deadletter_groups, "SCAN_ROWS", 2)  # examine two per request
    seen, cursor, requests = [], "", 0
    while True:
        page, next_after = with_fingerprint(db.conn, "t", wanted, after=cursor, limit=10)
        seen += [d.id for d in page]
        requests += 1
        if next_after is None:
            break
        cursor = next_after
    assert seen == refused and requests == 5
