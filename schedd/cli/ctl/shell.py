"""`schedctl work --shell`: what a message's payload runs, as whom, with which environment,
directory and standard input, by Debian cron's rules. It decides and starts nothing (processes.py
does); a payload it must not run is an Unrunnable, told apart: dead at once, or only not here.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_SHELL = "/bin/sh"
# Debian's cron.service starts `cron -f -P`: its commands get the PATH systemd gave cron (plain
# Vixie cron set its _PATH_DEFPATH, /usr/bin:/bin).
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ANY_USER = "*"  # --allow-user '*': any user the machine has
# Started as the line's user (never as root first): cron's chdir($HOME), / when that fails, then
# the line's shell.
CD_HOME = 'cd "$HOME" 2>/dev/null || cd /; exec "$0" -c "$1"'
WORKER_PREFIX = "SCHEDCTL_"  # the worker's own settings (its token, its URL): never a command's
CRON_KEYS = ("user", "env", "stdin")  # a payload with any of these gets cron's environment
_ENV_NAME = re.compile(r"[^=\0]+")


@dataclass(frozen=True, slots=True, kw_only=True)
class Launch:
    """How to start one message's command (the SCHEDD_* variables are added to `env` after)."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    stdin: bytes
    cwd: str | None = None  # None: the worker's own; entered before the user switch
    uid: int | None = None  # with gid and groups: the user the child becomes before its exec
    gid: int | None = None
    groups: tuple[int, ...] | None = None


class Unrunnable(Exception):
    """This payload is not run here: `is_dead` when no attempt anywhere could run it (the run is
    dead at once), else only this worker may not (a nack: another worker may)."""

    def __init__(self, message: str, *, is_dead: bool) -> None:
        super().__init__(message)
        self.is_dead = is_dead


def command_env(worker_env: Mapping[str, str]) -> dict[str, str]:
    """The worker's environment without its own settings: no SCHEDCTL_* (the token, the URL)."""
    return {k: v for k, v in worker_env.items() if not k.startswith(WORKER_PREFIX)}


def argv_launch(argv: tuple[str, ...], payload: Any, worker_env: Mapping[str, str]) -> Launch:
    """`schedctl work QUEUE -- CMD`: CMD with the payload as JSON on stdin, the worker's env
    without its SCHEDCTL_* variables."""
    return Launch(argv=argv, env=command_env(worker_env), stdin=_payload_json(payload))


def shell_launch(
    payload: Any, worker_env: Mapping[str, str], *, euid: int, allowed: frozenset[str]
) -> Launch:
    """`--shell`: payload.command under $SHELL -c, as a user in `allowed` (a worker that is root
    runs nothing else; one that is not, with an empty `allowed`, only its own user's lines). A
    payload with `user`, `env` or `stdin` (what import-crontab writes) runs as cron runs it; one
    with only `command` (an older import's, or one written by hand) as the worker's user, with
    the worker's environment (no SCHEDCTL_*) and the payload as JSON on stdin."""
    if not isinstance(payload, dict):
        raise Unrunnable("--shell: the payload is not an object with a 'command'", is_dead=True)
    command = payload.get("command")
    if not isinstance(command, str) or not command.strip() or "\0" in command:
        raise Unrunnable("--shell: the payload has no 'command' string", is_dead=True)
    if not any(key in payload for key in CRON_KEYS):
        _allow(_own_name(euid), euid, allowed)
        argv = (DEFAULT_SHELL, "-c", command)
        return Launch(argv=argv, env=command_env(worker_env), stdin=_payload_json(payload))
    entry = _entry(payload.get("user"), euid, allowed)
    env = _cron_env(entry, worker_env, _variables(payload.get("env", {})))
    switch = euid == 0 and payload.get("user") is not None
    return Launch(
        argv=(DEFAULT_SHELL, "-c", CD_HOME, env.get("SHELL") or DEFAULT_SHELL, command),
        env=env,
        stdin=_stdin(payload.get("stdin")),
        cwd="/",  # the worker's may be closed to the user; $HOME is entered after the switch
        uid=entry.pw_uid if switch and entry else None,
        gid=entry.pw_gid if switch and entry else None,
        groups=tuple(os.getgrouplist(entry.pw_name, entry.pw_gid)) if switch and entry else None,
    )


def _entry(user: object, euid: int, allowed: frozenset[str]) -> pwd.struct_passwd | None:
    """The passwd entry the command runs as: the payload's user, or the worker's own (None when
    the worker's uid has none). Raises Unrunnable for a user that is not here or not allowed."""
    if user is None:
        _allow(_own_name(euid), euid, allowed)
        return _own(euid)
    if not isinstance(user, str) or not user or "\0" in user:
        message = f"--shell: the payload's 'user' is not a user name: {user!r}"
        raise Unrunnable(message, is_dead=True)
    _allow(user, euid, allowed)
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        host = socket.gethostname()
        raise Unrunnable(f"job runs as {user!r}: no such user on {host}", is_dead=True) from None
    if entry.pw_uid != euid and euid != 0:
        own = _own(euid)
        name = own.pw_name if own is not None else f"uid {euid}"
        message = f"job runs as {user!r}; this worker runs as {name!r} and is not root"
        raise Unrunnable(message, is_dead=False)
    return entry


def _allow(user: str, euid: int, allowed: frozenset[str]) -> None:
    """Raise Unrunnable (a nack: another worker may allow it) for a user not in `allowed`; a
    worker that is root allows no user unless told, one that is not checks only when told."""
    if (not allowed and euid != 0) or ANY_USER in allowed or user in allowed:
        return
    refusal = f"job runs as {user!r}, which this worker may not run as"
    message = f"{refusal}: start it with --allow-user {user}"
    raise Unrunnable(message, is_dead=False)


def _own_name(euid: int) -> str:
    own = _own(euid)
    return own.pw_name if own is not None else f"uid {euid}"


def _own(euid: int) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwuid(euid)
    except KeyError:
        return None


def _variables(env: object) -> dict[str, str]:
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and _ENV_NAME.fullmatch(k) and "\0" not in v
        for k, v in env.items()
    ):
        raise Unrunnable("--shell: the payload's 'env' is not an object of strings", is_dead=True)
    return env


def _cron_env(
    entry: pwd.struct_passwd | None, worker_env: Mapping[str, str], variables: dict[str, str]
) -> dict[str, str]:
    """cron's: HOME, LOGNAME and USER from the passwd entry, SHELL and PATH by default, then the
    crontab's variables, which may replace all but LOGNAME and USER."""
    if entry is not None:
        home, name = entry.pw_dir, entry.pw_name
    else:  # a uid without a passwd entry (a container's): what the worker was given
        home, name = worker_env.get("HOME", "/"), worker_env.get("USER", "")
    login = {"LOGNAME": name, "USER": name} if name else {}
    base = {"HOME": home, "SHELL": DEFAULT_SHELL, "PATH": DEFAULT_PATH}
    return base | login | variables | login


def _stdin(text: object) -> bytes:
    """cron's: the text after the command's first %, ending in a newline; else nothing."""
    if text is None:
        return b""
    if not isinstance(text, str):
        raise Unrunnable("--shell: the payload's 'stdin' is not a string", is_dead=True)
    if text and not text.endswith("\n"):
        text += "\n"
    return text.encode()


def _payload_json(payload: Any) -> bytes:
    return (json.dumps(payload, ensure_ascii=False) + "\n").encode()
