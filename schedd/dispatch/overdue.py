"""On the leader: find the recurring jobs that stopped succeeding, and propose `mark_overdue`.

A job is overdue when two occurrences of its schedule came after its last success (or its
creation, or its start_at) and the second has had time to finish (its gap, at most a minute):
"no successful run within twice its interval", read from its own occurrences, so a cron's
quiet hours and weekends never count against it. Apply keeps the marks (store/overdue.py),
alerts once per mark where the job's failure policy has an alert_url, and the job object and
`schedd_jobs_overdue{tenant}` show them. A pass walks every tenant's active jobs a page at a
time (the jobs_by_tenant_status index), so the marks are at most a pass old, and waits while
a spike drains."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable

from schedd.dispatch.leases import Propose
from schedd.dispatch.pruner import SPIKE_OPEN_RUNS, SPIKE_SCAN_BATCHES
from schedd.errors import SchedError
from schedd.loop import Loop
from schedd.model import AfterSchedule, AtSchedule
from schedd.schedule import load_schedule, next_after
from schedd.store import overdue
from schedd.store.commands import SCHEDULE_CONTROL_LEVEL, MarkOverdue, OverdueMark
from schedd.store.gauges import oldest_due_ms, open_batch_runs
from schedd.store.queries import JOB_COLUMNS, job_to_json
from schedd.timeformat import parse_instant
from schedd.wire.jobs import JobView

PASS_EVERY_S = 10.0  # a pass over every tenant's jobs starts this often when the last one ended
# Active jobs looked at a step: one-time ones are told apart in SQL (most active jobs, at the
# seed's scale), only recurring ones are read whole and judged. At most 2,000 a second: a pass
# over 1,000,000 active jobs takes 500 s.
SCAN = 2_000
NEXT_PAGE_S = 1.0
IDLE_S = 1.0
# Runs due more than this long ago and not claimed, or SPIKE_OPEN_RUNS still open in queues: a
# spike is draining, and the scanner waits (its first version, reading every active job whole
# 10,000 a second, cost a 100,000-run drain a quarter more node CPU a run: docs/benchmarks.md).
SPIKE_LAG_MS = 1_000
SPIKE_WAIT_S = 1.0
MAX_GRACE_MS = 60_000  # how long the second occurrence's run may take before the job is overdue
LAST_ID = "\U0010ffff"  # after every job id
READ_CHUNK = 500  # recurring jobs read whole by one query

log = logging.getLogger(__name__)


def overdue_since(job: JobView, now_ms: int) -> OverdueMark | None:
    """The mark of an active recurring job that is overdue at `now_ms`, or None."""
    schedule = load_schedule(job.schedule)
    if isinstance(schedule, AtSchedule | AfterSchedule):  # no clock of its own
        return None
    since = parse_instant(job.last_success_at or job.created_at, field="since")
    first = next_after(schedule, since)
    second = None if first is None else next_after(schedule, first)
    if first is None or second is None:
        return None
    gap = second - first
    if second + min(gap, MAX_GRACE_MS) > now_ms:
        return None
    return OverdueMark(job_id=job.job_id, since_ms=since, gap_ms=gap)


class OverdueScanner(Loop):
    """One page of one tenant's active jobs a tick; the pass position lives in memory (a new
    leader starts a pass from the first tenant)."""

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        is_leader: Callable[[], bool],
        propose: Propose,
        *,
        partitions: int,
        lagging: Callable[[int], list[str]],
        pass_every_s: float = PASS_EVERY_S,
    ) -> None:
        super().__init__("overdue", first_wait_s=IDLE_S)
        self._partitions = partitions
        self._connect = connect
        self._conn: sqlite3.Connection | None = None
        self._is_leader = is_leader
        self._propose = propose
        self._lagging = lagging
        self._pass_every_s = pass_every_s
        self._tenant: str | None = None  # the tenant being read (None: the pass starts)
        self._after = ""

    def tick(self, now_ms: int) -> float:
        if not self._is_leader() or self._lagging(SCHEDULE_CONTROL_LEVEL):
            self._tenant, self._after = None, ""
            return IDLE_S
        if self._conn is None:
            self._conn = self._connect()
        oldest = oldest_due_ms(self._conn, self._partitions)
        if (oldest is not None and oldest < now_ms - SPIKE_LAG_MS) or open_batch_runs(
            self._conn, SPIKE_SCAN_BATCHES
        ) >= SPIKE_OPEN_RUNS:
            return SPIKE_WAIT_S  # claims and receives first
        if self._tenant is None:
            self._tenant = self._next_tenant(self._conn, "")
        budget = SCAN  # jobs looked at this tick, over as many tenants as it takes
        while self._tenant is not None and budget > 0:
            command, last, scanned = self.step(
                self._conn, self._tenant, self._after, now_ms, budget
            )
            budget -= max(scanned, 1)
            if command is not None:
                try:
                    self._propose(command)
                except (SchedError, TimeoutError) as exc:  # the next pass finds them again
                    log.warning("overdue: marks not recorded: %s", exc)
            if last is not None:
                self._after = last
            else:
                self._tenant, self._after = self._next_tenant(self._conn, self._tenant), ""
        return NEXT_PAGE_S if self._tenant is not None else self._pass_every_s

    @staticmethod
    def _next_tenant(conn: sqlite3.Connection, after: str) -> str | None:
        row = conn.execute(
            "SELECT tenant_id FROM tenants WHERE tenant_id > ? ORDER BY tenant_id LIMIT 1",
            (after,),
        ).fetchone()
        return None if row is None else str(row[0])

    @staticmethod
    def step(
        conn: sqlite3.Connection, tenant_id: str, after: str, now_ms: int, most: int = SCAN
    ) -> tuple[MarkOverdue | None, str | None, int]:
        """Judge up to `most` of a tenant's active jobs after `after`: the command that brings
        the marks of their id range up to date (None: nothing to change), the last id looked at
        when the stretch was full (None: the tenant is done), and how many were looked at."""
        scanned = conn.execute(
            "SELECT job_id, json_extract(spec, '$.schedule.run_at') IS NULL "
            "FROM jobs INDEXED BY jobs_by_tenant_status "
            "WHERE tenant_id = ? AND status = 'active' AND job_id > ? ORDER BY job_id LIMIT ?",
            (tenant_id, after, most),
        ).fetchall()
        full = len(scanned) == most
        last = scanned[-1][0] if full else LAST_ID
        recurring = [job_id for job_id, is_recurring in scanned if is_recurring]
        rows = []
        for start in range(0, len(recurring), READ_CHUNK):
            chunk = recurring[start : start + READ_CHUNK]
            marks = ",".join("?" * len(chunk))
            rows += conn.execute(
                f"SELECT {JOB_COLUMNS} FROM jobs WHERE job_id IN ({marks})", chunk
            ).fetchall()
        found: dict[str, OverdueMark] = {}
        for row in rows:
            job = job_to_json(row)
            try:
                mark = overdue_since(job, now_ms) if job.status == "active" else None
            except (ValueError, KeyError):  # a schedule no release wrote: never overdue
                mark = None
            if mark is not None:
                found[job.job_id] = mark
        marked = overdue.marked_in_tenant(conn, tenant_id, after, last)
        new = tuple(mark for job_id, mark in found.items() if job_id not in marked)
        cleared = tuple(sorted(marked - found.keys()))
        command = MarkOverdue(marked=new, cleared=cleared) if new or cleared else None
        return command, last if full else None, len(scanned)
