"""`schedctl apply`'s plan without a server: the field diff, the lines it prints, --prune reading
each job's set label itself, and the files and flags refused before any request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from schedd.cli.ctl.answers import Answer, read_answer
from schedd.cli.ctl.apply import step_lines
from schedd.cli.ctl.plan import Action, Change, Step, diff, set_jobs
from schedd.wire.jobs import JobList
from tests.ports import free_port
from tests.schedctl_inprocess import run_schedctl

ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def test_the_diff_goes_into_objects_and_names_each_member() -> None:
    current = {
        "name": "a",
        "schedule": {"cron": "0 3 * * *", "timezone": "UTC"},
        "payload": {"n": 1, "keep": True},
        "labels": {"schedd.set": "s", "team": "x"},
        "max_runs": None,
        "window": "5m",
    }
    proposed = current | {
        "schedule": {"cron": "0 4 * * *", "timezone": "UTC"},
        "payload": [1],
        "labels": {"schedd.set": "s", "team": "y", "env": "prod"},
        "max_runs": 10,
        "window": None,
    }
    assert list(diff(current, proposed)) == [
        Change(field="schedule.cron", current="0 3 * * *", proposed="0 4 * * *"),
        Change(field="payload", current={"n": 1, "keep": True}, proposed=[1]),
        Change(field="labels.team", current="x", proposed="y"),
        Change(field="labels.env", current=None, proposed="prod"),
        Change(field="max_runs", current=None, proposed=10),
        Change(field="window", current="5m", proposed=None),
    ]
    assert list(diff(current, dict(current))) == []
    [quoted] = diff({"labels": {"schedd.set": "a"}}, {"labels": {"schedd.set": "b"}})
    assert quoted.field == 'labels."schedd.set"'


def test_a_step_is_one_line_a_create_says_what_and_an_update_shows_each_field() -> None:
    update = Step(
        action=Action.UPDATE,
        key="nightly",
        job_id="job_01",
        changes=(Change(field="payload.n", current=1, proposed={"n": [2]}),),
    )
    assert [line.plain for line in step_lines(update)] == [
        "~ update    nightly (job_01)",
        '    payload.n: 1 -> {"n":[2]}',
    ]
    spec = {
        "schedule": {"cron": "@daily", "timezone": "UTC"},
        "target": {"type": "queue", "name": "q"},
    }
    planned = Step(action=Action.CREATE, key="k", job_id=None, proposed=spec)
    assert [line.plain for line in step_lines(planned)] == [
        "+ create    k",
        "    cron '@daily' UTC -> queue q",
    ]
    done = Step(action=Action.CREATE, key="k", job_id="job_02", proposed=spec, is_done=True)
    assert [line.plain for line in step_lines(done)] == ["+ created   k (job_02)"]
    keyless = Step(action=Action.DELETE, key=None, job_id="job_03", name="old one")
    assert [line.plain for line in step_lines(keyless)] == ['- delete    job_03 "old one"']


class IgnoringClient:
    """A node that ignores GET /v1/jobs's label filter (an older node): every job, every page."""

    def __init__(self, jobs: list[dict[str, Any]]) -> None:
        self.jobs = jobs
        self.calls: list[dict[str, Any]] = []

    def list_jobs(self, **call: Any) -> Answer[JobList]:
        self.calls.append(call)
        listed = [job for job in self.jobs if job["status"] == call["status"]]
        return read_answer({"jobs": listed, "next_cursor": None}, JobList, request="GET")


def listed(job_id: str, status: str, labels: dict[str, str] | None) -> dict[str, Any]:
    job = {
        "job_id": job_id,
        "tenant_id": "t",
        "name": None,
        "schedule": {"every": "1h"},
        "window": None,
        "target": {"type": "queue", "name": "q"},
        "payload": None,
        "retry": {},
        "misfire_policy": "run_once",
        "overlap_policy": "allow",
        "status": status,
        "next_run_at": None,
        "version": 1,
        "created_at": "2027-01-01T00:00:00Z",
        "updated_at": "2027-01-01T00:00:00Z",
    }
    return job if labels is None else job | {"labels": labels}


def test_prune_reads_each_jobs_set_label_itself_and_only_live_jobs() -> None:
    client = IgnoringClient(
        [
            listed("job_mine", "active", {"schedd.set": "s"}),
            listed("job_paused", "paused", {"schedd.set": "s", "team": "x"}),
            listed("job_done", "completed", {"schedd.set": "s"}),
            listed("job_other_set", "active", {"schedd.set": "t"}),
            listed("job_unlabelled", "active", {}),
            listed("job_older_node", "active", None),
        ]
    )
    found = [job["job_id"] for job in set_jobs(client, "s")]  # type: ignore[arg-type]
    assert found == ["job_mine", "job_paused"]
    assert [call["filters"] for call in client.calls] == [{"label": ["schedd.set=s"]}] * 2


@pytest.fixture
def closed_url() -> str:
    """A loopback URL nothing listens on: a request sent there would exit 3, not 1."""
    return f"http://127.0.0.1:{free_port()}"


@pytest.mark.parametrize(
    ("text", "args", "message"),
    [
        ('[[job]]\nkey = "a b"', (), "job #1: key: must match"),
        (
            '[[job]]\nkey = "k"\nschedule = {cron = "@daily"}\n'
            'target = {type = "queue", name = "q"}',
            ("--prune",),
            '--prune needs a top-level set = "..."',
        ),
    ],
)
def test_a_bad_file_fails_with_exit_1_before_any_request(
    tmp_path: Path, closed_url: str, text: str, args: tuple[str, ...], message: str
) -> None:
    (tmp_path / "jobs.toml").write_text(text)
    path = str(tmp_path / "jobs.toml")
    result = run_schedctl(["--url", closed_url, "apply", "-f", path, *args], env=ENV)
    assert result.returncode == 1, result
    assert result.stderr.startswith(f"error: {path}: {message}") and result.stdout == ""


def test_a_missing_file_and_exit_code_without_dry_run(tmp_path: Path, closed_url: str) -> None:
    missing = str(tmp_path / "nope.toml")
    result = run_schedctl(["--url", closed_url, "apply", "-f", missing], env=ENV)
    assert result.returncode == 1
    assert result.stderr == f"error: {missing}: cannot read it: No such file or directory\n"
    result = run_schedctl(["apply", "-f", missing, "--exit-code"], env=ENV)
    assert result.returncode == 2 and "--exit-code applies to --dry-run only" in result.stderr
