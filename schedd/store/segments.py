"""History segments (issue 35 §1, docs/scaling.md): finished rows moved out of `state.db` into
one SQLite file per family and UTC hour, `data_dir/history/<family>-<YYYYMMDDHH>.db`.

This module owns what a segment is: its name, path and period, its schema (the live tables'
columns, so the live readers of queries.py read a segment as they read `state.db`, and the
indexes its reads need), opening one, and its content digest (its rows in key order hashed,
as digest.py hashes the live tables). Who writes a segment: apply only, through
`segment_writes.SegmentWriter`; the replicated `segments` table in `state.db` says which
segments exist, which are closed and their digests.

A closed segment's file is immutable: rollback-journal mode, fsynced, no -wal or -shm beside
it, and `content_digest(path)` equals its `segments` row's `content_digest`.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

PERIOD_MS = 3_600_000  # one segment per family and UTC hour
# A period's segment may close this long after the period ended (proposers' clocks differ by
# up to [dispatch] max_clock_offset, a request waits up to [api] request_timeout: both far less).
CLOSE_GRACE_MS = 300_000
HISTORY_DIR = "history"
RUNS, DEADLETTERS, AUDIT = "runs", "deadletters", "audit"
FAMILIES = (RUNS, DEADLETTERS, AUDIT)
OPEN, CLOSED = "open", "closed"
# A dropped segment keeps its row: a row that ended in its hour, moved late (a leader whose clock
# is behind the one that dropped it, a retention changed meanwhile), goes to a later hour instead
# of reopening the name while nodes unlink the old file, each on its own thread.
DROPPED = "dropped"
_NAME = re.compile(r"^(runs|deadletters|audit)-(\d{10})$")

# Each family's tables with their key order (the digest's order). The columns are the live
# tables' (schema.py), in the same order, so rows move with `SELECT *` / `INSERT ... VALUES`.
FAMILY_TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    RUNS: (
        ("runs", "job_id, scheduled_at_ms"),
        ("attempts", "job_id, scheduled_at_ms, attempt"),
        ("batches", "batch_id"),
        ("run_keys", "job_id, scheduled_at_ms"),
        ("backfills", "job_id, scheduled_at_ms"),
        ("run_payloads", "job_id, scheduled_at_ms"),
        ("run_upstreams", "job_id, scheduled_at_ms"),
        ("run_outputs", "job_id, scheduled_at_ms, attempt"),
    ),
    DEADLETTERS: (("deadletters", "id"),),
    AUDIT: (("audit", "seq"),),
}

_META = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
"""
_SCHEMA: dict[str, str] = {
    RUNS: """
    CREATE TABLE IF NOT EXISTS runs (
        job_id TEXT NOT NULL,
        scheduled_at_ms INTEGER NOT NULL,
        tenant_id TEXT NOT NULL,
        fire_at_ms INTEGER NOT NULL,
        status TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        dispatched_at_ms INTEGER,
        finished_at_ms INTEGER,
        error TEXT,
        PRIMARY KEY (job_id, scheduled_at_ms)
    ) WITHOUT ROWID;
    -- (no runs_finished: nothing reads a segment by finish time)
    CREATE TABLE IF NOT EXISTS attempts (
        job_id TEXT NOT NULL,
        scheduled_at_ms INTEGER NOT NULL,
        attempt INTEGER NOT NULL,
        started_at_ms INTEGER NOT NULL,
        finished_at_ms INTEGER,
        outcome TEXT,
        error TEXT,
        PRIMARY KEY (job_id, scheduled_at_ms, attempt)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS batches (
        batch_id INTEGER PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        queue TEXT NOT NULL,
        claimed_at_ms INTEGER NOT NULL,
        runs BLOB NOT NULL,
        slots BLOB NOT NULL,
        times BLOB NOT NULL,
        open INTEGER NOT NULL,
        ready_at_ms INTEGER,
        finished_at_ms INTEGER
    );
    -- (no batches_finished: nothing reads a segment by finish time)
    CREATE TABLE IF NOT EXISTS run_keys (
        job_id TEXT NOT NULL,
        scheduled_at_ms INTEGER NOT NULL,
        batch_id INTEGER NOT NULL,
        slot INTEGER NOT NULL,
        fire_at_ms INTEGER NOT NULL,
        PRIMARY KEY (job_id, scheduled_at_ms)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS backfills (
        job_id TEXT NOT NULL,
        scheduled_at_ms INTEGER NOT NULL,
        PRIMARY KEY (job_id, scheduled_at_ms)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS run_payloads (
        job_id TEXT NOT NULL,
        scheduled_at_ms INTEGER NOT NULL,
        payload TEXT NOT NULL,
        PRIMARY KEY (job_id, scheduled_at_ms)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS run_upstreams (
        job_id TEXT NOT NULL,
        scheduled_at_ms INTEGER NOT NULL,
        upstream_job_id TEXT NOT NULL,
        upstream_status TEXT NOT NULL,
        PRIMARY KEY (job_id, scheduled_at_ms)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS run_outputs (
        job_id TEXT NOT NULL,
        scheduled_at_ms INTEGER NOT NULL,
        attempt INTEGER NOT NULL,
        output TEXT NOT NULL,
        PRIMARY KEY (job_id, scheduled_at_ms, attempt)
    ) WITHOUT ROWID;
    """,
    DEADLETTERS: """
    CREATE TABLE IF NOT EXISTS deadletters (
        id TEXT PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        job_id TEXT NOT NULL,
        scheduled_at_ms INTEGER NOT NULL,
        attempts INTEGER NOT NULL,
        error TEXT,
        target TEXT NOT NULL,
        payload TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS deadletters_by_tenant ON deadletters (tenant_id, id);
    CREATE INDEX IF NOT EXISTS deadletters_by_age ON deadletters (tenant_id, created_at_ms);
    """,
    AUDIT: """
    CREATE TABLE IF NOT EXISTS audit (
        seq INTEGER PRIMARY KEY,
        at_ms INTEGER NOT NULL,
        tenant_id TEXT,
        actor TEXT NOT NULL,
        action TEXT NOT NULL,
        job_id TEXT,
        detail TEXT
    );
    CREATE INDEX IF NOT EXISTS audit_by_tenant ON audit (tenant_id, seq);
    CREATE INDEX IF NOT EXISTS audit_by_job ON audit (job_id, seq) WHERE job_id IS NOT NULL;
    """,
}


class SegmentName(ValueError):
    """A text that is not a segment's name."""


def period_start(ms: int) -> int:
    """The start of the period (UTC hour) that holds the instant `ms`."""
    return ms - ms % PERIOD_MS


def segment_name(family: str, period_start_ms: int) -> str:
    """`<family>-<YYYYMMDDHH>`: the family's segment of the period starting at `period_start_ms`."""
    if family not in FAMILIES:
        raise SegmentName(f"no history family {family!r}")
    hour = datetime.fromtimestamp(period_start(period_start_ms) / 1000, UTC)
    return f"{family}-{hour:%Y%m%d%H}"


def parse_name(name: str) -> tuple[str, int]:
    """(family, period_start_ms) of a segment's name; SegmentName if it is not one."""
    match = _NAME.match(name)
    if match is None:
        raise SegmentName(f"{name!r} is not a segment name (<family>-<YYYYMMDDHH>)")
    hour = datetime.strptime(match.group(2), "%Y%m%d%H").replace(tzinfo=UTC)
    return match.group(1), int(hour.timestamp()) * 1000


def history_dir(data_dir: Path) -> Path:
    return data_dir / HISTORY_DIR


def segment_path(data_dir: Path, name: str) -> Path:
    """Where a node keeps the segment `name` (checked: a name is never a path of its own)."""
    parse_name(name)
    return history_dir(data_dir) / f"{name}.db"


def create_schema(conn: sqlite3.Connection, family: str) -> None:
    """The family's tables and indexes (idempotent)."""
    conn.executescript(_META + _SCHEMA[family])


def open_writer(path: Path, family: str) -> sqlite3.Connection:
    """apply's connection to an open segment (created with its schema when new): WAL while it is
    open, so API readers never hold apply up; autocommit, transactions explicit."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=30)
    conn.execute("PRAGMA busy_timeout = 30000")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    create_schema(conn, family)
    return conn


def open_reader(path: Path) -> sqlite3.Connection:
    """A read-only connection (FileNotFoundError when the file is not on this node)."""
    if not path.exists():
        raise FileNotFoundError(path)
    conn = sqlite3.connect(
        f"file:{path}?mode=ro", uri=True, isolation_level=None, check_same_thread=False
    )
    conn.execute("PRAGMA busy_timeout = 5000")
    return conn


def applied_index(conn: sqlite3.Connection) -> int:
    """The last log index whose part this segment committed (0: none)."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'applied_index'").fetchone()
    return 0 if row is None else int(row[0])


def content_digest(source: Path | str | sqlite3.Connection) -> str:
    """sha256 hex of the segment's rows, its tables in FAMILY_TABLES order, each in key order
    (the repr of each row, as digest.state_digest hashes the live tables); `meta` (the applied
    index) is not content. Equal on every node that holds the same rows, whatever the bytes."""
    if isinstance(source, sqlite3.Connection):
        return _digest(source)
    conn = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    try:
        return _digest(conn)
    finally:
        conn.close()


def _digest(conn: sqlite3.Connection) -> str:
    tables = {
        str(name) for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    }
    family = next((f for f, ts in FAMILY_TABLES.items() if ts[0][0] in tables), None)
    if family is None:
        raise ValueError("not a history segment: none of its families' tables")
    digest = hashlib.sha256()
    for table, order in FAMILY_TABLES[family]:
        # Table names and orders are constants of this module, never input.
        records = conn.execute(f"SELECT * FROM {table} ORDER BY {order}")
        digest.update(f"\x00table {table}\x00".encode())
        for record in records:
            digest.update(repr(record).encode())
            digest.update(b"\n")
    return digest.hexdigest()
