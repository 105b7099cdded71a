"""`schedctl add|reschedule --after JOB_ID [--on ...]`, how get, ls, runs and next show a job that
runs after another, job files naming the upstream by id or by key (`apply`, `export`), and the
```sh blocks of docs/dependencies.md, against a real node. schedctl's entry point runs in the
test process (tests/schedctl_inprocess.py), the docs' blocks as bash scripts."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_schedctl import Ctl, assert_fails
from tests.servers import ADMIN_TOKEN, NodeProcess, free_ports, http, wait_for

PAGE = Path(__file__).resolve().parents[2] / "docs" / "dependencies.md"
BIN = Path(sys.executable).parent


@pytest.fixture
def ctl(node: NodeProcess) -> Ctl:
    return Ctl(node.url, ADMIN_TOKEN).new_tenant()


def end_one(ctl: Ctl, queue: str, verb: str = "ack") -> dict[str, Any]:
    """Receive one message of `queue` (long-polled) and ack or nack it: a run of its job ends."""
    status, got, _ = http(
        "POST", f"{ctl.url}/v1/queues/{queue}/receive", {"max": 1, "wait": "10s"}, token=ctl.token
    )
    assert status == 200 and len(got["messages"]) == 1, got
    message: dict[str, Any] = got["messages"][0]
    status, done, _ = http(
        "POST",
        f"{ctl.url}/v1/queues/{queue}/{verb}",
        {"receipts": [message["receipt"]]},
        token=ctl.token,
    )
    assert status == 200, done
    return message


def line_of(text: str, key: str) -> str:
    """The `key   value` line of a `get` (piped: plain columns)."""
    found = re.search(rf"^{re.escape(key)}\s+(.*)$", text, re.M)
    assert found, text
    return found.group(1)


def test_add_after_sets_the_schedule_and_bad_combinations_exit_2(ctl: Ctl) -> None:
    a = ctl.json("add", "--every", "1h", "--queue", "qa")["job_id"]
    b = ctl.json("add", "--after", a, "--queue", "qb")
    assert b["schedule"] == {"after": {"job_id": a, "on": "success"}}
    assert b["next_run_at"] is None
    c = ctl.json("add", "--after", a, "--on", "finished", "--queue", "qc")
    assert c["schedule"] == {"after": {"job_id": a, "on": "finished"}}
    for args, fragments in (
        (("--after", a, "--at", "2030-01-01T00:00:00Z"), ("exactly one of", "--at and --after")),
        (("--every", "1h", "--on", "failure"), ("--on: applies to --after only",)),
        (("--after", a, "--start", "2030-01-01T00:00:00Z"), ("--start/--end",)),
        (("--after", a, "--exclude", "hols"), ("--exclude: applies to --cron and --every",)),
        (("--after", a, "--window", "1m"), ("--window: does not apply to after schedules",)),
        (("--after", a, "--max-runs", "2"), ("--max-runs: applies to recurring",)),
        (("--after", a, "--overlap", "skip"), ("--overlap: applies to recurring",)),
        (("--after", "not an id"), ("--after: must be a job id",)),
    ):
        assert_fails(ctl("add", *args, "--queue", "q"), 2, *fragments)
    bad_on = ctl("add", "--after", a, "--on", "sometimes", "--queue", "q")
    assert bad_on.returncode == 2 and "'--on'" in bad_on.stderr, bad_on.stderr
    # the node's refusals: the upstream must be the tenant's job, and no cycle
    assert_fails(ctl("add", "--after", "job_0000", "--queue", "q"), 2, "no job 'job_0000'")
    cycle = ctl("reschedule", a, "--after", b["job_id"])
    assert_fails(cycle, 2, f"would close a cycle {a} -> {b['job_id']} -> {a}")
    moved = ctl.json("reschedule", c["job_id"], "--after", b["job_id"], "--on", "failure")
    assert moved["schedule"] == {"after": {"job_id": b["job_id"], "on": "failure"}}
    back = ctl.json("reschedule", c["job_id"], "--every", "2h")
    assert back["schedule"]["every"] == "2h" and back["next_run_at"] is not None


def test_get_ls_and_runs_show_who_runs_after_whom(ctl: Ctl) -> None:
    a = ctl.json("add", "--every", "1h", "--queue", "qa", "--name", "extract")["job_id"]
    b = ctl.json("add", "--after", a, "--queue", "qb", "--name", "load")["job_id"]
    c = ctl.json("add", "--after", a, "--on", "failure", "--queue", "qc")["job_id"]
    shown = ctl("get", a)
    assert shown.returncode == 0, shown.stderr
    assert line_of(shown.stdout, "downstream") == f"{b} (on success), {c} (on failure)"
    shown = ctl("get", b).stdout
    assert line_of(shown, "schedule") == f"after {a} (on success)"
    assert line_of(shown, "next run") == f"when {a} ends (success)"
    assert "downstream" not in shown
    listed = ctl("ls").stdout
    assert re.search(
        rf"^{b}\s+load\s+active\s+after {a} \(on success\)\s+queue qb\s+-$", listed, re.M
    )

    ctl.json("trigger", a)
    ended = end_one(ctl, "qa")
    runs = wait_for(lambda: ctl.json("runs", b)["runs"] or None, 10, "B's run")
    assert runs[0]["triggered_by"] == {
        "job_id": a,
        "scheduled_at": ended["scheduled_at"],
        "status": "succeeded",
    }
    table = ctl("runs", b).stdout.splitlines()
    assert table[0].split()[-3:] == ["TRIGGERED", "BY", "ERROR"], table
    assert table[1].startswith(ended["scheduled_at"]) and f"{a} succeeded" in table[1], table
    with_attempts = ctl("runs", b, "--attempts").stdout.splitlines()
    assert "TRIGGERED BY" in with_attempts[0] and f"{a} succeeded" in with_attempts[1]
    assert "TRIGGERED BY" not in ctl("runs", a).stdout  # no run of A was made by another's


def test_next_of_an_after_job_says_what_it_follows(ctl: Ctl, tmp_path: Path) -> None:
    a = ctl.json("add", "--every", "1h", "--queue", "qa")["job_id"]
    b = ctl.json("add", "--after", a, "--on", "failure", "--queue", "qb")["job_id"]
    said = ctl("next", b)
    assert said.returncode == 0, said.stderr
    assert said.stdout == f"{b} has no times of its own: it runs when {a} ends (failure)\n"
    assert ctl.json("next", b) == {
        "runs": [],
        "occurrences": [],
        "after": {"job_id": a, "on": "failure"},
    }
    # offline: an instant is asked for, and nothing is sent
    nobody = f"http://127.0.0.1:{free_ports(1)[0]}"
    refused = ctl("next", "--after", a, url=nobody)
    assert_fails(refused, 2, "--after: is an instant here", f"schedctl next {'job_'}")
    refused = ctl("next", "0 8 * * *", "--after", a, url=nobody)
    assert_fails(refused, 2, "--after: is an instant here")
    # no occurrences to backfill either: the dry run (a preview) says so as the node does
    span = ("--from", "2026-01-01T00:00:00Z", "--to", "2026-01-02T00:00:00Z")
    for dry_run in ((), ("--dry-run",)):
        backfill = ctl("backfill", b, *span, *dry_run)
        assert_fails(backfill, 2, f"runs come from job {a}'s (backfill that job)")


def test_reschedule_preview_says_an_after_side_in_a_sentence(ctl: Ctl) -> None:
    a = ctl.json("add", "--every", "1h", "--queue", "qa")["job_id"]
    b = ctl.json("add", "--every", "1h", "--queue", "qb")["job_id"]
    to_after = ctl("reschedule", b, "--after", a, "--preview")
    assert to_after.returncode == 0, to_after.stderr
    assert to_after.stdout == (
        f"{b} would have no times of its own: it runs when {a} ends (success)\n"
    )
    assert ctl.json("reschedule", b, "--after", a, "--preview")["after"] == {
        "job_id": a,
        "on": "success",
    }
    assert ctl.json("get", b)["schedule"]["every"] == "1h"  # a preview changes nothing
    ctl.json("reschedule", b, "--after", a)
    from_after = ctl("reschedule", b, "--every", "2h", "--preview")
    assert from_after.returncode == 0, from_after.stderr
    assert f"{b} has no times of its own now: it runs when {a} ends (success)" in from_after.stderr
    assert len(from_after.stdout.splitlines()) == 11  # the header and the new schedule's 10
    assert len(ctl.json("reschedule", b, "--every", "2h", "--preview")["runs"]) == 10


JOBS = """\
set = "etl"

[[job]]
key = "load"
schedule = { after = { key = "extract" } }
target = { type = "queue", name = "load" }

[[job]]
key = "report"
schedule = { after = { key = "load", on = "finished" } }
target = { type = "queue", name = "report" }

[[job]]
key = "extract"
schedule = { cron = "0 2 * * *", timezone = "Europe/Berlin" }
target = { type = "queue", name = "extract" }
"""


def test_a_job_file_names_upstreams_by_key_and_export_writes_them_back(
    ctl: Ctl, tmp_path: Path
) -> None:
    path = tmp_path / "jobs.toml"
    path.write_text(JOBS)
    planned = ctl("apply", "-f", str(path), "--dry-run")
    assert planned.returncode == 0, planned.stderr
    assert "    after <extract> (on success) -> queue load" in planned.stdout
    steps = ctl.json("apply", "-f", str(path))["steps"]
    assert [(s["key"], s["action"]) for s in steps] == [
        ("extract", "create"),
        ("load", "create"),
        ("report", "create"),
    ]
    ids = {s["key"]: s["job_id"] for s in steps}
    assert ctl.json("get", ids["report"])["schedule"] == {
        "after": {"job_id": ids["load"], "on": "finished"}
    }
    assert ctl.json("get", ids["extract"])["downstream"] == [
        {"job_id": ids["load"], "on": "success"}
    ]
    again = ctl("apply", "-f", str(path), "--dry-run", "--exit-code")
    assert again.returncode == 0, again.stdout

    exported = ctl("export")
    assert exported.returncode == 0, exported.stderr
    assert '[job.schedule.after]\nkey = "extract"\non = "success"' in exported.stdout
    (tmp_path / "exported.toml").write_text(exported.stdout)
    same = ctl("apply", "-f", str(tmp_path / "exported.toml"), "--dry-run", "--exit-code")
    assert same.returncode == 0, same.stdout

    # a new upstream made by the same apply: planned with a stand-in, applied with its id
    path.write_text(
        JOBS.replace('key = "extract" }', 'key = "extract-v2" }')
        + '\n[[job]]\nkey = "extract-v2"\nschedule = { every = "1h" }\n'
        'target = { type = "queue", name = "extract" }\n'
    )
    plan = ctl("apply", "-f", str(path), "--dry-run").stdout
    assert f'    schedule.after.job_id: "{ids["extract"]}" -> "<extract-v2>"' in plan, plan
    steps = ctl.json("apply", "-f", str(path))["steps"]
    v2 = next(s["job_id"] for s in steps if s["key"] == "extract-v2")
    assert ctl.json("get", ids["load"])["schedule"]["after"]["job_id"] == v2

    path.write_text(JOBS.replace('key = "extract" }', 'key = "nowhere" }'))
    missing = ctl("apply", "-f", str(path), "--dry-run")
    assert_fails(missing, 1, "job \"load\": schedule.after.key: no job has the key 'nowhere'")


def sh_blocks() -> list[str]:
    return re.findall(r"^```sh\n(.*?)^```", PAGE.read_text(), re.S | re.M)


def test_the_docs_sh_blocks_run(ctl: Ctl, tmp_path: Path) -> None:
    """The page's blocks, one script in order (later blocks use the jobs the first made)."""
    blocks = sh_blocks()
    assert len(blocks) == 3
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDCTL_")}
    env |= {"PATH": f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}", "SCHEDCTL_URL": ctl.url}
    env["SCHEDCTL_TOKEN"] = ctl.token
    result = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", "\n".join(blocks)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = f"--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    assert result.returncode == 0, out
    for printed in (
        r"^downstream\s+job_\w+ \(on success\), job_\w+ \(on failure\)$",  # get of extract
        r"^schedule\s+after job_\w+ \(on success\)$",  # get of load
        r"^job_\w+ has no times of its own: it runs when job_\w+ ends \(success\)$",  # next
        r"^\S+Z\s+\S+Z\s+succeeded\s+1\s+\S+Z\s+job_\w+ succeeded$",  # runs of load
        r'^  "status": "succeeded"$',  # curl of load's runs, triggered_by
        r"^\S+Z\s+\S+Z\s+succeeded\s+1\s+\S+Z\s+job_\w+ dead$",  # runs of cleanup
        r"^refused \(exit 2\)$",
        r'^\{"after":\{"job_id":"job_\w+","on":"finished"\}\}$',  # curl's create
    ):
        assert re.search(printed, result.stdout, re.M), (printed, out)
    cycle = r"^error: schedule\.after\.job_id: would close a cycle (job_\w+) -> job_\w+ -> \1$"
    assert re.search(cycle, result.stderr, re.M), out
