"""Operators' control of schedules on one node (issue 31): pause reasons, pausing a queue or a
tenant, a trigger's own payload and a job's run limit. Three-node behaviour (a pause across a
leader change) is tests/cluster/test_schedule_control_cluster.py."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.api_helpers import (
    QUEUE_TARGET,
    Tenant,
    all_audit,
    assert_error,
    create_job,
    get_job,
    job_body,
    new_tenant,
)
from tests.servers import ADMIN_TOKEN, NodeProcess, http, make_nodes, running, wait_for

# A run later than 1 s follows its job's misfire policy: a tenant paused a few seconds misses runs.
MISFIRE = '[dispatch]\nmisfire_threshold = "1s"\n'


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    base: Path = tmp_path_factory.mktemp("control")
    with running(make_nodes(base, 1, extra_sections=MISFIRE)) as nodes:
        yield nodes[0]


def _post(node: NodeProcess, path: str, body: Any = None, token: str | None = None) -> Any:
    kwargs: dict[str, Any] = {} if token is None else {"token": token}
    status, answer, _ = http("POST", f"{node.url}{path}", body, **kwargs)
    assert status in (200, 202), (path, status, answer)
    return answer


def _runs(node: NodeProcess, tenant: Tenant, job_id: str) -> list[dict[str, Any]]:
    status, answer, _ = http("GET", f"{node.url}/v1/jobs/{job_id}/runs", token=tenant.token)
    assert status == 200, answer
    runs: list[dict[str, Any]] = answer["runs"]
    return runs


def _receive(node: NodeProcess, tenant: Tenant, queue: str, wait: str = "0s") -> list[Any]:
    status, answer, _ = http(
        "POST",
        f"{node.url}/v1/queues/{queue}/receive",
        {"max": 10, "wait": wait},
        token=tenant.token,
        timeout_s=30,
    )
    assert status == 200, answer
    messages: list[Any] = answer["messages"]
    return messages


def _queue(node: NodeProcess, tenant: Tenant, name: str) -> dict[str, Any] | None:
    status, answer, _ = http("GET", f"{node.url}/v1/queues", token=tenant.token)
    assert status == 200, answer
    return next((q for q in answer["queues"] if q["name"] == name), None)


def _due_now(queue: str, **fields: Any) -> dict[str, Any]:
    return job_body(schedule={"delay": "0s"}, target={"type": "queue", "name": queue}, **fields)


# ------------------------------------------------------------------ a job's pause reason


def test_a_job_paused_with_a_reason_shows_it_until_resumed_and_the_audit_names_it(
    node: NodeProcess,
) -> None:
    tenant = new_tenant(node)
    job = create_job(node, tenant.token, job_body(schedule={"every": "1h"}))
    assert job["paused_reason"] is None
    reason = "the payments API is down (INC-42)"
    paused = _post(node, f"/v1/jobs/{job['job_id']}/pause", {"reason": reason}, tenant.token)
    assert paused["status"] == "paused" and paused["paused_reason"] == reason
    assert get_job(node, tenant.token, job["job_id"])["paused_reason"] == reason
    records = [r for r in all_audit(node, tenant.token) if r["action"] == "pause_job"]
    assert [r["detail"] for r in records] == [{"reason": reason}]
    resumed = _post(node, f"/v1/jobs/{job['job_id']}/resume", None, tenant.token)
    assert resumed["status"] == "active" and resumed["paused_reason"] is None
    again = _post(node, f"/v1/jobs/{job['job_id']}/pause", None, tenant.token)  # no body
    assert again["status"] == "paused" and again["paused_reason"] is None


@pytest.mark.parametrize(
    "body",
    [{"reason": ""}, {"reason": "x" * 501}, {"reason": 7}, {"reason": "a\nb"}],
    ids=["empty", "too-long", "not-a-string", "control-character"],
)
def test_a_bad_pause_reason_is_400_naming_it_and_pauses_nothing(
    node: NodeProcess, body: dict[str, Any]
) -> None:
    tenant = new_tenant(node)
    job = create_job(node, tenant.token, job_body(schedule={"every": "1h"}))
    for path in (f"/v1/jobs/{job['job_id']}/pause", "/v1/queues/work/pause"):
        status, answer, _ = http("POST", f"{node.url}{path}", body, token=tenant.token)
        assert_error(status, answer, 400, "invalid_request")
        assert "reason" in answer["error"]["message"]
    assert get_job(node, tenant.token, job["job_id"])["status"] == "active"
    assert _queue(node, tenant, "work") is None


# ------------------------------------------------------------------ a queue's pause


def test_a_paused_queue_hands_out_nothing_and_resume_wakes_a_waiting_receive(
    node: NodeProcess,
) -> None:
    tenant, other = new_tenant(node), new_tenant(node)
    paused = _post(node, "/v1/queues/mail/pause", {"reason": "smtp relay swap"}, tenant.token)
    assert paused == {"name": "mail", "paused": True, "paused_reason": "smtp relay swap"}
    job = create_job(node, tenant.token, _due_now("mail", payload={"n": 1}))
    theirs = create_job(node, other.token, _due_now("mail", payload={"n": 2}))
    # Runs are still claimed into a paused queue: it shows them ready, and paused.
    shown = wait_for(
        lambda: (q := _queue(node, tenant, "mail")) and q["ready"] == 1 and q,
        10,
        "the run claimed into the paused queue",
    )
    assert shown["paused"] is True and shown["paused_reason"] == "smtp relay swap"
    assert _receive(node, tenant, "mail") == []
    # Another tenant's queue of the same name is not paused.
    assert [m["job_id"] for m in _receive(node, other, "mail", wait="10s")] == [theirs["job_id"]]

    got: list[list[Any]] = []
    waiting = threading.Thread(target=lambda: got.append(_receive(node, tenant, "mail", "20s")))
    started = time.monotonic()
    waiting.start()
    time.sleep(0.5)  # the long poll is waiting (a readiness check cannot see inside it)
    resumed = _post(node, "/v1/queues/mail/resume", None, tenant.token)
    assert resumed == {"name": "mail", "paused": False, "paused_reason": None}
    waiting.join(timeout=25)
    assert [m["job_id"] for m in got[0]] == [job["job_id"]]
    assert [m["payload"] for m in got[0]] == [{"n": 1}]
    assert time.monotonic() - started < 10  # woken by the resume, not by the poll's end
    actions = [r["action"] for r in all_audit(node, tenant.token)]
    assert "pause_queue" in actions and "resume_queue" in actions


def test_pausing_a_queue_twice_keeps_the_first_reason_and_resuming_twice_is_harmless(
    node: NodeProcess,
) -> None:
    tenant = new_tenant(node)
    _post(node, "/v1/queues/q1/pause", {"reason": "first"}, tenant.token)
    again = _post(node, "/v1/queues/q1/pause", {"reason": "second"}, tenant.token)
    assert again["paused_reason"] == "first"
    _post(node, "/v1/queues/q1/resume", None, tenant.token)
    assert _post(node, "/v1/queues/q1/resume", None, tenant.token)["paused"] is False
    status, answer, _ = http("POST", f"{node.url}/v1/queues/bad!name/pause", token=tenant.token)
    assert_error(status, answer, 400, "invalid_request")


# ------------------------------------------------------------------ a tenant's pause


def test_only_an_admin_pauses_a_tenant_and_an_unknown_one_is_404(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    status, answer, _ = http(
        "POST", f"{node.url}/v1/tenants/{tenant.tenant_id}/pause", token=tenant.token
    )
    assert status == 403, answer
    status, answer, _ = http("POST", f"{node.url}/v1/tenants/tnt_missing/pause", {})
    assert_error(status, answer, 404, "tenant_not_found")


def test_a_paused_tenant_has_no_run_claimed_until_resumed(node: NodeProcess) -> None:
    tenant, clock = new_tenant(node), new_tenant(node)
    shown = _post(node, f"/v1/tenants/{tenant.tenant_id}/pause", {"reason": "migration"})
    assert shown["paused"] is True and shown["paused_reason"] == "migration"
    job = create_job(node, tenant.token, _due_now("held"))
    later = create_job(node, clock.token, _due_now("held"))
    # The other tenant's run, due after this one's, is claimed: this one was passed over.
    wait_for(lambda: _runs(node, clock, later["job_id"]), 10, "the other tenant's run")
    assert _runs(node, tenant, job["job_id"]) == []
    assert get_job(node, tenant.token, job["job_id"])["status"] == "active"
    resumed = _post(node, f"/v1/tenants/{tenant.tenant_id}/resume")
    assert resumed["paused"] is False and resumed["paused_reason"] is None
    wait_for(lambda: _runs(node, tenant, job["job_id"]), 10, "the run after the resume")


@pytest.mark.parametrize("policy", ["run_once", "skip", "run_all"])
def test_a_resumed_tenant_catches_up_by_each_jobs_misfire_policy(
    node: NodeProcess, policy: str
) -> None:
    tenant = new_tenant(node)
    job = create_job(
        node,
        tenant.token,
        job_body(schedule={"every": "1s"}, target=QUEUE_TARGET, misfire_policy=policy),
    )
    wait_for(lambda: _runs(node, tenant, job["job_id"]), 10, "a first run")
    _post(node, f"/v1/tenants/{tenant.tenant_id}/pause")
    paused_at = len(_runs(node, tenant, job["job_id"]))
    time.sleep(4)  # slots missed while paused: four, past the 1 s misfire threshold
    before = len(_runs(node, tenant, job["job_id"]))
    assert before <= paused_at + 1  # a claim in flight when the pause committed, at most
    _post(node, f"/v1/tenants/{tenant.tenant_id}/resume")
    runs = wait_for(
        lambda: (runs := _runs(node, tenant, job["job_id"])) and len(runs) > before and runs,
        10,
        "a run after the resume",
    )
    first = runs[len(runs) - before - 1]  # newest first: the first run since the resume
    if policy == "skip":  # the missed slot is recorded as skipped, the next one runs
        assert first["status"] == "skipped", first
    else:  # run_once: the late slot runs once, then the next future one
        assert first["status"] != "skipped", first
    if policy == "run_all":  # every missed slot runs, one after another, none skipped
        runs = wait_for(
            lambda: (r := _runs(node, tenant, job["job_id"])) and len(r) >= before + 4 and r,
            10,
            "every missed slot",
        )
        assert all(r["status"] != "skipped" for r in runs[: len(runs) - before])
    _post(node, f"/v1/jobs/{job['job_id']}/pause", None, tenant.token)


# ------------------------------------------------------------------ a trigger's payload


def test_a_trigger_with_a_payload_delivers_it_for_that_run_only(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    job = create_job(
        node,
        tenant.token,
        job_body(schedule={"every": "1h"}, target={"type": "queue", "name": "tr"}, payload="job"),
    )
    answer = _post(
        node, f"/v1/jobs/{job['job_id']}/trigger", {"payload": {"x": [1, 2]}}, tenant.token
    )
    got = wait_for(lambda: _receive(node, tenant, "tr", "5s"), 15, "the triggered run")
    assert [m["payload"] for m in got] == [{"x": [1, 2]}]
    _post(node, f"/v1/jobs/{job['job_id']}/trigger", None, tenant.token)  # no body: the job's
    plain = wait_for(lambda: _receive(node, tenant, "tr", "5s"), 15, "the plain trigger")
    assert [m["payload"] for m in plain] == ["job"]
    runs = _runs(node, tenant, job["job_id"])
    overridden = {r["scheduled_at"]: r["payload_overridden"] for r in runs}
    assert overridden[answer["scheduled_at"]] is True
    assert sorted(overridden.values()) == [False, True]
    assert get_job(node, tenant.token, job["job_id"])["payload"] == "job"
    detail = [r["detail"] for r in all_audit(node, tenant.token) if r["action"] == "trigger_job"]
    assert sorted(d.get("payload_overridden", False) for d in detail) == [False, True]


def test_a_trigger_payload_over_the_limit_is_413_and_a_bad_body_400(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    job = create_job(node, tenant.token, job_body(schedule={"every": "1h"}))
    url = f"{node.url}/v1/jobs/{job['job_id']}/trigger"
    status, answer, _ = http("POST", url, {"payload": "x" * 300_000}, token=tenant.token)
    assert status == 413, answer
    status, answer, _ = http("POST", url, {"payload": 1, "extra": 2}, token=tenant.token)
    assert status == 400 and "extra" in answer["error"]["message"], answer
    assert _runs(node, tenant, job["job_id"]) == []


# ------------------------------------------------------------------ a job's run limit


def test_a_job_with_max_runs_completes_after_that_many_scheduled_runs(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    job = create_job(
        node,
        tenant.token,
        job_body(schedule={"every": "1s"}, target={"type": "queue", "name": "lim"}, max_runs=3),
    )
    assert job["max_runs"] == 3 and job["runs_started"] == 0
    _post(node, f"/v1/jobs/{job['job_id']}/trigger", None, tenant.token)  # not counted
    done = wait_for(
        lambda: (j := get_job(node, tenant.token, job["job_id"]))["status"] == "completed" and j,
        20,
        "the job to complete",
    )
    assert done["runs_started"] == 3 and done["next_run_at"] is None
    assert len(_runs(node, tenant, job["job_id"])) == 4  # three scheduled runs and the trigger


def test_max_runs_is_checked_and_applies_to_recurring_jobs_only(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    for bad in (0, 1_000_001, "3", 2.5):
        status, answer, _ = http(
            "POST",
            f"{node.url}/v1/jobs",
            job_body(schedule={"every": "1h"}, max_runs=bad),
            token=tenant.token,
        )
        assert_error(status, answer, 400, "invalid_request")
        assert "max_runs" in answer["error"]["message"], answer
    status, answer, _ = http(
        "POST", f"{node.url}/v1/jobs", job_body(max_runs=1), token=tenant.token
    )
    assert_error(status, answer, 400, "invalid_request")
    assert "max_runs" in answer["error"]["message"] and "recurring" in answer["error"]["message"]


def test_a_patch_may_not_set_max_runs_at_or_below_the_runs_started(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    job = create_job(
        node,
        tenant.token,
        job_body(schedule={"every": "1s"}, target={"type": "queue", "name": "p"}, max_runs=100),
    )
    wait_for(
        lambda: get_job(node, tenant.token, job["job_id"])["runs_started"] >= 2, 15, "two runs"
    )
    url = f"{node.url}/v1/jobs/{job['job_id']}"
    status, answer, _ = http("PATCH", url, {"max_runs": 1}, token=tenant.token)
    assert_error(status, answer, 400, "invalid_request")
    assert "max_runs" in answer["error"]["message"]
    status, answer, _ = http("PATCH", url, {"max_runs": None}, token=tenant.token)
    assert status == 200 and answer["max_runs"] is None, answer
    _post(node, f"/v1/jobs/{job['job_id']}/pause", None, tenant.token)


# ------------------------------------------------------------------ failure policies

ONE_TRY = {"max_attempts": 1, "backoff": "fixed", "initial_delay": "1s", "max_delay": "1s"}


def test_a_job_pauses_itself_after_its_policys_dead_runs_in_a_row(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    policy = {"after": 2, "pause": True}
    body = job_body(
        schedule={"every": "1s"},
        target={"type": "queue", "name": "fail"},
        retry=ONE_TRY,
        on_failure=policy,
    )
    job = create_job(node, tenant.token, body)
    assert job["on_failure"] == {"alert_url": None, "after": 2, "pause": True}
    for k in range(2):
        [message] = wait_for(lambda: _receive(node, tenant, "fail", "5s")[:1], 15, "a run")
        nack = {"receipts": [message["receipt"]], "error": f"boom {k}"}
        _post(node, "/v1/queues/fail/nack", nack, tenant.token)
    paused = wait_for(
        lambda: (j := get_job(node, tenant.token, job["job_id"]))["status"] == "paused" and j,
        10,
        "the job paused by its policy",
    )
    assert paused["paused_reason"] == "paused after 2 consecutive failures"
    records = [r for r in all_audit(node, tenant.token) if r["action"] == "pause_job"]
    assert [(r["actor"], r["detail"]) for r in records] == [
        ("schedd", {"reason": "paused after 2 consecutive failures"})
    ]


@pytest.mark.parametrize(
    ("policy", "field"),
    [
        ({}, "on_failure"),
        ({"after": 0, "pause": True}, "after"),
        ({"pause": "yes"}, "pause"),
        ({"pause": True, "extra": 1}, "extra"),
    ],
    ids=["nothing-to-do", "after-0", "pause-not-bool", "unknown-field"],
)
def test_a_bad_failure_policy_is_400_naming_it(
    node: NodeProcess, policy: dict[str, Any], field: str
) -> None:
    tenant = new_tenant(node)
    body = job_body(schedule={"every": "1h"}, on_failure=policy)
    status, answer, _ = http("POST", f"{node.url}/v1/jobs", body, token=tenant.token)
    assert_error(status, answer, 400, "invalid_request")
    assert field in answer["error"]["message"], answer


def test_an_alert_url_the_ssrf_guard_refuses_is_422_for_a_job_and_a_tenant(
    node: NodeProcess,
) -> None:
    tenant = new_tenant(node)
    policy = {"alert_url": "http://127.0.0.1:9/hook", "pause": False}
    body = job_body(schedule={"every": "1h"}, on_failure=policy)
    status, answer, _ = http("POST", f"{node.url}/v1/jobs", body, token=tenant.token)
    assert status == 422 and "on_failure.alert_url" in answer["error"]["message"], answer
    url = f"{node.url}/v1/tenants/{tenant.tenant_id}"
    status, answer, _ = http("PATCH", url, {"on_failure": policy})
    assert status == 422 and "on_failure.alert_url" in answer["error"]["message"], answer


def test_a_tenants_default_policy_is_set_shown_and_removed(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    url = f"{node.url}/v1/tenants/{tenant.tenant_id}"
    status, shown, _ = http("PATCH", url, {"on_failure": {"pause": True, "after": 5}})
    assert status == 200 and shown["on_failure"] == {"alert_url": None, "after": 5, "pause": True}
    status, shown, _ = http("PATCH", url, {"on_failure": None})
    assert status == 200 and shown["on_failure"] is None, shown


def test_a_job_no_run_of_which_succeeds_is_marked_overdue(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    body = job_body(schedule={"every": "1s"}, target={"type": "queue", "name": "unread"})
    job = create_job(node, tenant.token, body)
    assert job["overdue"] is False
    wait_for(lambda: get_job(node, tenant.token, job["job_id"])["overdue"], 30, "the overdue mark")
    request = urllib.request.Request(f"{node.url}/metrics")
    request.add_header("Authorization", f"Bearer {ADMIN_TOKEN}")
    with urllib.request.urlopen(request, timeout=10) as answer:
        text = answer.read().decode()
    assert f'schedd_jobs_overdue{{tenant="{tenant.tenant_id}"}} 1.0' in text
    paused = _post(node, f"/v1/jobs/{job['job_id']}/pause", None, tenant.token)
    assert paused["overdue"] is False  # a paused job is not expected to run
