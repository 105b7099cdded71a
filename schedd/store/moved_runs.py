"""What a job's runs that moved into history segments say (log level 14): the
`moved_run_summaries` table, one row per job, so that a job's last success, last failure,
failure streak and `failing` filter, the overdue scanner and the failure policies still see the
runs a `move_history` took out of the live tables (docs/scaling.md §1).

Written only by apply (`apply/history.py` through `merge`, once per job per move command; the
job's row goes with the job, `forget`); read by `recent_runs.py` (in SQL) and by
`apply/failures.py` (`of`). Moves take a run out of the live tables an hour or more after it
ended, so the moved runs are older than the live ones, except for a run that finished long after
its scheduled time (a long retry): where that matters the counts here are approximate (below).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import NamedTuple

import msgspec

_JSON = msgspec.json.Encoder()
SUCCEEDED = "succeeded"
DIED = ("dead", "failed")  # as recent_runs.py counts a death

_COLUMNS = "job_id, succeeded_at_ms, succeeded_finished_ms, died_at_ms, died_finished_ms, deaths"


class Summary(NamedTuple):
    """A job's row: the newest moved success's scheduled time and end, the newest moved death's,
    and the moved runs that died scheduled after that success (all that died, without one)."""

    job_id: str
    succeeded_at_ms: int | None
    succeeded_finished_ms: int | None
    died_at_ms: int | None
    died_finished_ms: int | None
    deaths: int


class Moved:
    """What one move command moves of one job's finished runs."""

    __slots__ = ("deaths", "died", "succeeded")

    def __init__(self, succeeded: tuple[int, int] | None = None) -> None:
        self.succeeded = succeeded  # (scheduled, finished) of the newest success
        self.died: tuple[int, int] | None = None  # of the newest death
        self.deaths: list[int] = []  # every death's scheduled time

    def add(self, status: str, scheduled_ms: int, finished_ms: int) -> None:
        if status == SUCCEEDED:
            if self.succeeded is None or scheduled_ms > self.succeeded[0]:
                self.succeeded = (scheduled_ms, finished_ms)
        elif status in DIED:
            self.deaths.append(scheduled_ms)
            if self.died is None or scheduled_ms > self.died[0]:
                self.died = (scheduled_ms, finished_ms)


Pair = tuple[int | None, int | None]
_NONE: Pair = (None, None)


def merged(old: Summary | None, job_id: str, moved: Moved) -> Summary:
    """The job's row after a move of `moved`. Exact while runs move in the order they were
    scheduled; when a success moving now was scheduled before a death that moved earlier (a run
    that ended long after a newer one), the earlier deaths all count as after it."""
    if old is None:  # the common case: the job's first move (every one-time job's only one)
        since = -1 if moved.succeeded is None else moved.succeeded[0]
        now = sum(1 for at in moved.deaths if at > since) if moved.deaths else 0
        first: Pair = moved.succeeded or _NONE
        death: Pair = moved.died or _NONE
        return Summary(job_id, first[0], first[1], death[0], death[1], now)
    succeeded = _newest((old.succeeded_at_ms, old.succeeded_finished_ms), moved.succeeded)
    died = _newest((old.died_at_ms, old.died_finished_ms), moved.died)
    since = -1 if succeeded[0] is None else succeeded[0]
    earlier = old.deaths if old.died_at_ms is not None and old.died_at_ms > since else 0
    now = sum(1 for at in moved.deaths if at > since)
    return Summary(job_id, succeeded[0], succeeded[1], died[0], died[1], earlier + now)


def _newest(old: Pair, new: tuple[int, int] | None) -> Pair:
    if new is None or (old[0] is not None and old[0] >= new[0]):
        return old
    return new


def merge(tx: sqlite3.Connection, moved: dict[str, Moved]) -> None:
    """Fold one move command's runs into their jobs' rows: one read and one write a job, in job
    order (so every replica writes alike)."""
    if not moved:
        return
    ids = sorted(moved)
    found = {
        row[0]: Summary(*row)
        for row in tx.execute(
            f"SELECT {_COLUMNS} FROM moved_run_summaries "
            "WHERE job_id IN (SELECT value FROM json_each(?))",
            (_JSON.encode(ids).decode(),),
        )
    }
    tx.executemany(
        f"INSERT OR REPLACE INTO moved_run_summaries ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
        [merged(found.get(job_id), job_id, moved[job_id]) for job_id in ids],
    )


def of(conn: sqlite3.Connection, job_id: str) -> Summary | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM moved_run_summaries WHERE job_id = ?", (job_id,)
    ).fetchone()
    return None if row is None else Summary(*row)


def forget(tx: sqlite3.Connection, job_ids: Iterable[str]) -> None:
    tx.executemany("DELETE FROM moved_run_summaries WHERE job_id = ?", [(j,) for j in job_ids])
