"""Shared helpers of the API tests: tenants, job bodies, error-body checks, state snapshots.

Everything goes over real HTTP to a `schedd serve` node, as the contract's outside clients do.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from http.client import HTTPConnection
from typing import Any

from schedd.store.schema import REPLICATED_TABLES
from tests.servers import ADMIN_TOKEN, NodeProcess, http

QUEUE_TARGET: dict[str, Any] = {"type": "queue", "name": "work"}
JOB_FIELDS = frozenset(
    {
        "job_id",
        "tenant_id",
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
        "status",
        "paused_reason",
        "next_run_at",
        "runs_started",
        "version",
        "created_at",
        "updated_at",
        "last_success_at",
        "last_failure_at",
        "consecutive_failures",
        "overdue",
    }
)
MISSING_JOB_ID = "job_" + "0" * 24
_SNAKE = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*")
_registered: set[str] = set()


@dataclass(frozen=True, slots=True)
class Tenant:
    """A tenant's credentials as POST /v1/tenants returns them (the only time they are shown)."""

    tenant_id: str
    token: str
    signing_secret: str


def job_body(**fields: Any) -> dict[str, Any]:
    """A valid one-time job body (a run in an hour, to a queue); `fields` override."""
    return {"schedule": {"delay": "1h"}, "target": QUEUE_TARGET, **fields}


def new_tenant(node: NodeProcess, **settings: Any) -> Tenant:
    """Create a tenant with a unique name (unless given) and return its credentials."""
    body = {"name": f"t-{uuid.uuid4().hex[:12]}", **settings}
    status, created, _ = http("POST", f"{node.url}/v1/tenants", body)
    assert status == 201, created
    return Tenant(**created)


def create_job(node: NodeProcess, token: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """POST /v1/jobs that must succeed; the job object."""
    status, job, _ = http(
        "POST", f"{node.url}/v1/jobs", job_body() if body is None else body, token=token
    )
    assert status == 201, job
    assert set(job) == JOB_FIELDS, job
    created: dict[str, Any] = job
    return created


def get_job(node: NodeProcess, token: str, job_id: str) -> dict[str, Any]:
    status, job, _ = http("GET", f"{node.url}/v1/jobs/{job_id}", token=token)
    assert status == 200, job
    found: dict[str, Any] = job
    return found


def list_all_jobs(node: NodeProcess, token: str, query: str = "") -> list[dict[str, Any]]:
    """Every job of a tenant, following next_cursor at limit=100."""
    jobs: list[dict[str, Any]] = []
    cursor = ""
    while True:
        url = f"{node.url}/v1/jobs?limit=100{query}" + (f"&cursor={cursor}" if cursor else "")
        status, page, _ = http("GET", url, token=token)
        assert status == 200, page
        jobs.extend(page["jobs"])
        if page["next_cursor"] is None:
            return jobs
        cursor = page["next_cursor"]


def all_audit(
    node: NodeProcess, token: str, headers: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """Every audit record the token may see, following next_cursor."""
    records: list[dict[str, Any]] = []
    cursor = None
    while True:
        query = "limit=1000" + (f"&cursor={cursor}" if cursor else "")
        status, page, _ = http("GET", f"{node.url}/v1/audit?{query}", token=token, headers=headers)
        assert status == 200, page
        records += page["audit"]
        cursor = page["next_cursor"]
        if cursor is None:
            return records


def tenant_view(node: NodeProcess, token: str) -> tuple[list[dict[str, Any]], int]:
    """A tenant's jobs and how many audit records it has: equal means it changed nothing there
    (a check that other tenants' and the dispatcher's writes cannot disturb)."""
    return list_all_jobs(node, token), len(all_audit(node, token))


def assert_error(
    status: int, body: Any, expected_status: int, code: str | None = None
) -> dict[str, str]:
    """The contract's error body, exactly: {"error": {"code": <snake_case>, "message": <str>}}."""
    assert status == expected_status, (status, body)
    assert isinstance(body, dict) and set(body) == {"error"}, body
    error = body["error"]
    assert isinstance(error, dict) and set(error) == {"code", "message"}, body
    assert isinstance(error["code"], str) and _SNAKE.fullmatch(error["code"]), body
    assert isinstance(error["message"], str) and error["message"].strip(), body
    if code is not None:
        assert error["code"] == code, body
    return error


def wait_registered(node: NodeProcess, timeout_s: float = 10.0) -> None:
    """Until the node's own registration went through the log (after that, nothing writes
    unless a request does), so state snapshots taken later are stable."""
    if node.url in _registered:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        _, cluster, _ = http("GET", f"{node.url}/v1/cluster")
        if any(n["api"] is not None for n in cluster["nodes"]):
            _registered.add(node.url)
            return
        time.sleep(0.05)
    raise AssertionError(f"node did not register in {timeout_s}s:\n{node.log_tail()}")


# Heartbeats and lease renewals write every second: "nothing changed" is judged on the tables
# a request can touch, read straight from the node's database.
BACKGROUND_TABLES = frozenset({"applied_commands", "nodes", "leases"})


def state(node: NodeProcess) -> str:
    """A digest of every table a request could write: equal means nothing was written."""
    wait_registered(node)
    conn = sqlite3.connect(f"file:{node.data_dir / 'state.db'}?mode=ro", uri=True)
    try:
        digest = hashlib.sha256()
        conn.execute("BEGIN")
        for table, order in REPLICATED_TABLES:
            if table not in BACKGROUND_TABLES:
                for row in conn.execute(f"SELECT * FROM {table} ORDER BY {order}"):
                    digest.update(repr((table, row)).encode())
        conn.execute("COMMIT")
        return digest.hexdigest()
    finally:
        conn.close()


def raw_http(
    node: NodeProcess,
    method: str,
    path: str,
    body: bytes = b"",
    *,
    token: str | bytes | None = ADMIN_TOKEN,
    headers: Mapping[str, str | bytes] | None = None,
    content_length: int | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One request with exact bytes: header values as given, a Content-Length that may claim
    more than `body` (the rest is never sent). Returns (status, headers, raw body)."""
    conn = HTTPConnection("127.0.0.1", node.api_port, timeout=10)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        if token is not None:
            conn.putheader("Authorization", b"Bearer " + _bytes(token))
        for key, value in (headers or {}).items():
            conn.putheader(key, _bytes(value))
        conn.putheader(
            "Content-Length", str(len(body) if content_length is None else content_length)
        )
        conn.endheaders(body)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def raw_json(raw: bytes) -> Any:
    return json.loads(raw) if raw else None


def _bytes(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode()
