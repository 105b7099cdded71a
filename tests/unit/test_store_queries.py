"""The API's reads (store/queries.py) that need more than a key: a job's audit trail."""

from __future__ import annotations

from schedd.store import queries
from schedd.store.db import Database
from tests.conftest import NOW_MS


def add_audit(db: Database, rows: list[tuple[str | None, str, str | None]]) -> None:
    """(tenant_id, action, job_id) rows, in seq order."""
    db.conn.executemany(
        "INSERT INTO audit (at_ms, tenant_id, actor, action, job_id) VALUES (?, ?, 'a', ?, ?)",
        [(NOW_MS, tenant, action, job) for tenant, action, job in rows],
    )


def test_a_jobs_audit_trail_in_seq_order_pages_and_stays_within_the_tenant(db: Database) -> None:
    add_audit(
        db,
        [
            ("t1", "create_tenant", None),
            ("t1", "create_jobs", "job_a"),
            ("t1", "create_jobs", "job_b"),
            ("t1", "pause_job", "job_a"),
            ("t2", "create_jobs", "job_c"),
            ("t1", "cancel_job", "job_a"),
        ],
    )
    trail = queries.list_audit(db.conn, "t1", after=0, limit=10, job_id="job_a")
    assert [(r.seq, r.action) for r in trail] == [
        (2, "create_jobs"),
        (4, "pause_job"),
        (6, "cancel_job"),
    ]
    later = queries.list_audit(db.conn, "t1", after=2, limit=1, job_id="job_a")
    assert [r.seq for r in later] == [4]
    assert queries.list_audit(db.conn, "t1", after=0, limit=10, job_id="job_c") == []
    admin = queries.list_audit(db.conn, None, after=0, limit=10, job_id="job_c")
    assert [(r.tenant_id, r.job_id) for r in admin] == [("t2", "job_c")]


def test_a_jobs_audit_trail_reads_its_own_index_range(db: Database) -> None:
    statements: list[str] = []
    db.conn.set_trace_callback(statements.append)
    queries.list_audit(db.conn, "t1", after=0, limit=10, job_id="job_a")
    db.conn.set_trace_callback(None)
    plan = db.conn.execute(f"EXPLAIN QUERY PLAN {statements[-1]}").fetchall()
    assert [row[-1] for row in plan] == [
        "SEARCH audit USING INDEX audit_by_job (job_id=? AND seq>?)"
    ]
