"""A store holding one tenant with many jobs, for bench_console_lists.py: built fast, cached.

The tenant and the first 1,000 jobs go through the real apply (StateMachine); every other row is
bulk-inserted in the exact format that apply writes (checked against those first rows, and each
1,000th spec against parse_job). Never used by a node: a benchmark's fixture only.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schedd.api.context import token_hash
from schedd.jobspec import parse_job, spec_to_json
from schedd.model import partition_of
from schedd.schedule import fire_time, first_run_at
from schedd.store.apply import StateMachine
from schedd.store.command import compact_json, encode_command
from schedd.store.commands import CreateJobs, CreateTenant, NewJob
from schedd.store.db import Database
from schedd.store.ledger.deliveries import queue_target
from schedd.store.schema import MIGRATIONS
from schedd.timeformat import format_instant, parse_instant

BUILD_VERSION = 1  # bump when the rows built here change: the cached file's name carries it
TOKEN = "sk_bench_console_lists_0123456789abcdef0123456789"
TENANT_ID = "tnt_benchconsole0001"
ACTOR = f"tenant:{TENANT_ID}"
PARTITIONS = 256  # the default [cluster] partitions
HOSTS = ("hooks-1.example.com", "hooks-2.example.com", "hooks-3.example.com")
QUEUES = tuple(f"reports-{k}" for k in range(8))
EVERY = ("1h", "6h", "1d")
NEEDLES = 20  # jobs named needle-<n>, spread uniformly over the id space
DEADLETTERS = 20_000
START_MS = parse_instant("2026-11-01T00:00:00Z", field="start")  # the first job's creation
BASE_MS = parse_instant("2026-12-01T00:00:00Z", field="base")  # next runs from here on
DAY_MS = 86_400_000
REFERENCE = 1_000  # the first jobs, created through the real apply as one batch
CHUNK = 50_000  # rows per bulk transaction


@dataclass(frozen=True, slots=True)
class Job:
    """One job as its create command carries it, and as the store keeps it."""

    n: int
    job_id: str
    created_ms: int
    body: dict[str, Any]  # the POST /v1/jobs body
    spec: dict[str, Any]  # the stored spec (spec_to_json of the parsed body)
    run_at_ms: int
    is_paused: bool

    @property
    def partition(self) -> int:
        return partition_of(self.job_id, PARTITIONS)


def cached_path(root: Path, size: int) -> Path:
    """The cached store's file: keyed by size, schema version and this builder's version."""
    return root / f"console-{size}-s{len(MIGRATIONS)}-b{BUILD_VERSION}.db"


def needle_every(size: int) -> int:
    return max(size // NEEDLES, 1)


def _templates() -> dict[str, dict[str, Any]]:
    """The stored spec of each target kind, from the real parser (the fields every job shares)."""
    bodies = {
        "queue": {"type": "queue", "name": QUEUES[0]},
        "http": {"type": "http", "url": f"https://{HOSTS[0]}/hooks/report"},
    }
    return {
        kind: spec_to_json(
            parse_job(
                {"schedule": {"run_at": format_instant(BASE_MS)}, "target": t, "payload": {}},
                now_ms=START_MS,
            )
        )
        for kind, t in bodies.items()
    }


def jobs(size: int, seed: int = 18) -> Iterator[Job]:
    """The jobs in creation order: ~90% queue targets, ~10% http on a few hosts, ~2% paused,
    75% one-time runs over 60 days from BASE_MS, the rest recurring from within its first day."""
    rng = random.Random(seed)
    templates = _templates()
    step_ms = 30 * DAY_MS // max(size, 1)
    needles = needle_every(size)
    for n in range(size):
        created = START_MS if n < REFERENCE else START_MS + n * step_ms
        job_id = f"job_{created:012x}{rng.getrandbits(48):012x}"
        name = f"needle-{n}" if n % needles == needles // 2 else f"report-{n}"
        if rng.random() < 0.10:
            target: dict[str, Any] = templates["http"]["target"] | {
                "url": f"https://{HOSTS[n % len(HOSTS)]}/hooks/report"
            }
            kind = "http"
        else:
            target, kind = {"type": "queue", "name": QUEUES[n % len(QUEUES)]}, "queue"
        if rng.random() < 0.75:
            run_at = BASE_MS + rng.randrange(60 * DAY_MS // 1000) * 1000
            schedule = {"run_at": format_instant(run_at)}
        else:
            run_at = BASE_MS + rng.randrange(DAY_MS // 1000) * 1000
            schedule = {"every": rng.choice(EVERY), "start_at": format_instant(run_at)}
        body = {"name": name, "schedule": schedule, "target": target, "payload": {"n": n}}
        spec = templates[kind] | {k: body[k] for k in ("name", "schedule", "target", "payload")}
        is_paused = rng.random() < 0.02 and n >= REFERENCE  # the reference batch: as created
        yield Job(n, job_id, created, body, spec, run_at, is_paused)


def _check(job: Job) -> None:
    """The stored spec and next run as the API would have made them from the same body."""
    parsed = parse_job(job.body, now_ms=job.created_ms)
    assert compact_json(spec_to_json(parsed)) == compact_json(job.spec), job.n
    assert first_run_at(parsed.schedule, job.created_ms) == job.run_at_ms, job.n


def _job_row(job: Job) -> tuple[Any, ...]:
    """The jobs row create_jobs writes (status active, version 1), or after a pause_job."""
    if job.is_paused:
        status, run, fire, version, updated = "paused", None, None, 2, job.created_ms + 1
    else:
        status, run, version, updated = "active", job.run_at_ms, 1, job.created_ms
        fire = fire_time(job.job_id, job.run_at_ms, 0)
    return (
        job.job_id,
        TENANT_ID,
        job.partition,
        compact_json(job.spec),
        status,
        run,
        fire,
        version,
        job.created_ms,
        updated,
    )


def _new_job(job: Job) -> NewJob:
    return NewJob(
        job_id=job.job_id,
        partition=job.partition,
        spec=job.spec,
        next_run_at_ms=job.run_at_ms,
        next_fire_at_ms=fire_time(job.job_id, job.run_at_ms, 0),
        idempotency_key=None,
        request_hash=None,
    )


def _apply_reference(db: Database, size: int, first: list[Job]) -> None:
    """The tenant and the first jobs through the real apply; the bulk rows must equal them."""
    machine = StateMachine(db)
    tenant = CreateTenant(
        tenant_id=TENANT_ID,
        token_hash=token_hash(TOKEN),
        signing_secret="whsec_" + "A" * 43 + "=",
        actor="admin",
        name="console-bench",
        max_active_jobs=10 * size,
        dispatch_rate=1_000,
        allowed_hosts=(),
    )
    create = CreateJobs(tenant_id=TENANT_ID, actor=ACTOR, jobs=tuple(map(_new_job, first)))
    for index, (cmd, ts) in enumerate(((tenant, START_MS - 1), (create, START_MS)), start=1):
        result = machine.apply(encode_command(cmd, id=f"bench-{index}", ts_ms=ts), index=index)
        assert result.get("status") == "ok", result
    columns = "job_id, tenant_id, partition, spec, status, next_run_at_ms, next_fire_at_ms, "
    columns += "version, created_at_ms, updated_at_ms"
    for job in first:
        stored = db.conn.execute(f"SELECT {columns} FROM jobs WHERE job_id = ?", (job.job_id,))
        assert stored.fetchone() == _job_row(job), job.n
    audit = db.conn.execute("SELECT at_ms, tenant_id, actor, action, job_id, detail FROM audit")
    assert audit.fetchall()[1:] == [_audit_row(job) for job in first]


def _audit_row(job: Job) -> tuple[Any, ...]:
    """The audit record create_jobs writes for a job (without its seq)."""
    return (job.created_ms, TENANT_ID, ACTOR, "create_jobs", job.job_id, None)


_INSERT_JOB = (
    "INSERT INTO jobs (job_id, tenant_id, partition, spec, status, next_run_at_ms, "
    "next_fire_at_ms, version, created_at_ms, updated_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_DUE = (
    "INSERT OR IGNORE INTO due (partition, fire_at_ms, job_id, scheduled_at_ms, is_trigger) "
    "VALUES (?, ?, ?, ?, 0)"
)
_INSERT_AUDIT = (
    "INSERT INTO audit (at_ms, tenant_id, actor, action, job_id, detail) VALUES (?, ?, ?, ?, ?, ?)"
)
_INSERT_DEAD = (
    "INSERT OR REPLACE INTO deadletters (id, tenant_id, job_id, scheduled_at_ms, attempts, "
    "error, target, payload, created_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _insert_chunk(conn: sqlite3.Connection, chunk: list[Job]) -> None:
    """One transaction of creates: jobs, their due rows (active ones) and audit records."""
    rows = [_job_row(job) for job in chunk]
    conn.execute("BEGIN")
    conn.executemany(_INSERT_JOB, rows)
    conn.executemany(_INSERT_DUE, [(r[2], r[6], r[0], r[5]) for r in rows if r[6] is not None])
    conn.executemany(_INSERT_AUDIT, [_audit_row(job) for job in chunk])
    conn.execute("COMMIT")


def _finish(conn: sqlite3.Connection, paused: list[Job], dead: list[Job], size: int) -> None:
    """After every create: the pauses' audit records, the dead letters, the tenant's count."""
    conn.execute("BEGIN")
    conn.executemany(
        _INSERT_AUDIT,
        [(j.created_ms + 1, TENANT_ID, ACTOR, "pause_job", j.job_id, None) for j in paused],
    )
    conn.executemany(
        _INSERT_DEAD,
        [
            (
                f"{j.job_id}:{j.run_at_ms}",
                TENANT_ID,
                j.job_id,
                j.run_at_ms,
                3,
                "nacked: report generator failed",
                queue_target(j.spec["target"]["name"]),
                compact_json(j.spec["payload"]),
                j.run_at_ms + 60_000,
            )
            for j in dead
        ],
    )
    conn.execute("UPDATE tenants SET live_jobs = ? WHERE tenant_id = ?", (size, TENANT_ID))
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('applied_index', 3)")
    conn.execute("COMMIT")


def build(path: Path, size: int) -> None:
    """Write the store at `path` (a new file): the tenant, `size` jobs, audit, dead letters."""
    db = Database(path)
    db.conn.execute("PRAGMA synchronous = OFF")  # a fixture: rebuilt if a crash spoils it
    db.conn.execute("PRAGMA cache_size = -524288")
    generated = jobs(size)
    first = [next(generated) for _ in range(min(REFERENCE, size))]
    _apply_reference(db, size, first)
    paused: list[Job] = []
    dead: list[Job] = []
    dead_every = max(size // DEADLETTERS, 50)
    chunk: list[Job] = []
    started = time.monotonic()
    for job in generated:
        if job.n % 1_000 == 0:
            _check(job)
        if job.is_paused:
            paused.append(job)
        elif job.n % dead_every == 0 and job.spec["target"]["type"] == "queue":
            dead.append(job)
        chunk.append(job)
        if len(chunk) == CHUNK:
            _insert_chunk(db.conn, chunk)
            chunk = []
            if (job.n + 1) % (4 * CHUNK) < CHUNK:  # about every 200,000 jobs
                rate = (job.n + 1 - len(first)) / (time.monotonic() - started)
                print(f"  built {job.n + 1:>9,} jobs ({rate:,.0f}/s)", flush=True)
    if chunk:
        _insert_chunk(db.conn, chunk)
    _finish(db.conn, paused, dead, size)
    db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
