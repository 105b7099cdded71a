"""Benchmark: history segments against row-by-row retention (issue 35 §1), in one process.

Builds N finished one-time queue runs through the real apply path (bench_apply's spike: jobs
created, claimed, received and acked), in the per-run form (claim_runs: a runs row and an
attempts row each) or the batch form (claim_batch with deferred completion: batches and
run_keys), then copies the store twice and measures, with the Pruner's budget (250 rows a
command):

- bytes per finished run live (state.db's pages of the run tables and their indexes, SQLite's
  dbstat) and in a closed segment (the file's size / N, and its pages the same way);
- today's retention: `prune` commands deleting the runs and the jobs' audit records, apply time
  per 1,000 rows;
- segments: `move_history` commands moving the same rows into the hour's segments (runs,
  audit), apply time per 1,000 rows; then the segments' digests as the leader's Pruner computes
  them (off the apply thread), `close_segment` carrying them (the row count check, checkpoint,
  rollback-journal mode, fsync) and `drop_segment` (the row; the file is unlinked after the
  commit, off the apply thread), once per segment for the whole hour.

    .venv/bin/python benchmarks/bench_segments.py --n 100000 --form batch
    .venv/bin/python benchmarks/bench_segments.py --n 100000 --form per-run

The moves are measured twice on copies of one store: as level 13 writes them, and with
`summarize` (level 14: each job's moved runs' summary kept, store/moved_runs.py).
"""

from __future__ import annotations

import argparse
import itertools
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_apply  # benchmarks/, beside this file

from schedd.store import segments
from schedd.store.apply import StateMachine
from schedd.store.db import Database

HOUR = 3_600_000
DAY = 24 * HOUR
BUDGET = 250  # dispatch/pruner.py TENANT_SHARE_ROWS: one command's rows
RUN_TABLES = {  # each form's tables of finished runs (their indexes counted with them)
    "per-run": ("runs", "attempts"),
    "batch": ("batches", "run_keys"),
}


def build(path: Path, n: int, form: str) -> int:
    """A store holding N finished one-time runs, all ended in NOW_MS's hour; its last index."""
    log = bench_apply.Log(StateMachine(Database(path)))
    jobs = bench_apply.create_spike(log, n)
    bench_apply._claims(log, jobs, "claim_runs" if form == "per-run" else "deferred", "partition")
    if form == "batch":
        bench_apply._completions(log)
    bench_apply._receives_and_acks(log, n)
    log.machine.db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    log.machine.db.close()
    return log.index


def copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(source)
    try:
        conn.execute("VACUUM INTO ?", (str(target),))
    finally:
        conn.close()


def table_bytes(path: Path, tables: tuple[str, ...]) -> int:
    """Bytes of the tables' pages and their indexes' (dbstat)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        owner = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master"))
        total = 0
        for name, size in conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
            if owner.get(name, name) in tables:
                total += int(size)
        return total
    finally:
        conn.close()


class Timed:
    def __init__(self, path: Path, index: int) -> None:
        self.log = bench_apply.Log(StateMachine(Database(path)))
        self.log.index = index
        self.log.ids = itertools.count(10**9)  # never an id the build's commands used
        self.wall = self.cpu = 0.0
        self.commands = 0

    def apply(self, type_: str, body: dict[str, Any], ts_ms: int) -> dict[str, Any]:
        result, (wall, cpu) = self.log.apply(type_, body, ts_ms=ts_ms)
        self.wall += wall
        self.cpu += cpu
        self.commands += 1
        return dict(result)

    def passes(
        self, type_: str, retention_ms: dict[str, int], ts_ms: int, *, summarize: bool = False
    ) -> int:
        """Commands of `type_` until a pass is done; the rows they deleted or moved (with
        `summarize`: level 14's move, which keeps each job's moved runs' summary)."""
        rows = 0
        after = ""
        while True:
            body: dict[str, Any] = {
                "retention_ms": retention_ms,
                "after_tenant": after,
                "max_rows": BUDGET,
            }
            if summarize:
                body["summarize"] = True
            result = self.apply(type_, body, ts_ms)
            counted = result["moved"] if type_ == "move_history" else result["deleted"]
            rows += sum(v for k, v in counted.items() if k != "commands")
            if result["done"]:
                return rows
            after = result["next_after"]

    def close(self) -> None:
        self.log.machine.db.close()


def measure(n: int, form: str, scratch: Path) -> dict[str, float]:
    started = time.monotonic()
    built = scratch / "built" / "state.db"
    index = build(built, n, form)
    build_s = time.monotonic() - started
    live_bytes = table_bytes(built, RUN_TABLES[form])
    pruned_path, moved_path = scratch / "prune" / "state.db", scratch / "move" / "state.db"
    summarized_path = scratch / "summarize" / "state.db"
    for path in (pruned_path, moved_path, summarized_path):
        copy(built, path)
    for path in (pruned_path, moved_path, summarized_path):
        # Finished jobs stay live with segments and are pruned row by row as today: kept out of
        # both measurements (marked active, retention passes them by), so both handle the same
        # rows: the runs and the jobs' audit records.
        conn = sqlite3.connect(path)
        conn.execute("UPDATE jobs SET status = 'active'")
        conn.commit()
        conn.close()

    # Today: prune deletes the runs and the jobs' audit records once past their retention
    # (1 h here, 2 h later).
    short = {"runs": HOUR, "audit": HOUR, "deadletters": 14 * DAY, "messages": 7 * DAY}
    pruner = Timed(pruned_path, index)
    pruned = pruner.passes("prune", short, bench_apply.NOW_MS + 2 * HOUR)
    pruner.close()

    # Segments: move_history moves the same rows (their hour has ended), then each segment is
    # closed, and dropped.
    week = short | {"runs": 7 * DAY, "audit": 30 * DAY}
    mover = Timed(moved_path, index)
    moved = mover.passes("move_history", week, bench_apply.NOW_MS + 2 * HOUR)
    move_wall, move_cpu, move_commands = mover.wall, mover.cpu, mover.commands
    # Level 14: the same moves keeping each job's moved runs' summary (one row a job).
    summarizer = Timed(summarized_path, index)
    summarized = summarizer.passes(
        "move_history", week, bench_apply.NOW_MS + 2 * HOUR, summarize=True
    )
    summaries = summarizer.log.machine.db.conn.execute(
        "SELECT count(*) FROM moved_run_summaries"
    ).fetchone()[0]
    summarizer.close()
    assert summarized == moved and summaries == n, (summarized, moved, summaries)
    names = [
        str(name)
        for (name,) in mover.log.machine.db.conn.execute("SELECT name FROM segments ORDER BY name")
    ]
    # The leader's Pruner hashes each file on its own thread and carries the digest: timed
    # apart; apply then checks the row count, records it and makes the file immutable.
    digest_started = time.perf_counter()
    carried = {}
    db = mover.log.machine.db
    for name in names:
        (rows,) = db.conn.execute("SELECT rows FROM segments WHERE name = ?", (name,)).fetchone()
        digest = segments.content_digest(segments.segment_path(moved_path.parent, name))
        carried[name] = {"name": name, "rows": rows, "content_digest": digest}
    digest_wall = time.perf_counter() - digest_started
    mover.wall = mover.cpu = 0.0
    for name in names:
        closed = mover.apply("close_segment", carried[name], bench_apply.NOW_MS + 2 * HOUR)
        assert closed["status"] == "ok", closed
    close_wall, close_cpu = mover.wall, mover.cpu
    runs_name = segments.segment_name("runs", bench_apply.NOW_MS)
    paths = [segments.segment_path(moved_path.parent, name) for name in names]
    runs_path = segments.segment_path(moved_path.parent, runs_name)
    segment_file = runs_path.stat().st_size
    segment_bytes = table_bytes(runs_path, RUN_TABLES[form] + ("runs", "attempts"))
    mover.wall = mover.cpu = 0.0
    for name in names:
        mover.apply("drop_segment", {"name": name}, bench_apply.NOW_MS + 8 * DAY)
    drop_wall, drop_cpu = mover.wall, mover.cpu
    deadline = time.monotonic() + 30
    while any(p.exists() for p in paths) and time.monotonic() < deadline:
        time.sleep(0.001)
    mover.close()
    assert moved == pruned, (moved, pruned)
    per_k = 1000 / pruned
    return {
        "build_s": build_s,
        "rows_pruned_or_moved": pruned,
        "live_bytes_per_run": live_bytes / n,
        "segment_file_bytes_per_run": segment_file / n,
        "segment_table_bytes_per_run": segment_bytes / n,
        "prune_commands": pruner.commands,
        "prune_ms_per_1000_wall": pruner.wall * 1000 * per_k,
        "prune_ms_per_1000_cpu": pruner.cpu * 1000 * per_k,
        "move_commands": move_commands,
        "move_ms_per_1000_wall": move_wall * 1000 * per_k,
        "move_ms_per_1000_cpu": move_cpu * 1000 * per_k,
        "move_summarize_ms_per_1000_wall": summarizer.wall * 1000 * per_k,
        "move_summarize_ms_per_1000_cpu": summarizer.cpu * 1000 * per_k,
        "segments": len(names),
        "digest_ms_wall_all_off_apply": digest_wall * 1000,
        "close_ms_wall_all": close_wall * 1000,
        "close_ms_cpu_all": close_cpu * 1000,
        "drop_ms_wall_all": drop_wall * 1000,
        "drop_ms_cpu_all": drop_cpu * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="finished runs (default 100,000)")
    parser.add_argument("--form", choices=sorted(RUN_TABLES), default="batch")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        figures = measure(args.n, args.form, Path(scratch))
    print(f"n={args.n:,} form={args.form}")
    for key, value in figures.items():
        print(f"  {key:30} {value:,.2f}")


if __name__ == "__main__":
    main()
