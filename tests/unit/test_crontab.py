"""Reading crontab files for `schedctl import-crontab` (schedd/cli/ctl/crontab_file.py) and the
jobs made of their lines (schedd/cli/ctl/crontab.py)."""

from __future__ import annotations

from schedd.cli.ctl.crontab import job_body, plan
from schedd.cli.ctl.crontab_file import (
    Crontab,
    Entry,
    RunParts,
    parse_crontab,
    run_parts_call,
    split_percent,
)

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
0 12 * * * mail -s hi ops%line one%line two
61 * * * * bad-minute
* * * * wrong-field-count
CRON_TZ=Mars/Olympus
0 1 * * * after-a-bad-zone
CRON_TZ=UTC
30 2 1 1 * yearly-ish
"""


def lines(crontab: Crontab) -> list[tuple[int, str, str, str]]:
    return [(e.line, e.cron, e.timezone, e.command) for e in crontab.entries]


def test_lines_become_entries_in_their_zone() -> None:
    crontab = parse_crontab(CRONTAB, timezone="Asia/Kolkata")
    assert lines(crontab) == [
        (
            7,
            "*/5 * * * *",
            "Asia/Kolkata",
            "/usr/bin/backup --full   # a trailing comment is part of the command, as in cron",
        ),
        (9, "0 8 * * MON-FRI", "Europe/Paris", "./report.sh  --week"),
        (10, "@daily", "Europe/Paris", "echo hi"),
        (12, "0 12 * * *", "Europe/Paris", "printf '50% done'"),
        (13, "0 12 * * *", "Europe/Paris", "mail -s hi ops"),
        (19, "30 2 1 1 *", "UTC", "yearly-ish"),
    ]
    assert {e.file for e in crontab.entries} == {"-"} and crontab.files == ["-"]
    assert {e.user for e in crontab.entries} == {None}


def test_what_cannot_be_imported_is_listed_with_the_reason() -> None:
    crontab = parse_crontab(CRONTAB, timezone="UTC")
    reasons = {skipped.line: skipped.reason for skipped in crontab.skipped}
    assert reasons[11].startswith("@reboot")
    assert "61" in reasons[14]
    assert reasons[15] == "expected five time fields and a command"
    assert reasons[17] == "CRON_TZ=Mars/Olympus is not a known time zone"
    assert set(reasons) == {11, 14, 15, 17}
    assert [s.line for s in crontab.skipped if not s.is_error] == [11]
    assert crontab.has_errors


def test_variables_apply_to_the_lines_after_them() -> None:
    crontab = parse_crontab(CRONTAB, timezone="UTC")
    first, report, *_, last = crontab.entries
    assert first.env == {
        "MAILTO": "ops@example.com",
        "SHELL": "/bin/bash",
        "PATH": "/usr/local/bin:/usr/bin",
        "RETRIES": "3",
    }
    assert first.mailto == "ops@example.com"
    assert report.env == first.env | {"CRON_TZ": "Europe/Paris"}  # quotes taken off
    assert last.env["CRON_TZ"] == "UTC"
    [warning] = crontab.warnings  # SHELL=, PATH= and the others are no longer warnings
    assert warning.line == 3 and "MAILTO=" in warning.text and "--mailto-alerts" in warning.text
    with_alerts = parse_crontab(CRONTAB, timezone="UTC", has_mailto_alerts=True)
    assert with_alerts.warnings == []


def test_tz_is_the_commands_variable_not_the_schedules_zone() -> None:
    text = "TZ=Asia/Tokyo\n0 1 * * * one\nTZ=Nowhere/Land\n0 2 * * * two\n"
    crontab = parse_crontab(text, timezone="Europe/Paris")
    one, two = crontab.entries
    assert (one.timezone, one.env) == ("Europe/Paris", {"TZ": "Asia/Tokyo"})
    assert (two.timezone, two.env) == ("Europe/Paris", {"TZ": "Nowhere/Land"})
    assert crontab.skipped == [] and not crontab.has_errors  # an unknown TZ is the command's
    assert [(n.line, n.text) for n in crontab.warnings] == [
        (
            1,
            "TZ=Asia/Tokyo sets the commands' TZ only: as in cron, the lines after it keep their "
            "schedule's zone (CRON_TZ= sets that)",
        ),
        (
            3,
            "TZ=Nowhere/Land sets the commands' TZ only: as in cron, the lines after it keep their "
            "schedule's zone (CRON_TZ= sets that)",
        ),
    ]
    moved = parse_crontab("CRON_TZ=Asia/Tokyo\n0 1 * * * one\n", timezone="UTC")
    assert moved.entries[0].timezone == "Asia/Tokyo"


def test_variable_lines_as_crontab_5_writes_them() -> None:
    text = (
        "A = spaced out  \n"
        "B='  kept  '\n"
        'C=""\n'
        "D=unquoted # not a comment\n"
        "PATH=$HOME/bin:$PATH\n"
        "LOGNAME=someone\n"
        "0 * * * * run A=1\n"
    )
    crontab = parse_crontab(text, timezone="UTC")
    [entry] = crontab.entries
    assert entry.command == "run A=1"
    assert entry.env == {
        "A": "spaced out",
        "B": "  kept  ",
        "C": "",
        "D": "unquoted # not a comment",
        "PATH": "$HOME/bin:$PATH",
    }
    notes = {note.line: note.text for note in crontab.warnings}
    assert "does not expand" in notes[5]
    assert "cron sets LOGNAME" in notes[6]


def test_percent_is_stdin_as_cron_does_it() -> None:
    assert split_percent("cmd") == ("cmd", None)
    assert split_percent("cmd%") == ("cmd", "")
    assert split_percent(r"date +\%F%") == ("date +%F", "")
    assert split_percent("mail -s x y%Hi,%%bye%") == ("mail -s x y", "Hi,\n\nbye\n")
    assert split_percent(r"cat%100\% sure%\n stays") == ("cat", "100% sure\n\\n stays")
    assert split_percent("a\\\\%b") == ("a\\\\", "b")  # an escaped backslash escapes no %
    assert split_percent("cat%ends\\") == ("cat", "ends\\")
    [entry] = parse_crontab("0 0 * * * tr a-z A-Z%hello%world\n", timezone="UTC").entries
    assert (entry.command, entry.stdin) == ("tr a-z A-Z", "hello\nworld")


def test_the_system_format_has_a_user_field() -> None:
    text = (
        "30 3 * * 0 root test -e /run/systemd/system || SERVICE_MODE=1 /sbin/e2scrub_all_cron\n"
        "@hourly\tpostgres\tvacuumdb --all\n"
        "0 0 * * * root\n"
    )
    crontab = parse_crontab(text, timezone="UTC", file="/etc/cron.d/x", is_system=True)
    assert [(e.user, e.command) for e in crontab.entries] == [
        ("root", "test -e /run/systemd/system || SERVICE_MODE=1 /sbin/e2scrub_all_cron"),
        ("postgres", "vacuumdb --all"),
    ]
    assert crontab.entries[0].source == "/etc/cron.d/x:1"
    assert crontab.skipped[0].reason.startswith("expected a user and a command")
    as_user = parse_crontab(text, timezone="UTC", user="alice")
    assert as_user.entries[0].command.startswith("root test -e")  # as written, but said:
    assert as_user.entries[0].user == "alice"
    assert "a system crontab? (--system)" in as_user.warnings[0].text


def test_anacron_lines_lose_their_guard_and_catch_up() -> None:
    text = (
        "17 *\t* * *\troot\tcd / && run-parts --report /etc/cron.hourly\n"
        "25 6\t* * *\troot\ttest -x /usr/sbin/anacron || { cd / && run-parts --report "
        "/etc/cron.daily; }\n"
        "47 6 * * 7 root [ -x /usr/sbin/anacron ] || ( cd / && run-parts /etc/cron.weekly )\n"
        "30 7-23 * * * root [ -x /etc/init.d/anacron ] && /usr/sbin/invoke-rc.d anacron start\n"
    )
    crontab = parse_crontab(text, timezone="UTC", file="/etc/crontab", is_system=True)
    hourly, daily, weekly = crontab.entries
    assert not hourly.is_anacron and daily.is_anacron and weekly.is_anacron
    assert daily.command == "{ cd / && run-parts --report /etc/cron.daily; }"
    assert weekly.command == "( cd / && run-parts /etc/cron.weekly )"
    assert daily.legacy_command is not None and daily.legacy_command.startswith("root\ttest -x")
    [starter] = crontab.skipped
    assert starter.line == 4 and not starter.is_error and "anacron" in starter.reason
    assert [n.line for n in crontab.warnings] == [2, 3]
    assert not crontab.has_errors


def test_run_parts_calls_are_recognised() -> None:
    assert run_parts_call("cd / && run-parts --report /etc/cron.hourly") == RunParts(
        directory="/etc/cron.hourly", cd="/", options=("--report",)
    )
    assert run_parts_call("{ cd / && run-parts --report /etc/cron.daily; }") == RunParts(
        directory="/etc/cron.daily", cd="/", options=("--report",)
    )
    assert run_parts_call("run-parts /etc/cron.weekly/") == RunParts(
        directory="/etc/cron.weekly", cd=None, options=()
    )
    assert run_parts_call("run-parts --test /etc/cron.daily").can_expand is False  # type: ignore[union-attr]
    assert run_parts_call("run-parts /etc/cron.daily && echo done") is None
    assert run_parts_call("run-parts /srv/scripts") is None


def test_a_last_line_without_newline_is_not_run_by_cron() -> None:
    crontab = parse_crontab("0 * * * * first\n0 * * * * last", timezone="UTC")
    assert lines(crontab) == [(1, "0 * * * *", "UTC", "first")]
    [skipped] = crontab.skipped
    assert skipped.line == 2 and "newline" in skipped.reason and not skipped.is_error
    assert parse_crontab("A=1", timezone="UTC").skipped == []  # a variable is read all the same


def test_cronies_no_log_dash_is_dropped() -> None:
    crontab = parse_crontab("-*/5 * * * * root quiet\n", timezone="UTC", is_system=True)
    assert [(e.cron, e.user, e.command) for e in crontab.entries] == [
        ("*/5 * * * *", "root", "quiet")
    ]
    assert "cronie" in crontab.warnings[0].text


def test_only_reboot_lines_left_behind_is_not_an_error() -> None:
    crontab = parse_crontab("@reboot ./start.sh\n0 * * * * run\n", timezone="UTC")
    assert len(crontab.entries) == 1 and not crontab.has_errors


def entry(**fields: object) -> Entry:
    base: dict[str, object] = {
        "file": "/etc/cron.d/x",
        "line": 1,
        "cron": "0 8 * * *",
        "timezone": "UTC",
        "user": "root",
        "command": "run",
        "is_system": True,
    }
    return Entry(**(base | fields))  # type: ignore[arg-type]


def keys(*entries: Entry, queue: str = "q") -> list[str]:
    return [p.key for p in plan(list(entries), queue, is_anacron=False, mailto_alerts=None)]


def test_the_key_follows_the_line_not_where_it_is_in_the_file() -> None:
    [key] = keys(entry())
    assert key.startswith("crontab:q:") and len(key) == len("crontab:q:") + 40
    assert keys(entry(line=99, env={"PATH": "/bin"})) == [key]  # moved, or a variable changed
    for other in (
        {"file": "/etc/cron.d/y"},
        {"user": "postgres"},
        {"cron": "0 9 * * *"},
        {"timezone": "Europe/Paris"},
        {"command": "run --now"},
        {"stdin": "input"},
    ):
        assert keys(entry(**other)) != [key], other
    assert keys(entry(), queue="other") != [key]
    first, second = keys(entry(), entry(line=2))  # two identical lines: cron runs both
    assert first == key and second != key


def test_a_user_crontabs_key_follows_its_user_not_how_it_was_read() -> None:
    text = "0 8 * * * run\n0 8 * * * run\n"
    spool = parse_crontab(text, timezone="UTC", file="crontab -l -u alice", user="alice")
    stdin = parse_crontab(text, timezone="UTC", file="-", user="alice")
    path = parse_crontab(text, timezone="UTC", file="/home/alice/cron", user="alice")
    assert keys(*stdin.entries) == keys(*spool.entries) == keys(*path.entries)
    assert len(set(keys(*spool.entries))) == 2  # two identical lines: two jobs still
    bob = parse_crontab(text, timezone="UTC", file="-", user="bob")
    assert not set(keys(*bob.entries)) & set(keys(*spool.entries))
    nobody = parse_crontab(text, timezone="UTC", file="-")  # no user: the file it was read from
    assert [e.crontab for e in nobody.entries] == ["-", "-"]
    [planned, _] = plan(stdin.entries, "q", is_anacron=False, mailto_alerts=None)
    # the key it had before (its file's), to take the job made then over
    assert planned.file_key == keys(entry(file="-", user="alice", is_system=True))[0]
    assert planned.file_key != planned.key
    assert planned.body["labels"] == {  # labelled where it was read
        "crontab.file": "-",
        "crontab.line": "1",
        "crontab.user": "alice",
    }


def test_the_job_body_carries_what_the_worker_needs() -> None:
    line = entry(
        line=5,
        env={"PATH": "/usr/bin", "MAILTO": "ops@example.com"},
        mailto="ops@example.com",
        stdin="hello\n",
    )
    body = job_body(line, "host1", "k", is_anacron=False, mailto_alerts=None)
    assert body == {
        "name": "crontab: run",
        "key": "k",
        "labels": {"crontab.file": "/etc/cron.d/x", "crontab.line": "5", "crontab.user": "root"},
        "schedule": {"cron": "0 8 * * *", "timezone": "UTC"},
        "target": {"type": "queue", "name": "host1"},
        "payload": {
            "command": "run",
            "user": "root",
            "env": {"PATH": "/usr/bin", "MAILTO": "ops@example.com"},
            "source": "/etc/cron.d/x:5",
            "stdin": "hello\n",
            "mailto": "ops@example.com",
        },
        "misfire_policy": "skip",
    }
    alerted = job_body(line, "host1", "k", is_anacron=True, mailto_alerts="https://a.example/")
    assert alerted["on_failure"] == {"alert_url": "https://a.example/", "after": 1}
    assert alerted["misfire_policy"] == "run_once"
    no_mail = entry(user=None, mailto="", command="x\ty")
    quiet = job_body(no_mail, "q", "k", is_anacron=False, mailto_alerts="https://a.example/")
    assert "on_failure" not in quiet  # MAILTO="": cron would not have mailed
    assert quiet["payload"] == {
        "command": "x\ty",
        "user": None,
        "env": {},
        "source": "/etc/cron.d/x:1",
        "mailto": "",
    }
    assert quiet["name"] == "crontab: x y" and "crontab.user" not in quiet["labels"]  # type: ignore[operator]


def test_a_step_past_the_range_imports_and_a_non_ascii_step_is_skipped() -> None:
    crontab = parse_crontab("0 0 */100 * * monthly\n*/\u00b2 * * * * squared\n", timezone="UTC")
    assert lines(crontab) == [(1, "0 0 */100 * *", "UTC", "monthly")]
    [skipped] = crontab.skipped
    assert skipped.line == 2 and "minute step" in skipped.reason
