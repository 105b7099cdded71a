"""schedd.worker: consume a schedd queue from Python, with handlers that run effectively once.

    worker = Worker("http://10.0.0.1:8701,http://10.0.0.2:8701", token, "reports", concurrency=4)

    @worker.handler(once=SQLiteOnce("app.db"))
    def render(message: Message, tx: sqlite3.Connection) -> None:
        tx.execute("INSERT INTO reports (team) VALUES (?)", (message.payload["team"],))

    worker.run()

It imports nothing of the schedd server (import-linter keeps it so): the sync form needs the
stdlib and msgspec, AsyncWorker aiohttp, PostgresOnce psycopg 3. docs/workers.md explains it.
"""

import importlib
from typing import TYPE_CHECKING

from schedd.worker.errors import Busy, Nack, Refused, Unavailable, WorkerError
from schedd.worker.events import Events, Outcome
from schedd.worker.once import Once
from schedd.worker.output import Output
from schedd.worker.protocol import Message
from schedd.worker.settlement import Ack
from schedd.worker.worker import Worker

if TYPE_CHECKING:  # imported on first use (below): a worker pays only for what it uses
    from schedd.worker.aioworker import AsyncWorker
    from schedd.worker.postgres_once import PostgresOnce
    from schedd.worker.sqlite_once import SQLiteOnce

__all__ = [
    "Ack",
    "AsyncWorker",
    "Busy",
    "Events",
    "Message",
    "Nack",
    "Once",
    "Outcome",
    "Output",
    "PostgresOnce",
    "Refused",
    "SQLiteOnce",
    "Unavailable",
    "Worker",
    "WorkerError",
]


_LAZY = {
    "AsyncWorker": "schedd.worker.aioworker",  # aiohttp
    "PostgresOnce": "schedd.worker.postgres_once",
    "SQLiteOnce": "schedd.worker.sqlite_once",  # sqlite3 and asyncio
}


def __getattr__(name: str) -> object:
    """AsyncWorker, SQLiteOnce and PostgresOnce, imported on first use."""
    if name not in _LAZY:
        raise AttributeError(f"module 'schedd.worker' has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)
