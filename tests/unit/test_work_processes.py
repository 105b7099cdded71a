"""`schedctl work`'s handler (processes.py) on real processes, without a node: a --shell command
becomes the payload's user when the worker is root (uid, gid and groups, no root left), gets
cron's environment, directory and stdin, and what it prints on stdout and stderr is kept, bounded,
for the ack or nack. This test process is root (as the project's machines and CI run it)."""

from __future__ import annotations

import os
import pwd
import threading
from typing import Any

import pytest

from schedd.cli.ctl.processes import Commands, Log, Settings
from schedd.worker import Ack, Message, Nack

DAEMON = pwd.getpwnam("daemon")


def commands(*, is_shell: bool = True, argv: tuple[str, ...] = ()) -> Commands:
    settings = Settings(
        queue="cron",
        argv=argv,
        is_shell=is_shell,
        concurrency=1,
        timeout_ms=20_000,
        visibility_timeout_ms=30_000,
        wait_ms=0,
        grace_ms=1_000,
        is_once=True,
        as_json=True,  # the commands' stdout goes to stderr, which pytest captures
    )
    return Commands(settings, Log(), threading.Event())


def message(payload: Any, attempt: int = 1) -> Message:
    at = "2026-12-05T06:25:00Z"
    return Message(
        receipt="r-1",
        job_id="job_1",
        scheduled_at=at,
        attempt=attempt,
        idempotency_key=f"job_1:{at}",
        payload=payload,
    )


def run(payload: Any) -> str | None:
    """The output of an acked command."""
    done = commands()(message(payload))
    assert isinstance(done, Ack)
    return done.output


def lines(text: str | None) -> dict[str, str]:
    assert text is not None
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def test_root_runs_the_command_as_its_user_with_no_root_left() -> None:
    assert os.geteuid() == 0, "this test runs as root (the project's machines and CI do)"
    script = (
        "grep -E '^(Uid|Gid|Groups):' /proc/self/status | tr -s '\\t ' ' ' | sed 's/: /=/';"
        ' echo "pwd=$(pwd)"; echo "HOME=$HOME"; echo "LOGNAME=$LOGNAME"; echo "USER=$USER"'
    )
    got = lines(run({"command": script, "user": "daemon"}))
    uid, gid = DAEMON.pw_uid, DAEMON.pw_gid
    assert got["Uid"].split() == [str(uid)] * 4  # real, effective, saved, filesystem
    assert got["Gid"].split() == [str(gid)] * 4
    groups = sorted(int(g) for g in got.get("Groups", "").split())
    assert groups == sorted(set(os.getgrouplist("daemon", gid)))
    assert 0 not in groups or gid == 0
    assert got["HOME"] == DAEMON.pw_dir and got["LOGNAME"] == got["USER"] == "daemon"
    assert got["pwd"] == (DAEMON.pw_dir if os.path.isdir(DAEMON.pw_dir) else "/")


def test_the_environment_is_crons_plus_the_run_and_the_shell_is_the_crontabs() -> None:
    env = {"SHELL": "/bin/bash", "PATH": "/usr/local/bin:/usr/bin:/bin", "MAILTO": "ops"}
    got = lines(run({"command": "env; echo BASH=$BASH_VERSION", "user": None, "env": env}))
    assert got["SHELL"] == "/bin/bash" and got["BASH"]  # bash ran it
    assert got["PATH"] == env["PATH"] and got["MAILTO"] == "ops"
    assert got["SCHEDD_JOB_ID"] == "job_1" and got["SCHEDD_QUEUE"] == "cron"
    own = pwd.getpwuid(os.geteuid())
    assert got["HOME"] == own.pw_dir and got["USER"] == own.pw_name
    names = set(got) - {"BASH", "PWD", "SHLVL", "_", "OLDPWD"}  # what the shells add
    assert names == {
        "HOME",
        "LOGNAME",
        "USER",
        "SHELL",
        "PATH",
        "MAILTO",
        "SCHEDD_QUEUE",
        "SCHEDD_JOB_ID",
        "SCHEDD_SCHEDULED_AT",
        "SCHEDD_ATTEMPT",
        "SCHEDD_IDEMPOTENCY_KEY",
    }


def test_stdin_is_the_percent_text_and_empty_without_one() -> None:
    assert run({"command": "cat", "user": None, "stdin": "Dear all,\n\nthe backup ran"}) == (
        "Dear all,\n\nthe backup ran\n"
    )
    assert run({"command": "cat; echo end", "user": None}) == "end\n"


def test_stdout_and_stderr_are_both_kept_and_bounded() -> None:
    both = run({"command": "echo one; echo two >&2; echo three", "user": None})
    assert both is not None and sorted(both.splitlines()) == ["one", "three", "two"]
    assert both.index("one") < both.index("three")  # each stream's lines in their order
    long = run({"command": "seq 1 100000", "user": None})
    assert long is not None and long.startswith("1\n2\n3\n") and long.endswith("\n99999\n100000\n")
    assert "characters left out ...]" in long and len(long) < 8_300
    assert run({"command": "true", "user": None}) is None  # nothing printed: no output


def test_a_failing_command_nacks_with_its_stderr_tail_and_keeps_its_output() -> None:
    with pytest.raises(Nack) as failed:
        commands()(message({"command": "echo partial; echo boom >&2; exit 3", "user": None}))
    assert str(failed.value) == "exit code 3\nboom"
    output = failed.value.output
    assert output is not None and sorted(output.splitlines()) == ["boom", "partial"]
    assert failed.value.is_dead is False


def test_a_missing_user_is_dead_and_nothing_runs(tmp_path: Any) -> None:
    marker = tmp_path / "ran"
    with pytest.raises(Nack) as dead:
        commands()(message({"command": f"touch {marker}", "user": "no-such-user-34"}))
    assert dead.value.is_dead is True and "no such user" in str(dead.value)
    assert not marker.exists()


def test_a_command_line_worker_keeps_its_output_too() -> None:
    done = commands(is_shell=False, argv=("sh", "-c", "cat; echo err >&2"))(message({"a": 1}))
    assert isinstance(done, Ack) and done.output is not None
    assert sorted(done.output.splitlines()) == ["err", '{"a": 1}']
