"""`schedctl work` (the real console script, a subprocess), `queues ls` and `deadletters ...`
(schedctl's entry point in the test process, tests/schedctl_inprocess.py) against a real node.

Jobs fire one second after they are made; every wait is bounded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from tests.schedctl_inprocess import PROCESS_ONLY, run_schedctl
from tests.servers import ADMIN_TOKEN, NodeProcess, free_ports, http, serving

SCHEDCTL = str(Path(sys.executable).with_name("schedctl"))
Result = subprocess.CompletedProcess[str]
ONE_RETRY = {"max_attempts": 2, "backoff": "fixed", "initial_delay": "1s"}
NO_RETRY = {"max_attempts": 1}


def wait_for(condition: Callable[[], Any], timeout_s: float = 15.0, what: str = "") -> Any:
    """Poll until `condition()` is truthy and return it; fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout_s}s: {what or condition}")


class Tenant:
    """One tenant on the node: jobs through the API; `schedctl work` as a subprocess, the other
    commands in the test process."""

    def __init__(self, node: NodeProcess, token: str, tmp: Path) -> None:
        self.node, self.token, self.tmp = node, token, tmp
        self.workers: list[subprocess.Popen[str]] = []

    def env(self, url: str | None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDCTL_")}
        env |= {"SCHEDCTL_URL": url or self.node.url, "SCHEDCTL_TOKEN": self.token}
        return env | {"COLUMNS": "200", "OUT": str(self.tmp)}

    def run(self, *args: str, url: str | None = None, timeout_s: float = 30) -> Result:
        if not PROCESS_ONLY & set(args):
            return run_schedctl(args, env=self.env(url))
        return subprocess.run(
            [SCHEDCTL, *args],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=self.env(url),
            stdin=subprocess.DEVNULL,
        )

    def json(self, *args: str) -> Any:
        result = self.run(*args, "--json")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    def start(self, *args: str) -> subprocess.Popen[str]:
        """A `schedctl work` left running; the fixture stops it if the test does not."""
        worker = subprocess.Popen(
            [SCHEDCTL, "work", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=self.env(None),
        )
        self.workers.append(worker)
        return worker

    def job(self, queue: str, retry: dict[str, Any] | None = None, payload: Any = None) -> str:
        body: dict[str, Any] = {
            "schedule": {"delay": "1s"},
            "target": {"type": "queue", "name": queue},
            "payload": payload,
        }
        if retry is not None:
            body["retry"] = retry
        status, job, _ = http("POST", f"{self.node.url}/v1/jobs", body, token=self.token)
        assert status == 201, job
        return str(job["job_id"])

    def run_of(self, job_id: str) -> dict[str, Any]:
        """The job's one run ({} before it fires)."""
        url = f"{self.node.url}/v1/jobs/{job_id}/runs?outputs=true"
        status, page, _ = http("GET", url, token=self.token)
        assert status == 200 and len(page["runs"]) <= 1, page
        run: dict[str, Any] = page["runs"][0] if page["runs"] else {}
        return run

    def deadletter_of(self, job_id: str) -> dict[str, Any] | None:
        page = self.json("deadletters", "ls", "--all")
        found = [item for item in page["deadletters"] if item["job_id"] == job_id]
        return found[0] if found else None


@pytest.fixture(scope="module")
def tenant(node: NodeProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tenant]:
    status, created, _ = http("POST", f"{node.url}/v1/tenants", {"name": "work-tests"})
    assert status == 201, created
    own = Tenant(node, created["token"], tmp_path_factory.mktemp("work"))
    yield own
    for worker in own.workers:
        if worker.poll() is None:
            worker.terminate()
            try:
                worker.wait(timeout=10)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait(timeout=10)


@pytest.fixture
def queue() -> str:
    return f"q-{uuid.uuid4().hex[:10]}"


def stop(worker: subprocess.Popen[str], timeout_s: float = 15) -> tuple[int, str, str]:
    """SIGTERM, then (exit code, stdout, stderr)."""
    worker.send_signal(signal.SIGTERM)
    out, err = worker.communicate(timeout=timeout_s)
    return worker.returncode, out, err


def is_dead(pid: int) -> bool:
    """The process is gone, or a zombie nobody has reaped yet."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def test_success_acks_and_the_run_succeeds(tenant: Tenant, queue: str) -> None:
    job_id = tenant.job(queue)
    result = tenant.run("work", queue, "--once", "--wait", "10s", "--json", "--", "true")
    assert result.returncode == 0, result.stderr
    line = json.loads(result.stdout)
    assert line["job_id"] == job_id and line["attempt"] == 1
    assert line["exit_code"] == 0 and line["outcome"] == "acked" and line["error"] is None
    assert f"finished job={job_id} attempt=1 exit=0" in result.stderr
    run = tenant.run_of(job_id)
    assert run["status"] == "succeeded" and run["attempt"] == 1
    assert run["attempts"][0]["outcome"] == "succeeded"


def test_the_command_gets_the_payload_on_stdin_and_four_variables(
    tenant: Tenant, queue: str
) -> None:
    payload = {"user_id": 42, "name": "Zoë", "tags": ["a", "b"]}
    job_id = tenant.job(queue, payload=payload)
    script = 'cat > "$OUT/$SCHEDD_JOB_ID.in"; env | grep "^SCHEDD_" > "$OUT/$SCHEDD_JOB_ID.env"'
    result = tenant.run("work", queue, "--once", "--wait", "10s", "--", "sh", "-c", script)
    assert result.returncode == 0, result.stderr
    assert json.loads((tenant.tmp / f"{job_id}.in").read_text(encoding="utf-8")) == payload
    env = dict(
        line.split("=", 1) for line in (tenant.tmp / f"{job_id}.env").read_text().splitlines()
    )
    scheduled_at = tenant.run_of(job_id)["scheduled_at"]
    assert env["SCHEDD_JOB_ID"] == job_id
    assert env["SCHEDD_SCHEDULED_AT"] == scheduled_at
    assert env["SCHEDD_ATTEMPT"] == "1"
    assert env["SCHEDD_IDEMPOTENCY_KEY"] == f"{job_id}:{scheduled_at}"


@pytest.mark.slow
def test_a_failure_nacks_with_the_stderr_tail_retries_then_dead_letters(
    tenant: Tenant, queue: str
) -> None:
    job_id = tenant.job(queue, retry=ONE_RETRY)
    script = 'seq 1 3000 >&2; echo "boom on attempt $SCHEDD_ATTEMPT" >&2; exit 3'
    command = ("work", queue, "--once", "--wait", "10s", "--", "sh", "-c", script)
    first = tenant.run(*command)
    assert first.returncode == 0, first.stderr  # a failing command is an outcome, not an error
    assert f"finished job={job_id} attempt=1 exit=3" in first.stderr and "nacked" in first.stderr
    run = tenant.run_of(job_id)
    assert run["status"] == "retrying"
    error = run["attempts"][0]["error"]
    assert error.startswith("exit code 3\n") and error.endswith("boom on attempt 1")
    assert len(error) < 2100 and "\n2999\n3000\n" in error  # the tail, not the whole stderr

    second = tenant.run(*command)  # the retry is visible again after the 1s fixed backoff
    assert second.returncode == 0 and "attempt=2 exit=3" in second.stderr, second.stderr
    run = tenant.run_of(job_id)
    assert run["status"] == "dead" and run["attempt"] == 2
    assert run["error"].endswith("boom on attempt 2")

    dead = tenant.deadletter_of(job_id)
    assert dead is not None
    assert set(dead) == {
        "id",
        "job_id",
        "scheduled_at",
        "attempts",
        "error",
        "created_at",
        "target",
    }
    assert dead["attempts"] == 2 and dead["target"] == {"type": "queue", "name": queue}
    assert dead["error"] == run["error"]
    assert tenant.json("deadletters", "show", dead["id"]) == dead
    table = tenant.run("deadletters", "ls")
    assert table.returncode == 0 and dead["id"] in table.stdout and "exit code 3" in table.stdout
    [listed] = [q for q in tenant.json("queues", "ls")["queues"] if q["name"] == queue]
    counts = {"name": queue, "ready": 0, "in_flight": 0, "delayed": 0, "dead": 1}
    assert listed | counts == listed and listed["oldest_age_s"] is None


def test_schedctl_runs_shows_no_error_on_a_run_that_succeeded_on_its_retry(
    tenant: Tenant, queue: str
) -> None:
    job_id = tenant.job(queue, retry=ONE_RETRY)
    script = 'if [ "$SCHEDD_ATTEMPT" = 1 ]; then echo boom >&2; exit 1; fi'
    command = ("work", queue, "--once", "--wait", "10s", "--", "sh", "-c", script)
    for attempt in (1, 2):  # the retry is visible again after the 1s fixed backoff
        done = tenant.run(*command)
        assert done.returncode == 0 and f"attempt={attempt}" in done.stderr, done.stderr
    [run] = tenant.json("runs", job_id)["runs"]
    assert (run["status"], run["attempt"], run["error"]) == ("succeeded", 2, None), run
    assert run["attempts"][0]["error"] == "exit code 1\nboom", run
    table = tenant.run("runs", job_id)
    assert table.returncode == 0 and "succeeded" in table.stdout, table.stderr
    assert "boom" not in table.stdout and "exit code" not in table.stdout, table.stdout


@pytest.mark.slow
def test_redrive_gives_a_dead_letter_one_new_attempt(tenant: Tenant, queue: str) -> None:
    job_id = tenant.job(queue, retry=NO_RETRY)
    failed = tenant.run("work", queue, "--once", "--wait", "10s", "--", "false")
    assert failed.returncode == 0, failed.stderr
    dead = wait_for(lambda: tenant.deadletter_of(job_id), what="a dead letter")
    assert tenant.json("deadletters", "redrive", dead["id"]) == {
        "id": dead["id"],
        "status": "redriven",
    }
    assert tenant.deadletter_of(job_id) is None
    again = tenant.run("work", queue, "--once", "--wait", "10s", "--json", "--", "true")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["attempt"] == 2
    run = tenant.run_of(job_id)
    assert run["status"] == "succeeded" and run["error"] is None, run
    assert [a["outcome"] for a in run["attempts"]] == ["failed", "succeeded"]
    nothing_left = tenant.run("work", queue, "--once", "--wait", "1s", "--", "true")
    assert nothing_left.returncode == 0 and "started" not in nothing_left.stderr


@pytest.mark.slow
def test_redrive_of_several_ids_or_all_goes_through_the_batch_route(
    node: NodeProcess, tmp_path: Path
) -> None:
    status, created, _ = http("POST", f"{node.url}/v1/tenants", {"name": "redrive-batch"})
    assert status == 201, created
    own, queue = Tenant(node, created["token"], tmp_path), f"q-{uuid.uuid4().hex[:10]}"
    jobs = [own.job(queue, retry=NO_RETRY) for _ in range(3)]
    for _ in range(3):
        assert own.run("work", queue, "--once", "--wait", "10s", "--", "false").returncode == 0
    wait_for(
        lambda: len(own.json("deadletters", "ls", "--all")["deadletters"]) == 3,
        what="three dead letters",
    )
    ids = [item["id"] for item in own.json("deadletters", "ls", "--all")["deadletters"]]
    unknown = f"{jobs[0]}:1"
    some = own.run("deadletters", "redrive", ids[0], ids[1], unknown)
    assert some.returncode == 1, some.stderr
    assert f"{unknown}: not redriven: no dead letter" in some.stderr, some.stderr
    assert "redriven: 2, not redriven: 1" in some.stderr, some.stderr
    left = own.json("deadletters", "ls", "--all")["deadletters"]
    assert [item["id"] for item in left] == [ids[2]]

    everything = own.run("deadletters", "redrive", "--all", "--json")
    assert everything.returncode == 0, everything.stderr
    assert json.loads(everything.stdout) == {"results": [{"id": ids[2], "redriven": True}]}
    assert own.json("deadletters", "ls", "--all")["deadletters"] == []
    for args in ((), (ids[0], "--all")):
        wrong = own.run("deadletters", "redrive", *args)
        assert wrong.returncode == 2 and "--all" in wrong.stderr, wrong.stderr


class FirstBatchOnly(BaseHTTPRequestHandler):
    """Redrives the first batch it is sent, then answers 503 no_leader; records each batch."""

    batches: list[list[str]]

    def do_POST(self) -> None:
        ids = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["ids"]
        self.batches.append(ids)
        body: dict[str, Any]
        if len(self.batches) == 1:
            status, body = 200, {"results": [{"id": i, "redriven": True} for i in ids]}
        else:
            status, body = 503, {"error": {"code": "no_leader", "message": "no leader"}}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def first_batch_only() -> Iterator[tuple[str, list[list[str]]]]:
    """(the URL of a FirstBatchOnly server, the batches it was sent)."""
    batches: list[list[str]] = []
    with serving(type("Handler", (FirstBatchOnly,), {"batches": batches})) as url:
        yield url, batches


@pytest.mark.parametrize("as_json", [False, True])
def test_a_batch_refused_as_a_whole_stops_the_redrive_and_keeps_the_earlier_results(
    first_batch_only: tuple[str, list[list[str]]], tmp_path: Path, as_json: bool
) -> None:
    url, batches = first_batch_only
    ids = [f"job_{n:024d}:1" for n in range(1001)]  # three batches: 500, 500, 1
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDCTL_")}
    env |= {"SCHEDCTL_URL": url, "SCHEDCTL_TOKEN": "tok_x"}
    args = [SCHEDCTL, "deadletters", "redrive", *ids] + (["--json"] if as_json else [])
    result = subprocess.run(args, capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 3, result.stderr  # a 503's exit code
    assert batches == [ids[:500], ids[500:1000]]  # nothing sent after the refused batch
    last = result.stderr.splitlines()[-1]
    assert last == f"error: {url}: no leader (501 of 1001 dead letters were not redriven)"
    if not as_json:
        assert "redriven: 500, not redriven: 501" in result.stderr
        assert f"{ids[500]}: not redriven: {url}: no leader" in result.stderr
        assert f"{ids[1000]}: not redriven: not sent: an earlier batch failed" in result.stderr
        return
    results = json.loads(result.stdout)["results"]
    assert [r["id"] for r in results] == ids
    assert results[:500] == [{"id": i, "redriven": True} for i in ids[:500]]
    assert {r["error"]["code"] for r in results[500:]} == {"no_leader"}
    assert results[1000]["error"]["message"].startswith("not sent: an earlier batch failed: ")


def test_purge_deletes_a_dead_letter(tenant: Tenant, queue: str) -> None:
    job_id = tenant.job(queue, retry=NO_RETRY)
    assert tenant.run("work", queue, "--once", "--wait", "10s", "--", "false").returncode == 0
    dead = wait_for(lambda: tenant.deadletter_of(job_id), what="a dead letter")
    purged = tenant.run("deadletters", "purge", dead["id"])
    assert purged.returncode == 0 and purged.stdout == "", purged.stderr
    assert tenant.deadletter_of(job_id) is None
    missing = tenant.run("deadletters", "show", dead["id"])
    assert missing.returncode == 1 and missing.stderr.startswith("error: ")


def test_timeout_kills_the_whole_process_group_and_nacks(tenant: Tenant, queue: str) -> None:
    job_id = tenant.job(queue, retry=NO_RETRY)
    pid_file = tenant.tmp / f"{job_id}.pid"
    script = f'sleep 30 & echo $! > "{pid_file}"; echo started >&2; wait'
    began = time.monotonic()
    result = tenant.run(
        "work", queue, "--once", "--wait", "10s", "--timeout", "1s", "--", "sh", "-c", script
    )
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - began < 10
    assert f"timed out job={job_id} attempt=1" in result.stderr
    child = int(pid_file.read_text())
    wait_for(lambda: is_dead(child), 5, "the shell's background sleep is killed")
    run = tenant.run_of(job_id)
    assert run["status"] == "dead"
    assert run["error"] == "timed out after 1s: process group killed\nstarted"


def test_sigterm_lets_the_running_command_finish_and_exits_0(tenant: Tenant, queue: str) -> None:
    job_id = tenant.job(queue)
    started, done = tenant.tmp / f"{job_id}.started", tenant.tmp / f"{job_id}.done"
    script = f'touch "{started}"; sleep 2; touch "{done}"'
    worker = tenant.start(queue, "--", "sh", "-c", script)
    wait_for(started.exists, what="the command starts")
    code, _, err = stop(worker)
    assert code == 0, err
    assert done.exists()
    assert "SIGTERM: receiving no more" in err and f"job={job_id} attempt=1 exit=0" in err
    assert tenant.run_of(job_id)["status"] == "succeeded"


def test_after_the_grace_period_a_running_command_is_killed_and_nacked(
    tenant: Tenant, queue: str
) -> None:
    job_id = tenant.job(queue, retry=NO_RETRY)
    started = tenant.tmp / f"{job_id}.started"
    worker = tenant.start(queue, "--grace", "1s", "--", "sh", "-c", f'touch "{started}"; sleep 30')
    wait_for(started.exists, what="the command starts")
    began = time.monotonic()
    code, _, err = stop(worker)
    assert code == 0, err
    assert time.monotonic() - began < 8
    assert "grace period over: killing 1 running command(s)" in err
    run = tenant.run_of(job_id)
    assert run["status"] == "dead"
    assert run["error"] == "schedctl work stopped: the 1s grace period passed"


def test_concurrency_3_runs_three_commands_at_once(tenant: Tenant, queue: str) -> None:
    jobs = [tenant.job(queue) for _ in range(3)]

    def ready() -> bool:
        counts = [q for q in tenant.json("queues", "ls")["queues"] if q["name"] == queue]
        return bool(counts) and counts[0]["ready"] == 3

    wait_for(ready, what="three ready messages")
    stamp = "python3 -c 'import time; print(time.time())'"
    script = (
        f'{stamp} > "$OUT/$SCHEDD_JOB_ID.start"; sleep 1.5; {stamp} > "$OUT/$SCHEDD_JOB_ID.end"'
    )
    result = tenant.run(
        "work", queue, "--once", "--concurrency", "3", "--wait", "5s", "--", "sh", "-c", script
    )
    assert result.returncode == 0, result.stderr
    starts = [float((tenant.tmp / f"{job}.start").read_text()) for job in jobs]
    ends = [float((tenant.tmp / f"{job}.end").read_text()) for job in jobs]
    assert max(starts) < min(ends)  # all three were running at the same moment
    assert all(tenant.run_of(job)["status"] == "succeeded" for job in jobs)


@pytest.mark.slow
def test_visibility_is_extended_while_the_command_runs(tenant: Tenant, queue: str) -> None:
    job_id = tenant.job(queue)
    # A free slot polls all along: without extensions it would receive the message again.
    worker = tenant.start(
        queue,
        "--concurrency",
        "2",
        "--visibility-timeout",
        "1s",
        "--wait",
        "1s",
        "--",
        "sleep",
        "3",
    )
    wait_for(lambda: tenant.run_of(job_id).get("status") == "succeeded", what="the run succeeds")
    code, _, err = stop(worker)
    assert code == 0, err
    run = tenant.run_of(job_id)
    assert run["attempt"] == 1 and len(run["attempts"]) == 1
    assert err.count("started job=") == 1


def test_a_dead_node_fails_over_to_the_next_and_none_at_start_exits_3(
    tenant: Tenant, queue: str
) -> None:
    dead = f"http://127.0.0.1:{free_ports(1)[0]}"
    none = tenant.run("work", queue, "--once", "--", "true", url=dead)
    assert none.returncode == 3 and none.stderr.startswith("error: "), none.stderr
    job_id = tenant.job(queue)
    result = tenant.run(
        "work", queue, "--once", "--wait", "10s", "--", "true", url=f"{dead},{tenant.node.url}"
    )
    assert result.returncode == 0, result.stderr
    assert f"switching to {tenant.node.url}" in result.stderr
    assert tenant.run_of(job_id)["status"] == "succeeded"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("work", "bad/name", "--", "true"), "QUEUE"),
        (("work", "q", "--", "no-such-command-here"), "CMD"),
        (("work", "q", "--timeout", "soon", "--", "true"), "--timeout"),
        (("work", "q", "--wait", "1m", "--", "true"), "--wait"),
        (("work", "q"), "CMD"),
    ],
)
def test_bad_work_options_exit_2(tenant: Tenant, args: tuple[str, ...], fragment: str) -> None:
    result = tenant.run(*args)
    assert result.returncode == 2 and fragment in result.stderr, result.stderr


def test_admin_without_a_tenant_is_refused_before_receiving(tenant: Tenant) -> None:
    result = subprocess.run(
        [SCHEDCTL, "--token", ADMIN_TOKEN, "work", "q", "--once", "--", "true"],
        capture_output=True,
        text=True,
        timeout=30,
        env=tenant.env(None),
    )
    assert result.returncode == 1 and result.stderr.startswith("error: "), result.stderr


def test_an_unknown_token_exits_4_naming_it(tenant: Tenant) -> None:
    """401 is its own exit code for `work` too (docs/schedctl.md), and says which token."""
    result = subprocess.run(
        [SCHEDCTL, "--token", "sk_nobody", "work", "q", "--once", "--", "true"],
        capture_output=True,
        text=True,
        timeout=30,
        env=tenant.env(None),
    )
    assert result.returncode == 4, result.stderr
    assert "unknown token (the token from --token)" in result.stderr


def test_each_attempts_output_is_kept_and_schedctl_runs_output_shows_it(
    tenant: Tenant, queue: str
) -> None:
    job_id = tenant.job(queue, retry=ONE_RETRY)
    script = 'echo "out $SCHEDD_ATTEMPT"; echo "err $SCHEDD_ATTEMPT" >&2; [ "$SCHEDD_ATTEMPT" = 2 ]'
    for attempt in (1, 2):  # the retry is visible again after the 1s fixed backoff
        done = tenant.run("work", queue, "--once", "--wait", "10s", "--", "sh", "-c", script)
        assert done.returncode == 0 and f"attempt={attempt}" in done.stderr, done.stderr
        assert f"out {attempt}\n" in done.stdout  # relayed as well as kept
    run = tenant.run_of(job_id)
    assert run["status"] == "succeeded", run
    first, second = run["attempts"]
    assert sorted(first["output"].splitlines()) == ["err 1", "out 1"]
    assert sorted(second["output"].splitlines()) == ["err 2", "out 2"]
    assert first["error"] == "exit code 1\nerr 1" and second["error"] is None

    shown = tenant.run("runs", job_id, "--output")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == f"{run['scheduled_at']}   succeeded   attempt 2"
    span = f"{first['started_at']} - {first['finished_at']}"
    assert lines[1] == f"  attempt 1   failed   {span}   exit code 1"
    assert sorted(lines[2:4]) == ["    | err 1", "    | out 1"]
    assert lines[4].startswith("  attempt 2   succeeded   ") and len(lines) == 7
    assert sorted(lines[5:7]) == ["    | err 2", "    | out 2"]
    as_json = tenant.json("runs", job_id, "--output")
    assert as_json["runs"][0]["attempts"][0]["output"] == first["output"]
