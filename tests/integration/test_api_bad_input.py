"""Bad input over real HTTP: each case is a 400 (413 for size), never a 500, and stores nothing.

Every case compares the replicated state before and after, then makes a canary write.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from http.client import HTTPConnection
from typing import Any

import pytest

from tests.integration.api_helpers import (
    QUEUE_TARGET,
    Tenant,
    assert_error,
    create_job,
    job_body,
    new_tenant,
    raw_http,
    raw_json,
    state,
)
from tests.servers import ADMIN_TOKEN, NodeProcess

JOB_BODY_LIMIT = 64 * 1024 + 64 * 1024  # payload limit + room for the rest of a job body
SMALL_BODY_LIMIT = 64 * 1024  # tenants and preview
BATCH_BODY_LIMIT = 32 * 1024 * 1024
BASE = b'"schedule": {"delay": "1h"}, "target": {"type": "queue", "name": "work"}'


@dataclass(frozen=True)
class Bad:
    """One bad request: what to send and the status it must get."""

    body: bytes = b""
    method: str = "POST"
    path: str = "/v1/jobs"  # "{job}" and "{tenant}" are filled in
    status: int = 400
    admin: bool = False  # send the admin token instead of the tenant's
    headers: dict[str, str | bytes] = field(default_factory=dict)
    content_length: int | None = None  # claim more than `body`: the rest is never sent
    code: str | None = None


@pytest.fixture(scope="module")
def tenant(node: NodeProcess) -> Tenant:
    return new_tenant(node)


@pytest.fixture(scope="module")
def job(node: NodeProcess, tenant: Tenant) -> dict[str, Any]:
    """A one-time job for the PATCH and runs cases (they must leave it as it is)."""
    return create_job(node, tenant.token)


@pytest.fixture
def unchanged(node: NodeProcess, tenant: Tenant) -> Iterator[None]:
    """The replicated state is the same after the test's request; then a canary write works."""
    before = state(node)
    yield
    assert state(node) == before, "a rejected request changed the state"
    create_job(node, tenant.token)


def send(node: NodeProcess, case: Bad, tenant: Tenant, job: dict[str, Any]) -> tuple[int, Any]:
    path = case.path.format(job=job["job_id"], tenant=tenant.tenant_id)
    status, _, raw = raw_http(
        node,
        case.method,
        path,
        case.body,
        token=ADMIN_TOKEN if case.admin else tenant.token,
        headers=case.headers,
        content_length=case.content_length,
    )
    return status, raw_json(raw)


def with_payload(fragment: bytes) -> bytes:
    """A job body whose payload is the raw JSON text `fragment`."""
    return b"{" + BASE + b', "payload": ' + fragment + b"}"


def job_json(**fields: Any) -> bytes:
    return json.dumps(job_body(**fields)).encode()


def _in_years(years: int) -> str:
    return (datetime.now(UTC) + timedelta(days=366 * years)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _nested(depth: int, open_: str = "[", close: str = "]") -> bytes:
    return (open_ * depth + close * depth).encode()


def _nested_objects(depth: int) -> bytes:
    return ('{"a":' * depth + "1" + "}" * depth).encode()


# ---------------------------------------------------------------- JSON the contract refuses

JSON_CASES: dict[str, bytes] = {
    "nan": with_payload(b"NaN"),
    "infinity": with_payload(b"Infinity"),
    "minus-infinity": with_payload(b"-Infinity"),
    "nan-in-schedule": b'{"schedule": {"delay": NaN}, "target": {"type": "queue", "name": "w"}}',
    "float-overflow": with_payload(b"1e400"),
    "negative-float-overflow": with_payload(b"[-1.5e999]"),
    "long-mantissa-overflow": with_payload(b"1" + b"0" * 400 + b".0"),
    "duplicate-top-level-key": b'{"schedule": {"delay": "1h"}, "schedule": {"delay": "2h"}, '
    b'"target": {"type": "queue", "name": "w"}}',
    "duplicate-key-in-payload": with_payload(b'{"a": 1, "a": 2}'),
    "duplicate-key-in-target": b'{"schedule": {"delay": "1h"}, '
    b'"target": {"type": "queue", "name": "a", "name": "b"}}',
    "duplicate-key-spelled-with-an-escape": with_payload(b'{"a": 1, "\\u0061": 2}'),
    "duplicate-key-deep": with_payload(b'[[{"x": [{"k": 1, "k": 1}]}]]'),
    "lone-high-surrogate-in-name": b"{" + BASE + b', "name": "\\ud800"}',
    "lone-low-surrogate-in-payload": with_payload(b'"\\udc00"'),
    "reversed-surrogate-pair": with_payload(b'"\\udc00\\ud800"'),
    "lone-surrogate-uppercase": with_payload(b'"x\\uD83D"'),
    "lone-surrogate-in-a-key": with_payload(b'{"\\ud800": 1}'),
    "surrogate-halves-around-a-backslash": with_payload(b'"\\ud800\\\\\\udc00"'),
    "escaped-backslash-then-lone-surrogate": with_payload(b'"\\\\\\ud800"'),
    "nul-escape-in-name": b"{" + BASE + b', "name": "a\\u0000b"}',
    "nul-escape-in-a-key": with_payload(b'{"\\u0000": 1}'),
    "raw-nul-byte": with_payload(b'"a\x00b"'),
    "raw-control-byte": with_payload(b'"a\x01b"'),
    "int-2-to-the-63": with_payload(b"9223372036854775808"),
    "int-below-minus-2-to-the-63": with_payload(b"-9223372036854775809"),
    "int-2-to-the-64": with_payload(b'{"n": 18446744073709551616}'),
    "int-400-digits": with_payload(b"[" + b"7" * 400 + b"]"),
    "int-5000-digits": with_payload(b"1" * 5000),
    "int-huge-in-retry": b"{" + BASE + b', "retry": {"max_attempts": 99999999999999999999}}',
    "depth-33": with_payload(_nested(32)),
    "depth-33-objects": with_payload(_nested_objects(32)),
    "depth-50000": with_payload(_nested(50_000)),
    "depth-100000-unclosed": with_payload(b"[" * 100_000),
    "depth-mixed": with_payload(b'[{"a": ' * 20 + b"1" + b"}]" * 20),
    "not-utf8-byte": with_payload(b'"\xff"'),
    "latin-1-text": b"{" + BASE + b', "name": "caf\xe9"}',
    "utf-16-body": json.dumps(job_body()).encode("utf-16"),
    "utf-16-le-body": json.dumps(job_body()).encode("utf-16-le"),
    "utf-8-byte-order-mark": b"\xef\xbb\xbf" + json.dumps(job_body()).encode(),
    "overlong-encoding": with_payload(b'"\xc0\xaf"'),
    "encoded-surrogate": with_payload(b'"\xed\xa0\x80"'),
    "truncated-sequence": with_payload(b'"\xe2\x82"'),
    "beyond-unicode": with_payload(b'"\xf5\x80\x80\x80"'),
    "empty-body": b"",
    "blank-body": b" \r\n\t ",
    "null-body": b"null",
    "array-body": b"[" + json.dumps(job_body()).encode() + b"]",
    "string-body": b'"job"',
    "number-body": b"42",
    "two-objects": json.dumps(job_body()).encode() * 2,
    "trailing-comma": b"{" + BASE + b",}",
    "single-quotes": b"{'schedule': {'delay': '1h'}}",
    "trailing-garbage": json.dumps(job_body()).encode() + b" x",
    "comment": b"{/* c */" + BASE + b"}",
    "missing-colon": b'{"schedule" {"delay": "1h"}}',
    "truncated": b'{"schedule": {"delay": "1h"}, "target": {',
    "hex-number": with_payload(b"0x10"),
    "leading-zero": with_payload(b"01"),
    "bare-fraction": with_payload(b".5"),
    "plus-sign": with_payload(b"+1"),
    "python-true": with_payload(b"True"),
    "python-none": with_payload(b"None"),
}


# ---------------------------------------------------------------- job fields

WRONG_FIELDS: dict[str, dict[str, Any]] = {
    "name": {
        "int": 5,
        "bool": True,
        "list": [],
        "object": {},
        "201-chars": "n" * 201,
        "newline": "line\nbreak",
        "nul": "a\x00b",
    },
    "schedule": {
        "string": "daily",
        "list": [],
        "int": 5,
        "null": None,
        "empty": {},
        "two-forms": {"delay": "1h", "cron": "* * * * *"},
        "timezone-with-run-at": {"run_at": "2030-01-01T00:00:00Z", "timezone": "UTC"},
        "unknown-key": {"delay": "1h", "foo": 1},
        "start-at-with-delay": {"delay": "1h", "start_at": "2030-01-01T00:00:00Z"},
    },
}
SCHEDULES: dict[str, Any] = {
    "run-at-int": {"run_at": 5},
    "run-at-null": {"run_at": None},
    "run-at-bool": {"run_at": True},
    "run-at-words": {"run_at": "tomorrow"},
    "run-at-naive": {"run_at": "2026-10-12T08:00:00"},
    "run-at-naive-space": {"run_at": "2026-10-12 08:00"},
    "run-at-date-only": {"run_at": "2026-10-12"},
    "run-at-not-a-date": {"run_at": "2026-02-30T08:00:00Z"},
    "run-at-hour-24": {"run_at": "2026-10-12T24:00:00Z"},
    "run-at-leap-second": {"run_at": "2026-12-31T23:59:60Z"},
    "run-at-offset-25h": {"run_at": "2026-10-12T08:00:00+25:00"},
    "run-at-unix-seconds": {"run_at": "1790000000"},
    "run-at-11-years-ahead": {"run_at": _in_years(11)},
    "run-at-year-9999": {"run_at": "9999-12-31T23:59:59Z"},
    "run-at-arabic-digit-in-nanoseconds": {"run_at": "2030-10-12T08:00:00.123456\u0667Z"},
    "run-at-arabic-digit-year": {"run_at": "\u0662\u0660\u0663\u0660-10-12T08:00:00Z"},
    "delay-words": {"delay": "abc"},
    "delay-negative": {"delay": -5},
    "delay-negative-text": {"delay": "-1m"},
    "delay-bool": {"delay": True},
    "delay-list": {"delay": []},
    "delay-null": {"delay": None},
    "delay-exponent": {"delay": "1e3"},
    "delay-space": {"delay": "10 m"},
    "delay-empty": {"delay": ""},
    "delay-11-years": {"delay": "4020d"},
    "delay-11-years-seconds": {"delay": 11 * 366 * 86400},
    "delay-huge-number": {"delay": 1e300},
    "delay-400-digits": {"delay": "9" * 400},
    "delay-400-digits-with-unit": {"delay": "9" * 400 + "s"},
    "delay-superscript-digit": {"delay": "\u00b2"},
    "delay-arabic-digit": {"delay": "\u0663s"},
    "cron-int": {"cron": 5},
    "cron-null": {"cron": None},
    "cron-empty": {"cron": ""},
    "cron-4-fields": {"cron": "* * * *"},
    "cron-6-fields": {"cron": "0 * * * * *"},
    "cron-minute-60": {"cron": "60 * * * *"},
    "cron-reboot": {"cron": "@reboot"},
    "cron-never-fires": {"cron": "0 0 31 2 *"},
    "cron-hash-extension": {"cron": "0 8 * * MON#2"},
    "cron-step-zero": {"cron": "*/0 * * * *"},
    "cron-superscript-step": {"cron": "*/\u00b2 * * * *"},
    "cron-arabic-digit-step": {"cron": "*/\u0663 * * * *"},
    "cron-words": {"cron": "every day"},
    "cron-bool": {"cron": True},
    "cron-end-at-in-the-past": {"cron": "* * * * *", "end_at": "2020-01-01T00:00:00Z"},
    "cron-end-before-start": {
        "cron": "* * * * *",
        "start_at": "2031-01-01T00:00:00Z",
        "end_at": "2030-01-01T00:00:00Z",
    },
    "cron-naive-start": {"cron": "* * * * *", "start_at": "2030-01-01T00:00:00"},
    "cron-start-int": {"cron": "* * * * *", "start_at": 5},
    "every-zero": {"every": "0s"},
    "every-under-a-second": {"every": "500ms"},
    "every-words": {"every": "abc"},
    "every-negative": {"every": -1},
    "every-bool": {"every": True},
    "every-null": {"every": None},
    "every-over-100-years": {"every": "40000d"},
    "every-naive-end": {"every": "1h", "end_at": "2030-01-01T00:00:00"},
}
ZONES: dict[str, Any] = {
    "path-traversal": "../../etc/passwd",
    "localtime": "localtime",
    "300-chars": "Z" * 300,
    "absolute-path": "/etc/localtime",
    "posixrules": "posixrules",
    "factory": "Factory",
    "empty": "",
    "unknown": "Europe/Nowhere",
    "dot-dot-inside": "Europe/../UTC",
    "trailing-space": "UTC ",
    "backslash": "Europe\\Berlin",
    "int": 5,
    "null": None,
    "list": ["UTC"],
}
TARGETS: dict[str, Any] = {
    "string": "work",
    "list": [],
    "null": None,
    "int": 5,
    "no-type": {},
    "unknown-type": {"type": "smtp"},
    "type-int": {"type": 5},
    "queue-without-name": {"type": "queue"},
    "queue-with-url": {"type": "queue", "name": "work", "url": "https://h.example/"},
    "http-without-url": {"type": "http"},
    "http-unknown-field": {"type": "http", "url": "https://h.example/", "body": "x"},
}
QUEUE_NAMES: dict[str, Any] = {
    "empty": "",
    "space": "a b",
    "129-chars": "q" * 129,
    "slash": "q/1",
    "colon": "q:1",
    "non-ascii": "ü",
    "newline": "q\n",
    "int": 5,
    "null": None,
}
URLS: dict[str, Any] = {
    "ftp": "ftp://h.example/",
    "file": "file:///etc/passwd",
    "javascript": "javascript:alert(1)",
    "no-scheme": "//h.example/x",
    "bare-host": "h.example",
    "no-host": "http://",
    "no-host-path": "http:///x",
    "port-only": "https://:443/",
    "credentials": "http://user:pw@h.example/",
    "user-only": "http://user@h.example/",
    "password-only": "http://:pw@h.example/",
    "port-too-big": "http://h.example:99999/",
    "port-zero": "http://h.example:0/",
    "port-words": "http://h.example:http/",
    "unclosed-ipv6": "http://[::1/",
    "space-in-host": "http://exa mple.com/",
    "newline": "http://h.example/\n",
    "2049-chars": "http://h.example/" + "a" * 2032,
    "empty": "",
    "int": 5,
    "null": None,
}
HTTP_FIELDS: dict[str, dict[str, Any]] = {
    "method": {"trace": "TRACE", "lowercase": "post", "int": 5, "null": None},
    "headers": {
        "list": [],
        "string": "X-A: b",
        "space-in-name": {"bad name": "v"},
        "host": {"Host": "x"},
        "content-length": {"Content-Length": "1"},
        "idempotency-key": {"Idempotency-Key": "k"},
        "webhook": {"webhook-id": "x"},
        "value-int": {"X-A": 5},
        "value-crlf": {"X-A": "a\r\nB: c"},
        "33-headers": {f"X-{i}": "v" for i in range(33)},
    },
    "timeout": {"zero": "0s", "under-a-second": "500ms", "over-5m": "6m", "words": "abc"},
}
OTHER_FIELDS: dict[str, dict[str, Any]] = {
    "window": {
        "words": "abc",
        "negative": -1,
        "bool": True,
        "list": [],
        "over-a-day": "2d",
    },
    "retry": {
        "string": "x",
        "list": [],
        "int": 5,
        "attempts-0": {"max_attempts": 0},
        "attempts-101": {"max_attempts": 101},
        "attempts-string": {"max_attempts": "3"},
        "attempts-bool": {"max_attempts": True},
        "attempts-float": {"max_attempts": 1.5},
        "backoff-unknown": {"backoff": "random"},
        "backoff-int": {"backoff": 5},
        "initial-delay-words": {"initial_delay": "abc"},
        "initial-delay-2d": {"initial_delay": "2d"},
        "max-under-initial": {"initial_delay": "1m", "max_delay": "1s"},
        "unknown-key": {"jitter": True},
    },
    "misfire_policy": {
        "unknown": "never",
        "int": 5,
        "bool": True,
        "uppercase": "RUN_ONCE",
        "list": [],
    },
    "overlap_policy": {"unknown": "x", "int": 5, "skip-on-one-time": "skip"},
}
UNKNOWN_FIELDS = [
    "foo",
    "job_id",
    "tenant_id",
    "status",
    "next_run_at",
    "version",
    "idempotency_key",
    "Name",
]


def _cases(prefix: str, values: dict[str, Any], make: Callable[[Any], bytes]) -> list[Any]:
    return [pytest.param(Bad(make(value)), id=f"{prefix}-{name}") for name, value in values.items()]


def _with_field(name: str, value: Any) -> bytes:
    return job_json(**{name: value})


def _with_http_field(name: str, value: Any) -> bytes:
    return job_json(target={"type": "http", "url": "https://h.example/", name: value})


def _job_cases() -> list[Any]:
    cases = _cases("json", JSON_CASES, lambda raw: raw)
    for name, values in {**WRONG_FIELDS, **OTHER_FIELDS}.items():
        cases += _cases(name, values, partial(_with_field, name))
    cases += _cases("schedule", SCHEDULES, lambda schedule: job_json(schedule=schedule))
    cases += _cases(
        "timezone", ZONES, lambda zone: job_json(schedule={"cron": "0 8 * * *", "timezone": zone})
    )
    cases += _cases("target", TARGETS, lambda target: job_json(target=target))
    cases += _cases(
        "queue-name", QUEUE_NAMES, lambda queue: job_json(target={"type": "queue", "name": queue})
    )
    cases += _cases("url", URLS, lambda url: job_json(target={"type": "http", "url": url}))
    for name, values in HTTP_FIELDS.items():
        cases += _cases(f"http-{name}", values, partial(_with_http_field, name))
    cases += _cases(
        "unknown-field", {n: n for n in UNKNOWN_FIELDS}, lambda name: job_json(**{name: "x"})
    )
    missing = {
        "schedule": {"target": QUEUE_TARGET},
        "target": {"schedule": {"delay": "1h"}},
        "queue-name-recurring": {"schedule": {"every": "1h"}, "target": {"type": "queue"}},
    }
    return cases + _cases("missing", missing, lambda body: json.dumps(body).encode())


# Inputs that once reached the schedule engine's limits (datetime's range, unhashable
# values, float overflow): each is a clean 400.
SCHEDULE_ENGINE_LIMITS = [
    pytest.param(
        Bad(job_json(schedule={"delay": 1e308})),
        id="schedule-delay-1e308",
    ),
    pytest.param(
        Bad(job_json(schedule={"every": 1e308})),
        id="schedule-every-1e308",
    ),
    pytest.param(Bad(job_json(window=1e308)), id="window-1e308"),
    pytest.param(
        Bad(job_json(schedule={"cron": ["0 8 * * *"]})),
        id="schedule-cron-list",
    ),
    pytest.param(
        Bad(
            json.dumps({"schedule": {"cron": {"minute": 0}}}).encode(), path="/v1/schedules:preview"
        ),
        id="preview-cron-object",
    ),
    pytest.param(
        Bad(job_json(schedule={"run_at": "0001-01-01T00:00:00+01:00"})),
        id="run-at-before-year-1-in-utc",
    ),
    pytest.param(
        Bad(job_json(schedule={"every": "1d", "start_at": "9999-12-31T23:59:59-01:00"})),
        id="start-at-after-year-9999-in-utc",
    ),
    pytest.param(
        Bad(
            json.dumps(
                {"schedule": {"cron": "* * * * *"}, "after": "9999-12-31T23:58:00Z"}
            ).encode(),
            path="/v1/schedules:preview",
        ),
        id="preview-cron-runs-past-year-9999",
    ),
    pytest.param(
        Bad(
            json.dumps(
                {"schedule": {"every": "1d", "start_at": "9999-12-30T00:00:00Z"}, "count": 5}
            ).encode(),
            path="/v1/schedules:preview",
        ),
        id="preview-every-runs-past-year-9999",
    ),
    pytest.param(
        Bad(
            json.dumps(
                {"schedule": {"cron": "* * * * *"}, "after": "0001-01-01T00:00:00+01:00"}
            ).encode(),
            path="/v1/schedules:preview",
        ),
        id="preview-after-before-year-1-in-utc",
    ),
]


@pytest.mark.parametrize("case", [*_job_cases(), *SCHEDULE_ENGINE_LIMITS])
@pytest.mark.usefixtures("unchanged")
def test_bad_job_body_is_400_and_stores_nothing(
    node: NodeProcess, tenant: Tenant, job: dict[str, Any], case: Bad
) -> None:
    status, body = send(node, case, tenant, job)
    assert_error(status, body, case.status, case.code)


# ---------------------------------------------------------------- other routes' bodies


def _patch(**changes: Any) -> Bad:
    return Bad(json.dumps(changes).encode(), method="PATCH", path="/v1/jobs/{job}")


def _tenant_body(body: Any, *, path: str = "/v1/tenants", method: str = "POST") -> Bad:
    return Bad(json.dumps(body).encode(), method=method, path=path, admin=True)


def _preview(body: Any) -> Bad:
    return Bad(json.dumps(body).encode(), path="/v1/schedules:preview")


ROUTE_CASES = {
    "patch-unknown-field": _patch(status="paused"),
    "patch-job-id": _patch(job_id="job_x"),
    "patch-next-run-at": _patch(next_run_at="2030-01-01T00:00:00Z"),
    "patch-bad-cron": _patch(schedule={"cron": "61 * * * *"}),
    "patch-bad-zone": _patch(schedule={"cron": "0 * * * *", "timezone": "../../etc/passwd"}),
    "patch-naive-run-at": _patch(schedule={"run_at": "2030-01-01T00:00:00"}),
    "patch-ftp-url": _patch(target={"type": "http", "url": "ftp://h.example/"}),
    "patch-bad-queue": _patch(target={"type": "queue", "name": "a/b"}),
    "patch-overlap-on-one-time": _patch(overlap_policy="skip"),
    "patch-name-int": _patch(name=5),
    "patch-retry-string": _patch(retry="x"),
    "patch-array": Bad(b"[]", method="PATCH", path="/v1/jobs/{job}"),
    "patch-nan": Bad(b'{"payload": NaN}', method="PATCH", path="/v1/jobs/{job}"),
    "patch-duplicate-key": Bad(
        b'{"name": "a", "name": "b"}', method="PATCH", path="/v1/jobs/{job}"
    ),
    "patch-not-utf8": Bad(b'{"name": "\xff"}', method="PATCH", path="/v1/jobs/{job}"),
    "patch-payload-over-limit": Bad(
        json.dumps({"payload": "a" * 65535}).encode(),
        method="PATCH",
        path="/v1/jobs/{job}",
        status=413,
        code="payload_too_large",
    ),
    "batch-duplicate-key": Bad(b'{"jobs": [], "jobs": []}', path="/v1/jobs:batch"),
    "batch-nan": Bad(b'{"jobs": [NaN]}', path="/v1/jobs:batch"),
    "batch-deep": Bad(b'{"jobs": ' + _nested(40) + b"}", path="/v1/jobs:batch"),
    "batch-not-utf8": Bad(b'{"jobs": ["\xfe"]}', path="/v1/jobs:batch"),
    "batch-array": Bad(b"[]", path="/v1/jobs:batch"),
    "tenant-no-name": _tenant_body({}),
    "tenant-name-int": _tenant_body({"name": 5}),
    "tenant-name-empty": _tenant_body({"name": ""}),
    "tenant-name-blank": _tenant_body({"name": "   "}),
    "tenant-name-201-chars": _tenant_body({"name": "n" * 201}),
    "tenant-name-null": _tenant_body({"name": None}),
    "tenant-quota-negative": _tenant_body({"name": "q1", "max_active_jobs": -1}),
    "tenant-quota-string": _tenant_body({"name": "q2", "max_active_jobs": "5"}),
    "tenant-quota-bool": _tenant_body({"name": "q3", "max_active_jobs": True}),
    "tenant-quota-float": _tenant_body({"name": "q4", "max_active_jobs": 1.5}),
    "tenant-quota-huge": _tenant_body({"name": "q5", "max_active_jobs": 10**13}),
    "tenant-quota-over-64-bits": Bad(
        b'{"name": "q6", "max_active_jobs": 18446744073709551617}', path="/v1/tenants", admin=True
    ),
    "tenant-rate-negative": _tenant_body({"name": "r1", "dispatch_rate": -1}),
    "tenant-hosts-string": _tenant_body({"name": "h1", "allowed_hosts": "*.example"}),
    "tenant-hosts-int-item": _tenant_body({"name": "h2", "allowed_hosts": [5]}),
    "tenant-hosts-empty-item": _tenant_body({"name": "h3", "allowed_hosts": [""]}),
    "tenant-hosts-101": _tenant_body({"name": "h4", "allowed_hosts": ["h.example"] * 101}),
    "tenant-unknown-field": _tenant_body({"name": "u1", "token": "sk_mine"}),
    "tenant-array": _tenant_body([{"name": "a1"}]),
    "tenant-duplicate-key": Bad(b'{"name": "d1", "name": "d2"}', path="/v1/tenants", admin=True),
    "tenant-name-lone-surrogate": Bad(b'{"name": "\\udfff"}', path="/v1/tenants", admin=True),
    "tenant-patch-unknown-field": _tenant_body(
        {"tenant_id": "tnt_x"}, path="/v1/tenants/{tenant}", method="PATCH"
    ),
    "tenant-patch-name-empty": _tenant_body(
        {"name": ""}, path="/v1/tenants/{tenant}", method="PATCH"
    ),
    "tenant-patch-quota-negative": _tenant_body(
        {"max_active_jobs": -1}, path="/v1/tenants/{tenant}", method="PATCH"
    ),
    "preview-count-0": _preview({"schedule": {"every": "1h"}, "count": 0}),
    "preview-count-1001": _preview({"schedule": {"every": "1h"}, "count": 1001}),
    "preview-count-bool": _preview({"schedule": {"every": "1h"}, "count": True}),
    "preview-count-string": _preview({"schedule": {"every": "1h"}, "count": "5"}),
    "preview-count-float": _preview({"schedule": {"every": "1h"}, "count": 1.5}),
    "preview-naive-after": _preview({"schedule": {"every": "1h"}, "after": "2030-01-01T00:00"}),
    "preview-after-int": _preview({"schedule": {"every": "1h"}, "after": 5}),
    "preview-no-schedule": _preview({"count": 3}),
    "preview-schedule-string": _preview({"schedule": "0 8 * * *"}),
    "preview-unknown-field": _preview({"schedule": {"every": "1h"}, "limit": 3}),
    "preview-bad-cron": _preview({"schedule": {"cron": "0 25 * * *"}}),
    "preview-bad-zone": _preview({"schedule": {"cron": "0 8 * * *", "timezone": "localtime"}}),
    "preview-nan": Bad(b'{"schedule": {"every": NaN}}', path="/v1/schedules:preview"),
}


@pytest.mark.parametrize("case", [pytest.param(c, id=i) for i, c in ROUTE_CASES.items()])
@pytest.mark.usefixtures("unchanged")
def test_bad_body_on_other_routes_is_refused_and_stores_nothing(
    node: NodeProcess, tenant: Tenant, job: dict[str, Any], case: Bad
) -> None:
    status, body = send(node, case, tenant, job)
    assert_error(status, body, case.status, case.code)


# ---------------------------------------------------------------- query strings and headers


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


QUERY_CASES = {
    "limit-0": "/v1/jobs?limit=0",
    "limit-1001": "/v1/jobs?limit=1001",
    "limit-words": "/v1/jobs?limit=abc",
    "limit-negative": "/v1/jobs?limit=-1",
    "limit-fraction": "/v1/jobs?limit=1.5",
    "limit-exponent": "/v1/jobs?limit=1e2",
    "limit-empty": "/v1/jobs?limit=",
    "limit-padded": "/v1/jobs?limit=%205",
    "limit-arabic-digit": "/v1/jobs?limit=%D9%A3",
    "limit-25-digits": "/v1/jobs?limit=" + "9" * 25,
    "cursor-garbage": "/v1/jobs?cursor=garbage",
    "cursor-punctuation": "/v1/jobs?cursor=!!!",
    "cursor-nul": "/v1/jobs?cursor=%00",
    "cursor-not-utf8": "/v1/jobs?cursor=%FF%FE",
    "cursor-401-chars": "/v1/jobs?cursor=" + "A" * 401,
    "status-unknown": "/v1/jobs?status=bogus",
    "status-uppercase": "/v1/jobs?status=ACTIVE",
    "runs-limit-0": "/v1/jobs/{job}/runs?limit=0",
    "runs-limit-1001": "/v1/jobs/{job}/runs?limit=1001",
    "runs-cursor-garbage": "/v1/jobs/{job}/runs?cursor=garbage",
    "runs-cursor-not-a-number": "/v1/jobs/{job}/runs?cursor=" + _b64("abc"),
    "runs-cursor-too-long": "/v1/jobs/{job}/runs?cursor=" + _b64("1" * 25),
    "audit-cursor-garbage": "/v1/audit?cursor=garbage",
    "audit-cursor-not-a-number": "/v1/audit?cursor=" + _b64("job_x"),
    "audit-limit-words": "/v1/audit?limit=ten",
}
ADMIN_QUERY_CASES = {
    "tenants-limit-0": "/v1/tenants?limit=0",
    "tenants-limit-words": "/v1/tenants?limit=abc",
    "tenants-cursor-garbage": "/v1/tenants?cursor=garbage",
    "admin-audit-cursor-garbage": "/v1/audit?cursor=garbage",
}


@pytest.mark.parametrize(
    "case",
    [pytest.param(Bad(method="GET", path=p), id=i) for i, p in QUERY_CASES.items()]
    + [
        pytest.param(Bad(method="GET", path=p, admin=True), id=i)
        for i, p in ADMIN_QUERY_CASES.items()
    ],
)
@pytest.mark.usefixtures("unchanged")
def test_limits_and_cursors_out_of_range_are_400(
    node: NodeProcess, tenant: Tenant, job: dict[str, Any], case: Bad
) -> None:
    status, body = send(node, case, tenant, job)
    assert_error(status, body, 400, "invalid_request")


IDEMPOTENCY_KEYS = {
    "256-chars": "k" * 256,
    "1000-chars": "k" * 1000,
    "empty": "",
    "tab": "a\tb",
    "non-ascii": "clé".encode(),
    "not-utf8": b"\xff\xfe",
}


@pytest.mark.parametrize("key", [pytest.param(k, id=i) for i, k in IDEMPOTENCY_KEYS.items()])
@pytest.mark.usefixtures("unchanged")
def test_bad_idempotency_key_is_400(
    node: NodeProcess, tenant: Tenant, job: dict[str, Any], key: str | bytes
) -> None:
    case = Bad(job_json(), headers={"Idempotency-Key": key})
    status, body = send(node, case, tenant, job)
    assert_error(status, body, 400, "invalid_request")


@pytest.mark.parametrize("key", [b"a\x01b", b"\x7f", b"a\x00b"], ids=["soh", "del", "nul"])
@pytest.mark.usefixtures("unchanged")
def test_control_bytes_in_an_idempotency_key_are_400(
    node: NodeProcess, tenant: Tenant, key: bytes
) -> None:
    # aiohttp's HTTP parser refuses these header bytes before the app sees the request, so the
    # answer is its plain-text 400, not the contract's JSON body.
    status, _, _ = raw_http(
        node, "POST", "/v1/jobs", job_json(), token=tenant.token, headers={"Idempotency-Key": key}
    )
    assert status == 400


@pytest.mark.parametrize(
    "key", ["k" * 256, "a\u0001b", "", 42, ["k"]], ids=["256", "control", "empty", "int", "list"]
)
@pytest.mark.usefixtures("unchanged")
def test_bad_idempotency_key_in_a_batch_item_fails_only_that_item(
    node: NodeProcess, tenant: Tenant, job: dict[str, Any], key: Any
) -> None:
    item = {**job_body(), "idempotency_key": key}
    case = Bad(json.dumps({"jobs": [item]}).encode(), path="/v1/jobs:batch")
    status, body = send(node, case, tenant, job)
    assert status == 200, body
    [result] = body["results"]
    assert_error(400, result, 400, "invalid_request")


# ---------------------------------------------------------------- size limits (413)


SIZE_CASES = {
    "job-length-over-limit": Bad(b'{"payload": "', content_length=JOB_BODY_LIMIT + 1),
    "job-length-a-terabyte": Bad(b"{", content_length=10**12),
    "batch-length-over-limit": Bad(
        b'{"jobs": [', path="/v1/jobs:batch", content_length=BATCH_BODY_LIMIT + 1
    ),
    "patch-length-over-limit": Bad(
        b"{", method="PATCH", path="/v1/jobs/{job}", content_length=JOB_BODY_LIMIT + 1
    ),
    "tenant-length-over-limit": Bad(
        b"{", path="/v1/tenants", admin=True, content_length=SMALL_BODY_LIMIT + 1
    ),
    "preview-length-over-limit": Bad(
        b"{", path="/v1/schedules:preview", content_length=SMALL_BODY_LIMIT + 1
    ),
    "job-body-over-limit-sent-whole": Bad(job_json().ljust(JOB_BODY_LIMIT + 1)),
    "payload-one-byte-over": Bad(job_json(payload="a" * (64 * 1024 - 1))),
    "payload-deep-and-large": Bad(job_json(payload=[["x" * 1000] * 70])),
}


@pytest.mark.parametrize("case", [pytest.param(c, id=i) for i, c in SIZE_CASES.items()])
@pytest.mark.usefixtures("unchanged")
def test_body_over_the_limit_is_413(
    node: NodeProcess, tenant: Tenant, job: dict[str, Any], case: Bad
) -> None:
    status, body = send(node, case, tenant, job)
    assert_error(status, body, 413, "payload_too_large")


@pytest.mark.usefixtures("unchanged")
def test_chunked_body_over_the_limit_is_413_before_it_ends(
    node: NodeProcess, tenant: Tenant
) -> None:
    conn = HTTPConnection("127.0.0.1", node.api_port, timeout=10)
    try:
        conn.putrequest("POST", "/v1/jobs", skip_accept_encoding=True)
        conn.putheader("Authorization", f"Bearer {tenant.token}")
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        chunk = b" " * (JOB_BODY_LIMIT + 10)
        conn.send(b"%x\r\n" % len(chunk) + chunk + b"\r\n")  # and never the last chunk
        response = conn.getresponse()
        assert_error(response.status, raw_json(response.read()), 413, "payload_too_large")
    finally:
        conn.close()


def test_body_of_exactly_the_limit_is_accepted(node: NodeProcess, tenant: Tenant) -> None:
    body = job_json(name="padded").ljust(JOB_BODY_LIMIT)
    status, _, raw = raw_http(node, "POST", "/v1/jobs", body, token=tenant.token)
    assert status == 201, raw


# ---------------------------------------------------------------- what strict JSON still takes

ACCEPTED = {
    "surrogate-pair-escape": (b'"\\ud83d\\ude00"', "\U0001f600"),
    "escaped-backslash-before-u-text": (b'"\\\\ud800"', "\\ud800"),
    "nul-text-not-escape": (b'"\\\\u0000"', "\\u0000"),
    "brackets-inside-strings": (b'"' + b"[{" * 100 + b'"', "[{" * 100),
    "depth-32": (_nested(31), json.loads(_nested(31))),
    "int64-max": (b"9223372036854775807", 2**63 - 1),
    "int64-min": (b"-9223372036854775808", -(2**63)),
    "long-fraction": (b"0.12345678901234567890123", 0.12345678901234567890123),
    "large-float": (b"1.5e308", 1.5e308),
    "tiny-float": (b"1e-400", 0.0),
    "non-ascii-text": ('"café ✓ 日本"'.encode(), "café ✓ 日本"),
    "escaped-quote-and-brackets": (b'"\\"]]]]"', '"]]]]'),
}


@pytest.mark.parametrize(
    ("fragment", "expected"), [pytest.param(*v, id=i) for i, v in ACCEPTED.items()]
)
def test_strict_json_still_accepts_valid_edge_cases(
    node: NodeProcess, tenant: Tenant, fragment: bytes, expected: Any
) -> None:
    status, _, raw = raw_http(node, "POST", "/v1/jobs", with_payload(fragment), token=tenant.token)
    assert status == 201, raw
    assert raw_json(raw)["payload"] == expected


def test_instants_before_1970_or_from_3000_are_refused(node: NodeProcess) -> None:
    for instant in ("0999-01-01T00:00:00Z", "3000-01-01T00:00:00Z"):
        request = {"schedule": {"run_at": instant}, "after": "2026-01-01T00:00:00Z"}
        body = json.dumps(request).encode()
        status, _, raw = raw_http(node, "POST", "/v1/schedules:preview", body)
        assert status == 400, raw
        assert "between 1970 and 2999" in raw_json(raw)["error"]["message"]


@pytest.mark.parametrize("step", ["\u00b2", "\u0663", "\uff15"])
def test_a_non_ascii_cron_step_is_400_naming_the_field(
    node: NodeProcess, tenant: Tenant, step: str
) -> None:
    body = job_json(schedule={"cron": f"*/{step} * * * *"})
    status, _, raw = raw_http(node, "POST", "/v1/jobs", body, token=tenant.token)
    error = assert_error(status, raw_json(raw), 400, "invalid_schedule")
    assert "minute step" in error["message"], error
