"""schedctl against one real node: --json shapes, exit codes, failover. Its entry point runs in
the test process (tests/schedctl_inprocess.py: the same code from argv to exit code); the tests
with `process=True` start the real console script."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from tests.integration.api_helpers import JOB_FIELDS
from tests.schedctl_inprocess import PROCESS_ONLY, run_schedctl
from tests.servers import ADMIN_TOKEN, NodeProcess, free_ports, http, serving

SCHEDCTL = str(Path(sys.executable).with_name("schedctl"))
JOB_KEYS = set(JOB_FIELDS)
CRON_JOB = ("--cron", "0 8 * * MON", "--tz", "Asia/Kolkata", "--queue", "digest-jobs")
Result = subprocess.CompletedProcess[str]


class Ctl:
    """Runs schedctl with SCHEDCTL_URL and SCHEDCTL_TOKEN set: in the test process, or as the
    real console script in a subprocess with `process=True` (here or per call)."""

    def __init__(self, url: str, token: str, *, process: bool = False) -> None:
        self.url, self.token, self.process = url, token, process

    def __call__(
        self,
        *args: str,
        url: str | None = None,
        token: str | None = None,
        stdin: str = "",
        env: dict[str, str] | None = None,
        process: bool = False,
    ) -> Result:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDCTL_")} | (env or {})
        env["SCHEDCTL_URL"] = url or self.url
        token = self.token if token is None else token
        if token:
            env["SCHEDCTL_TOKEN"] = token
        env["COLUMNS"] = "200"
        if not (process or self.process or PROCESS_ONLY & set(args)):
            return run_schedctl(args, env=env, stdin=stdin)
        return subprocess.run(
            [SCHEDCTL, *args], input=stdin, capture_output=True, text=True, timeout=60, env=env
        )

    def json(self, *args: str, **kwargs: Any) -> Any:
        """The decoded stdout of a command that must succeed."""
        result = self(*args, "--json", **kwargs)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    def new_tenant(self) -> Ctl:
        name = f"cli-{uuid.uuid4().hex[:8]}"
        status, tenant, _ = http("POST", f"{self.url}/v1/tenants", {"name": name})
        assert status == 201, tenant
        return Ctl(self.url, tenant["token"], process=self.process)


def assert_fails(result: Result, code: int, *fragments: str) -> None:
    """Exit `code`, nothing on stdout, one `error:` line on stderr, no traceback."""
    assert result.returncode == code, (result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.fixture(scope="module")
def ctl(node: NodeProcess) -> Ctl:
    return Ctl(node.url, ADMIN_TOKEN).new_tenant()


@pytest.fixture(scope="module")
def job(ctl: Ctl) -> dict[str, Any]:
    created: dict[str, Any] = ctl.json("add", *CRON_JOB, "--name", "weekly")
    return created


@pytest.fixture
def dead_url() -> str:
    """A loopback URL with nothing listening."""
    return f"http://127.0.0.1:{free_ports(1)[0]}"


class Unavailable(BaseHTTPRequestHandler):
    """Answers every request 503 with the contract's error body, and records it."""

    seen: list[tuple[str, str, dict[str, str], bytes]]

    def _answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append((self.command, self.path, dict(self.headers), body))
        data = json.dumps({"error": {"code": "no_leader", "message": "no leader"}}).encode()
        self.send_response(503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Retry-After", "1")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = do_DELETE = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def unavailable() -> Iterator[tuple[str, list[tuple[str, str, dict[str, str], bytes]]]]:
    """A node that answers 503 to everything: (its URL, the requests it saw)."""
    seen: list[tuple[str, str, dict[str, str], bytes]] = []
    with serving(type("Handler", (Unavailable,), {"seen": seen})) as url:
        yield url, seen


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A port that accepts connections (the kernel's backlog) but never answers."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


# ---------------------------------------------------------------- add


def test_add_cron_prints_the_api_job_object(ctl: Ctl, job: dict[str, Any]) -> None:
    assert set(job) == JOB_KEYS
    assert job["job_id"].startswith("job_")
    assert job["name"] == "weekly"
    assert job["schedule"] == {"cron": "0 8 * * MON", "timezone": "Asia/Kolkata"}
    assert job["target"] == {"type": "queue", "name": "digest-jobs"}
    assert job["status"] == "active" and job["version"] == 1
    assert job["next_run_at"].endswith("T02:30:00Z")  # 08:00 in Kolkata is 02:30 UTC
    status, stored, _ = http("GET", f"{ctl.url}/v1/jobs/{job['job_id']}", token=ctl.token)
    assert status == 200 and stored == job


def test_add_at_with_an_http_target_and_every_policy_flag(ctl: Ctl) -> None:
    created = ctl.json(
        "add",
        *("--at", "2030-01-01T08:00:00+05:30", "--http", "https://hooks.example/x"),
        *("--method", "put", "--header", "X-A=b=c", "--http-timeout", "5s"),
        *("--max-attempts", "5", "--backoff", "linear", "--misfire", "skip", "--window", "5m"),
        *("--payload", '{"user_id": 42, "tags": ["a"]}'),
    )
    assert created["schedule"] == {"run_at": "2030-01-01T02:30:00Z"}
    assert created["target"] == {
        "type": "http",
        "url": "https://hooks.example/x",
        "method": "PUT",
        "headers": {"X-A": "b=c"},
        "timeout": "5s",
    }
    assert created["retry"]["max_attempts"] == 5 and created["retry"]["backoff"] == "linear"
    assert created["misfire_policy"] == "skip" and created["window"] == "5m"
    assert created["payload"] == {"user_id": 42, "tags": ["a"]}
    assert created["next_run_at"].startswith("2030-01-01T02:3")  # plus the window's offset


def test_add_in_is_a_delay_from_the_servers_now(ctl: Ctl) -> None:
    before = datetime.now(UTC)
    created = ctl.json("add", "--in", "10m", "--queue", "later")
    next_run = datetime.fromisoformat(created["next_run_at"].replace("Z", "+00:00"))
    assert before + timedelta(minutes=9) < next_run < datetime.now(UTC) + timedelta(minutes=11)


def test_add_every_with_bounds_and_payload_from_a_file_or_stdin(ctl: Ctl, tmp_path: Path) -> None:
    payload_file = tmp_path / "payload.json"
    payload_file.write_text('{"from": "file"}')
    bounds = ("--start", "2030-01-01T00:00:00Z", "--end", "2030-02-01T00:00:00Z")
    from_file = ctl.json(
        "add", "--every", "5m", *bounds, "--queue", "q", "--payload", "@" + str(payload_file)
    )
    assert from_file["schedule"] == {
        "every": "5m",
        "start_at": "2030-01-01T00:00:00Z",
        "end_at": "2030-02-01T00:00:00Z",
    }
    assert from_file["payload"] == {"from": "file"}
    assert from_file["next_run_at"] == "2030-01-01T00:00:00Z"
    from_stdin = ctl.json("add", "--every", "1h", "--queue", "q", "--payload", "-", stdin="[1, 2]")
    assert from_stdin["payload"] == [1, 2]


def test_add_with_the_same_idempotency_key_returns_the_same_job(ctl: Ctl) -> None:
    args = ("add", "--in", "1h", "--queue", "q", "--idempotency-key", "cli-key-1")
    first, again = ctl.json(*args), ctl.json(*args)
    assert again["job_id"] == first["job_id"]
    assert_fails(ctl(*args, "--name", "different body"), 1)


def test_add_prints_a_table_for_people(ctl: Ctl) -> None:
    result = ctl("add", *CRON_JOB, "--name", "[bold]not markup[/bold]")
    assert result.returncode == 0, result.stderr
    assert "job_" in result.stdout
    assert "cron '0 8 * * MON' Asia/Kolkata" in result.stdout
    assert "queue digest-jobs" in result.stdout
    assert "[bold]not markup[/bold]" in result.stdout


# ---------------------------------------------------------------- get, ls


def test_get_prints_the_job(ctl: Ctl, job: dict[str, Any]) -> None:
    assert ctl.json("get", job["job_id"]) == job
    table = ctl("get", job["job_id"])
    assert table.returncode == 0 and table.stderr == ""
    assert job["job_id"] in table.stdout and job["next_run_at"] in table.stdout


def test_ls_pages_with_cursor_and_follows_them_with_all(ctl: Ctl) -> None:
    own = ctl.new_tenant()
    ids = sorted(own.json("add", "--in", "1h", "--queue", "q")["job_id"] for _ in range(3))
    first = own.json("ls", "--limit", "2")
    assert set(first) == {"jobs", "next_cursor"}
    assert [j["job_id"] for j in first["jobs"]] == ids[:2]
    assert isinstance(first["next_cursor"], str)
    rest = own.json("ls", "--limit", "2", "--cursor", first["next_cursor"])
    assert [j["job_id"] for j in rest["jobs"]] == ids[2:]
    everything = own.json("ls", "--limit", "2", "--all")
    assert [j["job_id"] for j in everything["jobs"]] == ids
    assert everything["next_cursor"] is None
    assert set(everything["jobs"][0]) == JOB_KEYS
    table = own("ls", "--limit", "2")
    assert ids[0] in table.stdout and ids[2] not in table.stdout
    assert "--cursor" in table.stderr


def test_ls_filters_by_status(ctl: Ctl) -> None:
    own = ctl.new_tenant()
    paused = own.json("add", "--in", "1h", "--queue", "q")["job_id"]
    own.json("add", "--in", "1h", "--queue", "q")
    own.json("pause", paused)
    listed = own.json("ls", "--status", "paused")
    assert [j["job_id"] for j in listed["jobs"]] == [paused]
    assert own.json("ls", "--status", "cancelled") == {"jobs": [], "next_cursor": None}


def test_ls_filters_by_target_name_and_next_run(ctl: Ctl) -> None:
    own = ctl.new_tenant()
    mail = own.json("add", "--in", "1h", "--queue", "emails", "--name", "Nightly mail")["job_id"]
    own.json("add", "--in", "1h", "--queue", "other")
    at_2031 = ("--at", "2031-01-01T00:00:00Z", "--name", "nightly hook")
    hook = own.json("add", *at_2031, "--http", "https://hooks.example/x")["job_id"]

    def ids(*args: str) -> list[str]:
        return [job["job_id"] for job in own.json("ls", *args)["jobs"]]

    assert ids("--queue", "emails") == [mail]
    assert ids("--host", "HOOKS.example", "--target-type", "http") == [hook]
    assert ids("--name", "NIGHTLY", "--all") == sorted([mail, hook])
    assert ids("--next-run-after", "2030-01-01T00:00:00Z") == [hook]
    assert ids("--next-run-before", "2030-01-01T00:00:00Z", "--target-type", "http") == []
    assert_fails(own("ls", "--next-run-before", "soon"), 2, "--next-run-before")
    assert_fails(own("ls", "--host", "hooks.example:443"), 2, "host")


def test_add_with_a_key_and_labels_then_ls_by_label(ctl: Ctl) -> None:
    own = ctl.new_tenant()
    made = own.json(
        "add",
        "--every",
        "1h",
        "--queue",
        "q",
        "--key",
        "reports/nightly",
        "--label",
        "team=payments",
        "--label",
        "env=prod",
    )
    assert made["key"] == "reports/nightly"
    assert made["labels"] == {"env": "prod", "team": "payments"}
    other = own.json("add", "--every", "1h", "--queue", "q", "--label", "team=ops")["job_id"]

    def ids(*args: str) -> list[str]:
        return [job["job_id"] for job in own.json("ls", *args)["jobs"]]

    assert ids("--label", "team=payments") == [made["job_id"]]
    assert ids("--label", "team=payments", "--label", "env=dev") == []
    assert ids("--label", "team=ops", "--queue", "q") == [other]
    assert_fails(own("ls", "--label", "team"), 2, "--label")
    assert_fails(own("add", "--in", "1h", "--queue", "q", "--label", "Team=x"), 2, "--label")
    taken = own("add", "--in", "1h", "--queue", "q", "--key", "reports/nightly")
    assert taken.returncode != 0 and "reports/nightly" in taken.stderr, taken


# ---------------------------------------------------------------- change a job


def test_pause_resume_and_cancel(ctl: Ctl) -> None:
    job_id = ctl.json("add", "--every", "1h", "--queue", "q")["job_id"]
    paused = ctl.json("pause", job_id)
    assert set(paused) == JOB_KEYS and paused["status"] == "paused"
    assert ctl.json("resume", job_id)["status"] == "active"
    cancelled = ctl("cancel", job_id)
    assert (cancelled.returncode, cancelled.stdout, cancelled.stderr) == (0, "", "")
    assert ctl.json("cancel", job_id) == {"job_id": job_id, "status": "cancelled"}
    assert ctl.json("get", job_id)["status"] == "cancelled"
    resumed = ctl("resume", job_id)  # 409, in the words docs/schedctl.md shows
    assert_fails(resumed, 1)
    assert resumed.stderr == "error: a cancelled job cannot be resumed; create a new job instead\n"


def test_get_of_a_paused_job_says_paused(ctl: Ctl) -> None:
    job_id = ctl.json("add", "--every", "1h", "--queue", "q")["job_id"]
    ctl.json("pause", job_id)
    shown = ctl("get", job_id)
    assert shown.returncode == 0, shown.stderr
    assert ["next", "run", "paused"] in [line.split() for line in shown.stdout.splitlines()]


def test_reschedule_replaces_the_schedule_and_the_next_run(ctl: Ctl) -> None:
    job_id = ctl.json("add", "--at", "2030-01-01T00:00:00Z", "--queue", "q")["job_id"]
    changed = ctl.json("reschedule", job_id, "--cron", "30 9 * * *", "--tz", "Europe/Berlin")
    assert changed["schedule"] == {"cron": "30 9 * * *", "timezone": "Europe/Berlin"}
    assert changed["version"] == 2
    assert changed["next_run_at"][11:16] in ("08:30", "07:30")  # CET or CEST
    again = ctl.json("reschedule", job_id, "--every", "10m", "--start", "2031-05-05T00:00:00Z")
    assert again["next_run_at"] == "2031-05-05T00:00:00Z"


def test_reschedule_preview_shows_both_schedules_side_by_side_and_changes_nothing(
    ctl: Ctl,
) -> None:
    job_id = ctl.json("add", "--at", "2030-01-01T00:00:00Z", "--queue", "q")["job_id"]
    new = ("--cron", "30 2 * 3 SUN", "--tz", "Europe/Berlin", "--preview")
    answer = ctl.json("reschedule", job_id, *new)
    assert answer["current_runs"] == ["2030-01-01T00:00:00Z"] and len(answer["runs"]) == 10
    assert any(o["note"] for o in answer["occurrences"])  # a last Sunday of March: the gap
    table = ctl("reschedule", job_id, *new)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["#", "current", "(UTC)", "note", "new", "(Europe/Berlin)", "note"]
    assert lines[1].split()[:6] == ["1", "Tue", "2030-01-01", "00:00", "UTC", "(+0000)"]
    assert lines[1].split()[6] == "Sun"
    assert lines[2].split()[:2] == ["2", "-"] and "does not exist on" in table.stdout
    assert ctl.json("get", job_id)["version"] == 1


def test_trigger_prints_the_accepted_run(ctl: Ctl, job: dict[str, Any]) -> None:
    before = datetime.now(UTC) - timedelta(seconds=5)
    answer = ctl.json("trigger", job["job_id"])
    assert set(answer) == {"job_id", "scheduled_at"} and answer["job_id"] == job["job_id"]
    assert datetime.fromisoformat(answer["scheduled_at"].replace("Z", "+00:00")) > before
    table = ctl("trigger", job["job_id"])
    assert table.returncode == 0 and "one extra run" in table.stdout


def test_runs_of_a_job_that_never_fired(ctl: Ctl) -> None:
    job_id = ctl.json("add", "--at", "2030-01-01T00:00:00Z", "--queue", "q")["job_id"]
    assert ctl.json("runs", job_id) == {"runs": [], "next_cursor": None}
    assert ctl.json("runs", job_id, "--all", "--limit", "1") == {"runs": [], "next_cursor": None}
    assert_fails(ctl("runs", "job_missing"), 1, "job_missing")


def test_next_of_a_job_previews_its_schedule_with_start_and_end_through_the_node(
    ctl: Ctl,
) -> None:
    bounds = ("--start", "2030-01-06T00:00:00Z", "--end", "2030-01-21T00:00:00Z")
    job_id = ctl.json("add", *CRON_JOB, *bounds)["job_id"]
    after = ("--after", "2030-01-01T00:00:00Z")
    expected = ["2030-01-07T02:30:00Z", "2030-01-14T02:30:00Z"]  # Mondays; the 21st is past end
    through_the_node = ctl.json("next", job_id, *after, "-n", "5")
    assert through_the_node["runs"] == expected
    assert [o["local"] for o in through_the_node["occurrences"]] == [
        "2030-01-07T08:00:00+05:30",
        "2030-01-14T08:00:00+05:30",
    ]
    offline = ctl.json("next", "0 8 * * MON", "--tz", "Asia/Kolkata", *after, "-n", "2")
    assert offline == through_the_node
    table = ctl("next", job_id, *after, "-n", "1")
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[0].split() == ["#", "local", "(Asia/Kolkata)", "UTC"]
    assert "Mon 2030-01-07 08:00 IST (+0530)" in table.stdout
    assert_fails(ctl("next", "job_missing"), 1, "job_missing")


# ---------------------------------------------------------------- admin


def test_tenants_create_shows_credentials_once_and_ls_lists_them(ctl: Ctl) -> None:
    admin = Ctl(ctl.url, ADMIN_TOKEN)
    limits = ("--max-active-jobs", "10", "--dispatch-rate", "7", "--allowed-host", "*.acme.example")
    result = admin("tenants", "create", "acme", *limits, "--json")
    assert result.returncode == 0, result.stderr
    assert "only this once" in result.stderr
    created = json.loads(result.stdout)
    assert set(created) == {"tenant_id", "token", "signing_secret"}
    assert created["signing_secret"].startswith("whsec_")
    listed = admin.json("tenants", "ls", "--all")
    assert set(listed) == {"tenants", "next_cursor"} and listed["next_cursor"] is None
    [acme] = [t for t in listed["tenants"] if t["tenant_id"] == created["tenant_id"]]
    assert acme["name"] == "acme" and acme["max_active_jobs"] == 10
    assert acme["dispatch_rate"] == 7 and acme["allowed_hosts"] == ["*.acme.example"]
    fresh = Ctl(ctl.url, created["token"])
    assert fresh.json("ls") == {"jobs": [], "next_cursor": None}


def test_admin_acts_for_a_tenant_with_the_tenant_flag(ctl: Ctl, job: dict[str, Any]) -> None:
    admin = Ctl(ctl.url, ADMIN_TOKEN)
    assert admin.json("--tenant", job["tenant_id"], "get", job["job_id"]) == job
    # 403 without a tenant: the header for the API, the flag for schedctl
    assert_fails(admin("get", job["job_id"]), 1, "'X-Tenant: <tenant_id>'", "--tenant")


def test_status_shows_nodes_roles_and_the_leader(ctl: Ctl, node: NodeProcess) -> None:
    admin = Ctl(ctl.url, ADMIN_TOKEN)
    cluster = admin.json("status")
    assert cluster["leader"] == "n1"
    [only] = cluster["nodes"]
    assert {"node_id", "api", "raft", "role", "healthy", "applied_index"} <= set(only)
    assert (only["node_id"], only["raft"], only["role"]) == ("n1", node.raft, "leader")
    assert only["healthy"] is True and only["applied_index"] > 0
    assert only["reachable"] is True and only["lag"] == 0 and only["partitions"] >= 0
    assert only["term"] >= 1 and only["backlog"] >= 0 and cluster["ok"] is True
    table = admin("status")
    assert table.returncode == 0 and "leader: n1" in table.stdout and node.url in table.stdout
    # a tenant token: 403, naming where a dev cluster keeps the admin token and how to pass it
    assert_fails(ctl("status"), 1, "var/dev/admin.token", "--token", "SCHEDCTL_TOKEN")


# ---------------------------------------------------------------- exit codes


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--cron", "0 24 * * *", "--queue", "q"), "hour value 24"),
        (("--cron", "0 8 * * *", "--tz", "Mars/Olympus", "--queue", "q"), "Mars/Olympus"),
        (("--in", "10m", "--queue", "q", "--payload", "{bad"), "--payload"),
        (("--in", "10m", "--queue", "q", "--payload", "NaN"), "--payload"),
        (("--in", "10m", "--queue", "q", "--payload", "@/no/such/file.json"), "/no/such/file"),
        (("--at", "2030-01-01T08:00:00", "--queue", "q"), "no UTC offset"),
        (("--in", "10m", "--every", "5m", "--queue", "q"), "exactly one of --at"),
        (("--in", "10m"), "exactly one of --queue, --http, --redis-stream"),
        (("--in", "10m", "--http", "https://x.example", "--header", "nope"), "--header"),
        (("--in", "10m", "--queue", "q", "--tz", "UTC"), "--tz"),
        (("--in", "10m", "--http", "ftp://x.example"), "ftp://"),
    ],
)
def test_bad_input_exits_2(ctl: Ctl, args: tuple[str, ...], fragment: str) -> None:
    assert_fails(ctl("add", *args), 2, fragment)


def test_bad_input_the_server_refuses_exits_2(ctl: Ctl) -> None:
    assert_fails(Ctl(ctl.url, ADMIN_TOKEN)("tenants", "create", " "), 2, "name")  # a 400


def test_add_takes_timezone_for_tz_and_names_the_zone_meant(ctl: Ctl) -> None:
    cron = ("--cron", "0 8 * * *", "--queue", "q")
    berlin = ctl.json("add", *cron, "--timezone", "Europe/Berlin")
    assert berlin["schedule"]["timezone"] == "Europe/Berlin"
    typo = ctl("add", *cron, "--timezone", "Europe/Berln")
    assert_fails(typo, 2, "unknown zone 'Europe/Berln'; did you mean 'Europe/Berlin'")


def test_a_target_the_ssrf_guard_refuses_exits_2(ctl: Ctl) -> None:
    """The server's 422 `blocked_target` is invalid input (exit 2), not an idempotency mismatch
    (exit 1): the CLI reads an error answer by its code (issue 30)."""
    metadata = ("--in", "10m", "--http", "http://169.254.169.254/latest/meta-data")
    assert_fails(ctl("add", *metadata, process=True), 2, "169.254.169.254")


def test_bad_reschedule_and_usage_errors_exit_2(ctl: Ctl, job: dict[str, Any]) -> None:
    assert_fails(ctl("reschedule", job["job_id"], "--cron", "0 0 30 2 *"), 2)
    usage = ctl("ls", "--limit", "0")
    assert usage.returncode == 2 and "Traceback" not in usage.stderr


def test_not_found_exits_1(ctl: Ctl) -> None:
    # The console script's own exit status: 1 from the process.
    missing = ctl("get", "job_doesnotexist", process=True)
    assert_fails(missing, 1, "no job with id 'job_doesnotexist'")
    assert_fails(ctl("cancel", "job_doesnotexist"), 1)


def test_a_refused_token_exits_4_naming_where_it_came_from(ctl: Ctl) -> None:
    """Authentication failures (401) have their own exit code, and the message says which token
    was sent: the environment's, the flag's (the flag wins), or none (issue 30)."""
    from_env = ctl("ls", token="sk_nobody", process=True)
    assert_fails(from_env, 4, "unknown token (the token from SCHEDCTL_TOKEN)")
    flag = ctl("ls", "--token", "sk_other", token="sk_nobody")
    assert_fails(flag, 4, "unknown token (the token from --token)")
    before_verb = ctl("--token", "sk_other", "ls", token="sk_nobody")
    assert_fails(before_verb, 4, "(the token from --token)")
    assert_fails(ctl("ls", token=""), 4, "--token or SCHEDCTL_TOKEN")
    assert_fails(ctl("tenants", "ls"), 1, "admin")  # a known token, not allowed: 403, exit 1


def test_no_server_exits_3_naming_the_url(ctl: Ctl, dead_url: str) -> None:
    assert_fails(ctl("ls", url=dead_url, process=True), 3, dead_url, "connection refused")
    assert_fails(ctl("add", "--in", "1m", "--queue", "q", url=dead_url), 3, dead_url)
    debug = ctl("--debug", "ls", url=dead_url, process=True)
    assert debug.returncode == 3 and "Traceback" in debug.stderr


def test_a_node_that_never_answers_times_out_with_exit_3(ctl: Ctl, silent_url: str) -> None:
    started = time.monotonic()
    assert_fails(ctl("--timeout", "0.5", "get", "job_x", url=silent_url), 3, silent_url, "0.5s")
    assert time.monotonic() - started < 30
    unsafe = ctl("--timeout", "0.5", "trigger", "job_x", url=silent_url)
    assert_fails(unsafe, 3, "may or may not have been applied")


# ---------------------------------------------------------------- failover


def test_a_dead_first_url_fails_over_to_the_next(
    ctl: Ctl, job: dict[str, Any], dead_url: str
) -> None:
    urls = f"{dead_url},{ctl.url}"
    created = ctl.json("add", "--in", "1h", "--queue", "q", url=urls)
    assert ctl.json("get", created["job_id"], url=urls) == created
    # Connection refused means nothing was sent: even a trigger may go to the next node.
    assert ctl.json("trigger", job["job_id"], url=urls)["job_id"] == job["job_id"]
    assert Ctl(ctl.url, ADMIN_TOKEN).json("status", url=urls)["leader"] == "n1"


def test_a_503_fails_over_only_when_the_request_is_safe_to_repeat(
    ctl: Ctl,
    job: dict[str, Any],
    unavailable: tuple[str, list[tuple[str, str, dict[str, str], bytes]]],
) -> None:
    fake_url, seen = unavailable
    urls = f"{fake_url},{ctl.url}"
    assert ctl.json("get", job["job_id"], url=urls) == job
    created = ctl.json("add", "--in", "1h", "--queue", "q", url=urls)
    [(method, path, headers, body)] = [s for s in seen if s[0] == "POST"]
    assert (method, path) == ("POST", "/v1/jobs")
    key = headers["Idempotency-Key"]  # generated, so the retry could not create a second job
    status, replay, _ = http(
        "POST", f"{ctl.url}/v1/jobs", raw=body, token=ctl.token, headers={"Idempotency-Key": key}
    )
    assert status == 201 and replay["job_id"] == created["job_id"]
    assert_fails(ctl("trigger", job["job_id"], url=urls), 3, fake_url)
    assert seen[-1][:2] == ("POST", f"/v1/jobs/{job['job_id']}/trigger")


def test_messages_name_the_flags_and_are_never_wrapped_when_piped(node: NodeProcess) -> None:
    ctl = Ctl(node.url, ADMIN_TOKEN, process=True).new_tenant()  # the console script, piped
    bad = ctl("add", "--in", "5x", "--queue", "q")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --in: must be a duration")
    offset = ctl("add", "--at", "2026-12-24T18:00:00", "--queue", "q")
    assert offset.returncode == 2 and offset.stderr.startswith("error: --at: ")
    added = ctl("add", "--in", "1h", "--queue", "q", "--json")
    job_id = json.loads(added.stdout)["job_id"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDCTL_")}
    env |= {"SCHEDCTL_URL": node.url, "SCHEDCTL_TOKEN": ctl.token, "COLUMNS": "30"}
    narrow = subprocess.run(
        [SCHEDCTL, "trigger", job_id], capture_output=True, text=True, timeout=60, env=env
    )
    assert narrow.returncode == 0, narrow.stderr
    assert len(narrow.stdout.splitlines()) == 1  # piped: one whole line, however narrow
