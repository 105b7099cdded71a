"""`schedctl import-crontab` (its entry point in the test process, tests/schedctl_inprocess.py)
and `schedctl work --shell` (the real console script, a subprocess) on a real node."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.test_schedctl import Ctl
from tests.servers import ADMIN_TOKEN, NodeProcess

CRONTAB = """\
MAILTO=ops@example.com
CRON_TZ=Asia/Kolkata
0 8 * * MON ./weekly-report.sh
*/15 * * * * echo ping
@reboot ./boot.sh
"""


@pytest.fixture(scope="module")
def ctl(node: NodeProcess) -> Ctl:
    return Ctl(node.url, ADMIN_TOKEN).new_tenant()


def test_import_makes_one_job_per_line_and_importing_again_makes_none(
    ctl: Ctl, tmp_path: Path
) -> None:
    path = tmp_path / "crontab"
    path.write_text(CRONTAB)
    first = ctl("import-crontab", str(path), "--queue", "cron-a", "--json")
    assert first.returncode == 0, first.stderr  # @reboot stays behind, which is no error
    report = json.loads(first.stdout)
    assert [row["command"] for row in report["created"]] == ["./weekly-report.sh", "echo ping"]
    assert report["existing"] == []
    assert [row["line"] for row in report["skipped"]] == [5]
    assert report["work_command"] == "schedctl work cron-a --shell"
    assert "MAILTO" in report["warnings"][0]

    job = ctl.json("get", report["created"][0]["job_id"])
    assert job["schedule"] == {"cron": "0 8 * * MON", "timezone": "Asia/Kolkata"}
    assert job["target"] == {"type": "queue", "name": "cron-a"}
    assert job["payload"] == {"command": "./weekly-report.sh"}

    again = json.loads(ctl("import-crontab", str(path), "--queue", "cron-a", "--json").stdout)
    assert again["created"] == []
    assert sorted(row["job_id"] for row in again["existing"]) == sorted(
        row["job_id"] for row in report["created"]
    )
    listed = ctl.json("ls", "--all")["jobs"]
    assert len([j for j in listed if j["target"].get("name") == "cron-a"]) == 2


def test_stdin_dry_run_and_unreadable_lines(ctl: Ctl) -> None:
    text = "0 3 * * * nightly\n99 * * * * broken\n"
    result = ctl("import-crontab", "-", "--queue", "cron-b", "--dry-run", "--json", stdin=text)
    assert result.returncode == 2  # a line could not be read: scripts must notice
    report = json.loads(result.stdout)
    assert [row["command"] for row in report["would_create"]] == ["nightly"]
    assert report["created"] == [] and report["skipped"][0]["line"] == 2
    listed = ctl.json("ls", "--all")["jobs"]
    assert not [j for j in listed if j["target"].get("name") == "cron-b"]  # nothing was sent
    human = ctl("import-crontab", "-", "--queue", "cron-b", "--dry-run", stdin=text)
    assert "would create" in human.stdout and "not imported" in human.stdout
    assert "schedctl work cron-b --shell" in human.stdout


def test_bad_options_fail_before_any_request(ctl: Ctl) -> None:
    for args, field in (
        (("--tz", "Mars/Olympus"), "--tz"),
        (("--queue", "no spaces"), "--queue"),
    ):
        result = ctl("import-crontab", "-", *args, stdin="0 * * * * x\n")
        assert result.returncode == 2 and field in result.stderr, result.stderr


def test_work_shell_runs_the_imported_command(ctl: Ctl, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    crontab = f'0 0 1 1 * echo "$SCHEDD_JOB_ID" > {marker}\n'
    report = json.loads(
        ctl("import-crontab", "-", "--queue", "cron-c", "--json", stdin=crontab).stdout
    )
    [created] = report["created"]
    assert ctl("trigger", created["job_id"]).returncode == 0  # a run now, not next January
    worked = ctl("work", "cron-c", "--shell", "--once", "--wait", "10s", "--json")
    assert worked.returncode == 0, worked.stderr
    assert marker.read_text().strip() == created["job_id"]
    both = ctl("work", "cron-c", "--shell", "--", "true")
    assert both.returncode == 2 and "either --shell or a command" in both.stderr


def test_an_empty_crontab_says_so_and_dry_run_hints_are_whole_lines(ctl: Ctl) -> None:
    empty = ctl("import-crontab", "-", "--queue", "cron-e", "--dry-run", stdin="# nothing\n")
    assert empty.returncode == 0
    assert "no crontab lines read" in empty.stderr and empty.stdout == ""
    dry = ctl("import-crontab", "-", "--queue", "cron-e", "--dry-run", stdin="0 8 * * * x\n")
    assert dry.returncode == 0, dry.stderr
    assert "  schedctl work cron-e --shell" in dry.stdout.splitlines()  # never cut by wrapping
