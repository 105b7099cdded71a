"""schedd.worker's reading of node answers (hostile bytes: bounded and typed), what an error
answer means, the nack text of a handler's exception, and the worker's argument checks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from schedd.worker import Busy, Nack, Refused, Worker
from schedd.worker.cells import Cells, read_cells
from schedd.worker.nodes import Backoff, Nodes, parse_urls
from schedd.worker.protocol import (
    ERROR_CHARS,
    MAX_RECEIPT_CHARS,
    NodeFailed,
    WrongCell,
    counted,
    error_of,
    nack_text,
    read_messages,
    receive_limit,
)

BASE = "http://10.0.0.1:8701"
MESSAGE = {
    "receipt": "r-1",
    "job_id": "job_1",
    "scheduled_at": "2026-12-01T08:00:00Z",
    "attempt": 1,
    "idempotency_key": "job_1:2026-12-01T08:00:00Z",
    "payload": {"team": 7},
}


def body(value: Any) -> bytes:
    return json.dumps(value).encode()


def test_a_receive_answer_is_read_with_unknown_fields_ignored() -> None:
    [message] = read_messages(body({"messages": [MESSAGE | {"new": 1}], "more": 2}), BASE)
    assert message.payload == {"team": 7} and message.facts == "job=job_1 attempt=1"


@pytest.mark.parametrize(
    "answer",
    [
        b"<html>bad gateway</html>",
        body({"messages": "none"}),
        body({"messages": [MESSAGE] * 101}),
        body({"messages": [MESSAGE | {"receipt": "r" * 141}]}),
        body({"messages": [MESSAGE | {"attempt": "1"}]}),
        body({"messages": [MESSAGE | {"attempt": 0}]}),
        body({"messages": [{k: v for k, v in MESSAGE.items() if k != "job_id"}]}),
    ],
)
def test_a_receive_answer_that_is_not_the_apis_is_a_node_failure(answer: bytes) -> None:
    with pytest.raises(NodeFailed, match="not the API's"):
        read_messages(answer, BASE)


def test_a_count_answer_must_hold_a_count() -> None:
    assert counted("acked")(body({"acked": 2}), BASE) == 2
    for bad in (body({"acked": True}), body({"acked": -1}), body({}), b"[1]", b"x"):
        with pytest.raises(NodeFailed):
            counted("acked")(bad, BASE)
    assert receive_limit(100) > 100 * 512 * 1024  # a full receive of the largest payloads fits


def test_error_answers_mean_another_node_a_wait_or_a_refusal() -> None:
    unavailable = error_of(
        503, body({"error": {"code": "no_leader", "message": "no leader"}}), BASE, "1"
    )
    assert isinstance(unavailable, NodeFailed) and str(unavailable) == f"{BASE}: no leader"
    busy = error_of(
        429, body({"error": {"code": "quota_exceeded", "message": "long polls"}}), BASE, "3"
    )
    assert isinstance(busy, Busy) and busy.retry_after_s == 3.0
    token = error_of(
        401, body({"error": {"code": "unauthorized", "message": "unknown token"}}), BASE, None
    )
    assert isinstance(token, Refused) and (token.status, token.detail) == (401, "unknown token")
    assert (
        str(token) == f"{BASE} refused it (HTTP 401 unauthorized): unknown token; check the token"
    )
    page = error_of(404, b"<html>Not Found</html>", BASE, None)
    assert isinstance(page, Refused) and page.code is None and page.detail == "HTTP 404"
    assert "check the node URLs and the tenant" in str(page)
    assert isinstance(error_of(502, b"", BASE, None), NodeFailed)


def test_a_handlers_exception_is_nacked_with_its_type_and_text() -> None:
    assert nack_text(Nack("exit code 3\ntail")) == "exit code 3\ntail"
    assert nack_text(KeyError("user_id")) == "KeyError: 'user_id'"
    assert nack_text(ValueError("x" * 10_000)).startswith("ValueError: xxx")
    assert len(nack_text(ValueError("x" * 10_000))) == ERROR_CHARS
    assert nack_text(Nack("")) == "Nack"


def test_nodes_stay_on_the_one_that_answered_and_backoff_doubles_to_its_cap() -> None:
    switched: list[tuple[str, str, str]] = []
    nodes = Nodes(parse_urls("http://a:1, http://b:2/,http://c:3"), lambda *s: switched.append(s))
    assert nodes.order() == [0, 1, 2]
    nodes.failed(0, "refused")
    nodes.failed(0, "refused again")  # a stale failure of a node no longer in use: no move
    assert nodes.current == "http://b:2" and nodes.order() == [1, 2, 0]
    assert switched == [("http://a:1", "refused", "http://b:2")]
    backoff = Backoff(1.0, 10.0)
    assert [backoff.next() for _ in range(6)] == [1, 2, 4, 8, 10, 10]
    backoff.reset()
    assert backoff.next() == 1


@pytest.mark.parametrize(
    ("args", "options", "named"),
    [
        (("", "t", "q"), {}, "urls"),
        (("ftp://x", "t", "q"), {}, "urls"),
        (("http://a:1", "t", "bad/queue"), {}, "queue"),
        (("http://a:1", "t", "q"), {"concurrency": 101}, "concurrency"),
        (("http://a:1", "t", "q"), {"visibility_timeout_s": 0.5}, "visibility_timeout_s"),
        (("http://a:1", "t", "q"), {"wait_s": 21}, "wait_s"),
        (("http://a:1", "t", "q"), {"consumer": "a b"}, "consumer"),
    ],
)
def test_bad_worker_arguments_are_refused_naming_them(
    args: tuple[str, str, str], options: dict[str, Any], named: str
) -> None:
    with pytest.raises(ValueError, match=named):
        Worker(*args, **options)


def test_a_worker_has_one_handler() -> None:
    worker = Worker("http://a:1", "t", "q")
    worker.handler(print)
    with pytest.raises(ValueError, match="has a handler already"):
        worker.handler(print)


def test_a_wrong_cell_307_reads_the_cells_again_and_any_other_3xx_is_refused() -> None:
    error = {"code": "wrong_cell", "message": "partition 733 is served by cell c2"}
    moved = error_of(307, json.dumps({"error": error | {"cell": "c2"}}).encode(), BASE, None)
    assert isinstance(moved, WrongCell) and "served by cell c2" in str(moved)
    other = error_of(302, b"", BASE, None)
    assert isinstance(other, Refused) and "a redirect, not followed" in str(other)


def test_cells_route_each_receipt_to_the_cell_that_handed_it_out() -> None:
    seed = Nodes(("http://a:1",), lambda *_: None)
    cells = Cells(seed, lambda *_: None)
    directory = read_cells(
        json.dumps(
            {
                "directory_revision": 3,
                "cells": [
                    {"cell": "c1", "urls": ["http://a:1/"]},
                    {"cell": "c2", "urls": ["ftp://b:2", "http://b:2", "http://b:3/x"]},
                ],
            }
        ).encode(),
        "http://a:1",
    )
    assert directory == (3, {"c1": ("http://a:1",), "c2": ("http://b:2",)})
    assert cells.adopt(*directory) == ["c1", "c2"] and cells.names == ["c1", "c2"]
    c1, c2 = cells.nodes("c1"), cells.nodes("c2")
    assert c1 is not None and c2 is not None
    cells.hold(c2, ["r2"])
    cells.hold(c1, ["r1"])
    assert cells.by_cell(["r1", "r2", "unknown"]) == [
        (c1, ["r1"]),
        (c2, ["r2"]),
        (seed, ["unknown"]),
    ]
    assert cells.adopt(0, None) == ["default"] and cells.nodes("default") is seed
    assert read_cells(b'{"queues": []}', "http://a:1") is None  # not a directory: one cell


def test_a_cells_receipt_of_its_longest_name_is_taken() -> None:
    receipt = "c" * 32 + "~" + "n" * 24 + "-99." + "job_" + "0" * 24 + ":1790000000000"
    assert len(receipt) <= MAX_RECEIPT_CHARS
    [message] = read_messages(body({"messages": [MESSAGE | {"receipt": receipt}]}), BASE)
    assert message.receipt == receipt
