"""Concurrent single creates (grouped into one command per tenant, api/creates.py): each
caller still gets its own job, and Idempotency-Key keeps its meaning inside a group."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.integration.api_helpers import all_audit, get_job, job_body, new_tenant
from tests.servers import NodeProcess, http

CALLERS = 48


def _post(node: NodeProcess, token: str, body: dict[str, Any], key: str | None) -> Any:
    headers = {} if key is None else {"Idempotency-Key": key}
    return http("POST", f"{node.url}/v1/jobs", body, token=token, headers=headers)[:2]


def test_concurrent_creates_each_get_their_own_job(node: NodeProcess) -> None:
    first, second = new_tenant(node), new_tenant(node)
    calls = [
        (first if i % 3 else second, job_body(name=f"job-{i}", payload={"caller": i}), None)
        for i in range(CALLERS)
    ]
    with ThreadPoolExecutor(CALLERS) as pool:
        answers = list(pool.map(lambda c: _post(node, c[0].token, c[1], c[2]), calls))
    ids = set()
    for (tenant, body, _), (status, job) in zip(calls, answers, strict=True):
        assert status == 201, job
        assert (job["name"], job["payload"], job["tenant_id"]) == (
            body["name"],
            body["payload"],
            tenant.tenant_id,
        )
        assert get_job(node, tenant.token, job["job_id"]) == job  # as stored, created_at too
        ids.add(job["job_id"])
    assert len(ids) == CALLERS
    audited = {r["job_id"] for r in all_audit(node, first.token) if r["action"] == "create_jobs"}
    pairs = zip(calls, answers, strict=True)
    assert audited == {job["job_id"] for (tenant, _, _), (_, job) in pairs if tenant is first}


def test_concurrent_creates_with_one_key_answer_one_job_or_a_mismatch(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    same = job_body(name="once", payload={"order": 42})
    other = job_body(name="other", payload={"order": 43})
    calls = [(same, "order-42")] * 12 + [(other, "order-42")] * 4 + [(same, None)] * 8
    with ThreadPoolExecutor(len(calls)) as pool:
        answers = list(pool.map(lambda c: _post(node, tenant.token, c[0], c[1]), calls))
    keyed = [a for c, a in zip(calls, answers, strict=True) if c[1] is not None]
    created = {job["job_id"] for status, job in keyed if status == 201}
    assert len(created) == 1  # whichever body the log ordered first owns the key
    [job_id] = created
    owner = get_job(node, tenant.token, job_id)
    for (body, key), (status, job) in zip(calls, answers, strict=True):
        if key is None:
            assert status == 201 and job["job_id"] != job_id
        elif body["name"] == owner["name"]:
            assert (status, job["job_id"]) == (201, job_id)
        else:
            assert status == 422 and job["error"]["code"] == "idempotency_mismatch"
    unkeyed = [a for c, a in zip(calls, answers, strict=True) if c[1] is None]
    assert len({job["job_id"] for _, job in unkeyed}) == 8
