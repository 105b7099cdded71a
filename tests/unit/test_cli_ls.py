"""`schedctl ls` with filters: the flags become GET /v1/jobs parameters, and a page is filled
across the API's short filtered pages (each scans at most 10,000 jobs)."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner

from schedd.cli.ctl import jobs


class PagedClient:
    """Answers list_jobs from `pages` (cursor -> (job ids, next cursor)), recording each call."""

    def __init__(self, pages: dict[str | None, tuple[list[str], str | None]]) -> None:
        self.pages = pages
        self.calls: list[dict[str, Any]] = []

    def list_jobs(self, **call: Any) -> dict[str, Any]:
        self.calls.append(call)
        ids, cursor = self.pages[call["cursor"]]
        return {"jobs": [{"job_id": i} for i in ids[: call["limit"]]], "next_cursor": cursor}


def ls(client: PagedClient, *args: str) -> Any:
    result = CliRunner().invoke(jobs.list_jobs, [*args, "--json"], obj=client)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_ls_asks_again_until_its_page_is_full_and_passes_the_filters() -> None:
    client = PagedClient(
        {None: ([], "c1"), "c1": (["a"], "c2"), "c2": (["b", "c"], "c3"), "c3": (["d"], None)}
    )
    page = ls(client, "--limit", "2", "--name", "Nightly", "--target-type", "http")
    assert page == {"jobs": [{"job_id": "a"}, {"job_id": "b"}], "next_cursor": "c3"}
    assert [(c["cursor"], c["limit"]) for c in client.calls] == [(None, 2), ("c1", 2), ("c2", 1)]
    assert client.calls[0]["filters"] == {
        "target_type": "http",
        "queue": None,
        "host": None,
        "name": "Nightly",
        "next_run_after": None,
        "next_run_before": None,
    }


def test_ls_stops_at_the_last_page_with_fewer_jobs() -> None:
    client = PagedClient({None: ([], "c1"), "c1": (["a"], None)})
    assert ls(client, "--host", "hooks.example") == {"jobs": [{"job_id": "a"}], "next_cursor": None}


def test_ls_all_follows_every_cursor() -> None:
    client = PagedClient({None: ([], "c1"), "c1": (["a"], "c2"), "c2": (["b"], None)})
    page = ls(client, "--all", "--queue", "emails")
    assert page == {"jobs": [{"job_id": "a"}, {"job_id": "b"}], "next_cursor": None}


def test_ls_refuses_a_bad_instant_before_any_request() -> None:
    client = PagedClient({})
    result = CliRunner().invoke(jobs.list_jobs, ["--next-run-after", "soon"], obj=client)
    assert result.exit_code != 0 and client.calls == []
    assert "--next-run-after" in str(result.exception)
