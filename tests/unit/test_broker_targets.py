"""Broker targets (jobspec.py) and connection URLs (guard/connections.py): what is accepted,
what is refused with an error naming the field, and which addresses a connection pins."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from schedd.errors import InvalidRequest
from schedd.guard.connections import (
    UnresolvedHost,
    parse_connection_url,
    pin_addresses,
)
from schedd.guard.ssrf import BlockedTarget
from schedd.guard.targets import TargetGuard
from schedd.jobspec import parse_job, parse_target, target_to_json
from schedd.targets.nats import NatsTarget
from schedd.targets.rabbitmq import RabbitMqTarget
from schedd.targets.redis_stream import RedisStreamTarget
from tests.conftest import NOW_MS

SECRET = "pa55word-xyz"


@pytest.mark.parametrize(
    ("body", "parsed"),
    [
        (
            {"type": "redis_stream", "connection": "r", "stream": "digests", "maxlen": 100000},
            RedisStreamTarget(connection="r", stream="digests", maxlen=100000),
        ),
        (
            {"type": "redis_stream", "connection": "my.conn-1_x", "stream": "s:{tenant}/é"},
            RedisStreamTarget(connection="my.conn-1_x", stream="s:{tenant}/é"),
        ),
        (
            {"type": "rabbitmq", "connection": "r", "exchange": "", "routing_key": "digests"},
            RabbitMqTarget(connection="r", exchange="", routing_key="digests"),
        ),
        (
            {"type": "rabbitmq", "connection": "r", "exchange": "amq.topic", "routing_key": ""},
            RabbitMqTarget(connection="r", exchange="amq.topic", routing_key=""),
        ),
        (
            {"type": "nats", "connection": "n", "subject": "digests.weekly"},
            NatsTarget(connection="n", subject="digests.weekly"),
        ),
        (
            {"type": "nats", "connection": "n", "subject": "ünï.$SYS-like_x"},
            NatsTarget(connection="n", subject="ünï.$SYS-like_x"),
        ),
    ],
)
def test_broker_targets_parse_and_write_back_the_same_json(
    body: dict[str, Any], parsed: object
) -> None:
    assert parse_target(body) == parsed
    assert target_to_json(parse_target(body)) == body


def test_a_maxlen_given_as_a_whole_float_is_an_integer() -> None:
    body = {"type": "redis_stream", "connection": "r", "stream": "s", "maxlen": 5.0}
    assert target_to_json(parse_target(body))["maxlen"] == 5


REDIS = {"type": "redis_stream", "connection": "r", "stream": "s"}
RABBIT = {"type": "rabbitmq", "connection": "r", "exchange": "x", "routing_key": "k"}
NATS = {"type": "nats", "connection": "n", "subject": "a.b"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (REDIS | {"connection": ""}, "target.connection"),
        (REDIS | {"connection": "has space"}, "target.connection"),
        (REDIS | {"connection": "x" * 65}, "target.connection"),
        (REDIS | {"connection": 7}, "target.connection"),
        ({"type": "redis_stream", "stream": "s"}, "target.connection"),
        (REDIS | {"stream": ""}, "target.stream"),
        (REDIS | {"stream": "a b"}, "target.stream"),
        (REDIS | {"stream": "a\tb"}, "target.stream"),
        (REDIS | {"stream": "a\x00"}, "target.stream"),
        (REDIS | {"stream": "a\u2003b"}, "target.stream"),  # a Unicode space
        (REDIS | {"stream": "é" * 129}, "target.stream"),  # 258 bytes
        (REDIS | {"stream": ["s"]}, "target.stream"),
        (REDIS | {"maxlen": 0}, "target.maxlen"),
        (REDIS | {"maxlen": 1_000_000_001}, "target.maxlen"),
        (REDIS | {"maxlen": True}, "target.maxlen"),
        (REDIS | {"maxlen": "100"}, "target.maxlen"),
        (REDIS | {"maxlen": 1.5}, "target.maxlen"),
        (REDIS | {"extra": 1}, "target.extra"),
        (RABBIT | {"exchange": "a b"}, "target.exchange"),
        (RABBIT | {"exchange": "x" * 256}, "target.exchange"),
        (RABBIT | {"exchange": "ex/change"}, "target.exchange"),
        (RABBIT | {"exchange": None}, "target.exchange"),
        (RABBIT | {"routing_key": "k" * 256}, "target.routing_key"),
        (RABBIT | {"routing_key": "k\n"}, "target.routing_key"),
        ({"type": "rabbitmq", "connection": "r", "exchange": "x"}, "target.routing_key"),
        (RABBIT | {"exchange": "", "routing_key": ""}, "target.routing_key"),
        (RABBIT | {"connection": "a/b"}, "target.connection"),
        (NATS | {"subject": ""}, "target.subject"),
        (NATS | {"subject": "a..b"}, "target.subject"),
        (NATS | {"subject": ".a"}, "target.subject"),
        (NATS | {"subject": "a."}, "target.subject"),
        (NATS | {"subject": "a.*"}, "target.subject"),
        (NATS | {"subject": "a.>"}, "target.subject"),
        (NATS | {"subject": "a.b*"}, "target.subject"),
        (NATS | {"subject": "a b"}, "target.subject"),
        (NATS | {"subject": "a.\x7f"}, "target.subject"),
        (NATS | {"subject": "a" * 256}, "target.subject"),
        (NATS | {"subject": 3}, "target.subject"),
        (NATS | {"stream": "s"}, "target.stream"),  # a field of another kind
        ({"type": "kafka", "connection": "k"}, "target.type"),
        ({"type": ["nats"]}, "target.type"),
        # A pattern ending in $ matches the whole value: a final newline is refused.
        (REDIS | {"connection": "r\n"}, "target.connection"),
        (REDIS | {"stream": "s\n"}, "target.stream"),
        (RABBIT | {"exchange": "x\n"}, "target.exchange"),
        (NATS | {"subject": "a.b\n"}, "target.subject"),
        ({"type": "queue", "name": "q\n"}, "target.name"),
    ],
)
def test_bad_broker_targets_are_refused_naming_the_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_target(body)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")


def test_a_broker_target_keeps_its_sentences_and_clips_a_long_value() -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_target(REDIS | {"connection": "c" * 200})
    assert str(caught.value) == (
        "target.connection: must name a connection: [A-Za-z0-9_.-]{1,64}, got '" + "c" * 76 + "..."
    )
    with pytest.raises(InvalidRequest) as caught:
        parse_target(REDIS | {"stream": "é" * 129})  # 129 characters, 258 bytes: msgspec lets it by
    assert str(caught.value).startswith("target.stream: must be 1-256 bytes without spaces")


def test_a_job_body_takes_a_broker_target() -> None:
    spec = parse_job({"schedule": {"delay": "1m"}, "target": NATS}, now_ms=NOW_MS)
    assert spec.target == NatsTarget(connection="n", subject="a.b")


@pytest.mark.parametrize(
    ("url", "kind", "display"),
    [
        (f"redis://user:{SECRET}@Redis.Acme.Example:6380/0", "redis", "redis.acme.example:6380"),
        (f"rediss://:{SECRET}@redis.acme.example", "redis", "redis.acme.example:6379"),
        (f"amqp://u:{SECRET}@mq.acme.example/vhost", "rabbitmq", "mq.acme.example:5672"),
        ("amqps://mq.acme.example", "rabbitmq", "mq.acme.example:5671"),
        ("nats://203.0.113.9", "nats", "203.0.113.9:4222"),
        ("tls://[2001:db8::1]:4443", "nats", "[2001:db8::1]:4443"),
    ],
)
def test_connection_urls_give_their_kind_and_a_host_without_credentials(
    url: str, kind: str, display: str
) -> None:
    parsed = parse_connection_url(url)
    assert (parsed.kind, parsed.display) == (kind, display)


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        (f"http://u:{SECRET}@h.example", "must start with one of redis://, rediss://"),
        (f"https://u:{SECRET}@h.example", "got 'https'"),
        (f"mqtt://u:{SECRET}@h.example", "got 'mqtt'"),
        (f"redis://u:{SECRET}@", "has no host"),
        (f"redis://u:{SECRET}@h.example:0", "port must be 1024-65535"),
        (f"redis://u:{SECRET}@mx.example:25", "port must be 1024-65535 (a broker's port)"),
        (f"amqp://u:{SECRET}@h.example:1023", "port must be 1024-65535"),
        (f"redis://u:{SECRET}@h.example:65536", "a port 1-65535"),
        (f"redis://u:{SECRET}@h.example:port", "a port 1-65535"),
        (f"redis://u:{SECRET} x@h.example", "without spaces"),
        ("redis://h.example/" + "x" * 2048, "1-2048 characters"),
        ("", "1-2048 characters"),
        (f"redis://u:{SECRET}@[::1", "not a valid URL"),
        (f"redis://u:{SECRET}@bad_host!.example", "invalid host name"),
    ],
)
def test_bad_urls_are_refused_without_repeating_them(url: str, complaint: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_connection_url(url)
    assert caught.value.field == "url"
    assert complaint in str(caught.value)
    assert SECRET not in str(caught.value)


def test_a_url_that_is_not_a_string_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="url: must be a URL string"):
        parse_connection_url({"host": "x"})


class Resolver:
    def __init__(self, answers: dict[str, Sequence[str]]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append((host, port))
        if host not in self.answers:
            raise OSError(-2, "Name or service not known")
        return list(self.answers[host])


def pin(
    url: str,
    answers: dict[str, Sequence[str]],
    *,
    allow: Sequence[str] = (),
    hosts: Sequence[str] = (),
) -> tuple[str, ...]:
    guard = TargetGuard(allow, Resolver(answers))
    return asyncio.run(pin_addresses(guard, parse_connection_url(url), hosts))


def test_every_address_of_the_host_is_checked_and_pinned() -> None:
    answers = {"redis.acme.example": ["93.184.216.34", "2606:4700::1111", "93.184.216.34"]}
    url = f"redis://u:{SECRET}@redis.acme.example"
    assert pin(url, answers) == ("93.184.216.34", "2606:4700::1111")


@pytest.mark.parametrize(
    ("answers", "reason"),
    [
        (["127.0.0.1"], "loopback"),
        (["93.184.216.34", "10.1.2.3"], "private"),  # one bad answer among good ones
        (["169.254.169.254"], "link-local"),
        (["::ffff:192.168.1.1"], "private"),
    ],
)
def test_a_private_address_is_refused_without_allow_cidrs(answers: list[str], reason: str) -> None:
    with pytest.raises(BlockedTarget) as caught:
        pin(f"redis://u:{SECRET}@cache.internal", {"cache.internal": answers})
    assert caught.value.field == "url" and caught.value.reason == reason
    assert SECRET not in str(caught.value)


def test_allow_cidrs_open_a_private_range() -> None:
    url = f"amqp://u:{SECRET}@mq.internal"
    answers = {"mq.internal": ["10.1.2.3"]}
    assert pin(url, answers, allow=["10.0.0.0/8"]) == ("10.1.2.3",)
    with pytest.raises(BlockedTarget, match="loopback"):
        pin("nats://127.0.0.1", {}, allow=["10.0.0.0/8"])
    assert pin("nats://127.0.0.1", {}, allow=["127.0.0.0/8"]) == ("127.0.0.1",)


def test_a_literal_address_is_checked_without_dns() -> None:
    resolver = Resolver({})
    guard = TargetGuard((), resolver)
    found = asyncio.run(pin_addresses(guard, parse_connection_url("tls://[2606:4700::1]")))
    assert found == ("2606:4700::1",) and resolver.calls == []
    with pytest.raises(BlockedTarget, match="loopback"):
        pin("redis://[::1]:6379", {})


def test_the_tenants_allowed_hosts_limit_connections() -> None:
    answers = {"redis.acme.example": ["93.184.216.34"], "redis.evil.example": ["93.184.216.35"]}
    hosts = ["*.acme.example"]
    assert pin("redis://redis.acme.example", answers, hosts=hosts) == ("93.184.216.34",)
    with pytest.raises(BlockedTarget, match="allowed_hosts"):
        pin("redis://redis.evil.example", answers, hosts=hosts)


def test_a_host_that_does_not_resolve_cannot_be_pinned() -> None:
    with pytest.raises(UnresolvedHost, match=r"'nowhere\.example' did not resolve"):
        pin(f"redis://u:{SECRET}@nowhere.example", {})
    with pytest.raises(UnresolvedHost, match="resolved to no addresses"):
        pin("redis://empty.example", {"empty.example": []})


def test_a_slow_lookup_is_bounded_by_the_check_time() -> None:
    async def never(host: str, port: int) -> list[str]:
        await asyncio.sleep(60)
        return []

    guard = TargetGuard((), never, check_timeout_s=0.05)
    with pytest.raises(UnresolvedHost, match=r"no answer within 0\.05s"):
        asyncio.run(pin_addresses(guard, parse_connection_url("redis://slow.example")))


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"window": "2d"}, "window"),
        ({"schedule": {"every": "x"}}, "schedule.every"),
        ({}, "target.stream"),
        ({"retry": {"max_attempts": 0}}, "target.stream"),  # the target, then the retry object
    ],
)
def test_a_job_body_names_its_fields_in_the_order_of_its_checks(
    extra: dict[str, Any], field: str
) -> None:
    """msgspec converts the target with the job, first in the body's key order; the error
    named is still the first of the job's fields, its schedule, its target, then retry's."""
    body = {"target": REDIS | {"stream": "a b"}, "schedule": {"delay": "1m"}} | extra
    with pytest.raises(InvalidRequest) as caught:
        parse_job(body, now_ms=NOW_MS)
    assert caught.value.field == field
