"""Job files of `schedctl apply` and `export`: read and checked before any request (each message
names the file, the job and the field), and written back so that they read as they were."""

from __future__ import annotations

from typing import Any

import pytest

from schedd.cli.ctl.jobfile import (
    FILE_FIELDS,
    InvalidJobFile,
    job_table,
    parse_job_file,
    with_upstream,
    write_job_file,
)
from schedd.jobspec import JOB_FIELDS

NOW_MS = 1_800_000_000_000  # 2027-01-15
FILE = """
set = "payments-prod"

[[job]]
key = "nightly-report"
name = "nightly report"
schedule = { cron = "0 3 * * *", timezone = "Europe/Berlin" }
target = { type = "queue", name = "reports" }
payload = { team = 7, tags = ["a", "b"] }
retry = { max_attempts = 5, backoff = "linear" }
labels = { team = "payments" }

[[job]]
key = "year-end/close:2027"
schedule = { run_at = 2027-12-31T23:00:00+01:00 }
target = { type = "http", url = "https://hooks.example/close", headers = { X-Env = "prod" } }
payload_json = '{"account": null}'
"""


def read(text: str) -> Any:
    return parse_job_file(text, name="jobs.toml", now_ms=NOW_MS)


def refused(text: str) -> str:
    with pytest.raises(InvalidJobFile) as caught:
        read(text)
    assert caught.value.exit_code == 1  # not 2: `--dry-run --exit-code` says drift with 2
    return str(caught.value)


def test_jobs_are_the_api_bodies_with_the_set_label() -> None:
    job_file = read(FILE)
    assert job_file.set == "payments-prod"
    nightly, close = job_file.jobs
    assert nightly.key == "nightly-report"
    assert nightly.body == {
        "key": "nightly-report",
        "name": "nightly report",
        "schedule": {"cron": "0 3 * * *", "timezone": "Europe/Berlin"},
        "target": {"type": "queue", "name": "reports"},
        "payload": {"team": 7, "tags": ["a", "b"]},
        "retry": {"max_attempts": 5, "backoff": "linear"},
        "labels": {"team": "payments", "schedd.set": "payments-prod"},
    }
    # a TOML date-time is its RFC 3339 text; payload_json is the payload TOML cannot hold
    assert close.body["schedule"] == {"run_at": "2027-12-31T23:00:00+01:00"}
    assert close.body["payload"] == {"account": None} and "payload_json" not in close.body
    assert close.body["labels"] == {"schedd.set": "payments-prod"}


def test_a_file_without_a_set_adds_no_label_and_may_have_no_jobs() -> None:
    job_file = read(
        '[[job]]\nkey = "k"\nschedule = {cron = "@daily"}\ntarget = {type = "queue", name = "q"}\n'
    )
    assert job_file.set is None and job_file.jobs[0].body["labels"] == {}
    assert read('set = "empty"').jobs == ()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[job]\nkey = 1", "jobs.toml: is not valid TOML: "),
        ('sets = "x"', "jobs.toml: sets: unknown top-level field"),
        ('set = ""', 'jobs.toml: set: must be a string of 1-200 characters, got ""'),
        ('[job]\nkey = "k"', "jobs.toml: job: write each job as a [[job]] table, not [job]"),
        ('[[job]]\nname = "no key"', "jobs.toml: job #1: key: is required"),
        (
            '[[job]]\nkey = "has space"',
            'jobs.toml: job #1: key: must match [A-Za-z0-9_.:/-]{1,200}, got "has space"',
        ),
        ("[[job]]\nkey = " + '"' + "k" * 201 + '"', "jobs.toml: job #1: key: must match"),
    ],
)
def test_a_file_that_cannot_be_read_names_the_file_and_what(text: str, message: str) -> None:
    assert refused(text).startswith(message)


JOB = """[[job]]
key = "k"
schedule = { cron = "0 3 * * *" }
target = { type = "queue", name = "q" }
"""


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('schedule = { cron = "61 * * * *" }', 'job "k": schedule.cron: '),
        ('colour = "red"', 'job "k": colour: unknown field (a job\'s fields: key, name,'),
        ('misfire_policy = "sometimes"', 'job "k": misfire_policy: must be one of'),
        ("payload = { x = nan }", 'job "k": payload: NaN and Infinity are not JSON at x'),
        ('payload = 1\npayload_json = "2"', 'job "k": payload_json: give payload or payload_json'),
        ("payload_json = '{\"a\": '", 'job "k": payload_json: '),
        ('schedule = { delay = "10m" }', 'job "k": schedule.delay: counts from the moment of each'),
        ("schedule = { run_at = 2027-01-20T08:00:00 }", 'job "k": schedule'),  # no offset
        ('labels = { Team = "x" }', 'job "k": labels: name must match [a-z0-9_./-]{1,63}'),
        ("labels = { team = 7 }", 'job "k": labels.team: must be a string of at most 200'),
        (
            'labels = { "schedd.set" = "other" }',
            "job \"k\": labels.schedd.set: is 'other', but the file's set",
        ),
        (
            "labels = { " + ", ".join(f'l{i} = "v"' for i in range(16)) + " }",
            'job "k": labels: has 17 (with schedd.set), more than 16',
        ),
    ],
)
def test_a_bad_job_names_the_file_the_key_and_the_field(extra: str, message: str) -> None:
    text = (
        'set = "s"\n'
        + "\n".join(line for line in JOB.splitlines() if line.split(" =")[0] not in _fields(extra))
        + "\n"
        + extra
    )
    assert refused(text).startswith(f"jobs.toml: {message}"), refused(text)


def _fields(extra: str) -> set[str]:
    return {line.split(" =")[0] for line in extra.splitlines()}


def test_a_file_has_the_api_job_fields_and_payload_json() -> None:
    assert FILE_FIELDS - {"payload_json"} == JOB_FIELDS  # a new API field needs a place here


def test_a_key_named_twice_is_refused_with_both_places() -> None:
    assert refused(JOB + JOB) == 'jobs.toml: job "k": key: named twice (jobs #1 and #2)'


def test_a_set_label_equal_to_the_files_set_is_allowed() -> None:
    job_file = read('set = "s"\n' + JOB + 'labels = { "schedd.set" = "s" }')
    assert job_file.jobs[0].body["labels"] == {"schedd.set": "s"}


# ---------------------------------------------------------------- export's writing


def job_object(**spec: Any) -> dict[str, Any]:
    """A job object as GET /v1/jobs answers it (state fields included)."""
    return {
        "job_id": "job_01",
        "tenant_id": "t1",
        "key": "k",
        "name": None,
        "schedule": {"cron": "0 3 * * *", "timezone": "UTC"},
        "window": None,
        "target": {"type": "queue", "name": "q"},
        "payload": None,
        "retry": {
            "max_attempts": 3,
            "backoff": "exponential",
            "initial_delay": "1s",
            "max_delay": "5m",
        },
        "misfire_policy": "run_once",
        "overlap_policy": "allow",
        "max_runs": None,
        "on_failure": None,
        "labels": {},
        "status": "active",
        "next_run_at": "2027-01-16T03:00:00Z",
        "version": 3,
    } | spec


def test_export_writes_the_spec_fields_without_nulls_and_reads_back_the_same() -> None:
    jobs = [
        job_object(
            key="a",
            name="weekly",
            payload={"user": 42, "nested": {"list": [1, {"x": "y"}]}},
            on_failure={"alert_url": None, "after": 3, "pause": True},
            labels={"team": "payments", "schedd.set": "prod"},
        ),
        job_object(key="b/c", payload={"account": None}, labels={"schedd.set": "prod"}),
    ]
    text = write_job_file(
        [job_table(job, set_name="prod") for job in jobs], set_name="prod", header="a\n\nb"
    )
    assert text.startswith('# a\n#\n# b\n\nset = "prod"\n')
    assert '"schedd.set"' not in text
    assert [line for line in text.splitlines() if "null" in line] == [
        'payload_json = "{\\"account\\": null}"'
    ]
    read_back = read(text)
    assert read_back.set == "prod"
    first, second = read_back.jobs
    assert first.body == {
        "key": "a",
        "name": "weekly",
        "schedule": {"cron": "0 3 * * *", "timezone": "UTC"},
        "target": {"type": "queue", "name": "q"},
        "payload": {"user": 42, "nested": {"list": [1, {"x": "y"}]}},
        "retry": jobs[0]["retry"],
        "misfire_policy": "run_once",
        "overlap_policy": "allow",
        "on_failure": {"after": 3, "pause": True},
        "labels": {"team": "payments", "schedd.set": "prod"},
    }
    assert second.body["payload"] == {"account": None}
    assert second.body["labels"] == {"schedd.set": "prod"}


def test_export_without_a_common_set_keeps_each_jobs_set_label() -> None:
    job = job_object(labels={"schedd.set": "a"}, payload=[1, "two"])
    table = job_table(job, set_name=None)
    assert table["labels"] == {"schedd.set": "a"} and table["payload"] == [1, "two"]
    read_back = read(write_job_file([table], set_name=None, header="h"))
    assert read_back.set is None and read_back.jobs[0].body["labels"] == {"schedd.set": "a"}


# ---------------------------------------------------------------- after: by id or by key


def after_job(key: str, after: str) -> str:
    return (
        f'[[job]]\nkey = "{key}"\nschedule = {{ after = {after} }}\n'
        'target = { type = "queue", name = "q" }\n'
    )


def test_an_after_schedule_by_id_is_the_api_body() -> None:
    [job] = read(after_job("load", '{ job_id = "job_01a2", on = "failure" }')).jobs
    assert job.body["schedule"] == {"after": {"job_id": "job_01a2", "on": "failure"}}
    assert job.upstream_key is None


def test_an_after_by_key_stands_in_and_comes_after_the_job_of_the_file_it_names() -> None:
    text = (
        after_job("report", '{ key = "load", on = "finished" }')
        + after_job("load", '{ key = "extract" }')
        + JOB.replace('"k"', '"extract"')
        + after_job("elsewhere", '{ key = "on-the-node" }')
    )
    jobs = read(text).jobs
    assert [job.key for job in jobs] == ["extract", "load", "report", "elsewhere"]
    report = jobs[2]
    assert report.upstream_key == "load"
    assert report.body["schedule"] == {"after": {"job_id": "<load>", "on": "finished"}}
    assert with_upstream(report.body, "job_9")["schedule"] == {
        "after": {"job_id": "job_9", "on": "finished"}
    }
    assert jobs[1].body["schedule"] == {"after": {"job_id": "<extract>"}}  # on: the server's
    assert jobs[3].upstream_key == "on-the-node"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (after_job("a", '{ key = "a" }'), 'job "a": schedule.after.key: a job cannot run after'),
        (
            after_job("a", '{ key = "b" }')
            + after_job("b", '{ key = "c" }')
            + after_job("c", '{ key = "b" }'),
            'job "b": schedule.after.key: would close a cycle b -> c -> b',
        ),
        (
            after_job("a", '{ key = "b", job_id = "job_1" }'),
            'job "a": schedule.after: give job_id or key, not both',
        ),
        (after_job("a", '{ key = "has space" }'), 'job "a": schedule.after.key: must match'),
        (after_job("a", '{ key = "b", on = "never" }'), 'job "a": schedule.after.on: must be'),
        (after_job("a", '{ job = "b" }'), 'job "a": schedule.after.job: is not a field of after'),
        (
            after_job("a", '{ key = "b" }') + 'window = "1m"',
            'job "a": window: does not apply to after schedules',
        ),
        (
            after_job("a", '{ key = "b" }').replace("} }", '}, exclude = ["hols"] }'),
            'job "a": schedule.exclude: applies to cron and every schedules only',
        ),
    ],
)
def test_a_bad_after_names_the_job_and_the_field(text: str, message: str) -> None:
    assert refused(text).startswith(f"jobs.toml: {message}"), refused(text)


def test_export_names_an_upstream_of_the_file_by_key_and_others_by_id() -> None:
    extract = job_object(job_id="job_e", key="extract")
    load = job_object(
        job_id="job_l", key="load", schedule={"after": {"job_id": "job_e", "on": "success"}}
    )
    other = job_object(
        job_id="job_o", key="other", schedule={"after": {"job_id": "job_x", "on": "failure"}}
    )
    keys = {"job_e": "extract", "job_l": "load", "job_o": "other"}
    tables = [job_table(job, set_name=None, keys=keys) for job in (load, other, extract)]
    assert tables[0]["schedule"] == {"after": {"key": "extract", "on": "success"}}
    assert tables[1]["schedule"] == {"after": {"job_id": "job_x", "on": "failure"}}
    jobs = read(write_job_file(tables, set_name=None, header="h")).jobs
    assert [job.key for job in jobs] == ["extract", "load", "other"]
    assert (jobs[1].upstream_key, jobs[2].upstream_key) == ("extract", None)
    assert jobs[1].body["schedule"] == {"after": {"job_id": "<extract>", "on": "success"}}
