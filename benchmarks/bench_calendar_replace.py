"""Benchmark: the apply of a calendar replace (PUT /v1/calendars/{name}) that fences N jobs.

A replace raises the version of every job that excludes the calendar in one replicated change
(store/apply/calendars.py), applied on each node's Raft thread: this prints how long that one
apply takes for N jobs (docs/calendars.md quotes it against the election timeout).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_apply import NOW_MS, PARTITIONS, Log  # benchmarks/, beside this file

from schedd.store.apply import StateMachine
from schedd.store.db import Database

SPEC = {
    "name": None,
    "schedule": {"cron": "0 3 * * *", "timezone": "UTC", "exclude": ["hols"]},
    "window": None,
    "target": {"type": "queue", "name": "q"},
    "payload": None,
    "retry": {"max_attempts": 3, "backoff": "fixed", "initial_delay": "10s"},
    "misfire_policy": "run_once",
    "overlap_policy": "allow",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000, help="jobs excluding the calendar")
    parser.add_argument("--repeat", type=int, default=3, help="replaces measured (best kept)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="schedd-bench-calendar-") as tmp:
        db = Database(Path(tmp) / "state.db")
        try:
            log = Log(StateMachine(db))
            tenant = {
                "tenant_id": "t1",
                "name": "bench",
                "token_hash": "h",
                "signing_secret": "s",
                "max_active_jobs": args.n + 1,
                "dispatch_rate": 1_000,
                "allowed_hosts": [],
            }
            log.apply("create_tenant", tenant)
            log.apply("put_calendar", {"tenant_id": "t1", "name": "hols", "dates": []})
            for start in range(0, args.n, 1_000):
                items = [
                    {
                        "job_id": f"job-{i:08d}",
                        "partition": i % PARTITIONS,
                        "spec": SPEC,
                        "next_run_at_ms": NOW_MS + 3_600_000,
                        "next_fire_at_ms": NOW_MS + 3_600_000,
                        "idempotency_key": None,
                        "request_hash": None,
                    }
                    for i in range(start, min(start + 1_000, args.n))
                ]
                log.apply("create_jobs", {"tenant_id": "t1", "jobs": items})
            best = float("inf")
            for k in range(args.repeat):
                body = {"tenant_id": "t1", "name": "hols", "dates": [f"2030-01-{k + 1:02d}"]}
                result, (wall, _) = log.apply("put_calendar", body, ts_ms=NOW_MS + k + 1)
                assert result["jobs_fenced"] == args.n, result
                best = min(best, wall)
        finally:
            db.close()
    print(
        f"calendar replace fencing {args.n:,} jobs: {best:.3f} s in one apply "
        f"({best / args.n * 1e6:.2f} us a job, best of {args.repeat})"
    )


if __name__ == "__main__":
    main()
