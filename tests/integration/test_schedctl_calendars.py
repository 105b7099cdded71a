"""`schedctl calendars add|ls|show|rm`, `schedctl add --exclude` and the ```sh blocks of
docs/calendars.md against a real node; schedctl's entry point runs in the test process
(tests/schedctl_inprocess.py), the docs' blocks as bash scripts (about 1.5 s each)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.integration.test_schedctl import Ctl, assert_fails
from tests.servers import ADMIN_TOKEN, NodeProcess, wait_for

PAGE = Path(__file__).resolve().parents[2] / "docs" / "calendars.md"
BIN = Path(sys.executable).parent
ICS = """\
BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//schedd tests//calendars//EN
BEGIN:VEVENT
UID:christmas@test
SUMMARY:Christmas Day
DTSTART;VALUE=DATE:20201225
RRULE:FREQ=YEARLY
END:VEVENT
BEGIN:VEVENT
UID:party@test
SUMMARY:Office party
DTSTART:20261218T170000Z
END:VEVENT
END:VCALENDAR
"""


@pytest.fixture
def ctl(node: NodeProcess) -> Ctl:
    return Ctl(node.url, ADMIN_TOKEN).new_tenant()


def test_add_from_a_dates_file_and_an_ics_file_then_ls_and_show(ctl: Ctl, tmp_path: Path) -> None:
    dates = tmp_path / "holidays.txt"
    dates.write_text("# 2027\n2027-12-24\n\n2027-01-01   # New Year\n2027-12-24\n")
    created = ctl.json("calendars", "add", "us-holidays", "--dates", str(dates))
    assert created["dates"] == ["2027-01-01", "2027-12-24"] and created["dates_count"] == 2
    assert_fails(ctl("calendars", "add", "us-holidays", "--dates", str(dates)), 1, "us-holidays")
    (tmp_path / "company.ics").write_text(ICS)
    from_ics = ctl("calendars", "add", "company", "--ics", str(tmp_path / "company.ics"))
    assert from_ics.returncode == 0, from_ics.stderr
    assert "ignored 1 timed event" in from_ics.stderr
    assert re.search(r"^company\s+10\s+\d{4}-12-25\s+\d{4}-12-25\s", from_ics.stdout, re.M)
    listed = ctl.json("calendars", "ls")["calendars"]
    assert [(c["name"], c["dates_count"]) for c in listed] == [("company", 10), ("us-holidays", 2)]
    replaced = ctl.json(
        "calendars", "add", "us-holidays", "--dates", "-", "--replace", stdin="2028-07-04\n"
    )
    assert replaced["dates"] == ["2028-07-04"]
    shown = ctl("calendars", "show", "us-holidays")
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"^used by\s+0 jobs$", shown.stdout, re.M)
    assert re.search(r"^2028\s+07-04$", shown.stdout, re.M)
    assert_fails(ctl("calendars", "show", "nope"), 1, "nope")


def test_bad_input_exits_2_before_any_request(ctl: Ctl, tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("2027-01-01\n2027-02-30\n")
    assert_fails(ctl("calendars", "add", "x", "--dates", str(bad)), 2, "bad.txt line 2")
    assert_fails(ctl("calendars", "add", "no space", "--dates", str(bad)), 2, "NAME")
    assert_fails(ctl("calendars", "add", "x", "--ics", str(bad)), 2, "not an iCalendar file")
    assert ctl.json("calendars", "ls") == {"calendars": []}


def test_a_job_excluding_a_calendar_skips_its_days_and_keeps_it_from_deletion(ctl: Ctl) -> None:
    now = datetime.now(UTC)  # today and tomorrow (UTC, an every job's zone): a run is skipped
    days = "".join(f"{(now + timedelta(days=k)).date()}\n" for k in (0, 1))
    ctl.json("calendars", "add", "closed", "--dates", "-", stdin=days)
    assert_fails(ctl("add", "--every", "1h", "--exclude", "nope", "--queue", "q"), 2, "nope")
    job = ctl.json("add", "--every", "1s", "--exclude", "closed", "--queue", "q")
    assert job["schedule"]["exclude"] == ["closed"]
    assert "closed" in ctl("get", job["job_id"]).stdout
    assert ctl.json("calendars", "show", "closed")["used_by"] == 1

    def skipped() -> list[dict[str, str]]:
        runs = ctl.json("runs", job["job_id"])["runs"]
        return [run for run in runs if run["status"] == "skipped"]

    [run, *_] = wait_for(skipped, 15, "a skipped run")
    assert run["error"] == "calendar:closed"
    moved = ctl.json("reschedule", job["job_id"], "--every", "2s", "--exclude", "closed")
    assert moved["schedule"]["exclude"] == ["closed"]
    daily = ctl.json("add", "--cron", "0 12 * * *", "--exclude", "closed", "--queue", "q")
    # the node's preview of a job applies its calendars: not today's nor tomorrow's noon
    after_them = f"{(now + timedelta(days=2)).date()}T12:00:00Z"
    assert ctl.json("next", daily["job_id"], "-n", "1")["runs"] == [after_them]
    refused = ctl("calendars", "rm", "closed")
    assert_fails(refused, 1, "is used by jobs")
    for created in (job, daily):
        ctl.json("cancel", created["job_id"])
    assert ctl.json("calendars", "rm", "closed") == {"name": "closed", "status": "deleted"}
    assert_fails(ctl("calendars", "rm", "closed"), 1, "closed")


def sh_blocks() -> list[str]:
    return re.findall(r"^```sh\n(.*?)^```", PAGE.read_text(), re.S | re.M)


@pytest.mark.parametrize("index", [0, 1, 2])
def test_the_docs_sh_blocks_run(ctl: Ctl, tmp_path: Path, index: int) -> None:
    assert len(sh_blocks()) == 3
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDCTL_")}
    env |= {"PATH": f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}", "SCHEDCTL_URL": ctl.url}
    env["SCHEDCTL_TOKEN"] = ctl.token
    result = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", sh_blocks()[index]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    out = f"--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    assert result.returncode == 0, out
    printed = [
        r"^us-holidays\s+6\s+2027-01-01\s+2027-12-24\s",  # add (and ls)
        r"^refused: job_\w+ excludes it$",
        r"^company\s+\d+\s+\d{4}-12-25\s",  # the next Christmases and the shutdown
    ][index]
    assert re.search(printed, result.stdout, re.M), out
