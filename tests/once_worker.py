"""A schedd.worker process for the effectively-once tests: an `@worker.handler(once=...)` that
writes one row per run to a table of the tenant's own database (SQLite or PostgreSQL), and a
JSON line per worker event in a file. With --crash-after-switch it ends itself (os._exit) right
after the first handler's transaction that commits once it has left a failed node, before the
ack: that message must come back, find its key, and be acked without a second row.

    python -m tests.once_worker --urls U1,U2 --token T --queue Q --sqlite PATH --table P --events F
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import threading
import time
from typing import Any

from schedd.worker import Events, Message, Outcome, PostgresOnce, SQLiteOnce, Worker

CRASHED = 17  # the exit code of --crash-after


class Recorder(Events):
    """One JSON line per event, appended to a file both generations of a worker share."""

    def __init__(self, path: str, *, is_crashing: bool) -> None:
        self._path = path
        self._is_crashing = is_crashing
        self._has_switched = False
        self._ran: set[str] = set()  # keys whose handler this process ran
        self._lock = threading.Lock()

    def write(self, event: str, message: Message | None = None, **facts: Any) -> None:
        if message is not None:
            facts |= {"key": message.idempotency_key, "attempt": message.attempt}
        line = json.dumps({"event": event, "pid": os.getpid(), **facts}) + "\n"
        with self._lock, open(self._path, "a", encoding="utf-8") as out:
            out.write(line)

    def ran(self, message: Message) -> None:
        with self._lock:
            self._ran.add(message.idempotency_key)

    def started(self, message: Message) -> None:
        self.write("started", message)

    def duplicate(self, message: Message) -> None:
        self.write("duplicate", message)

    def handled(self, message: Message, error: str | None) -> None:
        with self._lock:
            is_committed = error is None and message.idempotency_key in self._ran
            is_due = self._is_crashing and self._has_switched
        if is_committed and is_due:
            self.write("crash", message)
            os._exit(CRASHED)  # committed, not acked

    def settled(
        self, message: Message, outcome: Outcome, error: str | None, duration_s: float
    ) -> None:
        self.write("settled", message, outcome=str(outcome), error=error)

    def switched(self, failed: str, reason: str, node: str) -> None:
        self.write("switched", failed=failed, node=node)
        with self._lock:
            self._has_switched = True


def main() -> None:
    parser = argparse.ArgumentParser()
    for flag in ("--urls", "--token", "--queue", "--table", "--events"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--sqlite")
    parser.add_argument("--postgres")
    parser.add_argument("--crash-after-switch", action="store_true")
    parser.add_argument("--handle-s", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=3)
    args = parser.parse_args()
    recorder = Recorder(args.events, is_crashing=args.crash_after_switch)
    worker = Worker(
        args.urls,
        args.token,
        args.queue,
        concurrency=args.concurrency,
        visibility_timeout_s=2.0,
        wait_s=1.0,
        request_timeout_s=3.0,
        grace_s=5.0,
        events=recorder,
    )
    effects = f"{args.table}_effects"
    if args.sqlite:
        with sqlite3.connect(args.sqlite) as db:
            db.execute(f"CREATE TABLE IF NOT EXISTS {effects} (key TEXT, attempt INT, pid INT)")
        once: SQLiteOnce | PostgresOnce = SQLiteOnce(args.sqlite, table=f"{args.table}_once")
        insert = f"INSERT INTO {effects} (key, attempt, pid) VALUES (?, ?, ?)"
    else:
        import psycopg

        with psycopg.connect(args.postgres) as pg:
            pg.execute(f"CREATE TABLE IF NOT EXISTS {effects} (key text, attempt int, pid int)")
        once = PostgresOnce(args.postgres, table=f"{args.table}_once")
        insert = f"INSERT INTO {effects} (key, attempt, pid) VALUES (%s, %s, %s)"

    @worker.handler(once=once)
    def handle(message: Message, tx: Any) -> None:
        time.sleep(args.handle_s)  # the run's work, inside its transaction
        tx.execute(insert, (message.idempotency_key, message.attempt, os.getpid()))
        recorder.ran(message)

    worker.run()


if __name__ == "__main__":
    main()
