"""`schedctl ls` with filters: the flags become GET /v1/jobs parameters, and a page is filled
across the API's short filtered pages (each scans at most 10,000 jobs)."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner

from schedd.cli.ctl import jobs
from schedd.cli.ctl.answers import Answer, read_answer
from schedd.wire.jobs import JobList

CREATED = "2026-12-01T08:00:00Z"


def job(job_id: str) -> dict[str, Any]:
    """A job object as GET /v1/jobs lists it."""
    return {
        "job_id": job_id,
        "tenant_id": "ten_1",
        "name": None,
        "schedule": {"every": "5m", "start_at": CREATED},
        "window": None,
        "target": {"type": "queue", "name": "emails"},
        "payload": None,
        "retry": {"max_attempts": 3, "backoff": "exponential", "initial_delay": "1s"},
        "misfire_policy": "run_once",
        "overlap_policy": "allow",
        "status": "active",
        "next_run_at": CREATED,
        "version": 1,
        "created_at": CREATED,
        "updated_at": CREATED,
    }


class PagedClient:
    """Answers list_jobs from `pages` (cursor -> (job ids, next cursor)), recording each call."""

    def __init__(self, pages: dict[str | None, tuple[list[str], str | None]]) -> None:
        self.pages = pages
        self.calls: list[dict[str, Any]] = []

    def list_jobs(self, **call: Any) -> Answer[JobList]:
        self.calls.append(call)
        ids, cursor = self.pages[call["cursor"]]
        page = {"jobs": [job(f"job_{i}") for i in ids[: call["limit"]]], "next_cursor": cursor}
        return read_answer(page, JobList, request="GET /v1/jobs")


def ids(page: dict[str, Any]) -> tuple[list[str], str | None]:
    return [job["job_id"].removeprefix("job_") for job in page["jobs"]], page["next_cursor"]


def ls(client: PagedClient, *args: str) -> Any:
    result = CliRunner().invoke(jobs.list_jobs, [*args, "--json"], obj=client)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_ls_asks_again_until_its_page_is_full_and_passes_the_filters() -> None:
    client = PagedClient(
        {None: ([], "c1"), "c1": (["a"], "c2"), "c2": (["b", "c"], "c3"), "c3": (["d"], None)}
    )
    page = ls(client, "--limit", "2", "--name", "Nightly", "--target-type", "http")
    assert ids(page) == (["a", "b"], "c3")
    assert page["jobs"][0] == job("job_a")  # --json prints the jobs as the API sent them
    assert [(c["cursor"], c["limit"]) for c in client.calls] == [(None, 2), ("c1", 2), ("c2", 1)]
    assert client.calls[0]["filters"] == {
        "target_type": "http",
        "queue": None,
        "host": None,
        "name": "Nightly",
        "next_run_after": None,
        "next_run_before": None,
        "failing": None,
        "label": None,
    }


def test_ls_stops_at_the_last_page_with_fewer_jobs() -> None:
    client = PagedClient({None: ([], "c1"), "c1": (["a"], None)})
    assert ids(ls(client, "--host", "hooks.example")) == (["a"], None)


def test_ls_all_follows_every_cursor() -> None:
    client = PagedClient({None: ([], "c1"), "c1": (["a"], "c2"), "c2": (["b"], None)})
    page = ls(client, "--all", "--queue", "emails")
    assert ids(page) == (["a", "b"], None)


def test_ls_refuses_a_bad_instant_before_any_request() -> None:
    client = PagedClient({})
    result = CliRunner().invoke(jobs.list_jobs, ["--next-run-after", "soon"], obj=client)
    assert result.exit_code != 0 and client.calls == []
    assert "--next-run-after" in str(result.exception)


def test_ls_failing_asks_for_failing_jobs_and_shows_their_failures_in_a_row() -> None:
    client = PagedClient({None: (["a"], None)})
    result = CliRunner().invoke(jobs.list_jobs, ["--failing"], obj=client)
    assert result.exit_code == 0, result.output
    assert client.calls[0]["filters"]["failing"] == "true"
    header, row = result.stdout.splitlines()
    assert header.split("   ")[:4] == ["JOB ID", "NAME", "STATUS", "FAILED IN A ROW"]
    assert "LAST FAILURE (UTC)" in header and "LAST SUCCESS (UTC)" in header
    assert row.split()[:4] == ["job_a", "-", "active", "0"]  # an older node: no such fields
