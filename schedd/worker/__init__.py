"""schedd.worker: consume a schedd queue from Python, with handlers that run effectively once.

    worker = Worker("http://10.0.0.1:8701,http://10.0.0.2:8701", token, "reports", concurrency=4)

    @worker.handler(once=SQLiteOnce("app.db"))
    def render(message: Message, tx: sqlite3.Connection) -> None:
        tx.execute("INSERT INTO reports (team) VALUES (?)", (message.payload["team"],))

    worker.run()

It imports nothing of the schedd server (import-linter keeps it so): the sync form needs the
stdlib and msgspec, AsyncWorker aiohttp, PostgresOnce psycopg 3. docs/workers.md explains it.
"""

from schedd.worker.errors import Busy, Nack, Refused, Unavailable, WorkerError
from schedd.worker.events import Events, Outcome
from schedd.worker.once import Once
from schedd.worker.postgres_once import PostgresOnce
from schedd.worker.protocol import Message
from schedd.worker.sqlite_once import SQLiteOnce
from schedd.worker.worker import Worker

__all__ = [
    "AsyncWorker",
    "Busy",
    "Events",
    "Message",
    "Nack",
    "Once",
    "Outcome",
    "PostgresOnce",
    "Refused",
    "SQLiteOnce",
    "Unavailable",
    "Worker",
    "WorkerError",
]


def __getattr__(name: str) -> object:
    """AsyncWorker is imported on first use: aiohttp costs the sync form nothing."""
    if name == "AsyncWorker":
        from schedd.worker.aioworker import AsyncWorker

        return AsyncWorker
    raise AttributeError(f"module 'schedd.worker' has no attribute {name!r}")
