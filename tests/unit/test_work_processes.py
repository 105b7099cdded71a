"""`schedctl work`'s handler (processes.py) on real processes, without a node: a --shell command
becomes the payload's user when the worker is root (uid, gid and groups, no root left), gets
cron's environment, directory and stdin, and what it prints on stdout and stderr is kept, bounded,
for the ack or nack. This test process is root (as the project's machines and CI run it)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pwd
import signal
import threading
import time
from pathlib import Path
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
        allowed_users=("*",),
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


def test_home_is_entered_as_the_user_and_one_it_may_not_enter_gives_slash() -> None:
    assert os.stat("/root").st_mode & 0o077 == 0  # root's alone: daemon may not enter it
    script = 'echo "pwd=$(pwd)"; echo "HOME=$HOME"'
    for home, expected in [("/root", "/"), ("/no/such/dir", "/"), ("/tmp", "/tmp")]:
        got = lines(run({"command": script, "user": "daemon", "env": {"HOME": home}}))
        assert (got["pwd"], got["HOME"]) == (expected, home)


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


def test_the_workers_token_and_url_reach_no_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCHEDCTL_TOKEN", "sk_secret")
    monkeypatch.setenv("SCHEDCTL_URL", "http://10.0.0.1:8701")
    monkeypatch.setenv("WORKER_OWN", "kept")
    show = 'echo "token=${SCHEDCTL_TOKEN-unset} url=${SCHEDCTL_URL-unset} own=${WORKER_OWN-unset}"'
    argv = commands(is_shell=False, argv=("sh", "-c", show))(message(None))
    assert argv.output == "token=unset url=unset own=kept\n"  # -- CMD: the rest of work's own
    assert run({"command": show}) == "token=unset url=unset own=kept\n"  # an older payload
    assert run({"command": show, "user": None}) == "token=unset url=unset own=unset\n"  # cron's


def test_a_line_for_a_user_not_allowed_is_nacked_and_never_runs(tmp_path: Any) -> None:
    marker = tmp_path / "ran"
    settings = dataclasses.replace(commands()._s, allowed_users=("daemon",))
    handler = Commands(settings, Log(), threading.Event())
    for payload in [{"command": f"touch {marker}"}, {"command": f"touch {marker}", "user": None}]:
        with pytest.raises(Nack) as refused:
            handler(message(payload))
        assert "job runs as 'root'" in str(refused.value) and "--allow-user root" in str(
            refused.value
        )
        assert refused.value.is_dead is False and refused.value.output is None
    assert not marker.exists()


@pytest.mark.parametrize(
    "background", ["sleep 30 >/dev/null 2>&1 &", "sleep 30 &", "(sleep 3; echo late) &"]
)
def test_what_a_line_leaves_running_keeps_running_and_the_attempt_ends(background: str) -> None:
    started = time.monotonic()
    done = run({"command": f"echo before; {background} echo pid=$!", "user": None})
    assert time.monotonic() - started < 5  # not the sleep's 30 s: the pipes are not awaited
    assert done is not None and done.startswith("before\npid=")
    assert "late" not in done  # printed after the attempt ended: relayed, not kept
    pid = int(lines(done)["pid"])
    try:
        assert is_running(pid)  # no kill of the group after a normal exit
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_a_timeout_still_kills_what_the_line_left_running() -> None:
    settings = dataclasses.replace(commands()._s, timeout_ms=300)
    handler = Commands(settings, Log(), threading.Event())
    with pytest.raises(Nack) as timed_out:
        handler(message({"command": "sleep 30 & echo pid=$!; wait", "user": None}))
    assert str(timed_out.value).startswith("timed out after 300ms")
    pid = int(lines(timed_out.value.output)["pid"])
    assert not is_running(pid)


def is_running(pid: int) -> bool:
    """Whether pid runs (a killed child not yet reaped by whoever inherited it does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_command_line_worker_keeps_its_output_too() -> None:
    done = commands(is_shell=False, argv=("sh", "-c", "cat; echo err >&2"))(message({"a": 1}))
    assert isinstance(done, Ack) and done.output is not None
    assert sorted(done.output.splitlines()) == ["err", '{"a": 1}']
