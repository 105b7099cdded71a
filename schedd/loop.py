"""Background loops: a thread that calls `tick()` until stopped, promptly and without dying.

Every loop can be driven by a test through `tick(now_ms)` alone.
"""

from __future__ import annotations

import logging
import threading
import time

log = logging.getLogger(__name__)


class Loop(threading.Thread):
    """Call `tick(now_ms)` repeatedly; it returns the seconds to wait before the next call.

    `wake()` cuts a wait short (new work arrived); `stop()` ends the loop after the current tick.
    """

    def __init__(self, name: str, *, first_wait_s: float = 0.0) -> None:
        super().__init__(name=name, daemon=True)
        self._wake_event = threading.Event()
        self._is_stopping = False
        self._first_wait_s = first_wait_s

    def tick(self, now_ms: int) -> float:
        raise NotImplementedError

    def wake(self) -> None:
        self._wake_event.set()

    def run(self) -> None:
        wait_s = self._first_wait_s
        while True:
            self._wake_event.wait(wait_s)
            self._wake_event.clear()
            if self._is_stopping:
                return
            try:
                wait_s = self.tick(int(time.time() * 1000))
            except Exception:
                log.exception("loop tick failed loop=%s", self.name)
                wait_s = 1.0

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask the loop to stop and wait for its current tick to finish."""
        self._is_stopping = True
        self._wake_event.set()
        if self.is_alive():
            self.join(timeout_s)
