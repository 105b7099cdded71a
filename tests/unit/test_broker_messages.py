"""What a broker attempt carries (schedd/delivery/brokers.py and each kind's module): the message
body, fields and headers exact, targets parsed from their JSON, credentials kept out of errors."""

from __future__ import annotations

import json

import pytest

from schedd.delivery.brokers import (
    broker_target,
    describe,
    message_body,
    message_fields,
    scrub,
)
from schedd.delivery.nats import message_headers
from schedd.delivery.rabbitmq import message_properties
from schedd.store.outbox import DueCall
from schedd.targets.nats import NatsTarget
from schedd.targets.rabbitmq import RabbitMqTarget
from schedd.targets.redis_stream import RedisStreamTarget

CALL = DueCall(
    seq=7,
    partition=3,
    tenant_id="t1",
    job_id="job_01",
    scheduled_at_ms=1_790_000_000_000,
    attempt=2,
    target="{}",
    payload='{"report":"daily"}',
    retry="{}",
)
KEY = "job_01:2026-09-21T14:13:20Z"


def test_body_holds_the_run_and_the_payload_as_its_json_value() -> None:
    body = message_body(CALL, '{"report": "日報", "n": [1, 2]}')
    assert body == (
        b'{"job_id":"job_01","scheduled_at":"2026-09-21T14:13:20Z","attempt":2,'
        b'"idempotency_key":"job_01:2026-09-21T14:13:20Z","payload":{"report": "'
        + "日報".encode()
        + b'", "n": [1, 2]}}'
    )
    assert json.loads(body)["payload"] == {"report": "日報", "n": [1, 2]}


@pytest.mark.parametrize("payload", ['"text"', "12.5", "null", "[]"])
def test_body_carries_any_json_payload(payload: str) -> None:
    assert json.loads(message_body(CALL, payload))["payload"] == json.loads(payload)


def test_stream_fields_are_the_run_as_text() -> None:
    assert message_fields(CALL, '{"report":"daily"}') == {
        "job_id": "job_01",
        "scheduled_at": "2026-09-21T14:13:20Z",
        "attempt": "2",
        "idempotency_key": KEY,
        "payload": '{"report":"daily"}',
    }


def test_amqp_properties_are_persistent_json_with_the_key_as_message_id() -> None:
    properties = message_properties(CALL)
    assert properties.content_type == "application/json"
    assert properties.delivery_mode == 2
    assert properties.message_id == KEY
    assert properties.headers == {
        "job_id": "job_01",
        "scheduled_at": "2026-09-21T14:13:20Z",
        "attempt": 2,
    }


def test_nats_headers_carry_the_key_as_msg_id() -> None:
    assert message_headers(CALL) == {
        "Nats-Msg-Id": KEY,
        "Schedd-Job-Id": "job_01",
        "Schedd-Scheduled-At": "2026-09-21T14:13:20Z",
        "Schedd-Attempt": "2",
    }


@pytest.mark.parametrize(
    ("target", "parsed"),
    [
        (
            {"type": "redis_stream", "connection": "r", "stream": "s", "maxlen": 100},
            RedisStreamTarget(connection="r", stream="s", maxlen=100),
        ),
        (
            {"type": "redis_stream", "connection": "r", "stream": "s"},
            RedisStreamTarget(connection="r", stream="s", maxlen=None),
        ),
        (  # stored, never refused: a maxlen that is no positive integer trims nothing
            {"type": "redis_stream", "connection": "r", "stream": "s", "maxlen": 0},
            RedisStreamTarget(connection="r", stream="s", maxlen=None),
        ),
        (
            {"type": "redis_stream", "connection": "r", "stream": "s", "maxlen": True},
            RedisStreamTarget(connection="r", stream="s", maxlen=None),
        ),
        (
            {"type": "rabbitmq", "connection": "q", "exchange": "", "routing_key": "jobs"},
            RabbitMqTarget(connection="q", exchange="", routing_key="jobs"),
        ),
        (
            {"type": "nats", "connection": "n", "subject": "a.b"},
            NatsTarget(connection="n", subject="a.b"),
        ),
    ],
)
def test_targets_are_parsed_from_their_stored_json(
    target: dict[str, object], parsed: object
) -> None:
    assert broker_target(json.dumps(target)) == parsed


@pytest.mark.parametrize(
    "target",
    [
        {"type": "http", "url": "https://x.example"},
        {"type": "redis_stream", "connection": "r"},
        {"type": "nats", "connection": 5, "subject": "a"},
        {"type": "nats", "connection": "n", "subject": ""},
        ["not", "an", "object"],
    ],
)
def test_unreadable_targets_are_refused(target: object) -> None:
    with pytest.raises(ValueError, match="target"):
        broker_target(json.dumps(target))


@pytest.mark.parametrize(
    ("url", "text", "scrubbed"),
    [
        (
            "amqp://alice:pa55word@mq.example:5672/",
            "cannot connect to amqp://alice:pa55word@mq.example:5672/: refused",
            "cannot connect to amqp://***@mq.example:5672/: refused",
        ),
        (
            "redis://default:p%40ss%2Fw@r.example/0",
            "AUTH default p@ss/w failed",
            "AUTH *** *** failed",
        ),
        (
            "nats://s3cr3t-token@n.example:4222",
            "authorization violation for token s3cr3t-token",
            "authorization violation for token ***",
        ),
        (
            "rediss://r.example:6380",
            "Error 111 connecting to 10.0.0.5:6380. Connection refused.",
            "Error 111 connecting to 10.0.0.5:6380. Connection refused.",
        ),
        (
            "amqp://someone:pw-123@h/",
            "any URL with a user part: tls://x:y@other.example:1",
            "any URL with a user part: tls://***@other.example:1",
        ),
    ],
)
def test_scrub_removes_the_credentials(url: str, text: str, scrubbed: str) -> None:
    assert scrub(text, url) == scrubbed


def test_describe_names_the_exception_without_credentials() -> None:
    url = "amqp://alice:pa55word@mq.example/"
    error = ConnectionRefusedError(111, f"refused by {url}")
    assert (
        describe(error, url)
        == "ConnectionRefusedError: [Errno 111] refused by amqp://***@mq.example/"
    )
    assert describe(TimeoutError(), url) == "TimeoutError"
