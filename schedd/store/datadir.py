"""The lock a running node holds on its data directory: one process per data directory."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType

LOCK_NAME = "node.lock"


class DataDirBusy(Exception):
    """Another process holds the data directory."""


class DataDirLock:
    """An exclusive flock on `<data_dir>/node.lock`, released when the process ends (even on
    kill -9), so it never needs cleaning up by hand."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> DataDirLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataDirBusy(f"{self.path.parent} is used by another schedd process") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def __enter__(self) -> DataDirLock:
        return self.acquire()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()
