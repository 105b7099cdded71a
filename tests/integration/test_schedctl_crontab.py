"""`schedctl import-crontab` (its entry point in the test process, tests/schedctl_inprocess.py)
and `schedctl work --shell` (the real console script, a subprocess) on a real node; --machine on
tests/fixtures/debian-machine, a copy of a Debian machine's cron with a stand-in `crontab`."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from schedd.cli.ctl import crontab
from schedd.cli.ctl.crontab_file import parse_crontab
from tests.debian_machine import MACHINE, copy_machine
from tests.integration.test_docs_commands import BIN, ROOT, sh_blocks, substituted
from tests.integration.test_schedctl import Ctl, assert_fails
from tests.servers import ADMIN_TOKEN, NodeProcess, http

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
    assert job["payload"] == {
        "command": "./weekly-report.sh",
        "user": None,
        "env": {"MAILTO": "ops@example.com", "CRON_TZ": "Asia/Kolkata"},
        "source": f"{path}:3",
        "mailto": "ops@example.com",
    }
    assert job["labels"] == {"crontab.file": str(path), "crontab.line": "3"}
    assert job["key"] == report["created"][0]["key"] and job["misfire_policy"] == "skip"

    again = json.loads(ctl("import-crontab", str(path), "--queue", "cron-a", "--json").stdout)
    assert again["created"] == [] and again["updated"] == []
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
        (("-", "--tz", "Mars/Olympus"), "--tz"),
        (("-", "--queue", "no spaces"), "--queue"),
        ((), "FILE"),
        (("-", "--machine"), "FILE"),
        (("-", "--users"), "--users"),
        (("--machine", "--user", "alice"), "--machine"),
        (("-", "--system", "--user", "alice"), "--user"),
        (("-", "--user", "no spaces"), "--user"),
        (("-", "--mailto-alerts", "ops@example.com"), "--mailto-alerts"),
    ):
        result = ctl("import-crontab", *args, stdin="0 * * * * x\n")
        assert_fails(result, 2, field)


def test_work_shell_runs_the_imported_command(ctl: Ctl, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    crontab = f'0 0 1 1 * echo "$SCHEDD_JOB_ID" > {marker}\n'
    report = json.loads(
        ctl("import-crontab", "-", "--queue", "cron-c", "--json", stdin=crontab).stdout
    )
    [created] = report["created"]
    assert ctl("trigger", created["job_id"]).returncode == 0  # a run now, not next January
    worked = ctl(
        "work", "cron-c", "--shell", "--allow-user", "root", "--once", "--wait", "10s", "--json"
    )
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


@pytest.fixture(scope="module")
def machine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_machine(tmp_path_factory.mktemp("machine") / "root")


def machine_ctl(ctl: Ctl, root: Path, *args: str) -> Any:
    """import-crontab --machine on `root`, its `crontab` the stand-in of tests/fixtures."""
    path = f"{root / 'usr' / 'bin'}:{os.environ['PATH']}"
    result = ctl("import-crontab", "--machine", "--root", str(root), *args, env={"PATH": path})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout) if "--json" in args else result


def jobs_by_source(ctl: Ctl, queue: str) -> dict[str, dict[str, Any]]:
    listed = ctl.json("ls", "--all")["jobs"]
    return {
        j["payload"]["source"]: j
        for j in listed
        if j["target"].get("name") == queue and j["status"] != "cancelled"
    }


def test_a_machine_moves_in_one_command(ctl: Ctl, machine: Path) -> None:
    args = ("--users", "--queue", "host1", "--mailto-alerts", "https://alerts.example.com/cron")
    report = machine_ctl(ctl, machine, *args, "--json")
    assert [(s["file"], s["line"], s["is_error"]) for s in report["skipped"]] == [
        ("/etc/cron.d/anacron", 6, False),  # starts anacron, whose part the cluster takes
        ("crontab -l -u alice", 11, False),  # @reboot
    ]
    jobs = jobs_by_source(ctl, "host1")
    assert sorted(jobs) == sorted(row["file"] + ":" + str(row["line"]) for row in report["created"])
    assert len(jobs) == 12

    e2scrub = jobs["/etc/cron.d/e2scrub_all:1"]  # issue 34: the user is no longer the command's
    assert e2scrub["payload"] == {
        "command": "test -e /run/systemd/system || SERVICE_MODE=1 "
        "/usr/lib/x86_64-linux-gnu/e2fsprogs/e2scrub_all_cron",
        "user": "root",
        "env": {},
        "source": "/etc/cron.d/e2scrub_all:1",
    }
    assert e2scrub["schedule"] == {"cron": "30 3 * * 0", "timezone": "Europe/Berlin"}
    assert e2scrub["labels"] == {
        "crontab.file": "/etc/cron.d/e2scrub_all",
        "crontab.line": "1",
        "crontab.user": "root",
    }
    assert e2scrub["misfire_policy"] == "skip"
    assert e2scrub["on_failure"] == {
        "alert_url": "https://alerts.example.com/cron",
        "after": 1,
        "pause": False,
    }

    hourly, daily = jobs["/etc/crontab:19"], jobs["/etc/crontab:20"]
    assert hourly["payload"]["command"] == "cd / && run-parts --report /etc/cron.hourly"
    assert hourly["payload"]["env"] == {"SHELL": "/bin/sh"} and hourly["misfire_policy"] == "skip"
    assert daily["payload"]["command"] == "{ cd / && run-parts --report /etc/cron.daily; }"
    assert daily["misfire_policy"] == "run_once"  # anacron's promise
    assert jobs["/etc/crontab:22"]["schedule"]["cron"] == "52 6 1 * *"

    backup = jobs["/etc/cron.d/pg-backup:4"]["payload"]
    assert backup["user"] == "postgres" and backup["mailto"] == "dba@example.com"
    assert backup["command"] == "pg_dumpall | gzip > /var/backups/pg/all-$(date +%F).sql.gz"

    report_mail = jobs["crontab -l -u alice:6"]
    assert report_mail["payload"] == {
        "command": 'mail -s "Weekly report" team@example.com',
        "user": "alice",
        "env": {
            "SHELL": "/bin/bash",
            "PATH": "/home/alice/bin:/usr/local/bin:/usr/bin:/bin",
            "MAILTO": "alice@example.com",
        },
        "source": "crontab -l -u alice:6",
        "stdin": "Hi all,\n\nthe numbers are in ~/reports (100% of them).\n",
        "mailto": "alice@example.com",
    }
    monthly = jobs["crontab -l -u alice:8"]
    assert monthly["schedule"] == {"cron": "0 9 1 * *", "timezone": "America/New_York"}
    quiet = jobs["crontab -l -u alice:10"]
    assert quiet["payload"]["mailto"] == "" and quiet["on_failure"] is None  # MAILTO=""
    by_label = ctl.json("ls", "--label", "crontab.user=alice")["jobs"]
    assert len(by_label) == 4

    again = machine_ctl(ctl, machine, *args, "--json")
    assert again["created"] == [] and again["updated"] == [] and len(again["existing"]) == 12
    plain = machine_ctl(ctl, machine, "--users", "--queue", "host1", "--json")  # alerts taken off
    assert len(plain["updated"]) == 11 and plain["created"] == []  # all but MAILTO=""
    assert jobs_by_source(ctl, "host1")["/etc/cron.d/e2scrub_all:1"]["on_failure"] is None


def test_expand_run_parts_makes_a_job_per_script(ctl: Ctl, machine: Path) -> None:
    report = machine_ctl(
        ctl, machine, "--queue", "host2", "--expand-run-parts", "--anacron", "--json"
    )
    commands = [(row["line"], row["command"]) for row in report["created"]]
    assert [c for c in commands if c[0] in (19, 20, 21, 22)] == [
        (20, "cd / && /etc/cron.daily/dpkg"),
        (20, "cd / && /etc/cron.daily/logrotate"),
        (20, "cd / && /etc/cron.daily/man-db"),
        (21, "cd / && /etc/cron.weekly/man-db"),
    ]
    assert {row["misfire_policy"] for row in report["created"]} == {"run_once"}  # --anacron
    assert (
        "/etc/crontab:20: run-parts passes over /etc/cron.daily/: cleanup.sh (its name), "
        "disabled (not executable)" in report["warnings"]
    )
    human = machine_ctl(ctl, machine, "--queue", "host2", "--expand-run-parts", "--anacron")
    assert human.stdout.count("exists already") == len(report["created"])
    assert "/etc/crontab:20 " in human.stdout and "/etc/cron.d/e2scrub_all:2 " in human.stdout


def test_jobs_an_earlier_import_made_are_taken_over(ctl: Ctl, tmp_path: Path) -> None:
    """Before issue 34 a system line's user was part of its command, and jobs had no key."""
    old = "root test -e /run/systemd/system || SERVICE_MODE=1 /sbin/e2scrub_all -A -r"
    body = {
        "name": f"crontab: {old}",
        "schedule": {"cron": "10 3 * * *", "timezone": "UTC"},
        "target": {"type": "queue", "name": "legacy"},
        "payload": {"command": old},
        "misfire_policy": "skip",
    }
    status, made, _ = http("POST", f"{ctl.url}/v1/jobs", body, token=ctl.token)
    assert status == 201, made
    path = tmp_path / "e2scrub_all"
    path.write_text((MACHINE / "etc/cron.d/e2scrub_all").read_text())
    report = ctl.json("import-crontab", str(path), "--system", "--queue", "legacy")
    [taken] = report["updated"]
    assert taken["job_id"] == made["job_id"] and taken["line"] == 2
    job = ctl.json("get", made["job_id"])
    assert job["payload"]["command"] == old.removeprefix("root ") and job["key"] == taken["key"]
    assert job["payload"]["user"] == "root"
    assert len(report["created"]) == 1 and len(jobs_by_source(ctl, "legacy")) == 2


def test_the_getting_started_machine_section_runs(ctl: Ctl, machine: Path, tmp_path: Path) -> None:
    """docs/getting-started.md's "Move a machine's cron", as test_docs_commands.py runs it on a
    dev cluster (slow), here on the module's node: each line, substituted the same way."""
    text = (ROOT / "docs" / "getting-started.md").read_text()
    section = text.split("## 5. Move a machine's cron", 1)[1].split("\n## ", 1)[0]
    [block] = sh_blocks(section)
    ctl = ctl.new_tenant()  # its own jobs only
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDCTL_")}
    env |= {"PATH": f"{BIN}:{env['PATH']}", "SCHEDCTL_URL": ctl.url, "SCHEDCTL_TOKEN": ctl.token}
    out: list[str] = []
    for line in block:
        for pattern, replacement in substituted(machine):
            line = re.sub(pattern, replacement, line)
        assert "--root" in line or not line.startswith("PATH="), line
        result = subprocess.run(
            ["bash", "-e", "-c", line],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, f"$ {line}\n{result.stdout}\n{result.stderr}"
        out.append(result.stdout)
    dry_run, imported, listed, _ = out  # the worker: nothing is due yet
    assert dry_run.count("would create") == 12 and "crontab -l -u alice:6" in dry_run
    assert "12 created, 0 updated, 0 existed already" in imported
    assert listed.count("crontab: ") == 4  # /etc/crontab's four lines


def test_a_user_crontab_read_from_stdin_then_from_the_spool_is_imported_once(
    ctl: Ctl, machine: Path
) -> None:
    """getting-started's §4 (`crontab -l | ... - --user NAME`) then §5 (--machine --users)."""
    alice = (machine / "var/spool/cron/crontabs/alice").read_text()
    args = ("--user", "alice", "--tz", "Europe/Berlin", "--queue", "twice")
    first = ctl.json("import-crontab", "-", *args, stdin=alice)
    assert len(first["created"]) == 4
    machine_report = machine_ctl(ctl, machine, "--users", "--queue", "twice", "--json")
    from_alice = [r for r in machine_report["created"] if r["file"] == "crontab -l -u alice"]
    assert from_alice == []  # the same jobs, now labelled where --machine read them
    assert sorted(r["job_id"] for r in machine_report["updated"]) == sorted(
        r["job_id"] for r in first["created"]
    )
    assert len(machine_report["created"]) == 8  # the system crontabs' lines and root's
    assert len(jobs_by_source(ctl, "twice")) == 12


def test_a_user_crontab_job_keyed_by_its_file_is_taken_over(ctl: Ctl) -> None:
    """Before, `- --user NAME` keyed a line by "-": the import now finds that job and rekeys it."""
    line = "0 6 * * * ./morning.sh\n"
    [planned] = crontab.plan(
        parse_crontab(line, timezone="UTC", file="-", user="bob").entries,
        "rekeyed",
        is_anacron=False,
        mailto_alerts=None,
    )
    old = dict(planned.body) | {"key": planned.file_key}
    status, made, _ = http(
        "PUT", f"{ctl.url}/v1/jobs/by-key/{planned.file_key}", old, token=ctl.token
    )
    assert status == 201, made
    report = ctl.json("import-crontab", "-", "--user", "bob", "--queue", "rekeyed", stdin=line)
    assert report["created"] == []
    [taken] = report["updated"] + report["existing"]
    assert taken["job_id"] == made["job_id"] and taken["key"] == planned.key
    assert ctl.json("get", made["job_id"])["key"] == planned.key
    again = ctl.json("import-crontab", "-", "--user", "bob", "--queue", "rekeyed", stdin=line)
    assert [r["job_id"] for r in again["existing"]] == [made["job_id"]]
