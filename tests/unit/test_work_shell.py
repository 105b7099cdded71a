"""`schedctl work --shell`'s reading of a payload by Debian cron's rules (shell.py): the shell,
the environment, the directory, stdin and the user to become, for a worker that is root or not
(the worker's euid is an argument: no process changes user here; test_work_processes.py runs
them). Uses the passwd entries every Debian system has: root, daemon, nobody."""

from __future__ import annotations

import json
import os
import pwd
import socket
from typing import Any

import pytest

from schedd.cli.ctl.shell import CD_HOME, Launch, Unrunnable, argv_launch, shell_launch

OWN_ENV = {"PATH": "/worker/bin:/usr/bin", "HOME": "/worker", "USER": "w", "SECRET": "s"}
WORKER_ENV = OWN_ENV | {"SCHEDCTL_TOKEN": "sk_secret", "SCHEDCTL_URL": "http://10.0.0.1:8701"}
DEBIAN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NOBODY = pwd.getpwnam("nobody")
DAEMON = pwd.getpwnam("daemon")


def launch(payload: Any, euid: int, allowed: tuple[str, ...] = ("*",)) -> Launch:
    return shell_launch(payload, WORKER_ENV, euid=euid, allowed=frozenset(allowed))


def test_an_older_payload_runs_with_the_workers_environment_but_not_its_token() -> None:
    payload = {"command": "echo hi"}
    got = launch(payload, 0)
    assert got == Launch(
        argv=("/bin/sh", "-c", "echo hi"), env=OWN_ENV, stdin=b'{"command": "echo hi"}\n'
    )
    assert argv_launch(("cat",), [1, "é"], WORKER_ENV) == Launch(
        argv=("cat",), env=OWN_ENV, stdin='[1, "é"]\n'.encode()
    )


def test_as_root_only_the_allowed_users_run_the_worker_itself_included() -> None:
    cases = [
        ({"command": "id"}, "root"),  # an older payload: the worker's own user
        ({"command": "id", "user": None}, "root"),
        ({"command": "id", "user": "root"}, "root"),
        ({"command": "id", "user": "daemon"}, "daemon"),
    ]
    for payload, user in cases:
        for allowed in [(), ("nobody",)]:
            with pytest.raises(Unrunnable) as refused:
                launch(payload, 0, allowed)
            assert str(refused.value) == (
                f"job runs as {user!r}, which this worker may not run as: "
                f"start it with --allow-user {user}"
            )
            assert refused.value.is_dead is False  # another worker may allow it
        assert launch(payload, 0, (user,)).argv[-1] == "id"
        assert launch(payload, 0, ("*",)).argv[-1] == "id"


def test_not_root_the_allowed_users_are_checked_only_when_given() -> None:
    assert launch({"command": "id", "user": None}, NOBODY.pw_uid, ()).env["USER"] == "nobody"
    with pytest.raises(Unrunnable, match="--allow-user nobody"):
        launch({"command": "id", "user": "nobody"}, NOBODY.pw_uid, ("daemon",))


def test_a_null_user_runs_as_the_worker_in_crons_minimal_environment() -> None:
    got = launch({"command": "env", "user": None}, NOBODY.pw_uid)
    assert got.argv == ("/bin/sh", "-c", CD_HOME, "/bin/sh", "env")
    assert got.env == {
        "HOME": NOBODY.pw_dir,
        "LOGNAME": "nobody",
        "USER": "nobody",
        "SHELL": "/bin/sh",
        "PATH": DEBIAN_PATH,
    }
    assert "SECRET" not in got.env  # nothing of the worker's own environment
    assert got.stdin == b""
    assert got.cwd == "/"  # $HOME is entered by the command's own shell, as its user
    assert (got.uid, got.gid, got.groups) == (None, None, None)  # no user to become


def test_crontab_variables_override_all_but_logname_and_user() -> None:
    env = {
        "SHELL": "/bin/bash",
        "PATH": "/opt/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "LOGNAME": "mallory",
        "USER": "mallory",
        "MAILTO": "ops@example.com",
        "LANG": "C.UTF-8",
    }
    got = launch({"command": "x", "user": "daemon", "env": env}, 0)
    assert got.argv == ("/bin/sh", "-c", CD_HOME, "/bin/bash", "x")
    assert got.env == env | {"LOGNAME": "daemon", "USER": "daemon"}
    assert got.cwd == "/"


def test_as_root_the_command_becomes_the_recorded_user_with_its_groups() -> None:
    got = launch({"command": "id", "user": "daemon"}, 0)
    assert (got.uid, got.gid) == (DAEMON.pw_uid, DAEMON.pw_gid)
    assert got.groups == tuple(os.getgrouplist("daemon", DAEMON.pw_gid))
    assert got.env["HOME"] == DAEMON.pw_dir and got.env["LOGNAME"] == "daemon"
    root = launch({"command": "id", "user": "root"}, 0)
    assert (root.uid, root.gid, root.env["HOME"]) == (0, 0, pwd.getpwnam("root").pw_dir)


def test_not_root_a_command_for_another_user_is_refused_naming_both() -> None:
    with pytest.raises(Unrunnable) as refused:
        launch({"command": "id", "user": "daemon"}, NOBODY.pw_uid)
    assert (
        str(refused.value) == "job runs as 'daemon'; this worker runs as 'nobody' and is not root"
    )
    assert refused.value.is_dead is False  # a worker that is root may run it
    own = launch({"command": "id", "user": "nobody"}, NOBODY.pw_uid)
    assert own.uid is None and own.env["USER"] == "nobody"  # its own user: runs, no switch


def test_a_user_that_does_not_exist_is_dead_with_the_reason() -> None:
    for euid in (0, NOBODY.pw_uid):
        with pytest.raises(Unrunnable) as dead:
            launch({"command": "id", "user": "no-such-user-34"}, euid)
        host = socket.gethostname()
        assert str(dead.value) == f"job runs as 'no-such-user-34': no such user on {host}"
        assert dead.value.is_dead is True


@pytest.mark.parametrize(
    ("stdin", "expected"),
    [
        ("Hello\nworld", b"Hello\nworld\n"),  # cron ends the text with a newline
        ("done\n", b"done\n"),
        ("", b""),
        ("é", "é\n".encode()),
    ],
)
def test_stdin_is_the_percent_text_ending_in_a_newline(stdin: str, expected: bytes) -> None:
    got = launch({"command": "cat", "user": None, "stdin": stdin}, NOBODY.pw_uid)
    assert got.stdin == expected


def test_a_worker_uid_without_a_passwd_entry_takes_home_and_user_from_its_environment() -> None:
    free = next(uid for uid in range(54_321, 60_000) if not _has_entry(uid))
    got = launch({"command": "env", "env": {"A": "1"}}, free)
    assert got.env == {
        "HOME": "/worker",
        "LOGNAME": "w",
        "USER": "w",
        "SHELL": "/bin/sh",
        "PATH": DEBIAN_PATH,
        "A": "1",
    }


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        ("echo hi", "not an object"),
        ({"user": None}, "no 'command'"),
        ({"command": "  ", "user": None}, "no 'command'"),
        ({"command": "a\0b"}, "no 'command'"),
        ({"command": "id", "user": 1000}, "'user' is not a user name"),
        ({"command": "id", "user": ""}, "'user' is not a user name"),
        ({"command": "id", "env": ["A=1"]}, "'env' is not an object of strings"),
        ({"command": "id", "env": {"A": 1}}, "'env' is not an object of strings"),
        ({"command": "id", "env": {"A=B": "1"}}, "'env' is not an object of strings"),
        ({"command": "id", "env": {"A": "x\0y"}}, "'env' is not an object of strings"),
        ({"command": "id", "stdin": ["x"]}, "'stdin' is not a string"),
    ],
)
def test_a_payload_that_can_never_run_is_dead(payload: Any, fragment: str) -> None:
    with pytest.raises(Unrunnable) as dead:
        launch(payload, 0)
    assert fragment in str(dead.value) and dead.value.is_dead is True, json.dumps(payload)


def _has_entry(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True
