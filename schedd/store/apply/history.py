"""Apply functions for history segments (issue 35 §1, log level 13; store/segments.py).

`move_history` is `prune` with the history kinds moved instead of deleted: finished runs (with
their attempts, outputs, upstream and payload rows and backfill marks), finished batches (with
their run keys), dead letters and audit records that ended before the period of the command's
`ts_ms` go into their period's open segment, in the same entry: the segment part commits
first, `state.db` second (store/segment_writes.py). Rows past their retention are deleted as
`prune` deletes them; finished jobs, superseded job versions and failure alerts stay live and
are pruned as before. `close_segment` records a segment's rows' digest and makes its file
immutable; `drop_segment` forgets it and unlinks the file after the commit.

Apply never reads a closed segment (a node may still be fetching it): a move whose period's
segment is closed goes into the next period whose segment is not.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from schedd import metrics
from schedd.store import moved_runs, segments
from schedd.store.apply import retention
from schedd.store.apply.retention import Budget
from schedd.store.command import Applied, Command, Handler, Result, ok, rejected
from schedd.store.commands import CloseSegment, DropSegment, MoveHistory
from schedd.store.ledger import batches, completions
from schedd.store.segment_writes import SegmentWriter, unlink_later, verify_later, writer_for

Key = tuple[str, int]
_JSON = msgspec.json.Encoder()
MOVED = ("runs", "deadletters", "audit")
# Rows kept per run beside it, moved with it (by key; one range each).
_RUN_ROWS = ("attempts", "run_outputs", "run_upstreams", "run_payloads", "backfills")
_KEY_COLUMNS = "job_id = ? AND scheduled_at_ms = ?"


class Mover:
    """One move_history command's moves: the target segment of each row, its parts."""

    def __init__(self, tx: sqlite3.Connection, ts_ms: int, *, summarize: bool = False) -> None:
        self.tx = tx
        self.writer: SegmentWriter = writer_for(tx)
        self.before_ms = segments.period_start(ts_ms)  # rows that ended before this move
        self.moved = dict.fromkeys(MOVED, 0)
        # Level 14: what the moved runs say, per job (None: not kept, a level-13 move)
        self.summaries: dict[str, moved_runs.Moved] | None = {} if summarize else None
        self._states: dict[str, str | None] = {}
        self._targets: dict[tuple[str, int], str] = {}

    def target(self, family: str, end_ms: int) -> str:
        """The segment a row that ended at `end_ms` goes into: its period's, or the next
        period's whose segment is not closed (nor dropped: a name once used is never reopened)."""
        first = segments.period_start(end_ms)
        known = self._targets.get((family, first))
        if known is None:
            known = self._targets[(family, first)] = self._target(family, first)
        return known

    def _target(self, family: str, period: int) -> str:
        while True:
            name = segments.segment_name(family, period)
            if name not in self._states:
                row = self.tx.execute("SELECT state FROM segments WHERE name = ?", (name,))
                found = row.fetchone()
                self._states[name] = None if found is None else str(found[0])
            if self._states[name] in (None, segments.OPEN):
                return name
            period += segments.PERIOD_MS

    def write(self, family: str, name: str, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert rows into the segment's table (skipped when the segment holds this entry)."""
        if not rows:
            return
        part = self.writer.part(name)
        if part is None:
            return
        marks = ",".join("?" * len(rows[0]))
        part.executemany(f"INSERT OR REPLACE INTO {table} VALUES ({marks})", rows)

    def count(self, family: str, name: str, rows: int, kind: str) -> None:
        """The segment's row in `segments` (created open at its first move) counts them."""
        _, period = segments.parse_name(name)
        self.tx.execute(
            "INSERT INTO segments (name, family, period_start_ms, state, rows) "
            "VALUES (?, ?, ?, 'open', ?) ON CONFLICT (name) DO UPDATE SET rows = rows + ?",
            (name, family, period, rows, rows),
        )
        self._states[name] = segments.OPEN
        self.moved[kind] += rows

    def outcome(self, job_id: str, status: str, scheduled_ms: int, finished_ms: int) -> None:
        """A finished run moves: its job's summary learns of it (level 14)."""
        if self.summaries is not None:
            moved = self.summaries.get(job_id)
            if moved is None:
                moved = self.summaries[job_id] = moved_runs.Moved()
            moved.add(status, scheduled_ms, finished_ms)


def move_history(tx: sqlite3.Connection, cmd: Command[MoveHistory]) -> Result:
    mover = Mover(tx, cmd.ts_ms, summarize=cmd.body.summarize)
    result = retention.prune(tx, cmd, move=lambda *a: _move_tenant(mover, *a))
    if mover.summaries:
        moved_runs.merge(tx, mover.summaries)
    metrics.PRUNED_ROWS.labels(kind="moved").inc(sum(mover.moved.values()))
    if isinstance(result, Applied):
        return Applied({**result.fields, "moved": dict(mover.moved)}, result.events)
    return result


def _move_tenant(
    mover: Mover, tenant_id: str | None, cutoffs: dict[str, int], budget: Budget
) -> None:
    """Move a tenant's history that ended in a past period (and within its retention); the
    admin actions' audit records when `tenant_id` is None."""
    if tenant_id is not None:
        _move_runs(mover, tenant_id, cutoffs["runs"], budget)
        _move_batches(mover, tenant_id, cutoffs["runs"], budget)
        _move_deadletters(mover, tenant_id, cutoffs["deadletters"], budget)
    _move_audit(mover, tenant_id, cutoffs["audit"], budget)


def _move_runs(mover: Mover, tenant_id: str, cutoff_ms: int, budget: Budget) -> None:
    if budget.left <= 0:
        return
    tx = mover.tx
    runs = tx.execute(
        "SELECT * FROM runs INDEXED BY runs_finished "
        "WHERE tenant_id = ? AND finished_at_ms IS NOT NULL AND finished_at_ms >= ? "
        "AND finished_at_ms < ? ORDER BY finished_at_ms, job_id, scheduled_at_ms LIMIT ?",
        (tenant_id, cutoff_ms, mover.before_ms, budget.left),
    ).fetchall()
    by_segment: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for run in runs:
        by_segment[mover.target(segments.RUNS, int(run[7]))].append(run)
        mover.outcome(str(run[0]), str(run[4]), int(run[1]), int(run[7]))
    for name, rows in by_segment.items():
        keys = [(str(r[0]), int(r[1])) for r in rows]
        mover.write(segments.RUNS, name, "runs", rows)
        _move_run_rows(mover, name, keys)
        tx.executemany(f"DELETE FROM runs WHERE {_KEY_COLUMNS}", keys)
        mover.count(segments.RUNS, name, len(rows), "runs")
    budget.take("runs", len(runs))


def _move_run_rows(mover: Mover, name: str, keys: Sequence[Key]) -> None:
    """The rows kept beside each run (attempts, outputs, ...), copied and deleted by key: one
    statement per table for all the keys (most of these tables hold no row for most runs)."""
    for table in _RUN_ROWS:
        rows = _rows_of(mover.tx, table, keys)
        if rows:
            mover.write(segments.RUNS, name, table, rows)
            mover.tx.executemany(
                f"DELETE FROM {table} WHERE {_KEY_COLUMNS}", sorted({(r[0], r[1]) for r in rows})
            )


# Rows of a table by a list of (job_id, scheduled_at_ms) keys (one statement).
_BY_KEYS = (
    "SELECT t.* FROM json_each(?) k JOIN {table} t "
    "ON t.job_id = k.value ->> 0 AND t.scheduled_at_ms = k.value ->> 1"
)


def _keys_json(keys: Iterable[Key]) -> str:
    return _JSON.encode([list(key) for key in keys]).decode()


def _rows_of(tx: sqlite3.Connection, table: str, keys: Sequence[Key]) -> list[tuple[Any, ...]]:
    """In key order, so every replica inserts them alike."""
    if not keys:
        return []
    rows = tx.execute(_BY_KEYS.format(table=table), (_keys_json(keys),)).fetchall()
    return sorted(rows, key=lambda row: (row[0], row[1], row[2] if len(row) > 2 else 0))


def _without_run(tx: sqlite3.Connection, keys: Sequence[Key]) -> list[Key]:
    """The keys that have no runs row (a spilled batch run has one)."""
    if not keys:
        return []
    spilled = {
        (str(r[0]), int(r[1]))
        for r in tx.execute(_BY_KEYS.format(table="runs"), (_keys_json(keys),))
    }
    return [key for key in keys if key not in spilled]


def _move_batches(mover: Mover, tenant_id: str, cutoff_ms: int, budget: Budget) -> None:
    """Batches whose every run finished in a past period, whole, with their run keys (the
    first is taken whatever its size, as retention prunes them)."""
    tx = mover.tx
    for batch_id, finished_at in tx.execute(
        "SELECT batch_id, finished_at_ms FROM batches INDEXED BY batches_finished "
        "WHERE tenant_id = ? AND finished_at_ms IS NOT NULL AND finished_at_ms >= ? "
        "AND finished_at_ms < ? ORDER BY finished_at_ms, batch_id LIMIT ?",
        # Each batch takes at least one run of the budget: more could not be moved anyway (a
        # first pass after an upgrade would otherwise read a whole retention of batches).
        (tenant_id, cutoff_ms, mover.before_ms, max(1, budget.left)),
    ).fetchall():
        if budget.left <= 0:
            return
        completions.settle_batch(tx, batch_id)  # its jobs' derived state needs its key rows
        batch = tx.execute("SELECT * FROM batches WHERE batch_id = ?", (batch_id,)).fetchone()
        keys = batches.run_keys(batch[4])
        _batch_outcomes(mover, keys, batches.acked_at(batch[5], batch[6]))
        name = mover.target(segments.RUNS, int(finished_at))
        mover.write(segments.RUNS, name, "batches", [batch])
        mover.write(segments.RUNS, name, "run_keys", _rows_of(tx, "run_keys", keys))
        # A spilled run has its own runs row (moved with it when it ends): its rows stay.
        _move_run_rows(mover, name, _without_run(tx, keys))
        tx.executemany(f"DELETE FROM run_keys WHERE {_KEY_COLUMNS}", keys)
        tx.execute("DELETE FROM batches WHERE batch_id = ?", (batch_id,))
        mover.count(segments.RUNS, name, len(keys), "runs")
        budget.take("runs", len(keys))


def _batch_outcomes(mover: Mover, keys: Sequence[Key], acked: Sequence[int | None]) -> None:
    """A batch's done slots succeeded at their ack (a spilled one moves as its runs row)."""
    summaries = mover.summaries
    if summaries is None:
        return
    for (job_id, scheduled_ms), at in zip(keys, acked, strict=True):
        if at is None:
            continue
        moved = summaries.get(job_id)
        if moved is None:
            summaries[job_id] = moved_runs.Moved((scheduled_ms, at))
        else:
            moved.add(moved_runs.SUCCEEDED, scheduled_ms, at)


def _move_deadletters(mover: Mover, tenant_id: str, cutoff_ms: int, budget: Budget) -> None:
    if budget.left <= 0:
        return
    tx = mover.tx
    rows = tx.execute(
        "SELECT * FROM deadletters INDEXED BY deadletters_by_age "
        "WHERE tenant_id = ? AND created_at_ms >= ? AND created_at_ms < ? "
        "ORDER BY created_at_ms, id LIMIT ?",
        (tenant_id, cutoff_ms, mover.before_ms, budget.left),
    ).fetchall()
    by_segment: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for row in rows:
        by_segment[mover.target(segments.DEADLETTERS, int(row[8]))].append(row)
    for name, moving in by_segment.items():
        mover.write(segments.DEADLETTERS, name, "deadletters", moving)
        tx.executemany("DELETE FROM deadletters WHERE id = ?", [(r[0],) for r in moving])
        mover.count(segments.DEADLETTERS, name, len(moving), "deadletters")
    budget.take("deadletters", len(rows))


def _move_audit(mover: Mover, tenant_id: str | None, cutoff_ms: int, budget: Budget) -> None:
    """The oldest audit records in sequence order, up to the first one of the current period
    (time order is nearly, not exactly, seq order: a record that ended up behind one of the
    current period moves with it, into a later segment)."""
    if budget.left <= 0:
        return
    rows = mover.tx.execute(
        "SELECT * FROM audit INDEXED BY audit_by_tenant WHERE tenant_id IS ? ORDER BY seq LIMIT ?",
        (tenant_id, budget.left),
    ).fetchall()
    by_segment: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    taken = 0
    # The newest record stays live: `seq` is a plain INTEGER PRIMARY KEY, which an emptied
    # table would number from 1 again, under the numbers the segments hold (found in review:
    # a moved trail's records were hidden by new ones of the same seq).
    newest = mover.tx.execute("SELECT max(seq) FROM audit").fetchone()[0]
    for row in rows:
        at_ms = int(row[1])
        if at_ms >= mover.before_ms or row[0] == newest:
            break
        by_segment[mover.target(segments.AUDIT, max(at_ms, cutoff_ms))].append(row)
        taken += 1
    for name, moving in by_segment.items():
        mover.write(segments.AUDIT, name, "audit", moving)
        mover.tx.executemany("DELETE FROM audit WHERE seq = ?", [(r[0],) for r in moving])
        mover.count(segments.AUDIT, name, len(moving), "audit")
    budget.take("audit", taken)


def close_segment(tx: sqlite3.Connection, cmd: Command[CloseSegment]) -> Result:
    """Record the segment's rows' digest and close it; its file is made immutable (WAL folded
    in, rollback-journal mode, fsynced) at the entry's commit, before `state.db` commits."""
    name = cmd.body.name
    found = tx.execute(
        "SELECT family, period_start_ms, state FROM segments WHERE name = ?", (name,)
    )
    row = found.fetchone()
    if row is None:
        return rejected("not_found", f"no segment {name!r}")
    _, period, state = row
    if state != segments.OPEN:
        return rejected("conflict", f"segment {name!r} is {state}")
    ends = int(period) + segments.PERIOD_MS
    if cmd.ts_ms < ends + segments.CLOSE_GRACE_MS:
        return rejected("conflict", f"segment {name!r} may close only after its period and grace")
    writer = writer_for(tx)
    rows = int(tx.execute("SELECT rows FROM segments WHERE name = ?", (name,)).fetchone()[0])
    b = cmd.body
    if b.content_digest is not None:
        if b.rows != rows:
            return rejected("stale_state", f"segment {name!r} holds {rows} rows, not {b.rows}")
        digest = b.content_digest  # the proposer's, off the apply thread: checked below
        path = segments.segment_path(writer.data_dir, name)
        writer.after_commit(lambda: verify_later(path, digest))
    else:
        digest = segments.content_digest(writer.reader(name))
    writer.close_at_commit(name)
    tx.execute(
        "UPDATE segments SET state = 'closed', content_digest = ?, closed_index = ? WHERE name = ?",
        (digest, writer.index, name),
    )
    return ok(name=name, rows=rows, content_digest=digest)


def drop_segment(tx: sqlite3.Connection, cmd: Command[DropSegment]) -> Result:
    """Forget a closed segment's rows (and its tombstones): its row stays, as dropped, so its
    name is never reopened; each node unlinks its file after the commit, off the apply
    thread."""
    name = cmd.body.name
    row = tx.execute("SELECT state FROM segments WHERE name = ?", (name,)).fetchone()
    if row is None:
        return rejected("not_found", f"no segment {name!r}")
    if row[0] != segments.CLOSED:
        return rejected("conflict", f"segment {name!r} is {row[0]}, not closed")
    tx.execute(
        "UPDATE segments SET state = ?, rows = 0, content_digest = NULL WHERE name = ?",
        (segments.DROPPED, name),
    )
    tx.execute("DELETE FROM segment_tombstones WHERE segment = ?", (name,))
    writer = writer_for(tx)
    path = segments.segment_path(writer.data_dir, name)
    writer.after_commit(lambda: unlink_later(path))
    return ok()


HANDLERS: dict[str, Handler] = {
    MoveHistory.TYPE: move_history,
    CloseSegment.TYPE: close_segment,
    DropSegment.TYPE: drop_segment,
}
