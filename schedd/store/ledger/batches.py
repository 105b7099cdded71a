"""Queue runs in the batch form (issue 29, log level 4): one `batches` row holds the runs of one
claim command for one (tenant, queue), and their delivery state as two compact columns.

A run of a batch lives in its slot until it succeeds (acked) or its first delivery fails (nack,
visibility timeout, expiry): then it is *spilled*, written out as today's per-run rows (a
`runs` row, its attempt, a `messages` row) and everything after (retries, dead letters,
redrive, expiry) goes the per-run way. The common path (claimed, received once, acked) writes
one row update per batch touched instead of three statements per run. A slot is held at most
once in its life (attempt 1), so a receipt needs no nonce check: `(batch_id, slot)` held means
held by that receipt, and batch ids are never reused (AUTOINCREMENT).

`slots`: one ASCII byte a run (`r` ready, `h` held, `d` done, `s` spilled: readable in SQL with
`substr`). `times`: three little-endian int64 arrays of one value a run: visible at (the claim's
time while ready, the visibility deadline while held), the receive's time, the ack's time (0:
none). `ready_at_ms` is the earliest visible-at of a ready or held slot (NULL: none left);
`finished_at_ms` is set when the last slot leaves (retention counts from it).
"""

from __future__ import annotations

import re
import sqlite3
import sys
import threading
from array import array
from collections.abc import Iterable, Iterator, Sequence

import msgspec

from schedd.model import RunStatus, delivery_id
from schedd.store.ledger.deliveries import enqueue
from schedd.store.ledger.rows import NewRun, QueueDelivery
from schedd.store.ledger.runs import mark_runs, open_runs, start_attempts

READY, HELD, DONE, SPILLED = b"r"[0], b"h"[0], b"d"[0], b"s"[0]
# Spans of adjacent slots in one state, found in C: a claim writes its slots ready and a receive
# holds adjacent ones, so a batch has a few spans, and a held span is looked at slot by slot
# only when its earliest deadline has come. A ready slot's visible-at is the claim's time.
_READY_SPANS = re.compile(rb"r+")
_HELD_SPANS = re.compile(rb"h+")
_OPEN_SPANS = re.compile(rb"[rh]+")  # ready or held: still in the batch


def _slots_in(spans: re.Pattern[bytes], slots: bytearray) -> list[int]:
    return [slot for span in spans.finditer(slots) for slot in range(*span.span())]


RECEIPT_MARK = "~"  # "<nonce>.~<batch_id>.<slot>": never the first character of a msg_id


class BatchRun(msgspec.Struct, frozen=True, array_like=True):
    """One run of a batch as its claim wrote it (payload and retry: the job's JSON texts),
    stored as an array in the batch's msgpack `runs` column."""

    job_id: str
    scheduled_at_ms: int
    fire_at_ms: int
    payload: str
    retry: str


_RUNS_DECODER = msgspec.msgpack.Decoder(list[BatchRun])


class _RunKey(msgspec.Struct, frozen=True, array_like=True):
    """The first two fields of a BatchRun: msgspec skips the rest of each array unbuilt."""

    job_id: str
    scheduled_at_ms: int


_KEYS_DECODER = msgspec.msgpack.Decoder(list[_RunKey])


class _RecentRuns:
    """The runs columns of the batches read last, decoded once. Receives of 100 take a batch of
    up to 500 runs in several commands, and each decoded the whole column (3.4 us a run on
    every replica in a spike's profile); reading the column and comparing it with the text
    decoded before costs a memcmp, so a hit is right whatever store the id came from."""

    KEEP = 32

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._decoded: dict[int, tuple[bytes, list[BatchRun]]] = {}

    def decode(self, batch_id: int, column: bytes) -> list[BatchRun]:
        with self._lock:
            seen = self._decoded.get(batch_id)
        if seen is not None and seen[0] == column:
            return seen[1]
        runs = _RUNS_DECODER.decode(column)
        with self._lock:
            self._decoded[batch_id] = (column, runs)
            while len(self._decoded) > self.KEEP:
                del self._decoded[next(iter(self._decoded))]
        return runs


_DECODED_RUNS = _RecentRuns()
_ENCODE = msgspec.msgpack.encode
# The runs column (tens of kilobytes a batch) is read only when a run's fields are needed.
COLUMNS = "batch_id, tenant_id, queue, claimed_at_ms, slots, times, open"


def _times_from(blob: bytes) -> array[int]:
    times = array("q")
    times.frombytes(blob)
    if sys.byteorder != "little":  # stored little-endian on every machine
        times.byteswap()
    return times


def _times_blob(times: array[int]) -> bytes:
    if sys.byteorder == "little":
        return times.tobytes()
    swapped = array("q", times)
    swapped.byteswap()
    return swapped.tobytes()


class Batch:
    """A batch row read for change: its slots and times are mutable, `save` writes them."""

    __slots__ = (
        "_conn",
        "_runs",
        "batch_id",
        "claimed_at_ms",
        "n",
        "open",
        "queue",
        "slots",
        "tenant_id",
        "times",
    )

    def __init__(
        self,
        batch_id: int,
        tenant_id: str,
        queue: str,
        claimed_at_ms: int,
        slots: bytes,
        times: bytes,
        open_: int,
        *,
        conn: sqlite3.Connection,
    ) -> None:
        self.batch_id = batch_id
        self.tenant_id = tenant_id
        self.queue = queue
        self.claimed_at_ms = claimed_at_ms
        self._conn = conn
        self._runs: list[BatchRun] | None = None
        self.slots = bytearray(slots)
        self.n = len(self.slots)
        self.times = _times_from(times)
        self.open = open_

    @property
    def runs(self) -> list[BatchRun]:
        if self._runs is None:
            self._runs = _DECODED_RUNS.decode(self.batch_id, self._runs_column())
        return self._runs

    def oldest_open_run_ms(self) -> int | None:
        """The earliest scheduled time among the runs still in the batch (ready or held),
        decoding only the runs' keys, not their payloads."""
        open_slots = self.open_slots()
        if not open_slots:
            return None
        keys = _KEYS_DECODER.decode(self._runs_column())
        return min(keys[slot].scheduled_at_ms for slot in open_slots)

    def _runs_column(self) -> bytes:
        (blob,) = self._conn.execute(
            "SELECT runs FROM batches WHERE batch_id = ?", (self.batch_id,)
        ).fetchone()
        return bytes(blob)

    def visible_at(self, slot: int) -> int:
        return self.times[slot]

    def received_at(self, slot: int) -> int:
        return self.times[self.n + slot]

    def eligible(self, now_ms: int) -> list[int]:
        """Slots a receive may take now, in slot order: ready ones (visible from the claim's
        time: a slot is ready only until its one receive), and held ones past their deadline."""
        ready = _slots_in(_READY_SPANS, self.slots) if self.claimed_at_ms <= now_ms else []
        expired = self._expired(now_ms)
        return sorted(ready + expired) if ready and expired else ready or expired

    def open_slots(self) -> list[int]:
        """Slots still in the batch (ready or held)."""
        return _slots_in(_OPEN_SPANS, self.slots)

    def counts(self, now_ms: int) -> tuple[int, int, int]:
        """(ready, in flight, delayed) slots now: a held slot past its deadline is ready again,
        as a message past its visibility timeout is."""
        waiting, held = self.slots.count(READY), self.slots.count(HELD)
        expired = len(self._expired(now_ms)) if held else 0
        if self.claimed_at_ms <= now_ms:
            return waiting + expired, held - expired, 0
        return expired, held - expired, waiting

    def _expired(self, now_ms: int) -> list[int]:
        """Held slots whose deadline is reached; a span of held slots whose earliest deadline is
        later is passed over in C."""
        times, expired = self.times, list[int]()
        for span in _HELD_SPANS.finditer(self.slots):
            start, end = span.span()
            if min(times[start:end]) <= now_ms:
                expired += (slot for slot in range(start, end) if times[slot] <= now_ms)
        return expired

    def hold(self, slot: int, now_ms: int, deadline_ms: int) -> None:
        self.slots[slot] = HELD
        self.times[slot] = deadline_ms
        self.times[self.n + slot] = now_ms

    def extend(self, slot: int, deadline_ms: int) -> None:
        self.times[slot] = deadline_ms

    def finish(self, slot: int, state: int, now_ms: int) -> None:
        """The slot leaves the batch: done (acked at now) or spilled to per-run rows."""
        self.slots[slot] = state
        if state == DONE:
            self.times[2 * self.n + slot] = now_ms
        self.open -= 1

    def ready_at_ms(self) -> int | None:
        """The earliest visible-at of a ready or held slot (None: none left)."""
        times = self.times
        earliest = [self.claimed_at_ms] if READY in self.slots else []
        earliest += (min(times[slice(*m.span())]) for m in _HELD_SPANS.finditer(self.slots))
        return min(earliest, default=None)

    def save(self, tx: sqlite3.Connection, now_ms: int) -> None:
        tx.execute(
            "UPDATE batches SET slots = ?, times = ?, open = ?, ready_at_ms = ?, "
            "finished_at_ms = ? WHERE batch_id = ?",
            (
                bytes(self.slots),
                _times_blob(self.times),
                self.open,
                self.ready_at_ms(),
                now_ms if self.open == 0 else None,
                self.batch_id,
            ),
        )


def write_batch(
    tx: sqlite3.Connection, tenant_id: str, queue: str, now_ms: int, runs: Sequence[BatchRun]
) -> int:
    """A claim's runs of one (tenant, queue), ready now, and each run's key row; returns the
    batch's id (its runs' slots are their positions in `runs`)."""
    n = len(runs)
    times = array("q", [now_ms]) * n + array("q", [0]) * (2 * n)
    cur = tx.execute(
        "INSERT INTO batches (tenant_id, queue, claimed_at_ms, runs, slots, times, open, "
        "ready_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            tenant_id,
            queue,
            now_ms,
            _ENCODE(runs),
            bytes([READY]) * n,
            _times_blob(times),
            n,
            now_ms,
        ),
    )
    batch_id = int(cur.lastrowid or 0)  # an INTEGER PRIMARY KEY: always set by the insert
    tx.executemany(
        "INSERT INTO run_keys (job_id, scheduled_at_ms, batch_id, slot, fire_at_ms) "
        "VALUES (?, ?, ?, ?, ?)",
        [
            (r.job_id, r.scheduled_at_ms, batch_id, slot, r.fire_at_ms)
            for slot, r in enumerate(runs)
        ],
    )
    return batch_id


def ready_batches(
    tx: sqlite3.Connection, tenant_id: str, queue: str, now_ms: int, want: int
) -> list[Batch]:
    """The queue's batches with a slot a receive may take now, oldest first, until they hold
    `want` such slots."""
    found: list[Batch] = []
    eligible = 0
    for row in tx.execute(
        f"SELECT {COLUMNS} FROM batches INDEXED BY batches_ready WHERE tenant_id = ? "
        "AND queue = ? AND ready_at_ms <= ? ORDER BY ready_at_ms, batch_id",
        (tenant_id, queue, now_ms),
    ):
        batch = Batch(*row, conn=tx)
        found.append(batch)
        eligible += batch.counts(now_ms)[0]
        if eligible >= want:
            break
    return found


def open_batches(
    conn: sqlite3.Connection, tenant_id: str | None = None, queue: str | None = None
) -> Iterator[Batch]:
    """Batches with a run not finished (all, a tenant's, or one queue's), in index order."""
    sql = f"SELECT {COLUMNS} FROM batches INDEXED BY batches_ready WHERE ready_at_ms IS NOT NULL"
    args: list[str] = []
    if tenant_id is not None:
        sql += " AND tenant_id = ?"
        args.append(tenant_id)
    if queue is not None:
        sql += " AND queue = ?"
        args.append(queue)
    for row in conn.execute(sql, args).fetchall():
        yield Batch(*row, conn=conn)


def load(tx: sqlite3.Connection, batch_ids: Iterable[int]) -> dict[int, Batch]:
    ids = sorted(set(batch_ids))
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = tx.execute(f"SELECT {COLUMNS} FROM batches WHERE batch_id IN ({marks})", ids)
    return {row[0]: Batch(*row, conn=tx) for row in rows}


def runs_of(conn: sqlite3.Connection, batch_ids: Iterable[int]) -> dict[int, list[BatchRun]]:
    """The runs of each batch named that is still stored (a runs column never changes)."""
    ids = sorted(set(batch_ids))
    marks = ",".join("?" * len(ids))
    rows = conn.execute(f"SELECT batch_id, runs FROM batches WHERE batch_id IN ({marks})", ids)
    return {batch_id: _DECODED_RUNS.decode(batch_id, bytes(runs)) for batch_id, runs in rows}


def run_keys(runs: bytes) -> list[tuple[str, int]]:
    """(job_id, scheduled_at_ms) of every run of a batch's `runs` column."""
    return [(key.job_id, key.scheduled_at_ms) for key in _KEYS_DECODER.decode(runs)]


def acked_at(slots: bytes, times: bytes) -> list[int | None]:
    """Per slot of a batch, when its run was acked (a done slot), else None."""
    acks = _times_from(times)[2 * len(slots) :]
    return [at if state == DONE else None for state, at in zip(slots, acks, strict=True)]


def receipt(nonce: str, batch_id: int, slot: int) -> str:
    return f"{nonce}.{RECEIPT_MARK}{batch_id}.{slot}"


def parse_receipt(receipt_: str) -> tuple[int, int] | None:
    """(batch_id, slot) of a batch receipt; None for a message's receipt or a malformed one."""
    _, _, rest = receipt_.partition(".")
    if not rest.startswith(RECEIPT_MARK):
        return None
    batch, _, slot = rest[1:].partition(".")
    if not (batch.isdecimal() and slot.isdecimal() and len(batch) <= 18 and len(slot) <= 6):
        return None
    return int(batch), int(slot)


def held_by_receipts(
    tx: sqlite3.Connection, tenant_id: str, queue: str, receipts: Iterable[str]
) -> list[tuple[Batch, int]]:
    """Each (batch, slot) of this tenant's queue that a receipt holds now, once each, in
    (batch, slot) order. Other receipts are not counted."""
    wanted = {key for key in map(parse_receipt, receipts) if key is not None}
    found = {
        b.batch_id: b
        for b in load(tx, (batch_id for batch_id, _ in wanted)).values()
        if b.tenant_id == tenant_id and b.queue == queue
    }
    held = []
    for batch_id, slot in sorted(wanted):
        batch = found.get(batch_id)
        if batch is not None and slot < batch.n and batch.slots[slot] == HELD:
            held.append((batch, slot))
    return held


def save_all(tx: sqlite3.Connection, touched: Iterable[Batch], now_ms: int) -> None:
    """Write each changed batch once, in batch order."""
    for _, batch in sorted({b.batch_id: b for b in touched}.items()):
        batch.save(tx, now_ms)


def spill(tx: sqlite3.Connection, batch: Batch, slot: int, now_ms: int) -> tuple[str, bool]:
    """Write a slot out as today's per-run rows (its run, its attempt if it was received, its
    message) and take it out of the batch; returns the message id and whether it was received.
    The caller fails or expires the message at once, the per-run way (which sets or clears its
    receipt), so the message is written without one."""
    run = batch.runs[slot]
    key = (run.job_id, run.scheduled_at_ms)
    received = batch.slots[slot] == HELD
    open_runs(tx, [NewRun(*key, batch.tenant_id, run.fire_at_ms)], batch.claimed_at_ms)
    if received:
        mark_runs(tx, RunStatus.DELIVERED, [(1, *key)], columns=("attempt",))
        start_attempts(tx, [(*key, 1)], started_at_ms=batch.received_at(slot))
    msg_id = delivery_id(*key)
    message = QueueDelivery(
        msg_id,
        batch.tenant_id,
        batch.queue,
        *key,
        int(received),  # attempt
        batch.visible_at(slot),
        run.payload,
        run.retry,
    )
    enqueue(tx, [message])
    batch.finish(slot, SPILLED, now_ms)
    return msg_id, received
