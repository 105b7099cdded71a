"""The cluster's node URLs as a worker uses them: requests stay on the node that answered last and
move to the next one when it fails; and the backoff between rounds in which no node answered."""

from __future__ import annotations

import threading
import urllib.parse
from collections.abc import Callable, Sequence

Switched = Callable[[str, str, str], None]  # (the failed node, why, the node used from now on)


def parse_urls(urls: str | Sequence[str]) -> tuple[str, ...]:
    """Node URLs from a comma-separated string or a list, without trailing slashes."""
    parts = urls.split(",") if isinstance(urls, str) else list(urls)
    found = tuple(part.strip().rstrip("/") for part in parts if part.strip())
    if not found:
        raise ValueError("urls: give at least one node URL like http://127.0.0.1:8701")
    for url in found:
        split = urllib.parse.urlsplit(url)
        if split.scheme not in ("http", "https") or not split.hostname:
            raise ValueError(f"urls: each must be http(s)://host:port, got {url!r}")
    return found


class Nodes:
    """The node URLs and the one in use. Thread-safe; the asyncio worker uses it from its loop."""

    def __init__(self, urls: Sequence[str], on_switch: Switched) -> None:
        self.urls = tuple(urls)
        self._current = 0
        self._on_switch = on_switch
        self._lock = threading.Lock()

    @property
    def current(self) -> str:
        return self.urls[self._current]

    def order(self) -> list[int]:
        """Each node's index once, starting with the one in use."""
        start = self._current
        return [(start + step) % len(self.urls) for step in range(len(self.urls))]

    def failed(self, index: int, reason: str) -> None:
        """Node `index` gave no answer: move on from it, if it is still the one in use."""
        with self._lock:
            if self._current != index or len(self.urls) == 1:
                return
            self._current = (index + 1) % len(self.urls)
            now = self.urls[self._current]
        self._on_switch(self.urls[index], reason, now)


class Backoff:
    """Waits that double from `first_s` up to `most_s`, back to the start after a success."""

    def __init__(self, first_s: float = 1.0, most_s: float = 10.0) -> None:
        self._first_s, self._most_s = first_s, most_s
        self._next_s = first_s

    def next(self) -> float:
        wait_s = self._next_s
        self._next_s = min(2 * wait_s, self._most_s)
        return wait_s

    def reset(self) -> None:
        self._next_s = self._first_s
