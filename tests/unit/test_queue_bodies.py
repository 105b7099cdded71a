"""The queue and dead-letter routes' bodies as structs (api/queues.py, api/deadletters.py,
issue 30 point 3): each refusal names the field and says what the handlers said before."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest
from aiohttp import web

from schedd.api.deadletters import _redrive_ids
from schedd.api.queues import _consumer
from schedd.bodies import convert_body, ms_or
from schedd.errors import InvalidRequest
from schedd.wire.queues import (
    DEFAULT_VISIBILITY_MS,
    AckRequest,
    ExtendRequest,
    NackRequest,
    ReceiveRequest,
)


@pytest.mark.parametrize(
    ("kind", "body", "field", "message"),
    [
        (ReceiveRequest, {"max": 0}, "max", "must be an integer from 1 to 100"),
        (ReceiveRequest, {"max": "5"}, "max", "must be an integer from 1 to 100"),
        (ReceiveRequest, {"wait": "21s"}, "wait", "must be at most 20s"),
        (ReceiveRequest, {"visibility_timeout": "13h"}, "visibility_timeout", "at most 12h"),
        (ReceiveRequest, {"visibility_timeout": "500ms"}, "visibility_timeout", "at least 1s"),
        (ReceiveRequest, {"consumer": "a b"}, "consumer", "must match"),
        (ReceiveRequest, {"batch": 5}, "batch", "is not a known field"),
        (AckRequest, {}, "receipts", "is required"),
        (AckRequest, {"receipts": []}, "receipts", "must be a list of 1-1000 receipt strings"),
        (AckRequest, {"receipts": ["r", 5]}, "receipts", "must be a list of 1-1000 receipt"),
        (AckRequest, {"receipts": ["x" * 141]}, "receipts", "must be a list of 1-1000 receipt"),
        (NackRequest, {"receipts": ["r"], "error": 5}, "error", "must be a string"),
        (
            ExtendRequest,
            {"receipts": ["r"], "visibility_timeout": "soon"},
            "visibility_timeout",
            "",
        ),
    ],
)
def test_a_bad_body_names_its_field(
    kind: type[Any], body: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        convert_body(body, kind)
    assert caught.value.field == field
    assert message in caught.value.reason


def test_the_defaults_and_durations() -> None:
    asked = convert_body({}, ReceiveRequest)
    assert (asked.max, asked.consumer) == (10, None)
    assert ms_or(asked.wait, 0) == 0
    assert ms_or(asked.visibility_timeout, DEFAULT_VISIBILITY_MS) == 30_000
    given = convert_body({"max": 5.0, "wait": "1.5s", "visibility_timeout": 60}, ReceiveRequest)
    assert (given.max, ms_or(given.wait, 0), ms_or(given.visibility_timeout, 0)) == (
        5,
        1_500,
        60_000,
    )
    nack = convert_body({"receipts": ["a", "b"]}, NackRequest)
    assert (nack.receipts, nack.error) == (["a", "b"], "")


def test_a_consumer_name_ending_in_a_newline_stays_refused() -> None:
    """msgspec searches a pattern, and `$` matches before a final newline: convert_body matches
    the name whole (bodies.check_whole_patterns); the handler takes the name it was given."""
    with pytest.raises(InvalidRequest, match="must match") as caught:
        convert_body({"consumer": "worker-1\n"}, ReceiveRequest)
    assert caught.value.field == "consumer"
    request = cast(web.Request, SimpleNamespace(remote="127.0.0.1"))
    assert _consumer(None, request) == "127.0.0.1"
    assert _consumer("worker-1", request) == "worker-1"


def test_a_redrive_names_each_dead_letter_once() -> None:
    assert _redrive_ids({"ids": ["a", "b"]}) == ["a", "b"]
    with pytest.raises(InvalidRequest, match="twice"):
        _redrive_ids({"ids": ["a", "a"]})
