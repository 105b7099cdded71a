"""`schedctl import-crontab`, then `schedctl work --shell`, runs crontab lines as Debian's cron
would (issue 34), on a real node: the /etc/crontab of a Debian machine (tests/fixtures/
debian-machine), a cron.d file with users, a user's crontab with MAILTO=, SHELL=, PATH=, HOME= and
% stdin. Each line's job is triggered, then one `work --once` runs it; the test reads what the
command printed (kept with the attempt) to see who ran it, in which environment and directory,
with which stdin. The worker runs as root (each line as its user), then as `nobody` (a line for
another user is refused, naming both). A throwaway user with a supplementary group is made with
useradd and removed after.
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

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ETC_CRONTAB = FIXTURES / "debian-machine" / "etc" / "crontab"
CRON_D = FIXTURES / "crontabs" / "cron.d-backup"
USER_CRONTAB = FIXTURES / "crontabs" / "user-crontab"
ROOT = Path(__file__).resolve().parents[2]
RETRIES = {"max_attempts": 3, "backoff": "fixed", "initial_delay": "1h", "max_delay": "1h"}
CRON_D_PATH = "/usr/local/bin:/usr/bin:/bin"
# Debian's cron.service runs `cron -f -P`: the PATH systemd gives it (the fixture's comment)
DEBIAN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
USER_PATH = "/opt/reports/bin:/usr/bin:/bin"


class Cron(Tenant):
    """One tenant: crontabs imported to a queue, their jobs triggered and run by `schedctl work
    --shell` (as root: the console script; as nobody: see as_nobody)."""

    def import_crontab(self, queue: str, path: Path, *options: str) -> dict[int, str]:
        """Import a crontab: its jobs by line, each given retries (a failure shows as
        `retrying`, a dead run as dead at its first attempt)."""
        done = self.run("import-crontab", str(path), "--queue", queue, "--json", *options)
        assert done.returncode == 0, done.stderr
        jobs = {row["line"]: row["job_id"] for row in json.loads(done.stdout)["created"]}
        for job_id in jobs.values():
            url = f"{self.node.url}/v1/jobs/{job_id}"
            status, job, _ = http("PATCH", url, {"retry": RETRIES}, token=self.token)
            assert status == 200, job
        return jobs

    def payload(self, job_id: str) -> dict[str, Any]:
        status, job, _ = http("GET", f"{self.node.url}/v1/jobs/{job_id}", token=self.token)
        assert status == 200, job
        return dict(job["payload"])

    def trigger(self, queue: str, *jobs: str) -> None:
        for job_id in jobs:
            assert self.run("trigger", job_id).returncode == 0
        wait_for(lambda: self.ready(queue) == len(jobs), what=f"{len(jobs)} ready messages")

    def ready(self, queue: str) -> int:
        status, page, _ = http("GET", f"{self.node.url}/v1/queues", token=self.token)
        assert status == 200, page
        return sum(q["ready"] for q in page["queues"] if q["name"] == queue)

    def work_as_root(
        self, queue: str, count: int, allowed: tuple[str, ...] = ("*",)
    ) -> subprocess.CompletedProcess[str]:
        allow = [option for user in allowed for option in ("--allow-user", user)]
        done = self.run(
            "work", queue, "--shell", *allow, "--once", "--wait", "10s", "--concurrency", str(count)
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


@pytest.fixture
def queue() -> str:
    return f"cron-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def throwaway() -> Iterator[tuple[pwd.struct_passwd, str]]:
    """A user of its own (its passwd entry) with a supplementary group (its name) and a home
    only it may enter."""
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
            yield entry, group
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
    """The `name=value` words of an output."""
    assert output is not None
    pairs = (word.split("=", 1) for line in output.splitlines() for word in line.split(" "))
    return {pair[0]: pair[1] for pair in pairs if len(pair) == 2}


def test_debians_etc_crontab_runs_as_root_with_crons_default_path(
    cron: Cron, queue: str, tmp_path: Path
) -> None:
    crontab = tmp_path / "crontab"
    where = 'echo "$PATH $HOME $(pwd)"'
    crontab.write_text(ETC_CRONTAB.read_text() + f"30 4 * * * root {where}\n")
    jobs = cron.import_crontab(queue, crontab, "--system")
    hourly, printed = jobs[19], jobs[max(jobs)]
    payload = cron.payload(hourly)
    assert payload["command"] == "cd / && run-parts --report /etc/cron.hourly"
    assert (payload["user"], payload["env"]) == ("root", {"SHELL": "/bin/sh"})
    cron.trigger(queue, hourly, printed)
    cron.work_as_root(queue, 2)
    home = pwd.getpwnam("root").pw_dir
    assert cron.attempt(printed)["output"] == f"{DEBIAN_PATH} {home} {home}\n"
    attempt = cron.attempt(hourly)
    env = {"SHELL": "/bin/sh", "PATH": DEBIAN_PATH, "HOME": home}
    code, output = cron_like(payload["command"], env | {"LOGNAME": "root", "USER": "root"}, "/")
    # run-parts reports an empty /etc/cron.hourly with nothing; a missing one with an error
    assert attempt["outcome"] == ("succeeded" if code == 0 else "failed"), attempt
    assert attempt["output"] == (output or None)


def test_as_root_it_needs_allow_user_and_runs_no_line_for_another_user(
    cron: Cron, queue: str
) -> None:
    refused = cron.run("work", queue, "--shell", "--once", "--wait", "1s")
    assert refused.returncode == 2
    assert "--shell as root needs --allow-user NAME" in refused.stderr
    jobs = cron.import_crontab(queue, CRON_D, "--system")
    cron.trigger(queue, jobs[7], jobs[9])  # daemon's line, root's line
    done = cron.work_as_root(queue, 2, ("daemon",))
    assert cron.attempt(jobs[7])["outcome"] == "succeeded"
    refusal = "job runs as 'root', which this worker may not run as"
    refusal += ": start it with --allow-user root"
    as_root = cron.attempt(jobs[9])
    assert (as_root["run_status"], as_root["error"], as_root["output"]) == (
        "retrying",
        refusal,
        None,
    )
    assert f"not run job={jobs[9]} attempt=1: {refusal}" in done.stderr


def test_a_cron_d_file_runs_each_line_as_its_user(cron: Cron, queue: str) -> None:
    daemon, nobody = pwd.getpwnam("daemon"), pwd.getpwnam("nobody")
    jobs = cron.import_crontab(queue, CRON_D, "--system")
    assert sorted(jobs) == [7, 8, 9]
    cron.trigger(queue, *jobs.values())
    cron.work_as_root(queue, len(jobs))

    as_daemon = cron.attempt(jobs[7])
    assert as_daemon["outcome"] == "succeeded", as_daemon
    assert facts(as_daemon["output"]) == {
        "user": "daemon",
        "home": daemon.pw_dir,
        "logname": "daemon",
        "shell": "/bin/bash",
        "bash": "yes",
        "pwd": daemon.pw_dir if os.path.isdir(daemon.pw_dir) else "/",
        "path": CRON_D_PATH,
    }

    as_nobody = cron.attempt(jobs[8])  # exit 4: a nack, retried; its output kept all the same
    assert (as_nobody["outcome"], as_nobody["run_status"]) == ("failed", "retrying"), as_nobody
    assert as_nobody["error"] == "exit code 4\nto stderr"
    proc = [line.split(":", 1) for line in as_nobody["output"].splitlines() if ":" in line]
    status = {key: value.split() for key, value in proc}
    assert status["Uid"] == [str(nobody.pw_uid)] * 4  # real, effective, saved, filesystem
    assert status["Gid"] == [str(nobody.pw_gid)] * 4
    groups = sorted(set(os.getgrouplist("nobody", nobody.pw_gid)))
    assert [int(g) for g in status["Groups"]] == groups  # initgroups': none of root's
    assert "to stderr" in as_nobody["output"]

    as_root = cron.attempt(jobs[9])
    assert as_root["output"] == f"root's line: user=root home={pwd.getpwnam('root').pw_dir}\n"


def test_a_users_crontab_runs_as_its_user_with_its_variables_and_percent_stdin(
    cron: Cron, queue: str, throwaway: tuple[pwd.struct_passwd, str]
) -> None:
    user, group = throwaway
    jobs = cron.import_crontab(queue, USER_CRONTAB, "--user", user.pw_name)
    assert sorted(jobs) == [8, 9, 10]
    payload = cron.payload(jobs[8])
    assert (payload["command"], payload["stdin"]) == ("tr a-z A-Z", "Good morning\nteam 100% ready")
    assert (payload["user"], payload["mailto"]) == (user.pw_name, "ops@example.com")
    cron.trigger(queue, *jobs.values())
    cron.work_as_root(queue, len(jobs))

    assert cron.attempt(jobs[8])["output"] == "GOOD MORNING\nTEAM 100% READY\n"  # cron's newline
    echoed = cron.attempt(jobs[9])
    assert echoed["outcome"] == "succeeded", echoed
    assert echoed["output"].splitlines() == [
        f"path={USER_PATH} shell=/bin/bash home=/tmp mailto=ops@example.com user={user.pw_name}",
        "/tmp",  # cron's cd $HOME (the crontab's HOME=); `cat` read an empty stdin
    ]
    got = facts(cron.attempt(jobs[10])["output"])
    primary = grp.getgrgid(user.pw_gid).gr_name
    assert got["user"] == user.pw_name
    assert sorted(got["groups"].split(",")) == sorted([primary, group])
    assert got["pwd"] == got["home"] == "/tmp"


def test_a_users_home_is_its_directory_when_the_crontab_sets_none(
    cron: Cron, queue: str, throwaway: tuple[pwd.struct_passwd, str], tmp_path: Path
) -> None:
    user, _ = throwaway
    cron_d = tmp_path / "reports"
    cron_d.write_text(f'0 5 * * * {user.pw_name} echo "pwd=$(pwd) home=$HOME path=$PATH"\n')
    [job_id] = cron.import_crontab(queue, cron_d, "--system").values()
    cron.trigger(queue, job_id)
    cron.work_as_root(queue, 1)
    got = facts(cron.attempt(job_id)["output"])
    assert got == {"pwd": user.pw_dir, "home": user.pw_dir, "path": DEBIAN_PATH}


def test_a_user_that_does_not_exist_is_dead_at_once_with_the_reason(cron: Cron, queue: str) -> None:
    job_id = cron.import_crontab(queue, USER_CRONTAB, "--user", "no-such-user-34")[8]
    cron.trigger(queue, job_id)
    done = cron.work_as_root(queue, 1)
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
    system = shutil.which(version, path="/usr/local/bin:/usr/bin") or ""
    for candidate in (sys.executable, system):
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
    """Run argv as nobody (no group of root's), with this checkout and its packages."""
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
    cron: Cron, queue: str
) -> None:
    python = python_for_nobody()
    system = cron.import_crontab(queue, CRON_D, "--system")
    unnamed = cron.import_crontab(queue, USER_CRONTAB)[10]  # no --user: the worker's own
    other, own = system[7], system[8]  # daemon's line; nobody's line
    cron.trigger(queue, other, own, unnamed)
    main = "from schedd.cli.ctl.main import main; main()"
    argv = [python, "-c", main, "work", queue, "--shell", "--once", "--wait", "10s"]
    env = {"SCHEDCTL_URL": cron.node.url, "SCHEDCTL_TOKEN": cron.token}
    done = as_nobody([*argv, "--concurrency", "3", "--json"], env)
    assert done.returncode == 0, done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines()]
    outcomes = {result["job_id"]: result["outcome"] for result in results}
    assert outcomes == {other: "nacked", own: "nacked", unnamed: "acked"}  # own's exits 4

    refused = cron.attempt(other)
    refusal = "job runs as 'daemon'; this worker runs as 'nobody' and is not root"
    assert (refused["run_status"], refused["error"]) == ("retrying", refusal), refused
    assert refused["output"] is None  # it never ran
    assert f"not run job={other} attempt=1: {refusal}" in done.stderr
    nobody = pwd.getpwnam("nobody")
    own_output = cron.attempt(own)["output"]
    assert f"Uid:\t{nobody.pw_uid}\t" in own_output and "to stderr" in own_output
    got = facts(cron.attempt(unnamed)["output"])
    assert (got["user"], got["groups"], got["pwd"]) == (
        "nobody",
        grp.getgrgid(nobody.pw_gid).gr_name,
        "/tmp",
    )
