"""The dispatcher of one node: preload the due runs of its partitions, fire them from memory,
claim them in batches. It only reads, decides and proposes; apply fences every claim.
"""

from __future__ import annotations

import heapq
import logging
import sqlite3
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Protocol

import msgspec

from schedd import metrics
from schedd.admission import TenantBuckets
from schedd.config import DispatchSettings
from schedd.dispatch.plan import ClaimPlan, Hold, PlanJob, plan_run
from schedd.errors import SchedError
from schedd.loop import Loop
from schedd.model import partition_of
from schedd.store import calendars as stored_calendars
from schedd.store.commands import DEFERRED_COMPLETION_LEVEL, ClaimBatch, ClaimRuns, LogCommand, R
from schedd.store.commands import Claim as ClaimObject
from schedd.store.commands import ClaimRow as ClaimItem
from schedd.store.dispatch_reads import (
    DueRun,
    JobRow,
    due_runs,
    has_run_in_flight,
    read_jobs,
    tenant_rates,
)
from schedd.store.leases import held_partitions
from schedd.store.pauses import paused_tenants
from schedd.store.results import Claimed

log = logging.getLogger(__name__)
PRELOAD_WINDOW_MS = 60_000
PRELOAD_EVERY_MS = 5_000  # read the rows the window takes in since the last read
FULL_PRELOAD_EVERY_MS = 60_000  # read every row of the window again (a safety net: _preload)
MISFIRE_THRESHOLD_MS = DispatchSettings().misfire_threshold_ms  # [dispatch] misfire_threshold
CLAIM_BATCH = 500
CLAIM_BATCHES_IN_FLIGHT = 3  # per dispatcher; more only queue up in the proposer
MAX_CLAIMS_PER_TICK = 20_000
PARKED_RECHECK_S = 0.05  # how often runs over their tenant's rate look for fresh tokens
CLOCK_RECHECK_S = 0.1  # while the clock is distrusted (dispatch/clock.py)


class Submit(Protocol):
    """Start a proposal (raft.proposer.ThreadProposer.submit): its result comes in the future."""

    def __call__(self, cmd: LogCommand[R]) -> Future[R]: ...


class Dispatcher(Loop):
    """Claims the due runs of the partitions this node leases (see DESIGN.md rules 4-7)."""

    def __init__(
        self,
        node_id: str,
        partitions: int,
        connect: Callable[[], sqlite3.Connection],
        submit: Submit,
        *,
        misfire_threshold_ms: int = MISFIRE_THRESHOLD_MS,
        is_clock_trusted: Callable[[], bool] = lambda: True,
        lagging: Callable[[int], list[str]] = lambda _: [],
    ) -> None:
        super().__init__("dispatcher")
        self._lagging = lagging  # members that cannot apply a command level yet
        self._is_clock_trusted = is_clock_trusted
        self.misfire_threshold_ms = misfire_threshold_ms
        self.node_id = node_id
        self.partitions = partitions
        self._connect = connect
        self._conn: sqlite3.Connection | None = None
        self._submit = submit
        self._heap: list[DueRun] = []
        self._known: set[DueRun] = set()
        self._held: list[tuple[int, DueRun]] = []  # overlap "delay": retry time, run
        self._parked: dict[str, deque[DueRun]] = {}  # tenant -> runs over its rate, in order
        self._owned: dict[int, int] = {}  # partition -> lease epoch
        self._inbox: deque[DueRun] = deque()
        self._next_preload_ms = 0  # 0: read every row of the window at the next tick
        self._next_full_preload_ms = 0
        self._read_until: dict[int, int] = {}  # partition -> its due rows up to here were read
        self._is_forget_asked = False  # set from the tick thread, acted on by this loop
        self._buckets = TenantBuckets()
        # Tenants paused (level 8), read at each preload: their runs are left in the due
        # table, out of memory, until a resume makes the dispatcher read them again (forget).
        self._paused: frozenset[str] = frozenset()
        self._calendars = stored_calendars.DatesCache()  # dates of the calendars jobs exclude
        self.claimed = 0
        self.rejected: Counter[str] = Counter()
        self._claim_started_s = 0.0  # monotonic start of the current _claim, for claim lag

    # ------------------------------------------------------------------ inputs

    def offer_many(self, rows: Iterable[tuple[str, int, int, bool]]) -> None:
        """Due rows (job, fire time, run, is trigger) an entry committed (called from apply:
        fired without waiting for a preload), with one wake: a batch
        create's thousand rows wake the dispatcher once, not a thousand times."""
        for job_id, fire_at_ms, scheduled_at_ms, is_trigger in rows:
            partition = partition_of(job_id, self.partitions)
            self._inbox.append(DueRun(fire_at_ms, partition, job_id, scheduled_at_ms, is_trigger))
        self.wake()

    def forget(self) -> None:
        """The store's content was replaced (a snapshot installed): drop every run read from
        it and read the due runs again at the next tick. Safe from any thread."""
        self._is_forget_asked = True
        self.wake()

    def tick(self, now_ms: int) -> float:
        if self._is_forget_asked:
            self._is_forget_asked = False
            self._drop_preloaded()
        if not self._is_clock_trusted():  # now_ms may be wrong: fire nothing by it
            return CLOCK_RECHECK_S
        conn = self._connection()
        self._refresh_leases(conn, now_ms)
        if now_ms >= self._next_preload_ms:
            self._preload(conn, now_ms)
        self._take_inbox(now_ms)
        self._release_parked(now_ms)
        due = self._pop_due(now_ms)
        if due:
            self._claim(conn, due, now_ms)
        return self._wait_s(now_ms)

    def _drop_preloaded(self) -> None:
        # Claims are fenced in apply, so a stale run would only be refused; but a run the
        # snapshot added would wait for the next preload, and a parked one would hold its place.
        self._heap.clear()
        self._known.clear()
        self._held.clear()
        self._parked.clear()
        self._next_preload_ms = 0

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = self._connect()
        return self._conn

    def _refresh_leases(self, conn: sqlite3.Connection, now_ms: int) -> None:
        owned = held_partitions(conn, self.node_id, now_ms)
        if any(self._owned.get(partition) != epoch for partition, epoch in owned.items()):
            # New partitions, or ones held again under a new epoch (another node may have
            # claimed and added runs meanwhile): read their due runs now.
            self._next_preload_ms = 0
        self._owned = owned

    def _preload(self, conn: sqlite3.Connection, now_ms: int) -> None:
        """Read the owned partitions' runs due before now + the window.

        Each read takes only the rows the window gained since the partition's last read: rows
        added below that line are offered by apply (the inbox), so reading them again only
        costs (a 300,000-run spike on one node spent a quarter of its claim phase, and the
        minute before it, re-reading its due rows every 5 s). Every row of the window, late
        ones included, is read again when asked (`_next_preload_ms` 0: new partitions or a new
        epoch, claims not committed or rejected, a snapshot installed) and, as a safety net,
        once a minute."""
        horizon = now_ms + PRELOAD_WINDOW_MS
        self._buckets.set_rates(tenant_rates(conn))
        self._paused = paused_tenants(conn)
        if self._next_preload_ms == 0 or now_ms >= self._next_full_preload_ms:
            self._read_until.clear()
            self._next_full_preload_ms = now_ms + FULL_PRELOAD_EVERY_MS
        for partition in self._owned:
            after = self._read_until.get(partition)
            runs = due_runs(conn, partition, horizon, MAX_CLAIMS_PER_TICK, after_ms=after)
            self._push(runs)
            # Cut at the limit: the rows of the last one's millisecond may go on past it.
            full = len(runs) >= MAX_CLAIMS_PER_TICK
            self._read_until[partition] = runs[-1].fire_at_ms - 1 if full else horizon
        self._next_preload_ms = now_ms + PRELOAD_EVERY_MS

    def _take_inbox(self, now_ms: int) -> None:
        horizon = now_ms + PRELOAD_WINDOW_MS
        while self._inbox:
            run = self._inbox.popleft()
            # Below a partition's read line it is taken whatever the clock says now (a step
            # back must not drop it: no incremental read would find it again).
            line = max(horizon, self._read_until.get(run.partition, horizon))
            if run.fire_at_ms <= line and run.partition in self._owned:
                self._push([run])
        while self._held and self._held[0][0] <= now_ms:
            self._push([heapq.heappop(self._held)[1]])

    def _release_parked(self, now_ms: int) -> None:
        """Runs that waited for their tenant's rate go back to the heap as tokens come in."""
        for tenant_id, runs in list(self._parked.items()):
            for _ in range(min(len(runs), self._buckets.available(tenant_id, now_ms))):
                heapq.heappush(self._heap, runs.popleft())  # still in _known
            if not runs:
                del self._parked[tenant_id]

    def _push(self, runs: Iterable[DueRun]) -> None:
        for run in runs:
            if run not in self._known:
                self._known.add(run)
                heapq.heappush(self._heap, run)

    def _pop_due(self, now_ms: int) -> list[DueRun]:
        due: list[DueRun] = []
        while self._heap and self._heap[0].fire_at_ms <= now_ms and len(due) < MAX_CLAIMS_PER_TICK:
            run = heapq.heappop(self._heap)
            self._known.discard(run)
            if run.partition in self._owned:
                due.append(run)
        return due

    def _wait_s(self, now_ms: int) -> float:
        wake_at = self._next_preload_ms
        if self._heap:
            wake_at = min(wake_at, self._heap[0].fire_at_ms)
        if self._held:
            wake_at = min(wake_at, self._held[0][0])
        wait_s = min(max((wake_at - now_ms) / 1000, 0.0), 0.25)
        return min(wait_s, PARKED_RECHECK_S) if self._parked else wait_s

    # ------------------------------------------------------------------ claims

    def _claim(self, conn: sqlite3.Connection, due: list[DueRun], now_ms: int) -> None:
        """Plan and propose claims batch by batch, a few batches in flight: planning the next
        batch overlaps the replication of the last, and the log never holds more than a few
        of this node's claims ahead of other commands (receives, acks, creates)."""
        in_flight: deque[tuple[list[ClaimItem], Future[Claimed]]] = deque()
        self._claim_started_s = time.monotonic()
        # All of these are due now. In job order, a batch's rows (job, run, message, attempt:
        # all keyed by job id) share pages, so each replica writes far fewer pages per claim
        # (a 100,000-run spike in random order costs 3.5x the apply time).
        due = sorted(due, key=_job_order)
        for start in range(0, len(due), CLAIM_BATCH):
            claims = self._plan_batch(conn, due[start : start + CLAIM_BATCH], now_ms)
            if claims:
                cmd = self._command(claims)
                in_flight.append((claims, self._submit(cmd)))
            while len(in_flight) >= CLAIM_BATCHES_IN_FLIGHT:
                self._settle(*in_flight.popleft(), now_ms)
        while in_flight:
            self._settle(*in_flight.popleft(), now_ms)

    def _command(self, claims: list[ClaimItem]) -> ClaimRuns | ClaimBatch:
        """The newest claim form every member applies: claim_batch with its one-time jobs'
        completion deferred (level 5), claim_batch (level 4), or claim_runs (the same claims as
        objects: a rolling upgrade's few seconds, so converted here)."""
        if self._lagging(ClaimBatch.LEVEL):
            as_objects = tuple(ClaimObject(**msgspec.structs.asdict(c)) for c in claims)
            return ClaimRuns(node_id=self.node_id, claims=as_objects)
        defer = not self._lagging(DEFERRED_COMPLETION_LEVEL)
        return ClaimBatch(node_id=self.node_id, claims=tuple(claims), defer_completion=defer)

    def _plan_batch(
        self, conn: sqlite3.Connection, due: list[DueRun], now_ms: int
    ) -> list[ClaimItem]:
        jobs = read_jobs(conn, {run.job_id for run in due})
        found = [
            (run, job)
            for run in due
            if (job := jobs.get(run.job_id)) is not None and job.tenant_id not in self._paused
        ]
        claims: list[ClaimItem] = []
        self._calendars.new_batch()  # a calendar is checked for a change once a batch
        for run, job in self._admitted(found, now_ms):
            try:
                claim = self._plan(conn, run, job, now_ms)
            except Exception:  # one job's bad data must not stop the other runs of the batch
                log.exception("cannot plan a run, skipped job=%s", run.job_id)
                continue
            if claim is not None:
                claims.append(claim)
        return claims

    def _admitted(
        self, found: list[tuple[DueRun, JobRow]], now_ms: int
    ) -> list[tuple[DueRun, JobRow]]:
        """The runs their tenants' buckets admit, in order, with one bucket call a tenant; the
        rest of a tenant's runs (the last ones: as one `admit` a run would) are parked, out of
        the heap, so other tenants' runs go first."""
        counts = Counter(job.tenant_id for _, job in found)
        left = {
            tenant_id: admitted
            for tenant_id, count in counts.items()
            if (admitted := self._buckets.admit_many(tenant_id, count, now_ms)) < count
        }
        if not left:
            return found
        admitted_runs: list[tuple[DueRun, JobRow]] = []
        for run, job in found:
            tenant_left = left.get(job.tenant_id)
            if tenant_left == 0:
                self._known.add(run)
                self._parked.setdefault(job.tenant_id, deque()).append(run)
                continue
            if tenant_left is not None:
                left[job.tenant_id] = tenant_left - 1
            admitted_runs.append((run, job))
        return admitted_runs

    def _plan(
        self,
        conn: sqlite3.Connection,
        run: DueRun,
        job: JobRow,
        now_ms: int,
    ) -> ClaimItem | None:
        """The claim for one due run, or None when it is not (or not yet) to be claimed. A
        calendar is read after the job's version: a change of it between the two raised that
        version, so the claim is refused as stale and planned again (apply/calendars.py)."""

        def dates_of(name: str) -> frozenset[str] | None:
            return self._calendars.dates_of(conn, job.tenant_id, name)

        plan = plan_run(
            PlanJob.from_row(run.job_id, job),
            run,
            now_ms,
            misfire_threshold_ms=self.misfire_threshold_ms,
            run_in_flight=lambda: has_run_in_flight(conn, run.job_id),
            dates_of=dates_of,
        )
        if isinstance(plan, Hold):
            heapq.heappush(self._held, (plan.retry_at_ms, run))
        if not isinstance(plan, ClaimPlan):
            return None
        return ClaimItem(
            partition=run.partition,
            epoch=self._owned[run.partition],
            job_id=run.job_id,
            scheduled_at_ms=run.scheduled_at_ms,
            fire_at_ms=run.fire_at_ms,
            is_trigger=run.is_trigger,
            version=job.version,
            next_run_at_ms=plan.next_run_at_ms,
            next_fire_at_ms=plan.next_fire_at_ms,
            skip=plan.skip,
        )

    def _settle(self, batch: list[ClaimItem], future: Future[Claimed], now_ms: int) -> None:
        try:
            result = future.result()
        except (SchedError, TimeoutError) as exc:  # unavailable, or (never yet) refused
            log.warning("claims not committed count=%d: %s", len(batch), exc)
            self._next_preload_ms = 0  # the due rows are still there: read them again
            return
        self.claimed += result.claimed
        rejected = result.rejected
        self.rejected.update(rejected)
        if rejected:  # a stale or expired lease, not due yet...: the row may still be there
            self._next_preload_ms = 0
        # The result counts rejections without naming them: every claim's lag is observed.
        committed_ms = now_ms + int((time.monotonic() - self._claim_started_s) * 1000)
        metrics.record_claims(
            result.claimed, rejected, (claim.fire_at_ms for claim in batch), committed_ms
        )
        horizon = now_ms + PRELOAD_WINDOW_MS
        for claim in batch:  # a recurring job's next run, if it falls in the window
            next_fire, next_run = claim.next_fire_at_ms, claim.next_run_at_ms
            if next_fire is not None and next_run is not None and next_fire <= horizon:
                self._push([DueRun(next_fire, claim.partition, claim.job_id, next_run)])


def _job_order(run: DueRun) -> str:
    return run.job_id
