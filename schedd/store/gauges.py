"""The store gauges a metrics scrape reads (schedd/metrics.py renders them): the due backlog and
its oldest run, messages per queue and state, outbox and dead letters, partitions held, failure
alerts pending. Short read-only queries over indexes, capped where a count could be large."""

from __future__ import annotations

import sqlite3

from schedd.metrics import QUEUE_STATES, StoreGauges
from schedd.store import overdue
from schedd.store.leases import held_partitions
from schedd.store.ledger import batches

BACKLOG_CAP = 1_000_000  # the due backlog gauge saturates here (one index row read per run)
SPLIT_BUDGET = 200_000  # invisible messages read per scrape to tell in-flight from delayed
DEAD_SCAN_CAP = 100_000  # dead letters read per scrape to attribute them to queues

_PARTITIONS = "WITH RECURSIVE p(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM p WHERE n < ?) "
_BACKLOG = (
    _PARTITIONS + "SELECT COUNT(*) FROM (SELECT 1 FROM due WHERE partition IN p "
    "AND fire_at_ms <= ? LIMIT ?)"
)
_OLDEST_DUE = (
    _PARTITIONS + "SELECT MIN((SELECT MIN(fire_at_ms) FROM due WHERE partition = p.n)) FROM p"
)
_QUEUE_COUNTS = (
    "SELECT tenant_id, queue, SUM(visible_at_ms <= ?), SUM(visible_at_ms > ?) "
    "FROM messages INDEXED BY messages_ready GROUP BY tenant_id, queue"
)
_IN_FLIGHT = (
    "SELECT COUNT(receipt) FROM (SELECT receipt FROM messages WHERE tenant_id = ? AND queue = ? "
    "AND visible_at_ms > ? LIMIT ?)"
)
_DEAD_BY_QUEUE = (
    "SELECT json_extract(target, '$.name'), COUNT(*) FROM (SELECT target FROM deadletters "
    "LIMIT ?) WHERE json_extract(target, '$.type') = 'queue' GROUP BY 1"
)

# The partial index holds exactly the alerts not done: a count over it reads nothing else.
_ALERTS_PENDING = "SELECT COUNT(*) FROM alerts INDEXED BY alerts_due WHERE next_at_ms IS NOT NULL"


def read_store(
    conn: sqlite3.Connection, *, node_id: str, partitions: int, now_ms: int
) -> StoreGauges:
    """Read the store gauges in one read transaction (a consistent view)."""
    conn.execute("BEGIN")
    try:
        backlog = due_backlog(conn, partitions, now_ms)
        oldest = oldest_due_ms(conn, partitions)
        return StoreGauges(
            due_backlog=backlog,
            oldest_due_age_s=0.0 if oldest is None else max(now_ms - oldest, 0) / 1000,
            queues=queue_counts(conn, now_ms),
            outbox=conn.execute("SELECT COUNT(*) FROM outbox").fetchone()[0],
            deadletters=conn.execute("SELECT COUNT(*) FROM deadletters").fetchone()[0],
            partitions_owned=len(held_partitions(conn, node_id, now_ms, margin_ms=0)),
            alerts_pending=conn.execute(_ALERTS_PENDING).fetchone()[0],
            overdue_by_tenant=overdue.counts_by_tenant(conn),
        )
    finally:
        conn.execute("COMMIT")


def due_backlog(conn: sqlite3.Connection, partitions: int, now_ms: int) -> int:
    """Runs due at `now_ms` or before and not claimed yet, at most BACKLOG_CAP (every
    partition: a replica holds the whole cluster's due index)."""
    return int(conn.execute(_BACKLOG, (partitions - 1, now_ms, BACKLOG_CAP)).fetchone()[0])


def oldest_due_ms(conn: sqlite3.Connection, partitions: int) -> int | None:
    """The earliest fire time in the due index (one seek per partition), or None if empty."""
    value = conn.execute(_OLDEST_DUE, (partitions - 1,)).fetchone()[0]
    return None if value is None else int(value)


def queue_counts(conn: sqlite3.Connection, now_ms: int) -> dict[str, dict[str, int]]:
    """Messages per queue name and state. One pass over the (tenant, queue, visible_at) index;
    invisible messages are then read by key to tell in-flight (held by a consumer) from delayed
    (waiting out a retry backoff), up to SPLIT_BUDGET of them: past it they count as in flight."""
    counts: dict[str, dict[str, int]] = {}
    budget = SPLIT_BUDGET
    for tenant_id, queue, ready, invisible in conn.execute(_QUEUE_COUNTS, (now_ms, now_ms)):
        in_flight = invisible
        if invisible and budget > 0:
            in_flight = conn.execute(_IN_FLIGHT, (tenant_id, queue, now_ms, budget)).fetchone()[0]
            in_flight += max(invisible - budget, 0)
            budget -= invisible
        row = counts.setdefault(queue, dict.fromkeys(QUEUE_STATES, 0))
        row["ready"] += ready
        row["in_flight"] += in_flight
        row["delayed"] += invisible - in_flight
    for batch in batches.open_batches(conn):
        row = counts.setdefault(batch.queue, dict.fromkeys(QUEUE_STATES, 0))
        ready, in_flight, delayed = batch.counts(now_ms)
        row["ready"] += ready
        row["in_flight"] += in_flight
        row["delayed"] += delayed
    for queue, dead in conn.execute(_DEAD_BY_QUEUE, (DEAD_SCAN_CAP,)):
        if isinstance(queue, str):
            counts.setdefault(queue, dict.fromkeys(QUEUE_STATES, 0))["dead"] += dead
    return counts


def open_batch_runs(conn: sqlite3.Connection, most_batches: int) -> int:
    """Queue runs still open (not yet acked or dead) in the oldest `most_batches` batches with
    runs ready or held: how much a spike has left to drain, cheaply (one index range)."""
    (count,) = conn.execute(
        "SELECT coalesce(sum(open), 0) FROM (SELECT open FROM batches INDEXED BY "
        "batches_ready WHERE ready_at_ms IS NOT NULL LIMIT ?)",
        (most_batches,),
    ).fetchone()
    return int(count)
