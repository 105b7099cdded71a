"""`schedctl apply -f` and `schedctl export` on a real node (issue 32 §2): apply creates, a rerun
changes nothing, a changed field shows in the dry run's diff and applies, --exit-code says
drift with 2, export then apply is an empty plan, --prune deletes only its set's jobs, a bad
file applies nothing, and two applies of one file at once make one job per key."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from schedd.cli.ctl.client import Client
from schedd.cli.ctl.jobfile import read_job_file
from schedd.cli.ctl.plan import apply_plan, make_plan
from tests.integration.test_schedctl import SCHEDCTL, Ctl
from tests.schedctl_inprocess import run_schedctl
from tests.servers import ADMIN_TOKEN, NodeProcess, http, wait_for

JOBS = """\
set = "{set}"

[[job]]
key = "{set}/nightly"
name = "nightly settlement"
schedule = {{ cron = "0 2 * * *", timezone = "Europe/Berlin" }}
target = {{ type = "queue", name = "settlements" }}
payload = {{ region = "eu" }}
labels = {{ team = "payments" }}

[[job]]
key = "{set}/year-end"
schedule = {{ run_at = 2030-12-31T23:00:00+01:00 }}
target = {{ type = "queue", name = "settlements" }}
payload_json = '{{"account": null}}'
"""


@pytest.fixture(scope="module")
def ctl(node: NodeProcess) -> Ctl:
    return Ctl(node.url, ADMIN_TOKEN).new_tenant()


def job_by_key(ctl: Ctl, key: str) -> Any:
    url = f"{ctl.url}/v1/jobs/by-key/{urllib.parse.quote(key, safe='')}"
    status, job, _ = http("GET", url, token=ctl.token)
    return job if status == 200 else None


def put(ctl: Ctl, key: str, **fields: Any) -> Any:
    url = f"{ctl.url}/v1/jobs/by-key/{urllib.parse.quote(key, safe='')}"
    body = {"schedule": {"cron": "@daily"}, "target": {"type": "queue", "name": "q"}} | fields
    status, job, _ = http("PUT", url, body, token=ctl.token)
    assert status == 201, job
    return job


def plan(ctl: Ctl, path: Path, *args: str) -> Any:
    """The dry run's --json, with its exit code under --exit-code."""
    result = ctl("apply", "-f", str(path), "--dry-run", "--exit-code", "--json", *args)
    assert result.returncode in (0, 2), result.stderr
    report = json.loads(result.stdout)
    assert (result.returncode == 2) == any(s["action"] != "unchanged" for s in report["steps"])
    return report


def actions(report: Any) -> dict[str | None, str]:
    return {step["key"] or step["job_id"]: step["action"] for step in report["steps"]}


def test_apply_creates_a_rerun_changes_nothing_and_a_changed_field_is_diffed_and_applied(
    ctl: Ctl, tmp_path: Path
) -> None:
    path = tmp_path / "jobs.toml"
    path.write_text(JOBS.format(set="a"))
    assert actions(plan(ctl, path)) == {"a/nightly": "create", "a/year-end": "create"}
    assert job_by_key(ctl, "a/nightly") is None  # a dry run sends no write

    applied = ctl("apply", "-f", str(path))
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.splitlines()[-1] == "Applied jobs.toml, set a: 2 created.".replace(
        "jobs.toml", str(path)
    )
    nightly, year_end = job_by_key(ctl, "a/nightly"), job_by_key(ctl, "a/year-end")
    assert nightly["labels"] == {"team": "payments", "schedd.set": "a"}
    assert year_end["payload"] == {"account": None}
    assert year_end["schedule"] == {"run_at": "2030-12-31T22:00:00Z"}
    assert actions(plan(ctl, path)) == {"a/nightly": "unchanged", "a/year-end": "unchanged"}

    path.write_text(JOBS.format(set="a").replace("0 2 * * *", "30 1 * * *"))
    report = plan(ctl, path)
    assert report["steps"][0] == {
        "action": "update",
        "key": "a/nightly",
        "job_id": nightly["job_id"],
        "name": "nightly settlement",
        "changes": [{"field": "schedule.cron", "current": "0 2 * * *", "proposed": "30 1 * * *"}],
    }
    shown = ctl("apply", "-f", str(path), "--dry-run").stdout.splitlines()
    assert shown[:2] == [
        f"~ update    a/nightly ({nightly['job_id']})",
        '    schedule.cron: "0 2 * * *" -> "30 1 * * *"',
    ]
    assert ctl.json("apply", "-f", str(path))["counts"] == {
        "create": 0,
        "update": 1,
        "unchanged": 1,
        "delete": 0,
    }
    assert job_by_key(ctl, "a/nightly")["schedule"]["cron"] == "30 1 * * *"
    assert actions(plan(ctl, path)) == {"a/nightly": "unchanged", "a/year-end": "unchanged"}


def test_export_then_apply_is_an_empty_plan(ctl: Ctl, tmp_path: Path) -> None:
    put(ctl, "e/plain", labels={"schedd.set": "e"})
    http_job = put(
        ctl,
        "e/http",
        name="callback",
        schedule={"every": "90m", "start_at": "2027-01-01T00:00:00+05:30"},
        window="10m",
        target={"type": "http", "url": "https://hooks.example/x", "headers": {"X-A": "b"}},
        payload={"nested": [1, None, {"k": "v"}]},
        retry={"max_attempts": 7, "backoff": "fixed"},
        misfire_policy="skip",
        overlap_policy="delay",
        max_runs=100,
        on_failure={"pause": True, "after": 2},
        labels={"schedd.set": "e", "team": "x"},
    )
    assert ctl("pause", http_job["job_id"]).returncode == 0
    put(ctl, "other-set", labels={"schedd.set": "f"})
    keyless = ctl.json("add", "--cron", "@hourly", "--queue", "q", "--name", "by hand")

    exported = ctl("export", "--label", "schedd.set=e")
    assert exported.returncode == 0, exported.stderr
    assert '\nset = "e"\n' in exported.stdout and "payload_json = " in exported.stdout
    path = tmp_path / "e.toml"
    path.write_text(exported.stdout)
    assert actions(plan(ctl, path, "--prune")) == {"e/http": "unchanged", "e/plain": "unchanged"}
    assert job_by_key(ctl, "e/http")["status"] == "paused"  # apply leaves the status alone

    everything = ctl("export")  # jobs of several sets, and one without a key
    assert "set = " not in everything.stdout
    assert keyless["job_id"] in everything.stderr and "without a key" in everything.stderr
    assert "the jobs belong to several sets (" in everything.stderr
    path.write_text(everything.stdout)
    assert set(actions(plan(ctl, path)).values()) == {"unchanged"}


def test_prune_deletes_only_the_live_jobs_of_the_files_set(ctl: Ctl, tmp_path: Path) -> None:
    for key in ("p/kept", "p/gone"):
        put(ctl, key, labels={"schedd.set": "p"})
    put(ctl, "q/kept", labels={"schedd.set": "q"})
    put(ctl, "p/unlabelled")
    status, keyless, _ = http(
        "POST",
        f"{ctl.url}/v1/jobs",
        {
            "schedule": {"cron": "@daily"},
            "target": {"type": "queue", "name": "q"},
            "labels": {"schedd.set": "p"},
        },
        token=ctl.token,
    )
    assert status == 201, keyless
    path = tmp_path / "p.toml"
    path.write_text(
        'set = "p"\n\n[[job]]\nkey = "p/kept"\nschedule = {cron = "@daily"}\n'
        'target = {type = "queue", name = "q"}\n'
    )
    assert actions(plan(ctl, path)) == {"p/kept": "unchanged"}  # no --prune: no deletes
    assert actions(plan(ctl, path, "--prune")) == {
        "p/kept": "unchanged",
        "p/gone": "delete",
        keyless["job_id"]: "delete",
    }
    applied = ctl("apply", "-f", str(path), "--prune")
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.splitlines()[-1].endswith(": 2 deleted, 1 unchanged.")
    assert job_by_key(ctl, "p/gone") is None
    assert ctl.json("get", keyless["job_id"])["status"] == "cancelled"
    for key in ("p/kept", "q/kept", "p/unlabelled"):
        assert job_by_key(ctl, key)["status"] == "active", key
    assert actions(plan(ctl, path, "--prune")) == {"p/kept": "unchanged"}


def test_a_bad_file_applies_nothing(ctl: Ctl, tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    big = "x" * 70_000  # over the node's payload limit: only the server knows it
    text = JOBS.format(set="b") + '\n[[job]]\nkey = "b/big"\nschedule = {cron = "@daily"}\n'
    path.write_text(text + f'target = {{type = "queue", name = "q"}}\npayload = "{big}"\n')
    result = ctl("apply", "-f", str(path))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith(f'error: {path}: job "b/big": payload: is ')
    path.write_text(JOBS.format(set="b") + '\n[[job]]\nkey = "b/bad key"\n')
    result = ctl("apply", "-f", str(path))
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: {path}: job #3: key: must match")
    done = put(ctl, "b/done", schedule={"delay": "0s"})  # runs at once, then is completed
    wait_for(lambda: job_by_key(ctl, "b/done")["status"] == "completed", 20, "the run")
    run_at = done["schedule"]["run_at"]
    path.write_text(
        JOBS.format(set="b")
        + f'\n[[job]]\nkey = "b/done"\nschedule = {{run_at = "{run_at}"}}\n'
        + 'target = {type = "queue", name = "q"}\npayload = "changed"\n'
    )
    result = ctl("apply", "-f", str(path))
    assert result.returncode == 1
    assert result.stderr == (
        f'error: {path}: job "b/done": {done["job_id"]} is completed and cannot change; cancel '
        f"it (schedctl cancel {done['job_id']}) to free its key, then apply again\n"
    )
    assert [job_by_key(ctl, key) for key in ("b/nightly", "b/year-end", "b/big")] == [None] * 3


def race_file(path: Path, name: str, count: int) -> Path:
    jobs = "".join(
        f'\n[[job]]\nkey = "{name}/{i}"\nschedule = {{cron = "{i} * * * *"}}\n'
        'target = {type = "queue", name = "q"}\n'
        for i in range(count)
    )
    path.write_text(f'set = "{name}"\n{jobs}')
    return path


def live_keys(ctl: Ctl, set_name: str) -> list[str]:
    listed = ctl.json("ls", "--all")["jobs"]
    return sorted(
        job["key"]
        for job in listed
        if job["status"] == "active" and job["labels"].get("schedd.set") == set_name
    )


def test_two_plans_applied_one_after_the_other_converge(ctl: Ctl, tmp_path: Path) -> None:
    """The interleaving a race makes, step by step: both plans made before either is applied."""
    put(ctl, "twice/old", labels={"schedd.set": "twice"})
    job_file = read_job_file(str(race_file(tmp_path / "twice.toml", "twice", 3)))
    client = Client(ctl.url, token=ctl.token)
    plans = [make_plan(client, job_file, prune=True) for _ in range(2)]
    for made in plans:
        apply_plan(client, made, on_step=lambda step: None)
    assert [actions({"steps": [s.as_json() for s in made.steps]}) for made in plans] == [
        {"twice/0": "create", "twice/1": "create", "twice/2": "create", "twice/old": "delete"},
        # the second found the jobs made and the old one deleted: nothing left to do
        {
            "twice/0": "unchanged",
            "twice/1": "unchanged",
            "twice/2": "unchanged",
            "twice/old": "delete",
        },
    ]
    assert live_keys(ctl, "twice") == ["twice/0", "twice/1", "twice/2"]


def test_two_applies_of_one_file_at_once_make_one_job_per_key(ctl: Ctl, tmp_path: Path) -> None:
    path = race_file(tmp_path / "race.toml", "race", 30)
    env = {"SCHEDCTL_URL": ctl.url, "SCHEDCTL_TOKEN": ctl.token, "PATH": "/usr/bin:/bin"}
    command = [SCHEDCTL, "apply", "-f", str(path), "--prune", "--json"]
    racers = [
        subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    reports = []
    for racer in racers:
        out, err = racer.communicate(timeout=60)
        assert racer.returncode == 0, err
        reports.append(json.loads(out))
    assert sum(report["counts"]["create"] for report in reports) == 30  # each made once
    assert live_keys(ctl, "race") == sorted(f"race/{i}" for i in range(30))
    assert set(actions(plan(ctl, path, "--prune")).values()) == {"unchanged"}


# ---------------------------------------------------------------- docs/schedules-as-code.md

DOC = Path(__file__).resolve().parents[2] / "docs" / "schedules-as-code.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
EXIT = re.compile(r"#\s*exit (\d)")
JOB_ID = re.compile(r"job_[0-9a-f]{24}")


def shell(line: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A line in bash in the working directory; a plain `schedctl ...` (no pipe, no redirect)
    in this process, as the other schedctl tests run it (a process start is ~0.3 s)."""
    command = line.split("#", 1)[0]
    if command.startswith("schedctl ") and not set(command) & set("|>;&$`"):
        return run_schedctl(shlex.split(command)[1:], env=env)
    return subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True)


def test_the_docs_pages_commands_run_in_order_and_print_what_it_shows(
    ctl: Ctl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the page's order: each ```toml block that starts `# FILE` is written to FILE; each
    ```sh line and each `- run:` line of the CI steps runs (its `# exit N` comment is the exit
    code, 0 without one); a ```text block right after commands is what they printed (a blank
    line apart, job ids aside)."""
    monkeypatch.chdir(tmp_path)
    tenant = ctl.new_tenant()
    env = {
        "SCHEDCTL_URL": tenant.url,
        "SCHEDCTL_TOKEN": tenant.token,
        "PATH": f"{Path(SCHEDCTL).parent}:/usr/bin:/bin",
        "LANG": "C.UTF-8",
    }
    ran: list[str] = []
    printed: list[str] | None = None
    for kind, text in BLOCK.findall(DOC.read_text()):
        lines = text.splitlines()
        if kind == "toml" and lines[0].startswith("# "):
            (tmp_path / lines[0][2:].split()[0].rstrip(",")).write_text(text)
        elif kind == "text" and printed is not None:
            assert JOB_ID.sub("job_", text) == JOB_ID.sub("job_", "\n\n".join(printed) + "\n")
        commands = [line.split("- run: ", 1)[1] for line in lines if "- run: " in line]
        if kind == "sh":
            commands = lines
        printed = [] if commands else None
        for line in commands:
            found = EXIT.search(line)
            result = shell(line, env)
            assert result.returncode == (int(found.group(1)) if found else 0), (line, result)
            printed.append(result.stdout.rstrip("\n"))
            ran.append(line)
    assert len(ran) >= 10, ran
