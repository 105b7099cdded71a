"""What the store holds per retention kind: rows (counted up to a cap) and the oldest one kept,
for `GET /v1/admin/retention`, `schedctl gc status` and the metrics. Index reads only."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from schedd.storage import DiskWatch, file_sizes
from schedd.store.ledger import batches
from schedd.wire.retention_status import KINDS_SHOWN, ROW_COUNT_CAP

# Per kind: (rows, oldest kept). Oldest is the time its retention counts from, found with one
# index seek per tenant (or per tenant and queue); rows count a covering index up to the cap.
_COUNTS = {
    "runs": "SELECT 1 FROM runs INDEXED BY runs_finished WHERE finished_at_ms IS NOT NULL",
    "jobs": "SELECT 1 FROM jobs INDEXED BY jobs_finished "
    "WHERE status IN ('completed', 'cancelled')",
    "deadletters": "SELECT 1 FROM deadletters INDEXED BY deadletters_by_age",
    "messages": "SELECT 1 FROM messages INDEXED BY messages_ready",
    "audit": "SELECT 1 FROM audit",
}
# Runs kept in batches (store/ledger/batches.py), counted from each batch's slot bytes: done
# ones of finished batches are runs, ready or held ones are messages (a spilled run is counted
# by its own rows above).
_BATCH_COUNTS = {
    "runs": (
        "SELECT slots FROM batches INDEXED BY batches_finished WHERE finished_at_ms IS NOT NULL",
        (batches.DONE,),
    ),
    "messages": (
        "SELECT slots FROM batches INDEXED BY batches_ready WHERE ready_at_ms IS NOT NULL",
        (batches.READY, batches.HELD),
    ),
}
_OLDEST_PER_TENANT = {
    "runs": "SELECT MIN(m) FROM (SELECT MIN(finished_at_ms) AS m FROM runs INDEXED BY "
    "runs_finished WHERE tenant_id = ?1 AND finished_at_ms IS NOT NULL UNION ALL "
    "SELECT MIN(finished_at_ms) FROM batches INDEXED BY batches_finished "
    "WHERE tenant_id = ?1 AND finished_at_ms IS NOT NULL)",
    "jobs": "SELECT MIN(updated_at_ms) FROM jobs INDEXED BY jobs_finished "
    "WHERE tenant_id = ? AND status IN ('completed', 'cancelled')",
    "deadletters": "SELECT MIN(created_at_ms) FROM deadletters INDEXED BY deadletters_by_age "
    "WHERE tenant_id = ?",
}
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Retained:
    kind: str
    rows: int
    is_capped: bool  # rows is a lower bound
    oldest_ms: int | None


def retained(conn: sqlite3.Connection, *, count_rows: bool = True) -> list[Retained]:
    """Every kind, read in one transaction; without `count_rows` (metrics scrapes: counting is
    linear) only the oldest, and rows are 0."""
    conn.execute("BEGIN")
    try:
        tenants = [t for (t,) in conn.execute("SELECT tenant_id FROM tenants ORDER BY tenant_id")]
        return [_kind(conn, kind, tenants, count_rows) for kind in KINDS_SHOWN]
    finally:
        conn.execute("COMMIT")


def last_prune_ms(conn: sqlite3.Connection) -> int | None:
    row = conn.execute("SELECT value FROM meta WHERE key = 'last_prune_ms'").fetchone()
    return None if row is None else int(row[0])


def tenant_queues(conn: sqlite3.Connection, tenant_id: str) -> Iterator[str]:
    """The tenant's queues that hold messages, one index seek each (a skip-scan)."""
    queue = ""
    while True:
        row = conn.execute(
            "SELECT queue FROM messages INDEXED BY messages_ready "
            "WHERE tenant_id = ? AND queue > ? ORDER BY queue LIMIT 1",
            (tenant_id, queue),
        ).fetchone()
        if row is None:
            return
        queue = row[0]
        yield queue


def _kind(conn: sqlite3.Connection, kind: str, tenants: list[str], count_rows: bool) -> Retained:
    # _COUNTS and _OLDEST_PER_TENANT hold constant SQL, never input.
    rows = (
        conn.execute(
            f"SELECT COUNT(*) FROM ({_COUNTS[kind]} LIMIT ?)", (ROW_COUNT_CAP + 1,)
        ).fetchone()[0]
        if count_rows
        else 0
    )
    if count_rows and kind in _BATCH_COUNTS:
        sql, states = _BATCH_COUNTS[kind]
        for (slots,) in conn.execute(sql):
            if rows > ROW_COUNT_CAP:
                break
            rows += sum(slots.count(state) for state in states)
    if kind == "audit":
        first = conn.execute("SELECT at_ms FROM audit ORDER BY seq LIMIT 1").fetchone()
        oldest = [None if first is None else first[0]]
    elif kind == "messages":
        oldest = [
            conn.execute(
                "SELECT MIN(visible_at_ms) FROM messages INDEXED BY messages_ready "
                "WHERE tenant_id = ? AND queue = ?",
                (tenant, queue),
            ).fetchone()[0]
            for tenant in tenants
            for queue in tenant_queues(conn, tenant)
        ] + [
            conn.execute(
                "SELECT MIN(ready_at_ms) FROM batches INDEXED BY batches_ready "
                "WHERE tenant_id = ? AND ready_at_ms IS NOT NULL",
                (tenant,),
            ).fetchone()[0]
            for tenant in tenants
        ]
    else:
        oldest = [conn.execute(_OLDEST_PER_TENANT[kind], (t,)).fetchone()[0] for t in tenants]
    known = [int(ms) for ms in oldest if ms is not None]
    return Retained(
        kind, min(rows, ROW_COUNT_CAP), rows > ROW_COUNT_CAP, min(known) if known else None
    )


class RetainedCollector(Collector):
    """Scrape-time gauges of retention and disk: the oldest row kept per kind, the last prune,
    file sizes and free space (row counts are left to the API: counting is linear)."""

    def __init__(self, connect: Callable[[], sqlite3.Connection], disk: DiskWatch) -> None:
        self._connect = connect
        self._disk = disk

    def collect(self) -> Iterator[Metric]:
        reading = self._disk.reading()
        yield GaugeMetricFamily(
            "schedd_disk_free_bytes", "Free space in the data directory", value=reading.free_bytes
        )
        yield GaugeMetricFamily(
            "schedd_disk_low",
            "1 while free space is below storage.min_free (writes that add data are refused)",
            value=int(reading.is_low),
        )
        files = GaugeMetricFamily(
            "schedd_data_bytes", "Bytes in the data directory by file", labels=["file"]
        )
        for name, size in file_sizes(self._disk.directory).items():
            files.add_metric([name], size)
        yield files
        try:
            conn = self._connect()
            try:
                kinds, last = retained(conn, count_rows=False), last_prune_ms(conn)
            finally:
                conn.close()
        except sqlite3.Error as exc:  # a scrape never fails the node; the gauges are left out
            log.warning("metrics: cannot read retention state: %s", exc)
            return
        oldest = GaugeMetricFamily(
            "schedd_retained_oldest_timestamp_seconds",
            "Where the oldest kept row's retention counts from, per kind (unix time)",
            labels=["kind"],
        )
        for kind in kinds:
            if kind.oldest_ms is not None:
                oldest.add_metric([kind.kind], kind.oldest_ms / 1000)
        yield oldest
        if last is not None:
            yield GaugeMetricFamily(
                "schedd_last_prune_timestamp_seconds",
                "When the last prune command was applied (the proposer's clock, unix time)",
                value=last / 1000,
            )
