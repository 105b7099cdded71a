"""Benchmark: what issue 31's read side adds to a job read (last success, last failure,
failures in a row: store/recent_runs.py), the `failing` filter, and dead letters grouped by
error (store/deadletter_groups.py), on one tenant whose jobs all have a long run history.

Builds a store in a temporary directory (rows bulk-inserted in the format apply writes) and
times the store reads in this process, on a reader connection (the HTTP layer around them is
unchanged). Runs on code without the feature too (then it times only the job reads), so the
same script gives the before and after figures.
"""

from __future__ import annotations

import argparse
import importlib
import random
import statistics
import sys
import tempfile
import time
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from schedd.jobspec import parse_job, spec_to_json
from schedd.store import queries
from schedd.store.command import compact_json
from schedd.store.db import Database, connect

TENANT = "t_bench"
BASE_MS = 1_796_000_000_000
MINUTE = 60_000
ERRORS = (
    "HTTP 500: upstream id {hex} failed after {n} ms",
    "connection failed: ClientConnectorError: Cannot connect to host 10.0.{a}.{b}:{port} "
    "ssl:default [Connect call failed ('10.0.{a}.{b}', {port})]",
    "timed out after {n}s calling https://hooks.example.com/run/{n}?id={uuid}",
    "consumer said: order {n} not found",
)


def _spec() -> str:
    body = {"schedule": {"every": "1m"}, "target": {"type": "queue", "name": "work"}}
    return compact_json(spec_to_json(parse_job(body, now_ms=BASE_MS)))


def build(path: Path, jobs: int, runs: int, batch_every: int, deadletters: int) -> list[str]:
    """`jobs` recurring jobs with `runs` finished runs each (the newest few dead on every
    third job), every `batch_every`th job's runs in a batch instead; and dead letters."""
    db = Database(path)
    rng = random.Random(31)
    spec = _spec()
    ids = [f"job_{BASE_MS:012x}{n:012x}" for n in range(jobs)]
    db.conn.execute("BEGIN")
    db.conn.executemany(
        "INSERT INTO jobs (job_id, tenant_id, partition, spec, status, next_run_at_ms, "
        "next_fire_at_ms, version, created_at_ms, updated_at_ms) "
        "VALUES (?, ?, 0, ?, 'active', ?, ?, 1, ?, ?)",
        [(i, TENANT, spec, BASE_MS, BASE_MS, BASE_MS, BASE_MS) for i in ids],
    )
    for n, job_id in enumerate(ids):
        if batch_every and n % batch_every == 0:
            _batch(db, job_id, runs)
            continue
        dead = 3 if n % 3 == 0 else 0
        rows = []
        for k in range(runs):
            at = BASE_MS - (runs - k) * MINUTE
            status = "dead" if k >= runs - dead else "succeeded"
            rows.append((job_id, at, TENANT, at, status, 1, at, at + 500, None))
        db.conn.executemany("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    db.conn.executemany(
        'INSERT INTO deadletters VALUES (?, ?, ?, ?, 3, ?, \'{"type":"queue","name":"w"}\', '
        "'null', ?)",
        [
            (
                f"{ids[k % jobs]}:{BASE_MS + k}",
                TENANT,
                ids[k % jobs],
                BASE_MS + k,
                _error(rng),
                BASE_MS + k,
            )
            for k in range(deadletters)
        ],
    )
    db.conn.execute("COMMIT")
    db.conn.close()
    return ids


def _error(rng: random.Random) -> str:
    return rng.choice(ERRORS).format(
        hex=f"{rng.getrandbits(64):016x}",
        n=rng.randrange(1, 100_000),
        a=rng.randrange(256),
        b=rng.randrange(256),
        port=rng.randrange(1024, 65536),
        uuid=f"{rng.getrandbits(32):08x}-1234-4abc-8def-{rng.getrandbits(48):012x}",
    )


def _batch(db: Database, job_id: str, runs: int) -> None:
    """The job's runs as one batch, every slot done (acked), as claim_batch and acks leave it."""
    times = array("q", [BASE_MS] * runs + [BASE_MS] * runs + [BASE_MS + 9] * runs)
    cursor = db.conn.execute(
        "INSERT INTO batches (tenant_id, queue, claimed_at_ms, runs, slots, times, open, "
        "ready_at_ms, finished_at_ms) VALUES (?, 'work', ?, x'90', ?, ?, 0, NULL, ?)",
        (TENANT, BASE_MS, b"d" * runs, times.tobytes(), BASE_MS + 9),
    )
    batch_id = cursor.lastrowid
    db.conn.executemany(
        "INSERT INTO run_keys VALUES (?, ?, ?, ?, ?)",
        [(job_id, BASE_MS - (runs - k) * MINUTE, batch_id, k, BASE_MS) for k in range(runs)],
    )


def timed(fn: Callable[[], Any], reps: int) -> tuple[float, float]:
    """Median and max of `reps` calls, in ms."""
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), max(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=2_000)
    parser.add_argument("--runs", type=int, default=200, help="finished runs per job")
    parser.add_argument("--batch-every", type=int, default=4, help="every Nth job: batch runs")
    parser.add_argument("--deadletters", type=int, default=20_000)
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "state.db"
        ids = build(path, args.jobs, args.runs, args.batch_every, args.deadletters)
        conn = connect(path, readonly=True)
        middle = ids[len(ids) // 2]
        print(
            f"{args.jobs:,} jobs x {args.runs} runs (every {args.batch_every}th in a batch), "
            f"{args.deadletters:,} dead letters"
        )
        report = {
            "GET /v1/jobs?limit=100 (first page)": lambda: queries.list_jobs(
                conn, TENANT, status=None, after="", limit=100
            ),
            "GET /v1/jobs?limit=100 (a middle page)": lambda: queries.list_jobs(
                conn, TENANT, status=None, after=middle, limit=100
            ),
            "GET /v1/jobs/{id}": lambda: queries.get_job(conn, TENANT, middle),
        }
        report.update(_feature_reads(conn))
        for what, fn in report.items():
            median, worst = timed(fn, args.reps)
            print(f"  {what:<55} median {median:7.2f} ms   max {worst:7.2f} ms")


def _feature_reads(conn: Any) -> dict[str, Callable[[], Any]]:
    """The reads the feature adds, when this code has them."""
    try:
        job_search = importlib.import_module("schedd.store.job_search")
        groups = importlib.import_module("schedd.store.deadletter_groups")
    except ImportError:
        return {}
    fingerprints = importlib.import_module("schedd.store.fingerprint")
    failing = job_search.JobFilter(is_failing=True)

    def cold_groups() -> Any:
        fingerprints._fingerprint.cache_clear()  # as the first request after a start
        return groups.group_deadletters(conn, TENANT, limit=100)

    first = groups.group_deadletters(conn, TENANT, limit=100)
    fingerprint = first.groups[0].fingerprint
    return {
        "GET /v1/jobs?failing=true&limit=100 (one request)": lambda: job_search.search_jobs(
            conn, TENANT, failing, after="", limit=100
        ),
        "GET /v1/deadletters?group_by=error": lambda: groups.group_deadletters(
            conn, TENANT, limit=100
        ),
        "GET /v1/deadletters?group_by=error (no fingerprint cached)": cold_groups,
        "GET /v1/deadletters?fingerprint=<largest>&limit=1000": lambda: groups.with_fingerprint(
            conn, TENANT, fingerprint, after="", limit=1000
        ),
    }


if __name__ == "__main__":
    main()
