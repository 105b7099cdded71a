"""`schedctl history` against one real node: the versions table, --diff, --json, paging and a
job of another tenant."""

from __future__ import annotations

import pytest

from tests.integration.test_schedctl import CRON_JOB, Ctl, assert_fails
from tests.servers import ADMIN_TOKEN, NodeProcess, http


@pytest.fixture(scope="module")
def ctl(node: NodeProcess) -> Ctl:
    return Ctl(node.url, ADMIN_TOKEN).new_tenant()


@pytest.fixture(scope="module")
def job_id(ctl: Ctl) -> str:
    """A job created, rescheduled, renamed (PATCH), paused and resumed: five versions."""
    created = ctl.json("add", *CRON_JOB, "--name", "weekly", "--payload", '{"n": 1}')
    job: str = created["job_id"]
    ctl.json("reschedule", job, "--every", "2h")
    body = {"name": "renamed", "payload": {"n": 2}}  # no schedctl verb: the API's PATCH
    status, _, _ = http("PATCH", f"{ctl.url}/v1/jobs/{job}", body, token=ctl.token)
    assert status == 200
    ctl.json("pause", job)
    ctl.json("resume", job)
    return job


def test_history_lists_the_versions_newest_first(ctl: Ctl, job_id: str) -> None:
    result = ctl("history", job_id)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["VERSION", "CHANGED", "AT", "(UTC)", "CHANGE", "BY", "FIELDS"]
    rows = [line.split() for line in lines[1:]]
    assert [(row[0], row[2]) for row in rows] == [
        ("5", "resume"),
        ("4", "pause"),
        ("3", "update"),
        ("2", "reschedule"),
        ("1", "create"),
    ]
    assert rows[2][4:] == ["name,", "payload"] and rows[3][4:] == ["schedule"]
    assert len({row[3] for row in rows}) == 1 and rows[0][3].startswith("tenant:")


def test_history_diff_shows_each_field_that_changed(ctl: Ctl, job_id: str) -> None:
    result = ctl("history", job_id, "--diff")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    blocks = [block.splitlines() for block in text.split("version ")[1:]]
    assert [block[0].split(":")[0] for block in blocks] == ["5", "4", "3", "2", "1"]
    resume, pause, update, reschedule, create = blocks
    assert resume[1:] == ["  status: paused -> active"]
    assert pause[1:] == ["  status: active -> paused"]
    assert update[1:] == ['  name: "weekly" -> "renamed"', '  payload: {"n":1} -> {"n":2}']
    [line] = reschedule[1:]
    assert line.startswith('  schedule: {"cron":"0 8 * * MON"') and '-> {"every":"2h"' in line
    assert create[1:] == []


def test_history_json_is_the_apis_page_and_pages_like_runs(ctl: Ctl, job_id: str) -> None:
    page = ctl.json("history", job_id, "--limit", "2")
    assert [v["version"] for v in page["versions"]] == [5, 4] and page["next_cursor"]
    rest = ctl.json("history", job_id, "--limit", "2", "--cursor", page["next_cursor"])
    assert [v["version"] for v in rest["versions"]] == [3, 2]
    every = ctl.json("history", job_id, "--limit", "2", "--all")
    assert [v["version"] for v in every["versions"]] == [5, 4, 3, 2, 1]
    assert every["next_cursor"] is None
    assert every["versions"][2]["spec"]["payload"] == {"n": 2}
    assert every["versions"][-1]["spec"]["payload"] == {"n": 1}
    table = ctl("history", job_id, "--limit", "2")
    assert "--cursor" in table.stderr


def test_history_of_another_tenants_job_is_not_found(ctl: Ctl, job_id: str) -> None:
    assert_fails(ctl.new_tenant()("history", job_id), 1, "no job with id")
