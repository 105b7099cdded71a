"""`schedctl work --shell` runs crontab lines as Debian cron would (issue 34), on a real node:
Debian's own /etc/crontab, a cron.d file with users, a user's crontab with PATH=, SHELL=, HOME=,
MAILTO= and % stdin. Each line's job is triggered, then one `work --once` runs it; the test reads
what the command printed (kept with the attempt) to see who ran it, in which environment and
directory, with which stdin. The worker runs as root (each line as its user), then as `nobody`
(a line for another user is refused, naming both). A throwaway user with a supplementary group
is made with useradd and removed after.

The jobs carry the payloads `schedctl import-crontab` writes (the agreed contract: command, user,
env, stdin, mailto, source), made here through the API.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_schedctl_work import Tenant, wait_for
from tests.servers import NodeProcess, http

CRONTABS = Path(__file__).resolve().parents[1] / "fixtures" / "crontabs"
ROOT = Path(__file__).resolve().parents[2]
RETRIES = {"max_attempts": 3, "backoff": "fixed", "initial_delay": "1h", "max_delay": "1h"}
ETC_CRONTAB_ENV = {
    "SHELL": "/bin/sh",
    "PATH": "/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin",
}
CRON_D_ENV = {"SHELL": "/bin/bash", "PATH": "/usr/local/bin:/usr/bin:/bin", "MAILTO": "root"}
USER_ENV = {
    "MAILTO": "ops@example.com",
    "SHELL": "/bin/bash",
    "PATH": "/opt/reports/bin:/usr/bin:/bin",
    "HOME": "/tmp",
}


def payload(path: str, number: int, user: str | None, env: dict[str, str]) -> dict[str, Any]:
    """The payload of a crontab line as the import writes it: the command after the time fields
    (and the user field of a system crontab), the text after its first % as stdin."""
    line = (CRONTABS / path).read_text().splitlines()[number - 1]
    fields = line.split(None, 6 if user is not None else 5)
    command = fields[-1]
    body: dict[str, Any] = {"user": user, "env": env, "source": f"{path}:{number}"}
    if "MAILTO" in env:
        body["mailto"] = env["MAILTO"]
    head, percent, rest = command.replace("\\%", "\0").partition("%")
    body["command"] = head.replace("\0", "%")
    if percent:
        body["stdin"] = rest.replace("%", "\n").replace("\0", "%")
    return body


class Cron(Tenant):
    """The tenant's crontab jobs on one queue, triggered and run by `schedctl work --shell`."""

    queue = f"cron-{uuid.uuid4().hex[:8]}"

    def add(self, body: dict[str, Any]) -> str:
        job = {
            "schedule": {"cron": "0 0 1 1 *", "timezone": "UTC"},  # due next January: triggered
            "target": {"type": "queue", "name": self.queue},
            "payload": body,
            "retry": RETRIES,
            "misfire_policy": "skip",
        }
        status, made, _ = http("POST", f"{self.node.url}/v1/jobs", job, token=self.token)
        assert status == 201, made
        return str(made["job_id"])

    def trigger(self, *jobs: str) -> None:
        for job_id in jobs:
            assert self.run("trigger", job_id).returncode == 0
        wait_for(lambda: self.ready() == len(jobs), what=f"{len(jobs)} ready messages")

    def ready(self) -> int:
        status, page, _ = http("GET", f"{self.node.url}/v1/queues", token=self.token)
        assert status == 200, page
        return sum(q["ready"] for q in page["queues"] if q["name"] == self.queue)

    def work_as_root(self, count: int) -> subprocess.CompletedProcess[str]:
        done = self.run(
            "work", self.queue, "--shell", "--once", "--wait", "10s", "--concurrency", str(count)
        )
        assert done.returncode == 0, done.stderr
        return done

    def attempt(self, job_id: str) -> dict[str, Any]:
        """The last attempt of the job's one run, with the run's status and error."""
        run = self.run_of(job_id)
        last: dict[str, Any] = run["attempts"][-1]
        return last | {"run_status": run["status"], "run_error": run["error"]}


@pytest.fixture(scope="module")
def cron(node: NodeProcess, tmp_path_factory: pytest.TempPathFactory) -> Cron:
    status, created, _ = http("POST", f"{node.url}/v1/tenants", {"name": "work-cron-tests"})
    assert status == 201, created
    return Cron(node, created["token"], tmp_path_factory.mktemp("cron"))


@pytest.fixture(scope="module")
def throwaway() -> Iterator[pwd.struct_passwd]:
    """A user of its own with a supplementary group and a home only it may enter."""
    assert os.geteuid() == 0, "these tests run as root (the project's machines and CI do)"
    suffix = uuid.uuid4().hex[:6]
    user, group = f"schedd-u{suffix}", f"schedd-g{suffix}"
    home = Path(tempfile.mkdtemp(prefix="schedd-home-"))
    subprocess.run(["groupadd", group], check=True)
    try:
        useradd = ["useradd", "-M", "-d", str(home), "-s", "/bin/sh", "-G", group, user]
        subprocess.run(useradd, check=True)
        try:
            entry = pwd.getpwnam(user)
            os.chown(home, entry.pw_uid, entry.pw_gid)
            home.chmod(0o700)
            yield entry
        finally:
            subprocess.run(["userdel", user], check=True)
    finally:
        subprocess.run(["groupdel", group], check=True)
        shutil.rmtree(home)


def cron_like(command: str, env: dict[str, str], cwd: str) -> tuple[int, str]:
    """What the command gives run directly by this test in cron's way: (exit code, output)."""
    done = subprocess.run(
        [env.get("SHELL", "/bin/sh"), "-c", command],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=30,
    )
    return done.returncode, done.stdout


def facts(output: str | None) -> dict[str, str]:
    assert output is not None
    pairs = (word.split("=", 1) for line in output.splitlines() for word in line.split(" "))
    return {pair[0]: pair[1] for pair in pairs if len(pair) == 2}


def test_debian_etc_crontab_runs_as_root_as_cron_would(cron: Cron) -> None:
    hourly = payload("debian-etc-crontab", 18, "root", ETC_CRONTAB_ENV)
    assert hourly["command"] == "cd / && run-parts --report /etc/cron.hourly"
    job_id = cron.add(hourly)
    cron.trigger(job_id)
    cron.work_as_root(1)
    attempt = cron.attempt(job_id)
    root = pwd.getpwnam("root")
    env = ETC_CRONTAB_ENV | {"HOME": root.pw_dir, "LOGNAME": "root", "USER": "root"}
    code, output = cron_like(hourly["command"], env, root.pw_dir)
    # run-parts reports an empty /etc/cron.hourly with nothing; a missing one with an error
    assert attempt["outcome"] == ("succeeded" if code == 0 else "failed"), attempt
    assert attempt["output"] == (output or None)


def test_a_cron_d_file_runs_each_line_as_its_user(cron: Cron) -> None:
    daemon, nobody = pwd.getpwnam("daemon"), pwd.getpwnam("nobody")
    users = {7: "daemon", 8: "nobody", 9: "root"}
    lines = {n: payload("cron.d-backup", n, user, CRON_D_ENV) for n, user in users.items()}
    jobs = {n: cron.add(body) for n, body in lines.items()}
    cron.trigger(*jobs.values())
    cron.work_as_root(len(jobs))

    as_daemon = cron.attempt(jobs[7])
    assert as_daemon["outcome"] == "succeeded", as_daemon
    assert facts(as_daemon["output"]) == {
        "user": "daemon",
        "home": daemon.pw_dir,
        "logname": "daemon",
        "shell": "/bin/bash",
        "bash": "yes",
        "pwd": daemon.pw_dir if os.path.isdir(daemon.pw_dir) else "/",
        "path": CRON_D_ENV["PATH"],
    }

    as_nobody = cron.attempt(jobs[8])  # exit 4: a nack, retried; its output kept all the same
    assert (as_nobody["outcome"], as_nobody["run_status"]) == ("failed", "retrying"), as_nobody
    assert as_nobody["error"] == "exit code 4\nto stderr"
    proc = [line.split(":", 1) for line in as_nobody["output"].splitlines() if ":" in line]
    status = {key: value.split() for key, value in proc}
    assert status["Uid"] == [str(nobody.pw_uid)] * 4 and status["Gid"] == [str(nobody.pw_gid)] * 4
    assert [int(g) for g in status["Groups"]] == sorted(
        set(os.getgrouplist("nobody", nobody.pw_gid))
    )
    assert "to stderr" in as_nobody["output"]

    as_root = cron.attempt(jobs[9])
    assert as_root["output"] == f"root's line: user=root home={pwd.getpwnam('root').pw_dir}\n"


def test_a_user_with_a_supplementary_group_gets_it_and_its_home(
    cron: Cron, throwaway: pwd.struct_passwd
) -> None:
    command = 'echo "user=$(id -un) groups=$(id -Gn | tr " " ,) pwd=$(pwd) home=$HOME"'
    job_id = cron.add({"command": command, "user": throwaway.pw_name, "env": {}})
    cron.trigger(job_id)
    cron.work_as_root(1)
    got = facts(cron.attempt(job_id)["output"])
    group = f"schedd-g{throwaway.pw_name.removeprefix('schedd-u')}"
    primary = grp.getgrgid(throwaway.pw_gid).gr_name
    assert got["user"] == throwaway.pw_name
    assert sorted(got["groups"].split(",")) == sorted([primary, group])
    assert got["pwd"] == got["home"] == throwaway.pw_dir


def test_a_user_crontab_gets_its_variables_and_its_percent_stdin(cron: Cron) -> None:
    tr, echo = (payload("user-crontab", n, None, USER_ENV) for n in (8, 9))
    assert (tr["command"], tr["stdin"]) == ("tr a-z A-Z", "Good morning\nteam 100% ready")
    jobs = [cron.add(tr), cron.add(echo)]
    cron.trigger(*jobs)
    cron.work_as_root(2)
    assert cron.attempt(jobs[0])["output"] == "GOOD MORNING\nTEAM 100% READY\n"
    got = cron.attempt(jobs[1])
    assert got["outcome"] == "succeeded", got
    lines = got["output"].splitlines()
    assert lines[0] == (
        f"path={USER_ENV['PATH']} shell=/bin/bash home=/tmp mailto=ops@example.com user=root"
    )
    assert lines[1:] == ["/tmp"]  # cron's cd $HOME; `cat` read an empty stdin


def test_a_user_that_does_not_exist_is_dead_at_once_with_the_reason(cron: Cron) -> None:
    job_id = cron.add({"command": "true", "user": "no-such-user-34", "env": {}})
    cron.trigger(job_id)
    done = cron.work_as_root(1)
    reason = f"job runs as 'no-such-user-34': no such user on {socket.gethostname()}"
    attempt = cron.attempt(job_id)
    assert (attempt["run_status"], attempt["run_error"]) == ("dead", reason), attempt
    dead = cron.deadletter_of(job_id)
    assert dead is not None and dead["error"] == reason and dead["attempts"] == 1
    assert f"not run job={job_id} attempt=1 (dead): {reason}" in done.stderr


def python_for_nobody() -> str:
    """An interpreter `nobody` may run with this checkout and its packages (the venv's may sit
    under a home only root enters: then the system's of the same version)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (sys.executable, shutil.which(version, path="/usr/local/bin:/usr/bin") or ""):
        try:
            probe = as_nobody([candidate, "-c", "import schedd.cli.ctl.main"])
        except OSError:  # not even executable by nobody
            continue
        if probe.returncode == 0:
            return candidate
    raise AssertionError(f"no {version} that nobody may run: tried {sys.executable}, {version}")


def as_nobody(
    argv: list[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    nobody = pwd.getpwnam("nobody")
    path = f"{ROOT}:{sysconfig.get_paths()['purelib']}"
    return subprocess.run(
        argv,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": path, **(env or {})},
        cwd="/",
        user=nobody.pw_uid,
        group=nobody.pw_gid,
        extra_groups=[],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_worker_that_is_not_root_refuses_another_users_line_and_runs_its_own(
    cron: Cron,
) -> None:
    python = python_for_nobody()
    other = cron.add(payload("cron.d-backup", 7, "daemon", CRON_D_ENV))
    own = cron.add({"command": 'id -un; echo "home=$HOME"', "user": "nobody", "env": {}})
    unnamed = cron.add({"command": "id -un", "user": None, "env": {}})
    cron.trigger(other, own, unnamed)
    main = "from schedd.cli.ctl.main import main; main()"
    argv = [python, "-c", main, "work", cron.queue, "--shell", "--once", "--wait", "10s"]
    env = {"SCHEDCTL_URL": cron.node.url, "SCHEDCTL_TOKEN": cron.token}
    done = as_nobody([*argv, "--concurrency", "3", "--json"], env)
    assert done.returncode == 0, done.stderr
    outcomes = {
        line["job_id"]: line["outcome"] for line in map(json.loads, done.stdout.splitlines())
    }
    assert outcomes == {other: "nacked", own: "acked", unnamed: "acked"}

    refused = cron.attempt(other)
    refusal = "job runs as 'daemon'; this worker runs as 'nobody' and is not root"
    assert (refused["run_status"], refused["error"]) == ("retrying", refusal), refused
    assert refused["output"] is None  # it never ran
    assert f"not run job={other} attempt=1: {refusal}" in done.stderr
    assert cron.attempt(own)["output"] == f"nobody\nhome={pwd.getpwnam('nobody').pw_dir}\n"
    assert cron.attempt(unnamed)["output"] == "nobody\n"
