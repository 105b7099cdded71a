"""Reads of history across the live state and the segments (issue 35 §1, docs/scaling.md).

The live tables first, then the segments the replicated `segments` table lists, newest first;
a row found in a newer source hides the same row in an older one (a run redriven after it
moved lives again, and later moves into a newer segment), and a tombstoned dead letter is
skipped. Segments are the live tables' own columns, so each source is read with the live
readers of queries.py. A segment this node does not have yet (a closed one still being
fetched) makes a lookup raise `HistoryMissing` and a list page answer that it is incomplete.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from schedd.retention import Retention
from schedd.store import queries, segments
from schedd.timeformat import parse_instant
from schedd.wire.cluster import AuditRecord
from schedd.wire.deadletters import DeadLetterView
from schedd.wire.jobs import RunView

T = TypeVar("T")
POOLED_CONNECTIONS = 32  # read-only connections to closed segments kept open, most recent
# A row is in the segment of the period in which it ended, never before its lower bound in
# time (a run's scheduled time, a dead letter's creation) less the proposers' clock offset:
# this covers that offset with room.
LOWER_BOUND_SLACK_MS = segments.CLOSE_GRACE_MS


def cutoff_ms(
    conn: sqlite3.Connection, tenant_id: str | None, node: Retention, kind: str, now_ms: int
) -> int:
    """The oldest end of a `kind` row the tenant still sees: the node's retention shortened by
    the tenant's own, honoured at read time (a segment is deleted whole at the node's)."""
    policy = node
    if tenant_id is not None:
        row = conn.execute("SELECT retention FROM tenants WHERE tenant_id = ?", (tenant_id,))
        found = row.fetchone()
        if found is not None:
            policy = node.shortened_by(json.loads(found[0]))
    return now_ms - int(getattr(policy, kind))


class HistoryMissing(Exception):
    """A segment that may hold the answer is not on this node (yet)."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(f"history segments not on this node yet: {', '.join(names)}")
        self.names = names


@dataclass(frozen=True, slots=True)
class Listed:
    name: str
    period_start_ms: int
    state: str

    @property
    def ends_ms(self) -> int:
        return self.period_start_ms + segments.PERIOD_MS


class SegmentReaders:
    """Read-only connections to segments for the API's reader threads. A closed segment's
    connection is pooled (at most POOLED_CONNECTIONS idle, least recently used closed first);
    an open segment's is opened for one read and closed (a kept connection would stop its
    close from taking it out of WAL mode)."""

    def __init__(self, data_dir: Path, *, capacity: int = POOLED_CONNECTIONS) -> None:
        self.data_dir = data_dir
        self._capacity = capacity
        self._idle: OrderedDict[tuple[str, int], sqlite3.Connection] = OrderedDict()
        self._lock = threading.Lock()
        self._ids = iter(range(1 << 62))

    @contextmanager
    def open(self, segment: Listed) -> Iterator[sqlite3.Connection]:
        """A connection to the segment (FileNotFoundError when this node lacks its file)."""
        path = segments.segment_path(self.data_dir, segment.name)
        if segment.state != segments.CLOSED:
            conn = segments.open_reader(path)
            try:
                yield conn
            finally:
                conn.close()
            return
        conn = self._take(segment.name) or segments.open_reader(path)
        try:
            yield conn
        finally:
            self._give(segment.name, conn)

    def _take(self, name: str) -> sqlite3.Connection | None:
        with self._lock:
            for key in self._idle:
                if key[0] == name:
                    return self._idle.pop(key)
        return None

    def _give(self, name: str, conn: sqlite3.Connection) -> None:
        with self._lock:
            self._idle[(name, next(self._ids))] = conn
            while len(self._idle) > self._capacity:
                _, oldest = self._idle.popitem(last=False)
                oldest.close()

    def close(self) -> None:
        with self._lock:
            for conn in self._idle.values():
                conn.close()
            self._idle.clear()


def listed(conn: sqlite3.Connection, family: str) -> list[Listed]:
    """The family's segments the replicated table lists, newest first."""
    rows = conn.execute(
        "SELECT name, period_start_ms, state FROM segments WHERE family = ? "
        "AND state != 'dropped' ORDER BY period_start_ms DESC",
        (family,),
    ).fetchall()
    return [Listed(str(n), int(p), str(s)) for n, p, s in rows]


def closed_through(conn: sqlite3.Connection) -> int | None:
    """The highest closed_index of the segments (None: none closed), read in the same
    transaction as what is read after it only if the caller holds one."""
    row = conn.execute("SELECT max(closed_index) FROM segments WHERE state = 'closed'").fetchone()
    return None if row is None or row[0] is None else int(row[0])


def _has_segments(conn: sqlite3.Connection) -> bool:
    return (
        conn.execute("SELECT 1 FROM segments WHERE state != 'dropped' LIMIT 1").fetchone()
        is not None
    )


def _ms(instant: str) -> int:
    return parse_instant(instant, field="instant")


# ---------------------------------------------------------------------------- runs


def job_runs(
    conn: sqlite3.Connection,
    readers: SegmentReaders,
    job_id: str,
    *,
    before_ms: int,
    limit: int,
    not_before_ms: int,
    since_ms: int = 0,
    read: Callable[[sqlite3.Connection, list[RunView]], list[RunView]] = lambda _c, runs: runs,
) -> tuple[list[RunView], bool]:
    """A page of a job's runs newest first, scheduled before `before_ms`, none that ended
    before `not_before_ms` (the tenant's runs retention), no segment that ended before it or
    `since_ms` (the job's creation); `read` completes a source's runs from that source
    (outputs, upstream runs). Whether every segment that could hold one of the page's runs
    was read."""

    def page(source: sqlite3.Connection) -> list[RunView]:
        runs = queries.list_runs(source, job_id, before_ms=before_ms, limit=limit)
        return read(source, runs) if runs else runs

    found: dict[int, RunView] = {}
    for run in page(conn):
        found.setdefault(_ms(run.scheduled_at), run)  # the listing's first of a time wins
    if not _has_segments(conn):
        return _newest(found, limit), True
    is_complete = True
    for segment in listed(conn, segments.RUNS):
        if segment.ends_ms < max(not_before_ms, since_ms - LOWER_BOUND_SLACK_MS):
            break
        if len(found) >= limit:
            kth = sorted(found, reverse=True)[limit - 1]
            if segment.ends_ms + LOWER_BOUND_SLACK_MS < kth:
                break  # every run of it and older segments is older than the page's last
        try:
            with readers.open(segment) as source:
                for run in page(source):
                    found.setdefault(_ms(run.scheduled_at), run)
        except FileNotFoundError:
            is_complete = False
    kept = {
        at: run
        for at, run in found.items()
        if run.finished_at is None or _ms(run.finished_at) >= not_before_ms
    }
    return _newest(kept, limit), is_complete


_SLOTS_TAKEN = """
SELECT s.value FROM json_each(:slots) s
WHERE EXISTS (SELECT 1 FROM runs r WHERE r.job_id = :job AND r.scheduled_at_ms = s.value)
   OR EXISTS (SELECT 1 FROM run_keys k WHERE k.job_id = :job AND k.scheduled_at_ms = s.value)
   OR EXISTS (SELECT 1 FROM backfills f WHERE f.job_id = :job AND f.scheduled_at_ms = s.value)
"""


def slots_taken(
    conn: sqlite3.Connection, readers: SegmentReaders, job_id: str, slots: list[int]
) -> set[int]:
    """Which of a job's slots have a run (or a backfill mark) in a listed runs segment (one
    query per segment); HistoryMissing when a segment that could hold one is not here."""
    if not slots:
        return set()
    taken: set[int] = set()
    missing: list[str] = []
    text = json.dumps(slots)
    for segment in listed(conn, segments.RUNS):
        if segment.ends_ms < min(slots) - LOWER_BOUND_SLACK_MS:
            break
        try:
            with readers.open(segment) as source:
                rows = source.execute(_SLOTS_TAKEN, {"slots": text, "job": job_id}).fetchall()
        except FileNotFoundError:
            missing.append(segment.name)
            continue
        taken.update(int(v) for (v,) in rows)
    if missing:
        raise HistoryMissing(missing)
    return taken


def _newest(found: dict[int, RunView], limit: int) -> list[RunView]:
    return [found[at] for at in sorted(found, reverse=True)[:limit]]


# ---------------------------------------------------------------------------- dead letters


def deadletters(
    conn: sqlite3.Connection,
    readers: SegmentReaders,
    tenant_id: str,
    *,
    after: str,
    limit: int,
    not_before_ms: int,
) -> tuple[list[DeadLetterView], bool]:
    """A page of the tenant's dead letters in id order after `after`: the live ones and every
    listed segment's within the tenant's retention (each an index range), merged."""
    found = {d.id: d for d in queries.list_deadletters(conn, tenant_id, after=after, limit=limit)}
    if not _has_segments(conn):
        return [found[i] for i in sorted(found)[:limit]], True
    is_complete = True
    for segment in listed(conn, segments.DEADLETTERS):
        if segment.ends_ms < not_before_ms:
            break
        gone = _tombstoned(conn, segment.name)
        try:
            with readers.open(segment) as source:
                for item in queries.list_deadletters(source, tenant_id, after=after, limit=limit):
                    if item.id not in gone and _ms(item.created_at) >= not_before_ms:
                        found.setdefault(item.id, item)
        except FileNotFoundError:
            is_complete = False
    return [found[i] for i in sorted(found)[:limit]], is_complete


Row = tuple[object, ...]
Died = tuple[str | None, int, str]  # a dead letter's error, created_at_ms and id
# A tenant's newest dead letters, by when their runs died (live and in a segment alike).
_NEWEST_DEADLETTERS = (
    "SELECT error, created_at_ms, id FROM deadletters INDEXED BY deadletters_by_age "
    "WHERE tenant_id = ? AND created_at_ms >= ? ORDER BY created_at_ms DESC, id DESC LIMIT ?"
)


def newest_deadletters(
    conn: sqlite3.Connection,
    readers: SegmentReaders,
    tenant_id: str,
    *,
    most: int,
    not_before_ms: int,
) -> tuple[list[Died], bool]:
    """The tenant's newest `most` dead letters as (error, created_at_ms, id), newest first: the
    live ones, then the segments newest first until one ended before the `most`-th found (a
    segment's rows were all made before its period ended); whether every segment that could
    hold one of them was read."""
    args = (tenant_id, not_before_ms, most)
    found: dict[str, Died] = {r[2]: r for r in conn.execute(_NEWEST_DEADLETTERS, args)}
    is_complete = True
    for segment in listed(conn, segments.DEADLETTERS) if _has_segments(conn) else []:
        newest = _by_age(found)
        if segment.ends_ms <= not_before_ms or (
            len(newest) >= most and newest[most - 1][1] >= segment.ends_ms
        ):
            break
        gone = _tombstoned(conn, segment.name)
        try:
            with readers.open(segment) as source:
                for row in source.execute(_NEWEST_DEADLETTERS, args):
                    if row[2] not in gone:
                        found.setdefault(row[2], row)
        except FileNotFoundError:
            is_complete = False
    return _by_age(found)[:most], is_complete


def _by_age(found: dict[str, Died]) -> list[Died]:
    return sorted(found.values(), key=lambda r: (r[1], r[2]), reverse=True)


def deadletter(
    conn: sqlite3.Connection,
    readers: SegmentReaders,
    tenant_id: str,
    dl_id: str,
    *,
    not_before_ms: int,
) -> tuple[DeadLetterView, str | None] | None:
    """The dead letter and the segment it is in (None: live); HistoryMissing when a segment
    that could hold it is not on this node."""
    live = queries.get_deadletter(conn, tenant_id, dl_id)
    if live is not None:
        return live, None
    lower = _lower_bound(dl_id)
    missing: list[str] = []
    for segment in listed(conn, segments.DEADLETTERS):
        if segment.ends_ms < max(lower - LOWER_BOUND_SLACK_MS, not_before_ms):
            break
        if dl_id in _tombstoned(conn, segment.name, dl_id):
            continue
        try:
            with readers.open(segment) as source:
                item = queries.get_deadletter(source, tenant_id, dl_id)
        except FileNotFoundError:
            missing.append(segment.name)
            continue
        if item is not None and _ms(item.created_at) >= not_before_ms:
            return item, segment.name
    if missing:
        raise HistoryMissing(missing)
    return None


def moved_deadletter(readers: SegmentReaders, segment: Listed, dl_id: str) -> Row:
    """A moved dead letter's row, all its columns (what a redrive carries)."""
    with readers.open(segment) as source:
        row = source.execute("SELECT * FROM deadletters WHERE id = ?", (dl_id,)).fetchone()
    return tuple(row)


def moved_run(
    conn: sqlite3.Connection, readers: SegmentReaders, job_id: str, scheduled_at_ms: int
) -> tuple[Row, list[Row]] | None:
    """A run that moved into a segment (its row, its attempts), newest copy first; None when
    no listed segment holds it; HistoryMissing when one that could is not on this node."""
    missing: list[str] = []
    for segment in listed(conn, segments.RUNS):
        if segment.ends_ms < scheduled_at_ms - LOWER_BOUND_SLACK_MS:
            break
        key = (job_id, scheduled_at_ms)
        try:
            with readers.open(segment) as source:
                run = source.execute(
                    "SELECT * FROM runs WHERE job_id = ? AND scheduled_at_ms = ?", key
                ).fetchone()
                if run is None:
                    continue
                attempts = source.execute(
                    "SELECT * FROM attempts WHERE job_id = ? AND scheduled_at_ms = ? "
                    "ORDER BY attempt",
                    key,
                ).fetchall()
        except FileNotFoundError:
            missing.append(segment.name)
            continue
        if missing:  # a newer segment, not here yet, may hold a newer copy (a redriven run)
            raise HistoryMissing(missing)
        return tuple(run), [tuple(a) for a in attempts]
    if missing:
        raise HistoryMissing(missing)
    return None


def _lower_bound(dl_id: str) -> int:
    """A dead letter's id is `job_id:scheduled_at_ms`; it was made after that time."""
    _, _, at = dl_id.rpartition(":")
    return int(at) if at.isdigit() else 0


def _tombstoned(conn: sqlite3.Connection, name: str, dl_id: str | None = None) -> set[str]:
    if dl_id is not None:
        row = conn.execute(
            "SELECT id FROM segment_tombstones WHERE segment = ? AND id = ?", (name, dl_id)
        ).fetchone()
        return set() if row is None else {str(row[0])}
    rows = conn.execute("SELECT id FROM segment_tombstones WHERE segment = ?", (name,))
    return {str(i) for (i,) in rows}


# ---------------------------------------------------------------------------- audit


def audit(
    conn: sqlite3.Connection,
    readers: SegmentReaders,
    tenant_id: str | None,
    *,
    after: int,
    limit: int,
    job_id: str | None,
) -> tuple[list[AuditRecord], bool]:
    """Audit records after sequence `after`, in sequence order: the segments oldest first
    (sequence follows time, nearly), stopping once the page is full and a segment starts past
    it, then the live table."""
    found: dict[int, AuditRecord] = {}
    is_complete = True
    if _has_segments(conn):
        for segment in reversed(listed(conn, segments.AUDIT)):
            try:
                with readers.open(segment) as source:
                    low, high = source.execute("SELECT min(seq), max(seq) FROM audit").fetchone()
                    if high is None or high <= after:
                        continue
                    if len(found) >= limit and low > sorted(found)[limit - 1]:
                        break
                    for record in queries.list_audit(
                        source, tenant_id, after=after, limit=limit, job_id=job_id
                    ):
                        found.setdefault(record.seq, record)
            except FileNotFoundError:
                is_complete = False
    for record in queries.list_audit(conn, tenant_id, after=after, limit=limit, job_id=job_id):
        found[record.seq] = record
    return [found[s] for s in sorted(found)[:limit]], is_complete
