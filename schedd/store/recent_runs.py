"""What a job's newest runs say (issue 31): when it last succeeded, when it last failed, and how
many of its runs failed since its last success. Derived at read time from the live runs (run
rows and the runs kept in batches) and, for the runs moved into history segments, from the
job's `moved_run_summaries` row (store/moved_runs.py, log level 14). Never writes.

A success is a run that `succeeded` (acked, or its callback or broker accepted it); a failure is a
run that ended `dead` (its attempts ran out, or it expired unreceived). Runs in flight, retrying
or skipped count as neither. Only the job's newest RECENT_RUNS runs (by scheduled time) are read,
so a job costs the same however long its history. Among them: the last success is the newest
run that succeeded, shown by when it finished; the last failure the newest that died, shown by
when it died; `consecutive_failures` the runs that died scheduled after the last success (all
that died, without one), so at most RECENT_RUNS ("that many or more"). A success or failure
older than those runs reads as none. The moved runs' summary is combined with them: the newer of
the live and the moved success (and death) by scheduled time, and the moved deaths after the
newest success added to the live ones.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from schedd.timeformat import format_instant
from schedd.wire.jobs import RECENT_RUNS

# The job's newest runs, from both stores of runs: the run rows and the batch slots (a spilled
# slot, 's', has a run row and is read there; a done slot, 'd', succeeded), merged newest first
# from their primary keys (no sort: SQLite's merge of two ordered index ranges, which stops at
# the LIMIT). `o`: 1 succeeded, 2 died, 0 neither. One pass over them gives the newest
# success's and the newest death's scheduled times, and the oldest run's; every other read is
# by key.
_NEWEST = f"""
SELECT max(CASE o WHEN 1 THEN s END) AS succeeded, max(CASE o WHEN 2 THEN s END) AS died,
       min(s) AS oldest
FROM (
  SELECT scheduled_at_ms AS s,
         CASE status WHEN 'succeeded' THEN 1 WHEN 'dead' THEN 2 WHEN 'failed' THEN 2 ELSE 0 END AS o
  FROM runs WHERE job_id = {{job}}
  UNION ALL
  SELECT k.scheduled_at_ms, substr(b.slots, k.slot + 1, 1) = x'64'
  FROM run_keys k JOIN batches b ON b.batch_id = k.batch_id
  WHERE k.job_id = {{job}} AND substr(b.slots, k.slot + 1, 1) != x'73'
  ORDER BY 1 DESC LIMIT {RECENT_RUNS}
)"""

# When the run scheduled at `at` finished: its run row's time, else its batch slot's ack time
# (the slot's value in the third of the batch's times arrays).
_FINISHED = """coalesce(
  (SELECT finished_at_ms FROM runs WHERE job_id = {job} AND scheduled_at_ms = {at}),
  (SELECT schedd_int64_le(substr(b.times, 8 * (2 * length(b.slots) + k.slot) + 1, 8))
   FROM run_keys k JOIN batches b ON b.batch_id = k.batch_id
   WHERE k.job_id = {job} AND k.scheduled_at_ms = {at}))"""

# The live newest runs' summary beside the job's moved runs' (store/moved_runs.py, level 14: one
# key read): ls, ld the newest live success's and death's scheduled times, oldest the oldest live
# run read; ms, msf, md, mdf, mc the moved ones' scheduled and end times and deaths.
_BOTH = """SELECT n.succeeded AS ls, n.died AS ld, n.oldest AS oldest,
  m.succeeded_at_ms AS ms, m.succeeded_finished_ms AS msf, m.died_at_ms AS md,
  m.died_finished_ms AS mdf, coalesce(m.deaths, 0) AS mc
FROM ({newest}) n LEFT JOIN moved_run_summaries m ON m.job_id = {job}"""

# The newer of a live and a moved scheduled time (either may be NULL).
_NEWER = "CASE WHEN {moved} IS NULL OR {live} >= {moved} THEN {live} ELSE {moved} END"
_SUCCEEDED = _NEWER.format(live="ls", moved="ms")
_DIED = _NEWER.format(live="ld", moved="md")

# The runs that died after the newest success, live or moved: the live run rows among those read
# that died after it (a batch slot never dies: it spills first), plus the
# moved deaths when the newest moved death is after it (all of mc: exact unless a moved death
# was scheduled before a newer live success, docs in moved_runs.py).
_DIED_SINCE = f"""(SELECT count(*) FROM runs WHERE job_id = {{job}}
  AND scheduled_at_ms > max(coalesce({_SUCCEEDED}, oldest - 1), oldest - 1)
  AND status IN ('dead', 'failed'))
  + CASE WHEN md > coalesce({_SUCCEEDED}, -1) THEN mc ELSE 0 END"""


def summary_sql(job: str) -> str:
    """A scalar subquery: the summary of the job whose id is the SQL expression `job`
    (`jobs.job_id` in a SELECT over jobs), from its newest live runs and its moved ones, as the
    JSON text `[last success's finish ms, last death's ms, deaths since the last success]`, or
    NULL when none succeeded or died."""
    live_success = _FINISHED.format(job=job, at="ls")
    live_death = _FINISHED.format(job=job, at="ld")
    return (
        "SELECT json_array("
        f"CASE WHEN ms IS NULL OR ls >= ms THEN {live_success} ELSE msf END, "
        f"CASE WHEN md IS NULL OR ld >= md THEN {live_death} ELSE mdf END, "
        f"{_DIED_SINCE.format(job=job)}) "
        f"FROM ({_BOTH.format(newest=_NEWEST.format(job=job), job=job)}) "
        "WHERE ls IS NOT NULL OR ld IS NOT NULL OR ms IS NOT NULL OR md IS NOT NULL"
    )


def failing_sql(job: str) -> str:
    """A scalar subquery: 1 when the newest run that succeeded or died, live or moved, died,
    else 0 (or NULL)."""
    both = _BOTH.format(newest=_NEWEST.format(job=job), job=job)
    return f"SELECT {_DIED} > coalesce({_SUCCEEDED}, -1) FROM ({both})"


# Over `jobs` (unaliased), as queries.JOB_COLUMNS and job_search's filters use it.
SUMMARY = summary_sql("jobs.job_id")
FAILING = failing_sql("jobs.job_id")


@dataclass(frozen=True, slots=True, kw_only=True)
class Results:
    """A job's summary as the job object shows it: RFC 3339 instants (None: none)."""

    last_success_at: str | None = None
    last_failure_at: str | None = None
    consecutive_failures: int = 0


NONE = Results()


def results_of(summary: str | None) -> Results:
    """The Results of SUMMARY's value for one job."""
    if summary is None:
        return NONE
    succeeded, failed, since = json.loads(summary)
    return Results(
        last_success_at=None if succeeded is None else format_instant(succeeded),
        last_failure_at=None if failed is None else format_instant(failed),
        consecutive_failures=since,
    )
