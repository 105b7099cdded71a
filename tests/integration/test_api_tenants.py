"""Tenants, auth and the node routes over real HTTP: credentials, rotation, 401/403, audit."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest

from schedd.store.commands import LOG_LEVEL
from tests.integration.api_helpers import (
    MISSING_JOB_ID,
    all_audit,
    assert_error,
    create_job,
    job_body,
    new_tenant,
    raw_http,
    raw_json,
    state,
)
from tests.servers import ADMIN_TOKEN, NodeProcess, http, now_ms

TENANT_FIELDS = {
    "tenant_id",
    "name",
    "max_active_jobs",
    "dispatch_rate",
    "allowed_hosts",
    "alert_url",
    "retention",
    "active_jobs",
    "on_failure",
    "paused",
    "paused_reason",
    "created_at",
    "updated_at",
}


def test_creating_a_tenant_shows_its_credentials_once(node: NodeProcess) -> None:
    status, created, _ = http("POST", f"{node.url}/v1/tenants", {"name": "acme-once"})
    assert status == 201, created
    assert set(created) == {"tenant_id", "token", "signing_secret"}
    assert created["signing_secret"].startswith("whsec_")
    assert len(base64.b64decode(created["signing_secret"].removeprefix("whsec_"))) == 32
    status, tenant, _ = http("GET", f"{node.url}/v1/tenants/{created['tenant_id']}")
    assert status == 200, tenant
    assert set(tenant) == TENANT_FIELDS
    assert tenant["name"] == "acme-once"
    assert tenant["created_at"].endswith("Z") and tenant["updated_at"].endswith("Z")
    listed = _all_tenants(node)
    assert tenant["tenant_id"] in {t["tenant_id"] for t in listed}
    shown = repr(tenant) + repr(listed)
    assert created["token"] not in shown and created["signing_secret"] not in shown


def test_new_tenant_gets_the_default_settings(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    _, body, _ = http("GET", f"{node.url}/v1/tenants/{tenant.tenant_id}")
    assert body["max_active_jobs"] == 1_000_000
    assert body["dispatch_rate"] == 5_000
    assert body["allowed_hosts"] == []
    assert body["active_jobs"] == 0


def test_tenant_token_is_stored_only_as_its_hash(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    create_job(node, tenant.token)  # the token was used, and still must not be written down
    token_hash = hashlib.sha256(tenant.token.encode()).hexdigest().encode()
    files = [p for p in node.data_dir.rglob("*") if p.is_file()] + [node.log_path]
    contents = [p.read_bytes() for p in files]
    assert not any(tenant.token.encode() in data for data in contents)
    assert any(token_hash in data for data in contents)  # we looked where the state is


def test_duplicate_tenant_name_is_a_conflict_and_changes_nothing(node: NodeProcess) -> None:
    status, _, _ = http("POST", f"{node.url}/v1/tenants", {"name": "twice"})
    assert status == 201
    before = _all_tenants(node)
    status, body, _ = http("POST", f"{node.url}/v1/tenants", {"name": "twice"})
    assert_error(status, body, 409, "tenant_exists")
    assert _all_tenants(node) == before


def test_unknown_tenant_is_404_on_get_patch_and_rotate(node: NodeProcess) -> None:
    url = f"{node.url}/v1/tenants/tnt_0000000000000000"
    for method, path, body in (
        ("GET", "", None),
        ("PATCH", "", {"dispatch_rate": 5}),
        ("POST", "/rotate", None),
    ):
        status, answer, _ = http(method, url + path, body)
        assert_error(status, answer, 404, "tenant_not_found")


def test_patch_tenant_changes_only_the_given_fields(node: NodeProcess) -> None:
    tenant = new_tenant(node, dispatch_rate=10)
    url = f"{node.url}/v1/tenants/{tenant.tenant_id}"
    _, before, _ = http("GET", url)
    changes = {"max_active_jobs": 7, "allowed_hosts": ["*.acme.example"]}
    status, after, _ = http("PATCH", url, changes)
    assert status == 200, after
    assert after == {**before, **changes, "updated_at": after["updated_at"]}
    assert http("GET", url)[1] == after


def test_patch_tenant_to_a_taken_name_is_409(node: NodeProcess) -> None:
    first, second = new_tenant(node), new_tenant(node)
    _, taken, _ = http("GET", f"{node.url}/v1/tenants/{first.tenant_id}")
    url = f"{node.url}/v1/tenants/{second.tenant_id}"
    _, before, _ = http("GET", url)
    status, body, _ = http("PATCH", url, {"name": taken["name"]})
    assert_error(status, body, 409, "tenant_exists")
    assert http("GET", url)[1] == before


def test_rotate_replaces_the_token_and_the_signing_secret(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    job = create_job(node, tenant.token)
    status, rotated, _ = http("POST", f"{node.url}/v1/tenants/{tenant.tenant_id}/rotate")
    assert status == 200, rotated
    assert set(rotated) == {"tenant_id", "token", "signing_secret"}
    assert rotated["tenant_id"] == tenant.tenant_id
    assert rotated["token"] != tenant.token
    assert rotated["signing_secret"] != tenant.signing_secret
    assert rotated["signing_secret"].startswith("whsec_")
    status, body, _ = http("GET", f"{node.url}/v1/jobs", token=tenant.token)
    assert_error(status, body, 401, "unauthorized")
    status, body, _ = http("GET", f"{node.url}/v1/jobs/{job['job_id']}", token=rotated["token"])
    assert status == 200 and body == job


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/tenants", {"name": "not-allowed"}),
        ("GET", "/v1/tenants", None),
        ("GET", "/v1/tenants/{tenant}", None),
        ("PATCH", "/v1/tenants/{tenant}", {"max_active_jobs": 10**9}),
        ("POST", "/v1/tenants/{tenant}/rotate", None),
        ("GET", "/v1/cluster", None),
        ("GET", "/v1/admin/state", None),
    ],
)
def test_tenant_token_on_an_admin_route_is_403_and_changes_nothing(
    node: NodeProcess, method: str, path: str, body: Any
) -> None:
    tenant = new_tenant(node)
    before = state(node)
    url = node.url + path.format(tenant=tenant.tenant_id)
    status, answer, _ = http(method, url, body, token=tenant.token)
    assert_error(status, answer, 403, "forbidden")
    assert answer["error"]["message"] == (
        "this route needs the admin token (a dev cluster keeps it in "
        "var/dev/admin.token; schedctl: --token or SCHEDCTL_TOKEN)"
    )
    assert state(node) == before


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer   ",
        "Basic YWRtaW46YWRtaW4=",
        "Bearer sk_not_a_token_anyone_issued",
        f"Bearer {ADMIN_TOKEN}x",
        f"Token {ADMIN_TOKEN}",
    ],
    ids=[
        "none",
        "empty",
        "bearer-only",
        "bearer-blank",
        "basic",
        "unknown",
        "admin-plus",
        "scheme",
    ],
)
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/jobs"),
        ("GET", "/v1/jobs"),
        ("GET", f"/v1/jobs/{MISSING_JOB_ID}"),
        ("POST", "/v1/tenants"),
        ("GET", "/v1/audit"),
        ("POST", "/v1/schedules:preview"),
        ("GET", "/v1/no-such-route"),
    ],
)
def test_missing_or_unknown_token_is_401_and_changes_nothing(
    node: NodeProcess, authorization: str | None, method: str, path: str
) -> None:
    before = state(node)
    headers = {} if authorization is None else {"Authorization": authorization}
    body = b'{"name": "x"}' if method == "POST" else b""
    status, _, raw = raw_http(node, method, path, body, token=None, headers=headers)
    assert_error(status, raw_json(raw), 401, "unauthorized")
    assert state(node) == before


def test_token_bytes_that_are_not_utf8_are_401(node: NodeProcess) -> None:
    status, _, raw = raw_http(node, "GET", "/v1/jobs", token=b"\xff\xfe\x80")
    assert_error(status, raw_json(raw), 401, "unauthorized")


def test_admin_without_x_tenant_on_a_tenant_route_is_403(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    job = create_job(node, tenant.token)
    before = state(node)
    for method, path, body in (
        ("POST", "/v1/jobs", job_body()),
        ("POST", "/v1/jobs:batch", {"jobs": [job_body()]}),
        ("GET", "/v1/jobs", None),
        ("GET", f"/v1/jobs/{job['job_id']}", None),
        ("PATCH", f"/v1/jobs/{job['job_id']}", {"name": "admin"}),
        ("DELETE", f"/v1/jobs/{job['job_id']}", None),
        ("POST", f"/v1/jobs/{job['job_id']}/pause", None),
        ("POST", f"/v1/jobs/{job['job_id']}/resume", None),
        ("POST", f"/v1/jobs/{job['job_id']}/trigger", None),
        ("GET", f"/v1/jobs/{job['job_id']}/runs", None),
    ):
        status, answer, _ = http(method, f"{node.url}{path}", body)
        assert_error(status, answer, 403, "forbidden")
        assert answer["error"]["message"] == (
            "the admin token acts for a tenant here: "
            "send 'X-Tenant: <tenant_id>' (schedctl: --tenant)"
        )
    assert state(node) == before


def test_admin_with_x_tenant_acts_for_that_tenant(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    as_tenant = {"X-Tenant": tenant.tenant_id}
    status, job, _ = http("POST", f"{node.url}/v1/jobs", job_body(), headers=as_tenant)
    assert status == 201, job
    assert job["tenant_id"] == tenant.tenant_id
    assert http("GET", f"{node.url}/v1/jobs/{job['job_id']}", token=tenant.token)[1] == job
    _, listed, _ = http("GET", f"{node.url}/v1/jobs", headers=as_tenant)
    assert [j["job_id"] for j in listed["jobs"]] == [job["job_id"]]
    status, _, _ = http("DELETE", f"{node.url}/v1/jobs/{job['job_id']}", headers=as_tenant)
    assert status == 204
    _, audit, _ = http("GET", f"{node.url}/v1/audit", token=tenant.token)
    actors = [(r["action"], r["actor"]) for r in audit["audit"] if r["job_id"] == job["job_id"]]
    assert actors == [("create_jobs", "admin"), ("cancel_job", "admin")]


@pytest.mark.parametrize(
    ("x_tenant", "expected_status", "code"),
    [
        ("tnt_0000000000000000", 404, "tenant_not_found"),
        ("", 400, "invalid_request"),
        ("t" * 65, 400, "invalid_request"),
        (b"\xff\xfe", 400, "invalid_request"),
    ],
    ids=["unknown", "empty", "too-long", "not-utf8"],
)
def test_admin_with_a_bad_x_tenant_is_refused(
    node: NodeProcess, x_tenant: str | bytes, expected_status: int, code: str
) -> None:
    before = state(node)
    raw = b'{"schedule": {"delay": "1h"}, "target": {"type": "queue", "name": "w"}}'
    status, _, answer = raw_http(node, "POST", "/v1/jobs", raw, headers={"X-Tenant": x_tenant})
    assert_error(status, raw_json(answer), expected_status, code)
    assert state(node) == before


def test_x_tenant_from_a_tenant_token_does_not_switch_tenant(node: NodeProcess) -> None:
    owner, other = new_tenant(node), new_tenant(node)
    job = create_job(node, owner.token)
    url = f"{node.url}/v1/jobs/{job['job_id']}"
    status, body, _ = http("GET", url, token=other.token, headers={"X-Tenant": owner.tenant_id})
    assert_error(status, body, 404, "job_not_found")


def test_tenant_list_pages_with_a_cursor(node: NodeProcess) -> None:
    for _ in range(3):
        new_tenant(node)
    pages, cursor = [], None
    while True:
        query = "limit=2" + (f"&cursor={cursor}" if cursor else "")
        status, page, _ = http("GET", f"{node.url}/v1/tenants?{query}")
        assert status == 200, page
        assert set(page) == {"tenants", "next_cursor"} and len(page["tenants"]) <= 2
        pages.append(page["tenants"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    ids = [t["tenant_id"] for page in pages for t in page]
    assert len(ids) == len(set(ids)) >= 3
    assert ids == sorted(ids)
    assert ids == [t["tenant_id"] for t in _all_tenants(node)]


def test_tenant_changes_are_audited_for_the_admin(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    http("PATCH", f"{node.url}/v1/tenants/{tenant.tenant_id}", {"dispatch_rate": 9})
    http("POST", f"{node.url}/v1/tenants/{tenant.tenant_id}/rotate")
    records = [r for r in all_audit(node, ADMIN_TOKEN) if r["tenant_id"] == tenant.tenant_id]
    assert [(r["action"], r["actor"]) for r in records] == [
        ("create_tenant", "admin"),
        ("update_tenant", "admin"),
        ("rotate_tenant", "admin"),
    ]
    assert records[1]["detail"] == {"fields": ["dispatch_rate"]}
    for record in records:
        assert set(record) == {"seq", "at", "tenant_id", "actor", "action", "job_id", "detail"}
        assert record["at"].endswith("Z")
    assert all(tenant.signing_secret not in repr(r) for r in records)


def test_admin_sees_every_tenant_in_the_audit_and_a_tenant_only_its_own(node: NodeProcess) -> None:
    first, second = new_tenant(node), new_tenant(node)
    job_1 = create_job(node, first.token)
    job_2 = create_job(node, second.token)
    everything = all_audit(node, ADMIN_TOKEN)
    job_ids = {r["job_id"] for r in everything}
    assert {job_1["job_id"], job_2["job_id"]} <= job_ids
    assert {first.tenant_id, second.tenant_id} <= {r["tenant_id"] for r in everything}
    own = all_audit(node, first.token)
    assert own and {r["tenant_id"] for r in own} == {first.tenant_id}
    assert job_2["job_id"] not in {r["job_id"] for r in own}
    as_second = all_audit(node, ADMIN_TOKEN, headers={"X-Tenant": second.tenant_id})
    assert {r["tenant_id"] for r in as_second} == {second.tenant_id}
    assert job_2["job_id"] in {r["job_id"] for r in as_second}


def test_audit_pages_without_gaps(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    for _ in range(5):
        create_job(node, tenant.token)
    seqs, cursor = [], None
    while True:
        query = "limit=2" + (f"&cursor={cursor}" if cursor else "")
        status, page, _ = http("GET", f"{node.url}/v1/audit?{query}", token=tenant.token)
        assert status == 200, page
        seqs += [r["seq"] for r in page["audit"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seqs) == 6 and seqs == sorted(set(seqs))


def test_healthz_and_readyz_answer_without_a_token(node: NodeProcess) -> None:
    before = now_ms()
    status, body, _ = http("GET", f"{node.url}/healthz", token=None)
    clock = body.pop("now_ms")  # peers compare clocks with it (dispatch/clock.py)
    expected = {"status": "ok", "node_id": node.node_id, "disk_low": False, "log_level": LOG_LEVEL}
    assert (status, body) == (200, expected)
    assert before <= clock <= now_ms()
    status, body, _ = http("GET", f"{node.url}/readyz", token=None)
    assert (status, body) == (200, {"status": "ready", "node_id": node.node_id})
    status, body, _ = http("GET", f"{node.url}/healthz", token="garbage")
    assert status == 200


def test_metrics_are_prometheus_text(node: NodeProcess) -> None:
    status, _, raw = raw_http(node, "GET", "/metrics", token=None)
    assert_error(status, raw_json(raw), 401, "unauthorized")
    status, headers, raw = raw_http(node, "GET", "/metrics")  # the admin token
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain")
    assert b"# TYPE" in raw


def test_cluster_and_admin_state_describe_this_node(node: NodeProcess) -> None:
    status, cluster, _ = http("GET", f"{node.url}/v1/cluster")
    assert status == 200, cluster
    assert cluster["leader"] == node.node_id
    [me] = cluster["nodes"]
    assert set(me) == {"node_id", "api", "raft", "role", "healthy", "partitions", "applied_index"}
    assert (me["node_id"], me["role"], me["healthy"]) == (node.node_id, "leader", True)
    status, admin, _ = http("GET", f"{node.url}/v1/admin/state")
    assert status == 200, admin
    assert set(admin) == {"node_id", "role", "leader", "term", "applied_index", "digest"}
    assert (admin["node_id"], admin["role"], admin["leader"]) == (node.node_id, "leader", "n1")
    assert admin["applied_index"] >= 1 and len(admin["digest"]) == 64


def test_unknown_route_and_wrong_method_answer_the_error_body(node: NodeProcess) -> None:
    status, body, _ = http("GET", f"{node.url}/v1/no-such-thing")
    assert_error(status, body, 404, "not_found")
    status, body, _ = http("PUT", f"{node.url}/v1/jobs", {})
    assert_error(status, body, 405, "method_not_allowed")
    status, body, _ = http("DELETE", f"{node.url}/v1/tenants")
    assert_error(status, body, 405, "method_not_allowed")


def _all_tenants(node: NodeProcess) -> list[dict[str, Any]]:
    status, page, _ = http("GET", f"{node.url}/v1/tenants?limit=1000")
    assert status == 200 and page["next_cursor"] is None, page
    tenants: list[dict[str, Any]] = page["tenants"]
    return tenants


def test_alert_url_is_checked_and_shown(node: NodeProcess) -> None:
    status, created, _ = http("POST", f"{node.url}/v1/tenants", {"name": "acme-alerts"})
    assert status == 201
    url = f"{node.url}/v1/tenants/{created['tenant_id']}"
    for bad, expected in (
        (42, 400),
        ("", 400),
        ("ftp://alerts.example.com/x", 422),
        ("http://169.254.169.254/latest", 422),
        ("http://user:pw@alerts.example.com/", 422),
    ):
        status, answer, _ = http("PATCH", url, {"alert_url": bad})
        assert status == expected, (bad, answer)
        assert "alert_url" in answer["error"]["message"], answer
    status, tenant, _ = http("PATCH", url, {"alert_url": "https://alerts.example.com/schedd"})
    assert status == 200 and tenant["alert_url"] == "https://alerts.example.com/schedd"
    status, tenant, _ = http("PATCH", url, {"alert_url": None})
    assert status == 200 and tenant["alert_url"] is None
