"""What schedd.worker raises, one root (WorkerError), and Nack, which a handler raises.

Its own classes, not schedd.errors: the package imports nothing of schedd outside itself.
"""

from __future__ import annotations


class WorkerError(Exception):
    """A worker could not go on; the message says what to check."""


class Unavailable(WorkerError):
    """No node answered: connection refused or lost, timed out, or 502/503/504 from each."""


class Busy(WorkerError):
    """429: the tenant has as many long polls open as its nodes allow (or a rate limit)."""

    def __init__(self, message: str, *, retry_after_s: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class Refused(WorkerError):
    """A node refused the request (401 unknown token, 403, 404, 400...): repeating it, on this
    node or another, cannot help. `detail` is the node's own message, `code` its error code."""

    def __init__(self, message: str, *, status: int, code: str | None, detail: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.detail = detail


class Nack(Exception):
    """Raise in a handler to nack the message with exactly this text; any other exception
    nacks it with its type and text ("KeyError: 'user_id'"). `output` is kept with the attempt
    (bounded as output.bound_output does); `is_dead` makes the run dead at once, no more attempts
    (for what no retry can mend: a payload that can never run)."""

    def __init__(self, message: str, *, output: str | None = None, is_dead: bool = False) -> None:
        super().__init__(message)
        self.output = output
        self.is_dead = is_dead
