"""Reading crontab files for `schedctl import-crontab`."""

from __future__ import annotations

from schedd.cli.ctl.crontab import Entry, parse_crontab

CRONTAB = r"""
# nightly things
MAILTO=ops@example.com
SHELL=/bin/bash
PATH=/usr/local/bin:/usr/bin
RETRIES=3
*/5 * * * * /usr/bin/backup --full   # a trailing comment is part of the command, as in cron
CRON_TZ="Europe/Paris"
0 8 * * MON-FRI  ./report.sh  --week
@daily echo hi
@reboot ./start.sh
0 12 * * * printf '50\% done'
0 12 * * * date +%s > /tmp/stamp
61 * * * * bad-minute
* * * * wrong-field-count
TZ=Mars/Olympus
0 1 * * * after-a-bad-zone
TZ=UTC
30 2 1 1 * yearly-ish
"""


def test_lines_become_entries_in_their_zone() -> None:
    crontab = parse_crontab(CRONTAB, timezone="Asia/Kolkata")
    assert crontab.entries == [
        Entry(
            7,
            "*/5 * * * *",
            "Asia/Kolkata",
            "/usr/bin/backup --full   # a trailing comment is part of the command, as in cron",
        ),
        Entry(9, "0 8 * * MON-FRI", "Europe/Paris", "./report.sh  --week"),
        Entry(10, "@daily", "Europe/Paris", "echo hi"),
        Entry(12, "0 12 * * *", "Europe/Paris", "printf '50% done'"),
        Entry(19, "30 2 1 1 *", "UTC", "yearly-ish"),
    ]


def test_what_cannot_be_imported_is_listed_with_the_reason() -> None:
    crontab = parse_crontab(CRONTAB, timezone="UTC")
    reasons = {skipped.line: skipped.reason for skipped in crontab.skipped}
    assert reasons[11].startswith("@reboot")
    assert "feeds stdin" in reasons[13]
    assert "61" in reasons[14]
    assert reasons[15] == "expected five time fields and a command"
    assert reasons[17] == "TZ=Mars/Olympus is not a known time zone"
    assert set(reasons) == {11, 13, 14, 15, 17}
    assert crontab.has_errors


def test_variables_that_do_not_apply_are_warnings() -> None:
    warnings = parse_crontab(CRONTAB, timezone="UTC").warnings
    assert [w.split(":")[0] for w in warnings] == ["line 3", "line 4", "line 5", "line 6"]
    assert "MAILTO=" in warnings[0] and "dead letters" in warnings[0]
    assert "RETRIES=" in warnings[3]


def test_only_reboot_lines_left_behind_is_not_an_error() -> None:
    crontab = parse_crontab("@reboot ./start.sh\n0 * * * * run\n", timezone="UTC")
    assert len(crontab.entries) == 1 and not crontab.has_errors


def test_the_idempotency_key_follows_the_line_zone_and_queue() -> None:
    entry = Entry(1, "0 8 * * *", "UTC", "run")
    assert entry.key("q") == Entry(99, "0 8 * * *", "UTC", "run").key("q")  # line number: no
    assert entry.key("q") != entry.key("other")
    assert entry.key("q") != Entry(1, "0 8 * * *", "Europe/Paris", "run").key("q")
    assert entry.key("q") != Entry(1, "0 9 * * *", "UTC", "run").key("q")
    body = entry.body("q")
    assert body["schedule"] == {"cron": "0 8 * * *", "timezone": "UTC"}
    assert body["payload"] == {"command": "run"} and body["misfire_policy"] == "skip"


def test_a_step_past_the_range_imports_and_a_non_ascii_step_is_skipped() -> None:
    crontab = parse_crontab("0 0 */100 * * monthly\n*/\u00b2 * * * * squared\n", timezone="UTC")
    assert crontab.entries == [Entry(1, "0 0 */100 * *", "UTC", "monthly")]
    [skipped] = crontab.skipped
    assert skipped.line == 2 and "minute step" in skipped.reason
