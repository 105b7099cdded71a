"""The error hierarchy every layer raises: one root, a stable `code` per class.

Boundaries translate these once: the API to an HTTP status and body, the CLI to an exit code.
"""

from __future__ import annotations

# Every error class by its code: a class that sets `code` registers itself, and both sides of
# the API look errors up here (apply's rejections, the CLI's reading of error answers).
BY_CODE: dict[str, type[SchedError]] = {}


def _register(cls: type[SchedError]) -> None:
    known = BY_CODE.get(cls.code)
    if known is not None and known.__qualname__ != cls.__qualname__:  # a reload is no clash
        raise TypeError(f"error code {cls.code!r} of {cls.__name__} is {known.__name__}'s")
    BY_CODE[cls.code] = cls


class SchedError(Exception):
    """Root of every error schedd raises on purpose."""

    code = "internal"
    http_status = 500
    exit_code = 1

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "code" in cls.__dict__:
            _register(cls)

    @classmethod
    def from_rejection(cls, message: str) -> SchedError:
        """This error as apply's Rejected(code, message) reports it (the message is whole)."""
        exc = cls.__new__(cls)
        Exception.__init__(exc, message)
        return exc


class InvalidRequest(SchedError, ValueError):
    """The caller sent something the contract does not allow; `field` names what."""

    code = "invalid_request"
    http_status = 400
    exit_code = 2

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.reason = message

    @classmethod
    def from_rejection(cls, message: str) -> SchedError:
        """Apply's rejections name the field first (`target.connection: ...`)."""
        exc = super().from_rejection(message)
        if isinstance(exc, InvalidRequest):
            field, sep, reason = message.partition(": ")
            exc.field, exc.reason = (field, reason) if sep else ("", message)
        return exc


class InvalidSchedule(InvalidRequest):
    """A schedule, cron expression, time zone, instant or duration is not valid."""

    code = "invalid_schedule"


class InvalidDependency(InvalidSchedule):
    """An `after` schedule the store cannot take: its upstream is not the tenant's job, is
    cancelled, is the job itself, would close a cycle (named), or the chain would be too long
    (422, `schedule.after.job_id`)."""

    code = "invalid_dependency"
    http_status = 422


class InvalidBackfill(InvalidRequest):
    """A backfill the API cannot take: a bad or missing field, a range reversed or in the
    future, more occurrences than one backfill takes (422, the field named)."""

    code = "invalid_backfill"
    http_status = 422


class ConfigError(SchedError):
    """A node configuration file or value is not valid."""

    code = "config_error"
    exit_code = 2


class PayloadTooLarge(InvalidRequest):
    """A body or a payload is over its size limit."""

    code = "payload_too_large"
    http_status = 413


class CommandTooLarge(PayloadTooLarge):
    """A write whose Raft command would be over the per-command cap."""

    def __init__(self, type_: str, size: int, limit: int) -> None:
        super().__init__(
            "body",
            f"makes a {type_} command of {size} bytes, over the {limit}-byte limit of one "
            f"Raft command ({limit // 1024} KiB); send less per request",
        )
        self.size = size
        self.limit = limit


class Unauthorized(SchedError):
    """No token, or a token nobody issued."""

    code = "unauthorized"
    http_status = 401
    exit_code = 4  # schedctl's own code for "check the token", beside 1's "check the request"


class Forbidden(SchedError):
    """A valid token that may not do this."""

    code = "forbidden"
    http_status = 403
    exit_code = 1


class NotFound(SchedError, LookupError):
    """No such object for this tenant."""

    code = "not_found"
    http_status = 404
    exit_code = 1


class JobNotFound(NotFound):
    code = "job_not_found"

    def __init__(self, job_id: str, message: str | None = None) -> None:
        super().__init__(message or f"no job with id {job_id!r}")
        self.job_id = job_id


class TenantNotFound(NotFound):
    code = "tenant_not_found"

    def __init__(self, tenant_id: str) -> None:
        super().__init__(f"no tenant with id {tenant_id!r}")
        self.tenant_id = tenant_id


class Conflict(SchedError):
    """The request conflicts with the object's current state."""

    code = "conflict"
    http_status = 409


class ConnectionNotFound(NotFound):
    code = "connection_not_found"

    def __init__(self, name: str) -> None:
        super().__init__(f"no connection named {name!r}")
        self.name = name


class CalendarNotFound(NotFound):
    code = "calendar_not_found"

    def __init__(self, name: str) -> None:
        super().__init__(f"no calendar named {name!r}")
        self.name = name


class ConnectionExists(Conflict):
    """A connection of that name exists already for the tenant."""

    code = "connection_exists"


class ConnectionInUse(Conflict):
    """A live (active or paused) job uses the connection."""

    code = "connection_in_use"


class StaleState(Conflict):
    code = "stale_state"


class TenantExists(Conflict):
    """A tenant of that name exists already."""

    code = "tenant_exists"


class DeadletterNotFound(NotFound):
    code = "deadletter_not_found"


class IdempotencyMismatch(Conflict):
    """An Idempotency-Key was reused with a different body."""

    code = "idempotency_mismatch"
    http_status = 422


class QuotaExceeded(SchedError):
    """A tenant quota or rate limit; `retry_after_s` is sent as Retry-After."""

    code = "quota_exceeded"
    http_status = 429
    retry_after_s = 1

    def __init__(self, message: str, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class StorageLow(SchedError):
    """Free disk space is below `[storage] min_free` here or on a majority of the nodes: writes
    that add data are refused before they enter the log; dispatch, acks and deletes go on."""

    code = "storage_low"
    http_status = 507
    exit_code = 3
    retry_after_s = 60


class ClusterUnavailable(SchedError):
    """No leader reachable or the node is not ready; safe to retry later."""

    code = "cluster_unavailable"
    http_status = 503
    exit_code = 3
    retry_after_s = 1


class NoLeader(ClusterUnavailable):
    code = "no_leader"


class ServerBusy(ClusterUnavailable):
    """This node is at one of its server limits (bodies read at once); retry shortly."""

    code = "server_busy"


class RequestTimeout(InvalidRequest):
    """The client sent its request body too slowly."""

    code = "request_timeout"
    http_status = 408


class HistoryIncomplete(ClusterUnavailable):
    """The answer may be in a history segment this node has not fetched yet (a new or wiped
    node serves from the live state while it fetches closed segments): retry later, or ask
    another node."""

    code = "history_incomplete"
    retry_after_s = 5


class OutcomeUnknown(ClusterUnavailable):
    """The write may or may not have been applied (leader lost mid-way)."""

    code = "outcome_unknown"


class CorruptLog(BaseException):
    """A log entry this node cannot apply: the node halts rather than diverge."""

    code = "corrupt_log"


_register(SchedError)  # "internal": a committed command met a bug (apply contained it)

# The class an error answer stands for when its code is unknown here (a newer server's, or a
# class this process never imported), by HTTP status: the code is kept on it.
BY_STATUS: dict[int, type[SchedError]] = {
    400: InvalidRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    408: RequestTimeout,
    409: Conflict,
    413: PayloadTooLarge,
    422: InvalidRequest,
    429: QuotaExceeded,
    502: ClusterUnavailable,
    503: ClusterUnavailable,
    504: ClusterUnavailable,
    507: StorageLow,
}


def error_of_answer(status: int, code: str | None, message: str) -> SchedError:
    """The error an HTTP error answer stands for: its code's class, else its status's, else
    SchedError; the answer's code is kept."""
    cls = BY_CODE.get(code or "") or BY_STATUS.get(status, SchedError)
    exc = cls.from_rejection(message)
    if code and exc.code != code:
        exc.code = code
    return exc


def rejection_error(code: str, message: str) -> SchedError:
    """The error for a rejection apply returned; an unknown code (a newer node's) keeps it."""
    return error_of_answer(SchedError.http_status, code, message)


class WrongCell(SchedError):
    """The request's partition is served by another cell (docs/scaling.md §4): a 307 to one
    of that cell's API URLs, the body naming all of them."""

    code = "wrong_cell"
    http_status = 307
    exit_code = 3
    cell = ""
    urls: tuple[str, ...] = ()
    directory_revision = 0

    def __init__(
        self,
        *,
        partition: int,
        cell: str,
        urls: tuple[str, ...],
        directory_revision: int,
        message: str | None = None,
    ) -> None:
        super().__init__(message or f"partition {partition} is served by cell {cell}")
        self.cell, self.urls, self.directory_revision = cell, urls, directory_revision
