"""GET /v1/jobs/{id}/versions over real HTTP (issue 31): every change kind newest first with the
spec after it, paging, bad input, tenants apart, and payloads sealed at rest but shown plain."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from schedd.sealing import new_key_line
from tests.integration.api_helpers import (
    MISSING_JOB_ID,
    Tenant,
    assert_error,
    create_job,
    get_job,
    job_body,
    new_tenant,
)
from tests.servers import NodeProcess, http, make_nodes, running

MARKER = "versions-marker-51c2"
SPEC_FIELDS = [
    "name",
    "schedule",
    "window",
    "target",
    "payload",
    "retry",
    "misfire_policy",
    "overlap_policy",
    "max_runs",
    "on_failure",
    "key",
    "labels",
]


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    """One node that seals payloads at rest (the versions' specs are stored sealed too)."""
    base: Path = tmp_path_factory.mktemp("versions")
    keys = base / "payload.keys"
    keys.write_text(new_key_line("k1") + "\n")
    extra = f'[encryption]\npayload_keys_file = "{keys}"\n'
    with running(make_nodes(base, 1, extra_sections=extra)) as nodes:
        yield nodes[0]


@pytest.fixture(scope="module")
def tenant(node: NodeProcess) -> Tenant:
    return new_tenant(node)


def versions(node: NodeProcess, token: str, job_id: str, query: str = "") -> dict[str, Any]:
    status, page, _ = http("GET", f"{node.url}/v1/jobs/{job_id}/versions{query}", token=token)
    assert status == 200, page
    assert set(page) == {"versions", "next_cursor"}, page
    found: dict[str, Any] = page
    return found


def change(node: NodeProcess, token: str, method: str, path: str, body: Any = None) -> None:
    status, answer, _ = http(method, f"{node.url}{path}", body, token=token)
    assert status in (200, 202, 204), answer


def spec_of(job: dict[str, Any]) -> dict[str, Any]:
    return {field: job[field] for field in SPEC_FIELDS}


def test_a_new_job_has_version_1_its_create(node: NodeProcess, tenant: Tenant) -> None:
    job = create_job(node, tenant.token, job_body(name="fresh", payload={"note": MARKER}))
    page = versions(node, tenant.token, job["job_id"])
    assert page["next_cursor"] is None
    [first] = page["versions"]
    assert set(first) == {"version", "changed_at", "changed_by", "change", "fields", "spec"}
    assert first["version"] == 1 and first["change"] == "create" and first["fields"] is None
    assert first["changed_at"] == job["created_at"]
    assert first["changed_by"] == f"tenant:{tenant.tenant_id}"
    assert first["spec"] == spec_of(job)  # the payload opened, as the job object shows it


def test_every_change_is_a_version_newest_first_with_the_spec_after_it(
    node: NodeProcess, tenant: Tenant
) -> None:
    token = tenant.token
    created = create_job(node, token, job_body(name="v1", schedule={"every": "1h"}))
    path = f"/v1/jobs/{created['job_id']}"
    specs = [spec_of(created)]
    change(node, token, "PATCH", path, {"name": "v2", "payload": {"note": MARKER}})
    specs.append(spec_of(get_job(node, token, created["job_id"])))
    change(node, token, "PATCH", path, {"schedule": {"every": "2h"}})  # schedctl reschedule
    specs.append(spec_of(get_job(node, token, created["job_id"])))
    change(node, token, "POST", f"{path}/pause")
    change(node, token, "POST", f"{path}/pause")  # no change: no version
    change(node, token, "POST", f"{path}/resume")
    change(node, token, "POST", f"{path}/trigger")  # a run, not a change of the job
    change(node, token, "DELETE", path)
    job = get_job(node, token, created["job_id"])
    found = versions(node, token, created["job_id"])["versions"]
    assert [(v["version"], v["change"], v["fields"]) for v in found] == [
        (6, "cancel", None),
        (5, "resume", None),
        (4, "pause", None),
        (3, "reschedule", ["schedule"]),
        (2, "update", ["name", "payload"]),
        (1, "create", None),
    ]
    assert [v["spec"] for v in found] == [specs[2]] * 4 + [specs[1], specs[0]]
    assert specs[1]["payload"] == {"note": MARKER} and specs[2]["schedule"]["every"] == "2h"
    assert found[0]["changed_at"] == job["updated_at"]
    assert {v["changed_by"] for v in found} == {f"tenant:{tenant.tenant_id}"}
    times = [v["changed_at"] for v in found]
    assert times == sorted(times, reverse=True)


def test_pages_follow_next_cursor_to_the_first_version(node: NodeProcess, tenant: Tenant) -> None:
    token = tenant.token
    job = create_job(node, token, job_body(schedule={"every": "1h"}))
    path = f"/v1/jobs/{job['job_id']}"
    for _ in range(2):
        change(node, token, "POST", f"{path}/pause")
        change(node, token, "POST", f"{path}/resume")
    seen, cursor = [], None
    while True:
        page = versions(
            node, token, job["job_id"], "?limit=2" + (f"&cursor={cursor}" if cursor else "")
        )
        assert len(page["versions"]) <= 2
        seen += [v["version"] for v in page["versions"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [5, 4, 3, 2, 1]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("?cursor=!!", "cursor"),
        ("?cursor=YWJj", "cursor"),  # "abc": not a version number
        ("?limit=0", "limit"),
        ("?limit=1001", "limit"),
        ("?limit=ten", "limit"),
    ],
)
def test_bad_paging_is_refused_naming_the_field(
    node: NodeProcess, tenant: Tenant, query: str, field: str
) -> None:
    job = create_job(node, tenant.token)
    status, body, _ = http(
        "GET", f"{node.url}/v1/jobs/{job['job_id']}/versions{query}", token=tenant.token
    )
    error = assert_error(status, body, 400, "invalid_request")
    assert error["message"].startswith(f"{field}:"), error


def test_another_tenants_job_is_404_as_a_missing_one(node: NodeProcess, tenant: Tenant) -> None:
    job = create_job(node, tenant.token)
    change(node, tenant.token, "POST", f"/v1/jobs/{job['job_id']}/pause")
    other = new_tenant(node)
    for job_id in (job["job_id"], MISSING_JOB_ID):
        status, body, _ = http("GET", f"{node.url}/v1/jobs/{job_id}/versions", token=other.token)
        assert_error(status, body, 404, "job_not_found")


def test_the_versions_specs_are_sealed_at_rest(node: NodeProcess, tenant: Tenant) -> None:
    job = create_job(node, tenant.token, job_body(payload={"note": MARKER}))
    change(node, tenant.token, "PATCH", f"/v1/jobs/{job['job_id']}", {"name": "sealed"})
    found = versions(node, tenant.token, job["job_id"])["versions"]
    assert [v["spec"]["payload"] for v in found] == [{"note": MARKER}] * 2
    conn = sqlite3.connect(f"file:{node.data_dir / 'state.db'}?mode=ro", uri=True)
    try:
        stored = conn.execute(
            "SELECT spec FROM job_versions WHERE job_id = ?", (job["job_id"],)
        ).fetchall()
    finally:
        conn.close()
    assert len(stored) == 2 and not [s for (s,) in stored if MARKER in s]
