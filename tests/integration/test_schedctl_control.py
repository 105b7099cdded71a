"""schedctl's schedule control (issue 31) against one real node: pause and resume a job, a
queue or a tenant with a reason, trigger with a payload, add with --max-runs."""

from __future__ import annotations

import pytest

from tests.integration.test_schedctl import Ctl, assert_fails
from tests.servers import ADMIN_TOKEN, NodeProcess, wait_for


@pytest.fixture(scope="module")
def ctl(node: NodeProcess) -> Ctl:
    return Ctl(node.url, ADMIN_TOKEN).new_tenant()


def test_pause_and_resume_a_job_with_a_reason(ctl: Ctl) -> None:
    job = ctl.json("add", "--every", "1h", "--queue", "cc")
    paused = ctl.json("pause", job["job_id"], "--reason", "INC-42")
    assert paused["status"] == "paused" and paused["paused_reason"] == "INC-42"
    shown = ctl("get", job["job_id"])
    assert shown.returncode == 0 and "INC-42" in shown.stdout, shown.stderr
    assert ctl.json("resume", job["job_id"])["paused_reason"] is None


def test_pause_and_resume_a_queue(ctl: Ctl) -> None:
    out = ctl("pause", "--queue", "emails", "--reason", "relay swap")
    assert out.returncode == 0 and "queue emails: paused: relay swap" in out.stdout, out.stderr
    [listed] = [q for q in ctl.json("queues", "ls")["queues"] if q["name"] == "emails"]
    assert listed["paused"] is True and listed["paused_reason"] == "relay swap"
    assert ctl.json("resume", "--queue", "emails") == {
        "name": "emails",
        "paused": False,
        "paused_reason": None,
    }


def test_an_admin_pauses_and_resumes_a_tenant_with_tenant_alone(node: NodeProcess) -> None:
    admin, tenant = Ctl(node.url, ADMIN_TOKEN), Ctl(node.url, ADMIN_TOKEN).new_tenant()
    job = tenant.json("add", "--in", "1h", "--queue", "t")
    tenant_id = job["tenant_id"]
    out = admin("pause", "--tenant", tenant_id, "--reason", "migration")
    assert out.returncode == 0 and f"tenant {tenant_id}" in out.stdout, out.stderr
    assert "paused: migration" in out.stdout
    assert admin.json("resume", "--tenant", tenant_id)["paused"] is False
    # A tenant's own token may not pause itself: the admin's verb.
    assert tenant("pause", "--tenant", tenant_id).returncode != 0


def test_pause_needs_one_scope(ctl: Ctl) -> None:
    assert_fails(ctl("pause"), 2, "JOB_ID", "--queue")
    assert_fails(ctl("pause", "job_x", "--queue", "q"), 2, "--queue")


def test_trigger_with_a_payload_and_add_with_max_runs(ctl: Ctl) -> None:
    job = ctl.json(
        "add", "--every", "1s", "--queue", "lim", "--max-runs", "2", "--payload", '"own"'
    )
    assert job["max_runs"] == 2 and job["runs_started"] == 0
    triggered = ctl.json("trigger", job["job_id"], "--payload", '{"resend": true}')
    assert triggered["job_id"] == job["job_id"]
    done = wait_for(
        lambda: (j := ctl.json("get", job["job_id"]))["status"] == "completed" and j,
        20,
        "the job to complete after two runs",
    )
    assert done["runs_started"] == 2
    runs = ctl.json("runs", job["job_id"])["runs"]
    assert [r["payload_overridden"] for r in runs].count(True) == 1 and len(runs) == 3
    refused = ctl("add", "--every", "1h", "--queue", "x", "--max-runs", "0")
    assert refused.returncode == 2 and "--max-runs" in refused.stderr, refused.stderr


def test_add_with_a_failure_policy_and_get_shows_it(ctl: Ctl) -> None:
    job = ctl.json(
        "add", "--every", "1h", "--queue", "f", "--pause-on-failure", "--alert-after", "4"
    )
    assert job["on_failure"] == {"alert_url": None, "after": 4, "pause": True}
    shown = ctl("get", job["job_id"])
    assert shown.returncode == 0 and "after 4 dead runs in a row: pause" in shown.stdout
    assert_fails(
        ctl("add", "--every", "1h", "--queue", "f", "--alert-after", "2"), 2, "--alert-after"
    )
