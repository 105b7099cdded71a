"""Errors are looked up by their code on both sides of the API (issue 30, point 7): apply's
rejections and the CLI's reading of an error answer. Before, the CLI went by HTTP status: every
422 was an idempotency mismatch (an SSRF refusal, `blocked_target`, exited 1 instead of 2) and
every 409 a plain Conflict (`except StaleState` never matched)."""

from __future__ import annotations

import json
from email.message import Message

import pytest

import schedd.guard.ssrf  # noqa: F401  (registers blocked_target, as the API process does)
from schedd.cli.ctl.client import _http_error
from schedd.errors import (
    BY_CODE,
    ClusterUnavailable,
    Conflict,
    IdempotencyMismatch,
    InvalidRequest,
    JobNotFound,
    NoLeader,
    QuotaExceeded,
    SchedError,
    StaleState,
    rejection_error,
)
from schedd.guard.ssrf import BlockedTarget


def answer(status: int, code: str, message: str = "why") -> SchedError:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    return _http_error(status, body, Message(), "http://127.0.0.1:1")


@pytest.mark.parametrize(
    ("status", "code", "cls", "exit_code"),
    [
        (422, "blocked_target", BlockedTarget, 2),
        (422, "idempotency_mismatch", IdempotencyMismatch, 1),
        (409, "stale_state", StaleState, 1),
        (404, "job_not_found", JobNotFound, 1),
        (503, "no_leader", NoLeader, 3),
        (429, "quota_exceeded", QuotaExceeded, 1),
    ],
)
def test_the_cli_reads_an_error_answer_by_its_code(
    status: int, code: str, cls: type[SchedError], exit_code: int
) -> None:
    exc = answer(status, code)
    assert type(exc) is cls and exc.code == code and exc.exit_code == exit_code


@pytest.mark.parametrize(
    ("status", "cls", "exit_code"),
    [
        (422, InvalidRequest, 2),
        (409, Conflict, 1),
        (503, ClusterUnavailable, 3),
        (418, SchedError, 1),
    ],
)
def test_an_unknown_code_falls_back_to_its_status_and_is_kept(
    status: int, cls: type[SchedError], exit_code: int
) -> None:
    exc = answer(status, "a_newer_servers_code")
    assert type(exc) is cls and exc.code == "a_newer_servers_code" and exc.exit_code == exit_code


def test_an_invalid_request_answer_names_its_field() -> None:
    exc = answer(400, "invalid_request", "schedule.every: must be at least 1s")
    assert isinstance(exc, InvalidRequest)
    assert (exc.field, exc.reason, str(exc)) == (
        "schedule.every",
        "must be at least 1s",
        "schedule.every: must be at least 1s",
    )


def test_every_code_names_one_class_and_rejections_use_the_same_table() -> None:
    assert all(cls.code == code for code, cls in BY_CODE.items())
    assert type(rejection_error("stale_state", "moved on")) is StaleState
    with pytest.raises(TypeError, match="error code 'stale_state'"):

        class Another(SchedError):  # a second class may not take a code
            code = "stale_state"
