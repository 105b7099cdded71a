"""A job that runs after another in chromium (issue 33 §2): its page says which job's runs start
it (a link) instead of previewing times, the upstream's page lists it as downstream, its run
names the upstream run that started it, the jobs list prints the schedule, and a schedule change
involving it is compared without the preview of times it cannot have."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tests.browser.conftest import Console, new_tenant
from tests.browser.test_console import create_job
from tests.servers import NodeProcess, http, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.browser]


def ack_one(node: NodeProcess, token: str, queue: str) -> dict[str, Any]:
    """Receive one message of `queue` (long-polled) and ack it: that run of its job succeeds."""
    url = f"{node.url}/v1/queues/{queue}"
    status, got, _ = http("POST", f"{url}/receive", {"max": 1, "wait": "10s"}, token=token)
    assert status == 200 and len(got["messages"]) == 1, got
    message: dict[str, Any] = got["messages"][0]
    status, acked, _ = http("POST", f"{url}/ack", {"receipts": [message["receipt"]]}, token=token)
    assert status == 200, acked
    return message


def test_a_job_after_another_links_both_ways_and_names_the_run_that_started_it(
    console: Console,
) -> None:
    tenant = new_tenant(console.node, f"after-{uuid.uuid4().hex[:6]}")
    token = tenant["token"]
    suffix = uuid.uuid4().hex[:6]
    a = create_job(
        console.node,
        token,
        name="nightly-export",
        schedule={"every": "1s"},
        target={"type": "queue", "name": f"export-{suffix}"},
    )
    b = create_job(
        console.node,
        token,
        name="load-warehouse",
        schedule={"after": {"job_id": a["job_id"], "on": "success"}},
        target={"type": "queue", "name": f"load-{suffix}"},
    )
    acked = ack_one(console.node, token, f"export-{suffix}")
    runs_url = f"{console.node.url}/v1/jobs/{b['job_id']}/runs"
    wait_for(
        lambda: http("GET", runs_url, token=token)[1]["runs"], 30, "the run of B that A started"
    )

    console.sign_in(token)
    page = console.page
    row = f"#jobs tr[data-job='{b['job_id']}']"
    page.wait_for_selector(row)
    assert page.text_content(f"{row} td:nth-child(3)") == f"after {a['job_id']} on success"

    console.go(f"#/jobs/{b['job_id']}")
    page.wait_for_selector("#upcoming-after")
    assert page.text_content("#upcoming-after") == f"Runs when {a['job_id']} succeeds."
    assert page.get_attribute("#upcoming-after a", "href") == f"#/jobs/{a['job_id']}"
    assert page.locator("#upcoming-table").count() == 0  # no preview asked for
    run = page.locator(f"#runs-table tr[data-run='{acked['scheduled_at']}']")
    by = run.locator("td.triggered-by")
    assert by.locator("a").get_attribute("href") == f"#/jobs/{a['job_id']}"
    assert by.locator("a").text_content() == a["job_id"]
    assert acked["scheduled_at"][:19] in (by.text_content() or "")
    assert by.locator(".status").text_content() == "succeeded"
    assert "Triggered by" in page.locator("#runs-table th").all_text_contents()
    console.shot("job-after")

    # Changing B's schedule: its current side says when it runs; the proposed one is previewed.
    page.click("details.reschedule summary")
    page.fill("#new-schedule", json.dumps({"every": "1h"}))
    page.click("[data-action=preview-schedule]")
    page.wait_for_selector("#compare-proposed tbody tr")
    assert page.locator("#compare-proposed tbody tr").count() == 10
    assert "no times of its own" in (page.text_content("#compare-current-after") or "")
    assert page.is_enabled("[data-action=reschedule]")
    console.shot("job-after-compare")
    page.fill("#new-schedule", json.dumps(b["schedule"]))
    page.click("[data-action=preview-schedule]")
    page.wait_for_selector("#compare-proposed-after")
    assert page.locator("#compare-proposed tbody tr").count() == 0
    assert page.is_enabled("[data-action=reschedule]")

    page.click("#upcoming-after a")
    page.wait_for_selector("#job-downstream")
    assert page.text_content("#job-title") == "nightly-export"
    link = page.locator(f"#job-downstream a[data-downstream='{b['job_id']}']")
    assert link.get_attribute("href") == f"#/jobs/{b['job_id']}"
    assert page.text_content("#job-downstream") == f"{b['job_id']} on success"
    console.shot("job-downstream")
    link.click()
    page.wait_for_function(
        "() => document.querySelector('#job-title')?.textContent === 'load-warehouse'"
    )
    assert http("DELETE", f"{console.node.url}/v1/jobs/{a['job_id']}", token=token)[0] in (
        200,
        204,
    )
