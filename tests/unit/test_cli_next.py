"""`schedctl next`: offline schedule preview, its JSON contract and its exit codes. schedctl's
entry point runs in the test process (tests/schedctl_inprocess.py); `process=True` starts the
real console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.schedctl_inprocess import run_schedctl

SCHEDCTL = [str(Path(sys.executable).with_name("schedctl"))]


def schedctl(*args: str, process: bool = False) -> subprocess.CompletedProcess[str]:
    if not process:
        return run_schedctl(args, env=dict(os.environ))
    return subprocess.run(
        [*SCHEDCTL, *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_json_output_lists_runs_in_utc() -> None:
    result = schedctl(
        "next",
        "0 8 * * MON",
        "--tz",
        "Asia/Kolkata",
        "--after",
        "2026-10-10T00:00:00Z",
        "-n",
        "2",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["runs"] == ["2026-10-12T02:30:00Z", "2026-10-19T02:30:00Z"]
    assert answer["occurrences"][0] == {
        "at": "2026-10-12T02:30:00Z",
        "local": "2026-10-12T08:00:00+05:30",
        "zone": "Asia/Kolkata",
        "abbreviation": "IST",
        "note": None,
    }


def test_table_shows_local_time_with_zone_abbreviation() -> None:
    result = schedctl(
        "next", "30 2 * * *", "--tz", "Europe/Berlin", "--after", "2027-03-27T00:00:00Z", "-n", "2"
    )
    assert result.returncode == 0, result.stderr
    # 02:30 does not exist on 2027-03-28 in Berlin: the run moves to the transition, 03:00 CEST.
    assert "2027-03-27 02:30 CET" in result.stdout
    assert "2027-03-28 03:00 CEST" in result.stdout
    assert result.stdout.splitlines() == [
        "#   local (Europe/Berlin)               UTC                    note",
        "1   Sat 2027-03-27 02:30 CET (+0100)    2027-03-27T01:30:00Z",
        "2   Sun 2027-03-28 03:00 CEST (+0200)   2027-03-28T01:00:00Z   02:30 does not exist"
        " on 28 March: runs at 03:00",
    ]


def test_every_and_at_forms() -> None:
    every = schedctl(
        "next",
        "--every",
        "90m",
        "--start",
        "2026-12-01T09:00:00Z",
        "--after",
        "2026-11-30T00:00:00Z",
        "-n",
        "3",
        "--json",
    )
    assert json.loads(every.stdout)["runs"] == [
        "2026-12-01T09:00:00Z",
        "2026-12-01T10:30:00Z",
        "2026-12-01T12:00:00Z",
    ]
    at = schedctl(
        "next", "--at", "2026-12-24T18:00:00+01:00", "--after", "2026-11-30T00:00:00Z", "--json"
    )
    assert json.loads(at.stdout)["runs"] == ["2026-12-24T17:00:00Z"]


def test_bad_cron_exits_2_with_the_engine_message() -> None:
    result = schedctl("next", "0 24 * * *")
    assert result.returncode == 2
    assert result.stderr.strip() == "error: cron: hour value 24 out of range 0-23"
    assert result.stdout == ""
    assert "Traceback" not in result.stderr


def test_bad_zone_exits_2() -> None:
    result = schedctl("next", "0 8 * * *", "--tz", "Mars/Olympus")
    assert result.returncode == 2
    assert "timezone: unknown zone 'Mars/Olympus'" in result.stderr


def test_a_zone_a_letter_off_is_named_and_timezone_is_tz() -> None:
    """A newcomer typed `--timezone Europe/Berln` (issue 30): the option is accepted under
    both names, and the nearest zone is named."""
    result = schedctl("next", "0 8 * * *", "--timezone", "Europe/Berln")
    assert result.returncode == 2
    assert "unknown zone 'Europe/Berln'; did you mean 'Europe/Berlin'" in result.stderr
    both = [
        schedctl("next", "0 8 * * *", flag, "Asia/Tokyo", "--count", "2")
        for flag in ("--tz", "--timezone")
    ]
    assert both[0].returncode == 0 and both[0].stdout == both[1].stdout


def test_naive_after_instant_is_rejected() -> None:
    result = schedctl("next", "0 8 * * *", "--after", "2026-10-10T00:00:00")
    assert result.returncode == 2
    assert "after:" in result.stderr and "offset" in result.stderr


def test_exactly_one_schedule_form_is_required() -> None:
    none_given = schedctl("next")
    both = schedctl("next", "0 8 * * *", "--every", "5m")
    assert none_given.returncode == both.returncode == 2
    assert "exactly one of EXPR, JOB_ID, --every or --at" in both.stderr


def test_unknown_option_is_a_usage_error() -> None:
    result = schedctl("next", "* * * * *", "--bogus", process=True)
    assert result.returncode == 2
    assert "No such option" in result.stderr


def test_debug_shows_the_traceback() -> None:
    result = schedctl("--debug", "next", "0 24 * * *", process=True)
    assert result.returncode == 2
    assert "Traceback" in result.stderr


def test_a_step_past_the_range_runs_on_the_first_value_as_import_crontab_takes_it() -> None:
    result = schedctl(
        "next", "0 0 */100 * *", "--after", "2026-01-01T00:00:00Z", "-n", "2", "--json"
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["runs"] == ["2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"]


def test_a_non_ascii_step_is_a_usage_error_naming_the_field() -> None:
    result = schedctl("next", "*/\u00b2 * * * *", "--json")
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "minute step" in result.stderr
