"""The contract's error body: `{"error": {"code", "message"}}`, a failed request's or a failed
item's in a batch answer."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

ERROR_CODES = (
    "invalid_request, invalid_schedule, invalid_dependency, unauthorized, forbidden, "
    "job_not_found, tenant_not_found, deadletter_not_found, not_found, conflict, stale_state, "
    "tenant_exists, payload_too_large, idempotency_mismatch, blocked_target, quota_exceeded, "
    "no_leader, outcome_unknown, cluster_unavailable, request_timeout, server_busy, storage_low, "
    "wrong_cell"
)


class ErrorDetail(msgspec.Struct, frozen=True, kw_only=True):
    """The contract's error object: a code a client branches on, a message for people."""

    code: Annotated[
        str,
        Meta(
            pattern=r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$",
            description=f"Stable machine-readable code, e.g. {ERROR_CODES}.",
        ),
    ]
    message: Annotated[
        str,
        Meta(min_length=1, description="A human sentence naming the field and the value."),
    ]


class Failure(msgspec.Struct, frozen=True, kw_only=True):
    """Every error answer. A failed request changes nothing."""

    error: ErrorDetail

    @classmethod
    def of(cls, code: str, message: str) -> Failure:
        return cls(error=ErrorDetail(code=code, message=message))


class WrongCellDetail(ErrorDetail, frozen=True, kw_only=True):
    """A `wrong_cell` error (307): the cell that serves the request's partition, all its API
    URLs (Location names the first) and the directory revision this node routed by."""

    cell: str
    urls: list[str]
    directory_revision: int


class WrongCellFailure(msgspec.Struct, frozen=True, kw_only=True):
    """The 307 answer of a request for another cell's partition."""

    error: WrongCellDetail
