"""A stored spec is read back leniently (schedd/stored_spec.py): what today's API accepts reads
back as the API parsed it, what an earlier release accepted is still delivered, and only a value
that names nothing deliverable is refused (issue 30, point 1's latent defect)."""

from __future__ import annotations

import asyncio
import json
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar

import pytest

from schedd.delivery.http import HttpDeliverer
from schedd.delivery.outcome import Verdict
from schedd.errors import InvalidRequest
from schedd.guard.targets import TargetGuard
from schedd.jobspec import parse_target, target_to_json
from schedd.model import HttpTarget, RetryPolicy
from schedd.sealing import PayloadKeys
from schedd.store.outbox import DueCall
from schedd.stored_spec import load_retry, load_target
from schedd.targets.rabbitmq import RabbitMqTarget
from tests.brokers import TENANT
from tests.servers import serving


@pytest.mark.parametrize(
    "given",
    [
        {"type": "queue", "name": "emails"},
        {"type": "http", "url": "https://hooks.example/x?a=1"},
        {
            "type": "http",
            "url": "http://h.example:8080/",
            "method": "PUT",
            "headers": {"X-Team": "billing", "Authorization": "Bearer t"},
            "timeout": "2.5s",
        },
        {"type": "redis_stream", "connection": "main", "stream": "runs", "maxlen": 1000},
        {"type": "redis_stream", "connection": "main", "stream": "runs"},
        {"type": "rabbitmq", "connection": "mq", "exchange": "", "routing_key": "jobs"},
        {"type": "rabbitmq", "connection": "mq", "exchange": "ex.1", "routing_key": ""},
        {"type": "nats", "connection": "n", "subject": "orders.eu"},
    ],
)
def test_what_the_api_accepts_reads_back_as_the_api_parsed_it(given: dict[str, Any]) -> None:
    parsed = parse_target(given)
    assert load_target(json.dumps(target_to_json(parsed))) == parsed
    assert load_target(json.dumps(given)) == parsed  # the defaults are the API's too


TOO_MANY_HEADERS = {f"X-H{i}": str(i) for i in range(40)}
LONG_URL = "https://hooks.example/" + "p" * 2100


@pytest.mark.parametrize(
    ("stored", "read"),
    [
        (
            {"type": "http", "url": LONG_URL, "headers": TOO_MANY_HEADERS},
            HttpTarget(url=LONG_URL, headers=TOO_MANY_HEADERS),
        ),
        (  # schedd's own headers are never the stored target's; a timeout out of range clamped
            {
                "type": "http",
                "url": "https://h.example/",
                "headers": {"Host": "evil", "webhook-id": "x", "X-Ok": "1", "X-Num": 5},
                "timeout": "10m",
            },
            HttpTarget(url="https://h.example/", headers={"X-Ok": "1"}, timeout_ms=60_000),
        ),
        (
            {"type": "http", "url": "https://h.example/", "timeout": "soon", "extra": 1},
            HttpTarget(url="https://h.example/"),
        ),
        (
            {"type": "rabbitmq", "connection": "mq", "exchange": "orders/eu", "routing_key": "k"},
            RabbitMqTarget(connection="mq", exchange="orders/eu", routing_key="k"),
        ),
    ],
)
def test_a_stored_target_todays_api_refuses_is_still_read(
    stored: dict[str, Any], read: object
) -> None:
    with pytest.raises(InvalidRequest):
        parse_target(stored)
    assert load_target(json.dumps(stored)) == read


@pytest.mark.parametrize(
    "stored",
    [
        "not json",
        "[1]",
        '{"type": "http"}',
        '{"type": "http", "url": ""}',
        '{"type": "queue", "name": 5}',
        '{"type": "mqtt", "connection": "m"}',
        '{"type": "rabbitmq", "connection": "mq", "exchange": "", "routing_key": ""}',
    ],
)
def test_a_target_naming_nothing_deliverable_is_refused_naming_the_target(stored: str) -> None:
    with pytest.raises(ValueError, match="target"):
        load_target(stored)


def test_a_stored_retry_is_clamped_never_refused() -> None:
    assert load_retry("not json") == RetryPolicy()
    policy = load_retry('{"max_attempts": 5000000, "initial_delay": "2d", "max_delay": "1s"}')
    assert policy.max_attempts == 1_000_000
    assert policy.initial_delay_ms == policy.max_delay_ms == 86_400_000


class _Recorder(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, dict[str, str]]]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        _Recorder.seen.append((self.path, dict(self.headers.items())))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_a_stored_http_target_todays_api_refuses_is_still_delivered() -> None:
    """Before stored_spec, the deliverer judged stored targets by the API's parser: a job
    created when 40 headers or a 2,100-char URL were allowed raised on every attempt."""
    _Recorder.seen = []
    with serving(_Recorder) as base:
        url = f"{base}/{'p' * 2100}"
        stored = {"type": "http", "url": url, "headers": TOO_MANY_HEADERS}
        with pytest.raises(InvalidRequest):
            parse_target(stored)
        call = DueCall(1, 0, TENANT.tenant_id, "job-1", 1_000, 1, json.dumps(stored), "{}", "{}")

        async def deliver() -> Verdict:
            http = HttpDeliverer(TargetGuard(["127.0.0.0/8"]), PayloadKeys(), concurrency=1)
            http.start()
            try:
                outcome = await http.deliver(call, TENANT, 1_000, RetryPolicy())
            finally:
                await http.stop()
            return outcome.verdict

        assert asyncio.run(deliver()) is Verdict.SUCCEEDED
    [(path, headers)] = _Recorder.seen
    assert path == "/" + "p" * 2100
    assert headers["X-H39"] == "39" and headers["Idempotency-Key"]
