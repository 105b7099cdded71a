"""What apply may read of history beyond the live tables: the OPEN segments only (every replica
holds them: they travel in snapshots; a closed one may still be on its way to a new node).

Moves only relocate rows from the live tables into open segments, so "in the live tables or an
open segment" is the same answer before and after a move, and after a crash between a
segment's commit and `state.db`'s (the segment ahead): apply paths that asked "is there a run
at this slot" of the live tables ask it of both (issue 35 §1, docs/scaling.md, "The rule that
keeps replicas equal"). What only a closed segment could answer, the proposer carries.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from schedd.store import queries, segments
from schedd.store.segment_writes import writer_for
from schedd.timeformat import parse_instant
from schedd.wire.jobs import RunView

_SLOT_TABLES = ("runs", "run_keys", "backfills", "run_upstreams")


def open_segments(tx: sqlite3.Connection, family: str) -> list[str]:
    """The family's open segments, newest first (a few: those of the last hour or two)."""
    rows = tx.execute(
        "SELECT name FROM segments WHERE family = ? AND state = 'open' "
        "ORDER BY period_start_ms DESC",
        (family,),
    )
    return [str(name) for (name,) in rows]


def slots_taken(tx: sqlite3.Connection, job_id: str, slots: Sequence[int]) -> set[int]:
    """Which of the job's slots have a run (a row, a batch key, a backfill mark or an upstream
    record) in an open runs segment."""
    names = open_segments(tx, segments.RUNS) if slots else []
    if not names:
        return set()
    writer = writer_for(tx)
    taken: set[int] = set()
    for name in names:
        conn = writer.reader(name)
        for table in _SLOT_TABLES:
            for slot in slots:
                found = conn.execute(
                    f"SELECT 1 FROM {table} WHERE job_id = ? AND scheduled_at_ms = ?",
                    (job_id, slot),
                ).fetchone()
                if found is not None:
                    taken.add(slot)
    return taken


def newest_runs(tx: sqlite3.Connection, job_id: str, limit: int) -> list[RunView]:
    """The job's newest runs from the live tables and the open segments (a newer copy of a run
    hides an older one), newest first."""
    found: dict[int, RunView] = {}
    for run in queries.list_runs(tx, job_id, before_ms=2**62, limit=limit):
        found.setdefault(_ms(run.scheduled_at), run)  # the listing's first of a time wins
    names = open_segments(tx, segments.RUNS)
    if names:
        writer = writer_for(tx)
        for name in names:
            for run in queries.list_runs(writer.reader(name), job_id, before_ms=2**62, limit=limit):
                found.setdefault(_ms(run.scheduled_at), run)
    return [found[at] for at in sorted(found, reverse=True)[:limit]]


def _ms(instant: str) -> int:
    return parse_instant(instant, field="scheduled_at")
