"""Failures seen in the console (issue 31), in chromium on three real nodes: the jobs list's
last run and last result and its Failing filter; dead letters grouped by error, one group
listed and redriven after a confirmation that shows its count."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.browser.conftest import Console, new_tenant
from tests.servers import NodeProcess, http, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.browser]
NO_RETRY = {"max_attempts": 1, "backoff": "fixed", "initial_delay": "1s", "max_delay": "1s"}


def create_job(node: NodeProcess, token: str, **fields: Any) -> str:
    body = {"schedule": {"every": "1h"}, "target": {"type": "queue", "name": "work"}, **fields}
    status, job, _ = http("POST", f"{node.url}/v1/jobs", body, token=token)
    assert status == 201, job
    job_id: str = job["job_id"]
    return job_id


def run_once(node: NodeProcess, token: str, job_id: str, queue: str, error: str | None) -> None:
    """Trigger one run of the job and settle it: acked, or nacked with `error` (it dies)."""
    status, answer, _ = http("POST", f"{node.url}/v1/jobs/{job_id}/trigger", token=token)
    assert status == 202, answer
    settle(node, token, queue, error)


def settle(node: NodeProcess, token: str, queue: str, error: str | None) -> None:
    def received() -> str | None:
        wanted = {"max": 1, "wait": "2s", "visibility_timeout": "60s"}
        got = http("POST", f"{node.url}/v1/queues/{queue}/receive", wanted, token=token)[1]
        return got["messages"][0]["receipt"] if got["messages"] else None

    receipt = wait_for(received, 30.0, f"a message on {queue}")
    verb, body = ("ack", {}) if error is None else ("nack", {"error": error})
    answer = http(
        "POST", f"{node.url}/v1/queues/{queue}/{verb}", {"receipts": [receipt], **body}, token=token
    )
    assert answer[0] == 200, answer


def test_the_jobs_list_shows_last_run_and_result_and_filters_the_failing(
    console: Console,
) -> None:
    node = console.node
    tenant = new_tenant(node, f"ops-{uuid.uuid4().hex[:6]}")
    token = tenant["token"]
    queue = f"q-{uuid.uuid4().hex[:6]}"
    target = {"type": "queue", "name": queue}
    failing = create_job(node, token, name="invoice-sync", target=target, retry=NO_RETRY)
    healthy = create_job(node, token, name="nightly-report", target=target, retry=NO_RETRY)
    idle = create_job(node, token, name="weekly-digest")
    run_once(node, token, failing, queue, None)
    run_once(node, token, failing, queue, "ERP answered 503 for invoice 4411")
    run_once(node, token, failing, queue, "ERP answered 503 for invoice 4412")
    run_once(node, token, healthy, queue, None)

    console.sign_in(token)
    page = console.page
    page.wait_for_selector(f"#jobs tr[data-job='{idle}']")
    headers = page.locator("#jobs th").all_text_contents()
    assert headers[5:7] == ["Last run", "Last result"], headers

    def result(job_id: str) -> str:
        return page.text_content(f"tr[data-job='{job_id}'] td.last-result") or ""

    assert result(failing) == "failed · 2 in a row"
    assert result(healthy) == "succeeded"
    assert result(idle) == "—"
    assert page.text_content(f"tr[data-job='{failing}'] td.last-run") != "—"
    assert page.text_content(f"tr[data-job='{idle}'] td.last-run") == "—"
    console.shot("jobs-last-result")

    page.check("#filter-failing")
    page.click("#job-filters button[type=submit]")
    page.wait_for_function("() => location.hash.includes('failing=true')")
    page.wait_for_selector(f"#jobs tr[data-job='{failing}']")
    shown = page.locator("#jobs tr[data-job]").evaluate_all("rows => rows.map(r => r.dataset.job)")
    assert shown == [failing]
    assert page.is_checked("#filter-failing")
    console.shot("jobs-failing")

    page.click(f"tr[data-job='{failing}'] a.job-name")
    page.wait_for_selector("#job-last-failure")
    assert "2 in a row" in (page.text_content("#job-last-failure") or "")
    assert page.text_content("#job-last-success") != "—"


def test_dead_letters_grouped_by_error_and_one_group_redriven(console: Console) -> None:
    node = console.node
    tenant = new_tenant(node, f"erp-{uuid.uuid4().hex[:6]}")
    token = tenant["token"]
    queue = f"dying-{uuid.uuid4().hex[:6]}"
    errors = [f"ERP answered 503 for invoice {n}" for n in (4411, 4412, 4413)]
    errors += [f"connect to 10.0.3.{n}:5432 refused" for n in (7, 8)]
    for error in errors:  # one-attempt jobs, each run nacked with its error: dead
        job_id = create_job(
            node,
            token,
            schedule={"delay": "0s"},
            target={"type": "queue", "name": queue},
            retry=NO_RETRY,
        )
        settle(node, token, queue, error)
        assert job_id

    console.sign_in(token)
    console.go("#/deadletters")
    page = console.page
    page.wait_for_selector("#deadletters tr[data-deadletter]")
    page.click("#deadletter-views [data-view=by-error]")
    page.wait_for_selector("#groups tr[data-group]")
    counts = page.locator("#groups td.count").all_text_contents()
    examples = page.locator("#groups td.example").all_text_contents()
    assert counts == ["3", "2"] and examples == [errors[2], errors[4]]
    console.shot("deadletter-groups")

    largest = page.locator("#groups tr[data-group]").first
    fingerprint = largest.get_attribute("data-group")
    largest.locator("a", has_text="Show").click()
    page.wait_for_selector("#group-filter")
    page.wait_for_function(
        "() => document.querySelectorAll('#deadletters tr[data-deadletter]').length === 3"
    )
    assert sorted(page.locator("#deadletters td.error").all_text_contents()) == errors[:3]

    console.go("#/deadletters?by=error")
    page.wait_for_selector(f"#groups tr[data-group='{fingerprint}']")
    page.click(f"#groups tr[data-group='{fingerprint}'] [data-action=redrive-group]")
    page.wait_for_selector("dialog.confirm")
    question = page.text_content("dialog.confirm .question") or ""
    assert question.startswith("Redrive 3 dead letter(s) with this error?"), question
    assert page.text_content("dialog.confirm .detail") == errors[2]
    console.shot("deadletter-group-confirm")
    console.confirm()
    page.wait_for_selector("#group-status >> text=Redriven: 3.")

    def groups_left() -> list[int] | None:
        answer = http("GET", f"{node.url}/v1/deadletters?group_by=error", token=token)[1]
        counts = [g["count"] for g in answer["groups"]]
        return counts if counts == [2] else None

    wait_for(groups_left, 30.0, "only the other group left")
    page.wait_for_function("() => document.querySelectorAll('#groups tr[data-group]').length === 1")
