"""Product defects the chaos suite found, pinned at the smallest scale that shows them, as
regression tests (a new one starts as a strict xfail until its fix lands)."""

from __future__ import annotations

from typing import Any

from schedd.store.db import Database
from tests.conftest import NOW_MS, Applier
from tests.unit.test_store_delivery import HTTP, RETRY
from tests.unit.test_store_dispatch import MIN, claim, setup, spec


def _outcome(seq: int, verdict: str) -> dict[str, Any]:
    return {
        "seq": seq,
        "attempt": 1,
        "started_at_ms": NOW_MS + 1,
        "finished_at_ms": NOW_MS + 2,
        "verdict": verdict,
        "error": None,
        "retry_at_ms": None,
    }


def test_a_late_outcome_of_a_finished_run_never_ends_the_run_that_took_its_outbox_seq(
    apply: Applier, db: Database
) -> None:
    """Node n1 calls run 1 and is paused mid-call; its lease moves to n2, which calls run 1 and
    records it; the outbox row goes, and the claim of run 2 gets the same seq (SQLite reuses the
    highest rowid). n1 wakes up and records its outcome for "seq 1, attempt 1": it must count
    as stale, not end run 2, which nobody has called."""
    setup(apply, schedule={"every": "1m"})
    apply(
        "update_job",
        {
            "tenant_id": "t1",
            "job_id": "j1",
            "expected_version": 1,
            "spec": spec({"every": "1m"}, target=HTTP, retry=RETRY),
            "next_run_at_ms": NOW_MS,
            "next_fire_at_ms": NOW_MS,
            "fields": ["target", "retry"],
        },
    )
    assert claim(apply, version=2, run_ms=NOW_MS, next_ms=NOW_MS + MIN)["claimed"] == 1
    [(run1_seq,)] = db.conn.execute("SELECT seq FROM outbox").fetchall()
    apply("record_callbacks", {"node_id": "n2", "outcomes": [_outcome(run1_seq, "succeeded")]})
    assert claim(apply, version=3, run_ms=NOW_MS + MIN, next_ms=NOW_MS + 2 * MIN)["claimed"] == 1
    late = apply("record_callbacks", {"node_id": "n1", "outcomes": [_outcome(run1_seq, "failed")]})
    run2 = db.conn.execute(
        "SELECT status, attempt FROM runs WHERE scheduled_at_ms = ?", (NOW_MS + MIN,)
    ).fetchone()
    assert late.get("stale") == 1, late
    assert run2 == ("dispatched", 0), "run 2 was ended by run 1's outcome"
    assert db.conn.execute("SELECT COUNT(*) FROM outbox").fetchone()[0] == 1
