"""SQLiteOnce and PostgresOnce (schedd.worker): a key is recorded with the block's writes or not
at all, a recorded key hands out no transaction, a second delivery running at the same moment
waits for the first and finds its key, and old keys are pruned on schedule. The PostgreSQL cases
need the machine's server (tests/brokers.py `require`: skipped without it, failed under CI=true).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from schedd.worker import Once, PostgresOnce, SQLiteOnce
from tests.brokers import require

POSTGRES_DSN = "postgresql://postgres@127.0.0.1:5432/test"
KEY = "job_0123:2026-12-01T08:00:00Z"


class Clock:
    def __init__(self) -> None:
        self.now_s = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now_s


class Store:
    """One kind of once store and its own effects table."""

    def __init__(
        self, once: SQLiteOnce | PostgresOnce, effects: str, rows: Callable[[], list[str]]
    ) -> None:
        self.once, self.effects, self.rows = once, effects, rows
        self.placeholder = "?" if isinstance(once, SQLiteOnce) else "%s"

    def write(self, tx: Any, value: str) -> None:
        tx.execute(f"INSERT INTO {self.effects} (value) VALUES ({self.placeholder})", (value,))


@pytest.fixture(params=["sqlite", "postgres"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Store]]:
    """A factory of stores of one kind sharing one database and effects table."""
    effects = f"t{uuid.uuid4().hex[:10]}_effects"
    path = tmp_path / "tenant.db"
    made: list[SQLiteOnce | PostgresOnce] = []
    if request.param == "postgres":
        require("postgres")
    run(request.param, path, f"CREATE TABLE {effects} (value text)")

    def make(**options: Any) -> Store:
        table = effects.replace("_effects", "_once")
        once: SQLiteOnce | PostgresOnce
        if request.param == "sqlite":
            once = SQLiteOnce(path, table=table, **options)
        else:
            once = PostgresOnce(POSTGRES_DSN, table=table, **options)
        made.append(once)
        query = f"SELECT value FROM {effects}"
        return Store(once, effects, lambda: [v for (v,) in run(request.param, path, query)])

    yield make
    for once in made:
        once.close()
    if request.param == "postgres":
        for table in (effects, effects.replace("_effects", "_once")):
            run("postgres", path, f"DROP TABLE IF EXISTS {table}")


def run(kind: str, path: Path, query: str) -> list[tuple[Any, ...]]:
    """One statement on its own connection, committed: its rows."""
    if kind == "sqlite":
        with contextlib.closing(sqlite3.connect(path)) as db, db:
            return db.execute(query).fetchall()
    import psycopg

    with psycopg.connect(POSTGRES_DSN, autocommit=True) as pg:
        cursor = pg.execute(query)
        return cursor.fetchall() if cursor.description else []


def test_a_recorded_key_hands_out_no_transaction_and_the_first_writes_stay(
    make_store: Callable[..., Store],
) -> None:
    store = make_store()
    with store.once.transaction(KEY) as tx:
        assert tx is not None
        store.write(tx, "first")
    with store.once.transaction(KEY) as again:
        assert again is None
    assert store.once.is_recorded(KEY)
    assert store.rows() == ["first"]


def test_a_block_that_raises_leaves_neither_its_writes_nor_the_key(
    make_store: Callable[..., Store],
) -> None:
    store = make_store()
    with pytest.raises(ValueError, match="handler failed"), store.once.transaction(KEY) as tx:
        store.write(tx, "lost")
        raise ValueError("handler failed")
    assert not store.once.is_recorded(KEY)
    with store.once.transaction(KEY) as retry:
        assert retry is not None
        store.write(retry, "retried")
    assert store.rows() == ["retried"]


def test_a_second_delivery_at_the_same_moment_waits_and_finds_the_key(
    make_store: Callable[..., Store],
) -> None:
    first, second = make_store(), make_store()  # two workers of one database
    holding, release = threading.Event(), threading.Event()
    found: list[Any] = []

    def deliver_first() -> None:
        with first.once.transaction(KEY) as tx:
            first.write(tx, "once")
            holding.set()
            release.wait(10)

    def deliver_second() -> None:
        with second.once.transaction(KEY) as tx:
            found.append(tx)

    one = threading.Thread(target=deliver_first)
    one.start()
    assert holding.wait(10)
    two = threading.Thread(target=deliver_second)
    two.start()
    two.join(0.3)
    assert two.is_alive() and not found  # it waits on the first one's uncommitted key
    release.set()
    one.join(10)
    two.join(10)
    assert found == [None]
    assert first.rows() == ["once"]


def test_keys_older_than_keep_are_pruned_at_most_every_prune_every(
    make_store: Callable[..., Store],
) -> None:
    clock = Clock()
    store = make_store(keep_s=100, prune_every_s=600, clock=clock)
    once: Once = store.once
    for key in ("old:1", "new:1"):
        with store.once.transaction(key) as tx:
            assert tx is not None
        once.prune_if_due()  # the first one prunes (nothing is 100 s old), the second waits
        clock.now_s += 300
    assert store.once.is_recorded("old:1")  # 600 s old, but the last prune was 600 s ago
    once.prune_if_due()
    assert not store.once.is_recorded("old:1") and not store.once.is_recorded("new:1")
    with store.once.transaction("newest:1") as tx:
        assert tx is not None
    assert store.once.prune() == 0  # an explicit prune: keys within `keep_s` stay
    assert store.once.is_recorded("newest:1")


def test_the_asyncio_transaction_records_rolls_back_and_skips_alike(
    make_store: Callable[..., Store],
) -> None:
    store = make_store()

    async def deliveries() -> list[bool]:
        got = []
        with pytest.raises(RuntimeError):
            async with store.once.atransaction(KEY) as tx:
                raise RuntimeError("first attempt fails")
        for _ in range(2):
            async with store.once.atransaction(KEY) as tx:
                got.append(tx is not None)
        return got

    assert asyncio.run(deliveries()) == [True, False]
    assert store.once.is_recorded(KEY)
    if isinstance(store.once, PostgresOnce):
        asyncio.run(store.once.aclose())


@pytest.mark.parametrize("table", ["", "1abc", "a-b", 'a"; DROP', "x" * 64, "a.b.c"])
def test_a_table_name_that_is_not_a_plain_sql_name_is_refused(table: str) -> None:
    for make in (PostgresOnce, SQLiteOnce):
        with pytest.raises(ValueError, match="table"):
            make(":memory:", table=table)
    with pytest.raises(ValueError, match="table"):
        SQLiteOnce(":memory:", table="app.keys")  # a schema is PostgreSQL's
