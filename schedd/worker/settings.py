"""What a worker was asked to do, checked when it is made (a ValueError names the argument)."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from schedd.worker.protocol import MAX_RECEIVE, MAX_VISIBILITY_S, MAX_WAIT_S, MIN_VISIBILITY_S

QUEUE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
CONSUMER_NAME = re.compile(r"[A-Za-z0-9_.:@-]{1,128}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """A worker's queue, nodes and timings (seconds)."""

    urls: tuple[str, ...]
    token: str | None
    queue: str
    concurrency: int = 1
    visibility_timeout_s: float = 30.0
    wait_s: float = MAX_WAIT_S
    grace_s: float = 30.0
    stop_wait_s: float = 0.0
    request_timeout_s: float = 10.0
    consumer: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not QUEUE_NAME.fullmatch(self.queue):
            raise ValueError(f"queue: must match [A-Za-z0-9_.-]{{1,128}}, got {self.queue!r}")
        if not 1 <= self.concurrency <= MAX_RECEIVE:
            raise ValueError(f"concurrency: must be 1-{MAX_RECEIVE}, got {self.concurrency!r}")
        _between(
            "visibility_timeout_s", self.visibility_timeout_s, MIN_VISIBILITY_S, MAX_VISIBILITY_S
        )
        _between("wait_s", self.wait_s, 0.0, MAX_WAIT_S)
        _between("grace_s", self.grace_s, 0.0, float("inf"))
        _between("stop_wait_s", self.stop_wait_s, 0.0, float("inf"))
        _between("request_timeout_s", self.request_timeout_s, 0.1, 3600.0)
        if self.consumer is not None and not CONSUMER_NAME.fullmatch(self.consumer):
            raise ValueError(f"consumer: must match {CONSUMER_NAME.pattern}, got {self.consumer!r}")

    @property
    def extend_every_s(self) -> float:
        """Running messages are extended every third of their visibility timeout."""
        return self.visibility_timeout_s / 3

    def request_headers(self) -> dict[str, str]:
        headers = {
            "Accept": "application/json",
            "Content-Type": "application/json",
            "User-Agent": f"schedd.worker/{_version()}",
            **self.headers,
        }
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers


def _between(name: str, value: float, low: float, high: float) -> None:
    if not low <= value <= high:
        raise ValueError(f"{name}: must be from {low:g} to {high:g} seconds, got {value!r}")


@functools.cache
def _version() -> str:
    from importlib import metadata  # about 5 ms, once, at the first worker made

    try:
        return metadata.version("schedd")
    except metadata.PackageNotFoundError:
        return "0"
