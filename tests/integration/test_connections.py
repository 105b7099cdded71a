"""Broker connections and broker targets through the HTTP API of a real node (payload keys on):
create, list, delete while used, jobs that name them; the URL's credentials nowhere after the
create, neither in answers, the audit trail, /metrics, the node's log nor its files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from schedd.sealing import new_key_line
from tests.integration.api_helpers import Tenant, all_audit, assert_error, job_body, new_tenant
from tests.servers import ADMIN_TOKEN, NodeProcess, http, make_nodes, metrics_text, running

SECRET = "hunter2-c0nn3ction-pw"
USER = "digest-sender"
URL = f"redis://{USER}:{SECRET}@127.0.0.1:6390/2"
STREAM = {"type": "redis_stream", "connection": "r", "stream": "digests", "maxlen": 1000}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    base: Path = tmp_path_factory.mktemp("connections")
    keys = base / "payload.keys"
    keys.write_text(new_key_line("k1") + "\n")
    extra = (
        f'[encryption]\npayload_keys_file = "{keys}"\n'
        '[delivery]\nallow_cidrs = ["127.0.0.0/8", "::1/128"]\n'
    )
    with running(make_nodes(base, 1, extra_sections=extra)) as nodes:
        yield nodes[0]


@pytest.fixture
def tenant(node: NodeProcess) -> Tenant:
    return new_tenant(node)


def call(
    node: NodeProcess, tenant: Tenant, method: str, path: str, body: Any = None
) -> tuple[int, Any]:
    status, answer, _ = http(method, f"{node.url}{path}", body, token=tenant.token)
    return status, answer


def connect(node: NodeProcess, tenant: Tenant, name: str = "r", url: str = URL) -> dict[str, Any]:
    status, created = call(node, tenant, "POST", "/v1/connections", {"name": name, "url": url})
    assert status == 201, created
    answer: dict[str, Any] = created
    return answer


def test_a_connection_is_shown_without_its_credentials(node: NodeProcess, tenant: Tenant) -> None:
    created = connect(node, tenant)
    assert set(created) == {"name", "kind", "host", "created_at"}
    assert (created["name"], created["kind"], created["host"]) == ("r", "redis", "127.0.0.1:6390")
    connect(node, tenant, "mq", f"amqps://{USER}:{SECRET}@localhost/vhost")
    status, listed = call(node, tenant, "GET", "/v1/connections")
    assert status == 200
    assert [(c["name"], c["kind"], c["host"]) for c in listed["connections"]] == [
        ("mq", "rabbitmq", "localhost:5671"),
        ("r", "redis", "127.0.0.1:6390"),
    ]
    assert call(node, tenant, "GET", "/v1/connections/r") == (200, created)
    other = new_tenant(node)
    assert_error(*call(node, other, "GET", "/v1/connections/r"), 404, "connection_not_found")
    assert call(node, other, "GET", "/v1/connections") == (200, {"connections": []})
    answers = [created, listed]
    assert not any(SECRET in str(a) or USER in str(a) for a in answers)


def test_credentials_appear_nowhere_after_the_create(node: NodeProcess, tenant: Tenant) -> None:
    connect(node, tenant, "secretive")
    job = job_body(target=STREAM | {"connection": "secretive"})
    status, created = call(node, tenant, "POST", "/v1/jobs", job)
    assert status == 201, created
    status, duplicate = call(
        node, tenant, "POST", "/v1/connections", {"name": "secretive", "url": URL}
    )
    assert_error(status, duplicate, 409, "connection_exists")
    status, refused = call(node, tenant, "DELETE", "/v1/connections/secretive")
    assert_error(status, refused, 409, "connection_in_use")
    status, probe = call(node, tenant, "POST", "/v1/connections/secretive/test")
    assert status == 200 and probe["ok"] is False, probe  # nothing listens on port 6390
    seen = [
        created,
        duplicate,
        refused,
        probe,
        all_audit(node, tenant.token),
        all_audit(node, ADMIN_TOKEN),
        metrics_text(node.url),
        node.log_path.read_text(errors="replace"),
    ]
    for text in seen:
        assert SECRET not in str(text)
    actions = [r["action"] for r in all_audit(node, tenant.token)]
    assert "create_connection" in actions
    for path in (p for p in node.data_dir.rglob("*") if p.is_file()):  # journal, SQLite, WAL
        assert SECRET.encode() not in path.read_bytes(), path


@pytest.mark.parametrize(
    ("body", "status", "code", "field"),
    [
        (
            {"name": "x", "url": f"http://{USER}:{SECRET}@example.com"},
            400,
            "invalid_request",
            "url",
        ),
        ({"name": "x", "url": f"redis://{USER}:{SECRET}@"}, 400, "invalid_request", "url"),
        ({"name": "x", "url": f"redis://{USER}:{SECRET}@h:99999"}, 400, "invalid_request", "url"),
        ({"name": "x"}, 400, "invalid_request", "url"),
        ({"name": "a b", "url": URL}, 400, "invalid_request", "name"),
        ({"name": "a\n", "url": URL}, 400, "invalid_request", "name"),  # `$` before a newline
        ({"url": URL}, 400, "invalid_request", "name"),
        ({"name": "x", "url": URL, "tls": True}, 400, "invalid_request", "tls"),
        ({"name": "x", "url": f"redis://{USER}:{SECRET}@10.0.0.5"}, 422, "blocked_target", "url"),
        (
            {"name": "x", "url": f"nats://{USER}:{SECRET}@169.254.169.254"},
            422,
            "blocked_target",
            "url",
        ),
    ],
)
def test_bad_connections_are_refused_naming_the_field(
    node: NodeProcess, tenant: Tenant, body: dict[str, Any], status: int, code: str, field: str
) -> None:
    got, answer = call(node, tenant, "POST", "/v1/connections", body)
    error = assert_error(got, answer, status, code)
    assert error["message"].startswith(f"{field}: ")
    assert SECRET not in error["message"]
    assert call(node, tenant, "GET", "/v1/connections") == (200, {"connections": []})


def test_the_tenants_allowed_hosts_limit_its_connections(node: NodeProcess) -> None:
    tenant = new_tenant(node, allowed_hosts=["localhost"])
    connect(node, tenant, "ok", "nats://localhost:4222")
    got, answer = call(node, tenant, "POST", "/v1/connections", {"name": "no", "url": URL})
    assert "allowed_hosts" in assert_error(got, answer, 422, "blocked_target")["message"]


def test_jobs_name_an_existing_connection_of_their_kind(node: NodeProcess, tenant: Tenant) -> None:
    missing = call(node, tenant, "POST", "/v1/jobs", job_body(target=STREAM))
    message = assert_error(*missing, 400, "invalid_request")["message"]
    assert message.startswith("target.connection: no connection named 'r'")
    connect(node, tenant, "r", f"nats://{USER}:{SECRET}@127.0.0.1")
    wrong = call(node, tenant, "POST", "/v1/jobs", job_body(target=STREAM))
    assert "is a nats connection" in assert_error(*wrong, 400, "invalid_request")["message"]
    nats = {"type": "nats", "connection": "r", "subject": "digests.weekly"}
    status, job = call(node, tenant, "POST", "/v1/jobs", job_body(target=nats))
    assert status == 201 and job["target"] == nats
    bad = call(node, tenant, "POST", "/v1/jobs", job_body(target=nats | {"subject": "a.*"}))
    assert assert_error(*bad, 400, "invalid_request")["message"].startswith("target.subject: ")


def test_a_batch_refuses_only_the_items_without_their_connection(
    node: NodeProcess, tenant: Tenant
) -> None:
    connect(node, tenant)
    rabbit = {"type": "rabbitmq", "connection": "r", "exchange": "", "routing_key": "q"}
    jobs = [job_body(target=STREAM), job_body(target=rabbit), job_body()]
    status, answer = call(node, tenant, "POST", "/v1/jobs:batch", {"jobs": jobs})
    assert status == 200
    first, second, third = answer["results"]
    assert "job_id" in first and "job_id" in third
    assert second["error"]["code"] == "invalid_request"
    assert second["error"]["message"].startswith("jobs[1].target.connection: connection 'r'")


def test_a_connection_is_deleted_once_no_live_job_uses_it(
    node: NodeProcess, tenant: Tenant
) -> None:
    connect(node, tenant)
    status, job = call(node, tenant, "POST", "/v1/jobs", job_body(target=STREAM))
    assert status == 201
    status, paused = call(node, tenant, "POST", f"/v1/jobs/{job['job_id']}/pause")
    assert status == 200 and paused["status"] == "paused"
    busy = assert_error(
        *call(node, tenant, "DELETE", "/v1/connections/r"), 409, "connection_in_use"
    )
    assert job["job_id"] in busy["message"]
    assert call(node, tenant, "DELETE", f"/v1/jobs/{job['job_id']}")[0] == 204
    assert call(node, tenant, "DELETE", "/v1/connections/r") == (204, None)
    assert_error(*call(node, tenant, "GET", "/v1/connections/r"), 404, "connection_not_found")
    assert_error(*call(node, tenant, "DELETE", "/v1/connections/r"), 404, "connection_not_found")
    again = call(node, tenant, "POST", "/v1/jobs", job_body(target=STREAM))
    assert_error(*again, 400, "invalid_request")


def test_a_job_changed_to_a_broker_target_needs_its_connection(
    node: NodeProcess, tenant: Tenant
) -> None:
    status, job = call(node, tenant, "POST", "/v1/jobs", job_body())
    assert status == 201
    path = f"/v1/jobs/{job['job_id']}"
    refused = call(node, tenant, "PATCH", path, {"target": STREAM})
    assert assert_error(*refused, 400, "invalid_request")["message"].startswith(
        "target.connection: "
    )
    connect(node, tenant)
    status, changed = call(node, tenant, "PATCH", path, {"target": STREAM})
    assert status == 200 and changed["target"] == STREAM
    assert_error(*call(node, tenant, "DELETE", "/v1/connections/r"), 409, "connection_in_use")
    queue = {"type": "queue", "name": "w"}
    assert call(node, tenant, "PATCH", path, {"target": queue})[0] == 200
    assert call(node, tenant, "DELETE", "/v1/connections/r") == (204, None)


def test_the_admin_acts_for_a_tenant_with_x_tenant(node: NodeProcess, tenant: Tenant) -> None:
    body = {"name": "by-admin", "url": URL}
    status, answer, _ = http("POST", f"{node.url}/v1/connections", body, token=ADMIN_TOKEN)
    assert_error(status, answer, 403, "forbidden")
    headers = {"X-Tenant": tenant.tenant_id}
    status, answer, _ = http(
        "POST", f"{node.url}/v1/connections", body, token=ADMIN_TOKEN, headers=headers
    )
    assert status == 201, answer
    assert [c["name"] for c in call(node, tenant, "GET", "/v1/connections")[1]["connections"]] == [
        "by-admin"
    ]
