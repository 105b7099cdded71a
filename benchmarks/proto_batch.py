"""Prototype of issue 29's batch-replicated delivery state, SQLite only: what a claim, a receive
and an ack would cost per run if a claim wrote one `batches` row for its queue runs instead of a
`runs` and a `messages` row each, and receives and acks rewrote that row's compact per-run state.

Not the product: no Raft, no command decoding, no results kept. It runs the statements the
design (schedd/store/DESIGN.md, "Batches") would run, on a store shaped like today's (the due
and jobs tables as migrations made them), so its figures sit beside `bench_apply.py`'s, which
runs today's apply for the same spike. `python benchmarks/bench_apply.py --proto` prints both.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

PARTITIONS = 16
CLAIM_BATCH = 500
RECEIVE_MAX = 100
NOW_MS = 1_790_000_000_000

KINDS = ("claim", "receive", "ack")  # each in all, its transaction's commit included
PARTS = ("claim: due rows", "claim: batch row", "claim: jobs")  # inside "claim"
READY, HELD, DONE = 0, 1, 2  # a run's state in its batch: one byte each

SCHEMA = """
CREATE TABLE jobs (
    job_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, partition INTEGER NOT NULL,
    status TEXT NOT NULL, version INTEGER NOT NULL, spec TEXT NOT NULL,
    next_run_at_ms INTEGER, batch_id INTEGER
) WITHOUT ROWID;
CREATE INDEX jobs_by_tenant ON jobs (tenant_id, status, job_id);
CREATE INDEX jobs_next ON jobs (status, next_run_at_ms);
CREATE TABLE due (
    partition INTEGER NOT NULL, fire_at_ms INTEGER NOT NULL, job_id TEXT NOT NULL,
    scheduled_at_ms INTEGER NOT NULL, is_trigger INTEGER NOT NULL,
    PRIMARY KEY (partition, fire_at_ms, job_id, scheduled_at_ms)
) WITHOUT ROWID;
CREATE INDEX due_by_job ON due (job_id);
-- One claim's queue runs of one (tenant, queue): `runs` is their msgspec array (job id,
-- scheduled and fire time, payload), `state` a byte per run, `attempts` a byte per run,
-- `ready_at_ms` when the oldest run still to hand out may be handed out (NULL: none left).
CREATE TABLE batches (
    batch_id INTEGER PRIMARY KEY, tenant_id TEXT NOT NULL, queue TEXT NOT NULL,
    partition INTEGER NOT NULL, epoch INTEGER NOT NULL, claimed_at_ms INTEGER NOT NULL,
    runs BLOB NOT NULL, state BLOB NOT NULL, attempts BLOB NOT NULL,
    open INTEGER NOT NULL, ready_at_ms INTEGER
);
CREATE INDEX batches_ready ON batches (tenant_id, queue, ready_at_ms)
    WHERE ready_at_ms IS NOT NULL;
"""


@dataclass
class Spent:
    cpu: dict[str, float] = field(default_factory=lambda: dict.fromkeys(KINDS + PARTS, 0.0))

    def timed(self, name: str) -> _Timer:
        return _Timer(self, name)


class _Timer:
    def __init__(self, spent: Spent, name: str) -> None:
        self.spent, self.name = spent, name

    def __enter__(self) -> None:
        self.started = time.thread_time()

    def __exit__(self, *_: object) -> None:
        self.spent.cpu[self.name] += time.thread_time() - self.started


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def setup(db: sqlite3.Connection, n: int) -> list[str]:
    db.executescript(SCHEMA)
    spec = '{"schedule":{"at":"2026-09-21T14:13:20Z"},"target":{"type":"queue","name":"q"}}'
    jobs = [f"job-{i:08d}" for i in range(n)]
    with db:
        db.executemany(
            "INSERT INTO jobs VALUES (?, 't1', ?, 'active', 1, ?, ?, NULL)",
            [(job, i % PARTITIONS, spec, NOW_MS) for i, job in enumerate(jobs)],
        )
        db.executemany(
            "INSERT INTO due VALUES (?, ?, ?, ?, 0)",
            [(i % PARTITIONS, NOW_MS, job, NOW_MS) for i, job in enumerate(jobs)],
        )
    return jobs


def claim(
    db: sqlite3.Connection, jobs: list[str], spent: Spent, *, complete_jobs: bool = True
) -> list[int]:
    """Claims of CLAIM_BATCH runs (one partition's due rows), each one transaction: the due rows
    and the one-time jobs change per run (the fences and the job's end stay per run), the runs
    themselves go into one batches row."""
    batch_ids = []
    encode = msgspec.msgpack.encode
    by_partition: dict[int, list[str]] = {}
    for i, job in enumerate(jobs):
        by_partition.setdefault(i % PARTITIONS, []).append(job)
    for partition, members in by_partition.items():
        for chunk in _chunks(members, CLAIM_BATCH):
            with spent.timed("claim"), db:
                rows = [(partition, NOW_MS, job, NOW_MS) for job in chunk]
                with spent.timed("claim: due rows"):
                    db.executemany(
                        "DELETE FROM due WHERE partition = ? AND fire_at_ms = ? AND job_id = ?"
                        " AND scheduled_at_ms = ?",
                        rows,
                    )
                with spent.timed("claim: batch row"):
                    cursor = db.execute(
                        "INSERT INTO batches (tenant_id, queue, partition, epoch, claimed_at_ms,"
                        " runs, state, attempts, open, ready_at_ms)"
                        " VALUES ('t1', 'q', ?, 1, ?, ?, ?, ?, ?, ?)",
                        (
                            partition,
                            NOW_MS,
                            encode([(job, NOW_MS, NOW_MS, '{"n":1}') for job in chunk]),
                            bytes(len(chunk)),
                            bytes(len(chunk)),
                            len(chunk),
                            NOW_MS,
                        ),
                    )
                batch_id = cursor.lastrowid
                assert batch_id is not None
                with spent.timed("claim: jobs"):
                    if complete_jobs:  # False: the variant that defers a one-time job's end
                        db.executemany(
                            "UPDATE jobs SET status = 'completed', version = version + 1,"
                            " next_run_at_ms = NULL, batch_id = ?"
                            " WHERE job_id = ? AND version = 1",
                            [(batch_id, job) for job in chunk],
                        )
                batch_ids.append(batch_id)
    return batch_ids


def receive_and_ack(db: sqlite3.Connection, n: int, spent: Spent) -> int:
    """Receives of up to RECEIVE_MAX from the oldest ready batches, each acked at once: both
    rewrite the batch's state bytes (one row update per batch touched, not per run)."""
    received = 0
    while received < n:
        with spent.timed("receive"), db:
            taken: list[tuple[int, list[int]]] = []
            want = RECEIVE_MAX
            for batch_id, state, attempts in db.execute(
                "SELECT batch_id, state, attempts FROM batches INDEXED BY batches_ready"
                " WHERE tenant_id = 't1' AND queue = 'q' AND ready_at_ms <= ?"
                " ORDER BY ready_at_ms LIMIT 8",
                (NOW_MS + 1,),
            ).fetchall():
                states, tries = bytearray(state), bytearray(attempts)
                slots = []
                for slot, value in enumerate(states):
                    if value == READY:
                        states[slot] = HELD
                        tries[slot] += 1
                        slots.append(slot)
                        if len(slots) == want:
                            break
                left = states.count(READY)
                db.execute(
                    "UPDATE batches SET state = ?, attempts = ?, ready_at_ms = ?"
                    " WHERE batch_id = ?",
                    (bytes(states), bytes(tries), NOW_MS if left else None, batch_id),
                )
                taken.append((batch_id, slots))
                want -= len(slots)
                if want == 0:
                    break
        count = sum(len(slots) for _, slots in taken)
        assert count, "the queue ran dry before every run was received"
        received += count
        with spent.timed("ack"), db:
            for batch_id, slots in taken:
                (state,) = db.execute(
                    "SELECT state FROM batches WHERE batch_id = ?", (batch_id,)
                ).fetchone()
                states = bytearray(state)
                for slot in slots:
                    states[slot] = DONE
                open_ = len(states) - states.count(DONE)
                db.execute(
                    "UPDATE batches SET state = ?, open = ? WHERE batch_id = ?",
                    (bytes(states), open_, batch_id),
                )
    return received


def run(path: Path, n: int, *, complete_jobs: bool = True) -> dict[str, float]:
    """CPU seconds per run of each kind for a spike of `n` one-time queue runs."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.isolation_level = "DEFERRED"  # DML opens a transaction, `with db:` commits it
    try:
        jobs = setup(db, n)
        spent = Spent()
        claim(db, jobs, spent, complete_jobs=complete_jobs)
        assert receive_and_ack(db, n, spent) == n
        (left,) = db.execute("SELECT count(*) FROM batches WHERE open > 0").fetchone()
        assert left == 0, left
        return {name: cpu / n for name, cpu in spent.cpu.items()}
    finally:
        db.close()
