"""schedctl's tables: plain aligned columns when stdout is not a terminal, whole headers on one.

Issue 13, point 5: `schedctl ls | cat` split the header SCHEDULE into SCHEDU / LE and wrapped
long cron text; `status` piped cut a role to `foll…`. Point 8: an unreachable node showed as
`follower`, a paused job as `next run: none left`.
"""

from __future__ import annotations

from typing import Any, TypeVar

import pytest
from click.testing import CliRunner
from rich.console import Console

from schedd.cli.ctl import admin, jobs, queues, render, status
from schedd.cli.ctl.answers import Answer, read_answer
from schedd.cli.ctl.older_nodes import ClusterAnswer, Tenants
from schedd.wire.jobs import JobList, JobView, RunList

JOB_ID = "job_4e475890124e4120a0987da4"
LONG_CRON = "0,5,10,15,20,25,30,35,40,45,50,55 8-18 1-7,15-21 JAN,MAR,MAY,JUL,SEP,NOV MON-FRI"
JOB = {
    "job_id": JOB_ID,
    "tenant_id": "ten_1",
    "name": "weekly",
    "status": "active",
    "schedule": {"cron": LONG_CRON, "timezone": "America/Argentina/ComodRivadavia"},
    "target": {"type": "queue", "name": "digest-jobs"},
    "next_run_at": "2026-12-01T11:00:00Z",
    "window": None,
    "payload": None,
    "retry": {
        "max_attempts": 3,
        "backoff": "exponential",
        "initial_delay": "1s",
        "max_delay": "5m",
    },
    "misfire_policy": "run_once",
    "overlap_policy": "allow",
    "version": 1,
    "created_at": "2026-11-30T07:59:17.570Z",
    "updated_at": "2026-11-30T07:59:17.570Z",
}
SHORT = JOB | {
    "job_id": "job_0123abcd",
    "name": None,
    "schedule": {"every": "5m"},
    "target": {"type": "http", "method": "POST", "url": "https://example.com/hook"},
    "next_run_at": None,
    "status": "paused",
}


CREATED = "2026-11-30T07:59:17.570Z"
ATTEMPTS = [
    {
        "attempt": 1,
        "started_at": "2026-12-01T08:00:00.012Z",
        "finished_at": "2026-12-01T08:00:10.015Z",
        "outcome": "failed",
        "error": "POST https://example.com/hook answered HTTP 503 after 10.0s",
    },
    {
        "attempt": 2,
        "started_at": "2026-12-01T08:00:12.020Z",
        "finished_at": None,
        "outcome": None,
        "error": None,
    },
]
T = TypeVar("T")


class FakeClient:
    """What the commands ask the API, answered from fixed objects."""

    token = "adm_x"
    timeout_s = 1.0

    def answer(self, kind: type[T], method: str, path: str, *_: Any, **__: Any) -> Answer[T]:
        return read_answer(self.request(method, path), kind, request=f"{method} {path}")

    def list_jobs(self, **_: Any) -> Answer[JobList]:
        return read_answer({"jobs": [JOB, SHORT], "next_cursor": None}, JobList, request="ls")

    def get_job(self, job_id: str) -> Answer[JobView]:
        return read_answer(SHORT if job_id == SHORT["job_id"] else JOB, JobView, request="get")

    def cluster(self) -> Answer[ClusterAnswer]:
        return read_answer(self._cluster(), ClusterAnswer, request="GET /v1/cluster")

    def _cluster(self) -> dict[str, Any]:
        nodes = [
            {"node_id": "n1", "role": "leader", "healthy": True, "api": "http://127.0.0.1:8701"},
            {"node_id": "n2", "role": "follower", "healthy": True, "api": "http://127.0.0.1:8702"},
            {"node_id": "n3", "role": "follower", "healthy": True, "api": "http://127.0.0.1:8703"},
        ]
        for node in nodes:
            node["partitions"] = [0, 1]
            node["applied_index"] = 40
            node["raft"] = f"127.0.0.1:970{node['node_id'][1]}"
        return {"leader": "n1", "members": [node["raft"] for node in nodes], "nodes": nodes}

    def list_tenants(self, **_: Any) -> Answer[Tenants]:
        tenant = {
            "tenant_id": "ten_0123456789abcdef01234567",
            "name": "a-tenant-with-a-rather-long-name",
            "active_jobs": 12,
            "max_active_jobs": 10000,
            "dispatch_rate": 50,
            "allowed_hosts": ["hooks.example.com", "*.internal.example.org"],
            "alert_url": None,
            "retention": {},
            "created_at": CREATED,
            "updated_at": CREATED,
        }
        page = {"tenants": [tenant], "next_cursor": None}
        return read_answer(page, Tenants, request="GET /v1/tenants")

    def list_runs(self, job_id: str, **_: Any) -> Answer[RunList]:
        run = {
            "job_id": job_id,
            "attempts": ATTEMPTS,
            "dispatched_at": "2026-12-01T08:00:00Z",
            "scheduled_at": "2026-12-01T08:00:00Z",
            "fire_at": "2026-12-01T08:00:00Z",
            "status": "retrying",
            "attempt": 2,
            "finished_at": None,
            "error": "POST https://example.com/hook answered HTTP 503 after 10.0s: " + "x" * 60,
        }
        page = {"runs": [run], "next_cursor": None}
        return read_answer(page, RunList, request="GET /v1/jobs/ID/runs")

    def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        if path == "/v1/deadletters":
            item = {
                "id": f"{JOB_ID}:1796028778162",
                "job_id": JOB_ID,
                "scheduled_at": "2026-12-01T08:00:00Z",
                "created_at": CREATED,
                "attempts": 3,
                "target": {"type": "queue", "name": "reports"},
                "error": "exit code 3\nTraceback ...",
            }
            return {"deadletters": [item], "next_cursor": None}
        assert (method, path) == ("GET", "/v1/queues")
        return {
            "queues": [
                {"name": "digest-jobs", "ready": 3, "in_flight": 12345, "delayed": 0, "dead": 1},
                {
                    "name": "mail",
                    "ready": 1,
                    "in_flight": 0,
                    "delayed": 0,
                    "dead": 0,
                    "oldest_age_s": 725.5,
                    "consumers": [
                        {"consumer": name, "last_seen": "2026-12-02T17:00:00Z", "node": node}
                        for name, node in [
                            ("w1", "n1"),
                            ("w1", "n2"),
                            ("w2", "n1"),
                            ("w3", "n3"),
                            ("10.0.0.5", "n2"),
                        ]
                    ],
                },
            ],
            "partial": False,
        }


def invoke(command: Any, *args: str) -> str:
    """The command's stdout under CliRunner: not a terminal, like `schedctl ... | cat`."""
    result = CliRunner().invoke(command, list(args), obj=FakeClient(), env={"COLUMNS": "80"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.stdout


def test_ls_piped_prints_plain_aligned_columns_without_wrapping() -> None:
    lines = invoke(jobs.list_jobs).splitlines()
    schedule = f"cron '{LONG_CRON}' America/Argentina/ComodRivadavia"
    width = len(schedule)
    assert lines == [
        "JOB ID                         NAME     STATUS   "
        + "SCHEDULE".ljust(width)
        + "   TARGET                          NEXT RUN (UTC)",
        f"{JOB_ID}   weekly   active   {schedule}   queue digest-jobs               "
        "2026-12-01T11:00:00Z",
        "job_0123abcd                   -        paused   "
        + "every 5m".ljust(width)
        + "   POST https://example.com/hook   -",
    ]


def _unreachable_n3(api: str, client: Any) -> status.NodeFigures | None:
    if api.endswith(":8703"):
        return None
    connections = {"up": 2, "down": 1} if api.endswith(":8702") else {"up": 0, "down": 0}
    return status.NodeFigures(
        term=7,
        applied_index=40,
        backlog=0,
        claim_lag_p99_s=0.25,
        broker_connections=connections,
    )


def test_status_piped_names_an_unreachable_node_and_keeps_roles_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(status, "node_metrics", _unreachable_n3)
    assert invoke(status.status).splitlines() == [
        "NODE   ROLE          HEALTHY   TERM   APPLIED   LAG   PARTITIONS   BACKLOG   "
        "CLAIM LAG P99   BROKERS UP/DOWN   API",
        "n1     leader        yes       7      40        0     2            0         "
        "<= 0.25s        0/0               http://127.0.0.1:8701",
        "n2     follower      yes       7      40        0     2            0         "
        "<= 0.25s        2/1               http://127.0.0.1:8702",
        "n3     unreachable   no        -      40        0     2            -         "
        "-               -                 http://127.0.0.1:8703",
        "leader: n1",
    ]


def test_tenants_ls_and_queues_piped_use_the_same_plain_columns() -> None:
    assert invoke(admin.tenants, "ls").splitlines() == [
        "TENANT ID                      NAME                               ACTIVE JOBS   "
        "MAX ACTIVE   RATE/S   ALLOWED HOSTS",
        "ten_0123456789abcdef01234567   a-tenant-with-a-rather-long-name   12            "
        "10000        50       hooks.example.com, *.internal.example.org",
    ]
    assert invoke(queues.queues, "ls").splitlines() == [
        "QUEUE         READY   IN FLIGHT   DELAYED   DEAD   OLDEST   CONSUMERS",
        "digest-jobs   3       12345       0         1      -        -",
        "mail          1       0           0         0      12m5s    w1, w2, w3 +1 more",
    ]


def test_runs_and_deadletters_piped_keep_a_long_error_on_its_row() -> None:
    error = "POST https://example.com/hook answered HTTP 503 after 10.0s: " + "x" * 60
    assert invoke(jobs.runs, JOB_ID).splitlines() == [
        "SCHEDULED (UTC)        FIRES AT               STATUS     ATTEMPT   FINISHED   ERROR",
        f"2026-12-01T08:00:00Z   2026-12-01T08:00:00Z   retrying   2         -          {error}",
    ]
    assert invoke(queues.deadletters, "ls").splitlines() == [
        "ID                                           TRIES   TARGET          ERROR",
        f"{JOB_ID}:1796028778162   3       queue reports   exit code 3",
    ]


def test_runs_with_attempts_shows_each_attempt_indented_under_its_run() -> None:
    """Issue 31, section 7: the getting-started guide promised each attempt with its error;
    the default table (above) still shows one row per run."""
    error = "POST https://example.com/hook answered HTTP 503 after 10.0s"
    assert invoke(jobs.runs, JOB_ID, "--attempts").splitlines() == [
        "SCHEDULED (UTC)        FIRES/STARTED              STATUS/OUTCOME   ATTEMPT   "
        "FINISHED                   ERROR",
        "2026-12-01T08:00:00Z   2026-12-01T08:00:00Z       retrying         2         "
        f"-                          {error}: " + "x" * 60,
        "  attempt 1            2026-12-01T08:00:00.012Z   failed           1         "
        f"2026-12-01T08:00:10.015Z   {error}",
        "  attempt 2            2026-12-01T08:00:12.020Z   -                2         -",
    ]


def test_runs_with_attempts_folds_a_long_error_inside_its_column_on_a_terminal() -> None:
    page = FakeClient().list_runs(JOB_ID)
    console = Console(width=100, record=True, force_terminal=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(render, "console", lambda **_: console)
        patch.setattr(render.sys.stdout, "isatty", lambda: True, raising=False)
        render.show_runs(page, as_json=False, has_attempts=True)
    lines = console.export_text().splitlines()
    assert all(len(line) <= 100 for line in lines)
    assert lines[0].split()[:2] == ["SCHEDULED", "(UTC)"]
    assert [line[:11] for line in lines if "attempt" in line] == ["  attempt 1", "  attempt 2"]


def test_get_of_a_paused_job_says_paused_not_none_left() -> None:
    lines = [line.split() for line in invoke(jobs.get, SHORT["job_id"]).splitlines()]
    assert ["next", "run", "paused"] in lines
    assert ["schedule", "every", "5m"] in lines


def test_on_a_narrow_terminal_no_header_word_is_split() -> None:
    rows = [(JOB_ID, "weekly", f"cron '{LONG_CRON}' UTC", "queue digest-jobs")]
    console = Console(width=60, record=True, force_terminal=True)
    console.print(render.rich_table(("JOB ID", "NAME", "SCHEDULE", "TARGET"), rows))
    header = console.export_text().splitlines()[0]
    assert header.split() == ["JOB", "ID", "NAME", "SCHEDULE", "TARGET"]


def test_queue_ages_show_their_two_largest_units() -> None:
    ages = [None, 0.4, 59.9, 60, 3_599, 3_600 + 20 * 60 + 5, 2 * 86_400 + 4 * 3_600 + 59]
    assert [queues._age(age) for age in ages] == [
        "-",
        "0s",
        "59s",
        "1m0s",
        "59m59s",
        "1h20m",
        "2d4h",
    ]


def test_runs_made_by_another_jobs_end_get_a_triggered_by_column(
    capsys: pytest.CaptureFixture[str],
) -> None:
    made = FakeClient().list_runs(JOB_ID).raw["runs"][0] | {
        "status": "succeeded",
        "attempt": 1,
        "finished_at": "2026-12-01T08:00:01Z",
        "error": None,
        "attempts": ATTEMPTS[:1],
        "triggered_by": {
            "job_id": "job_a",
            "scheduled_at": "2026-12-01T08:00:00Z",
            "status": "dead",
        },
    }
    by_hand = made | {"scheduled_at": "2026-12-01T07:00:00Z", "triggered_by": None}
    page = read_answer({"runs": [made, by_hand], "next_cursor": None}, RunList, request="runs")
    render.show_runs(page, as_json=False, has_attempts=True)
    assert capsys.readouterr().out.splitlines() == [
        "SCHEDULED (UTC)        FIRES/STARTED              STATUS/OUTCOME   ATTEMPT   "
        "FINISHED                   TRIGGERED BY   ERROR",
        "2026-12-01T08:00:00Z   2026-12-01T08:00:00Z       succeeded        1         "
        "2026-12-01T08:00:01Z       job_a dead",
        "  attempt 1            2026-12-01T08:00:00.012Z   failed           1         "
        "2026-12-01T08:00:10.015Z                  POST https://example.com/hook answered "
        "HTTP 503 after 10.0s",
        "2026-12-01T07:00:00Z   2026-12-01T08:00:00Z       succeeded        1         "
        "2026-12-01T08:00:01Z       -",
        "  attempt 1            2026-12-01T08:00:00.012Z   failed           1         "
        "2026-12-01T08:00:10.015Z                  POST https://example.com/hook answered "
        "HTTP 503 after 10.0s",
    ]


def test_an_after_schedule_reads_as_the_job_it_follows() -> None:
    schedule = {"after": {"job_id": "job_a", "on": "failure"}}
    assert render.describe_schedule(schedule) == "after job_a (on failure)"
    assert render.after_text(schedule) == "it runs when job_a ends (failure)"
    assert render.after_text({"every": "5m"}) is None
    job = read_answer(JOB | {"schedule": schedule, "next_run_at": None}, JobView, request="get")
    assert render._next_run(job.view) == "when job_a ends (failure)"
