"""Schedule control in chromium (issue 31): a job paused with a reason shows it, a trigger with
its own payload is marked on its run, a run limit, a failure policy, a key and labels are shown (a
label links to the jobs that have it); the queues page pauses a queue with a reason and resumes
it. A job's runs in its zone with DST notes, and a schedule change previewed beside the current
one before it is saved (issue 33)."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.browser.conftest import Console, new_tenant
from tests.browser.test_console import create_job
from tests.servers import ADMIN_TOKEN, http, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.browser]


def test_the_job_page_pauses_with_a_reason_and_triggers_with_a_payload(console: Console) -> None:
    tenant = new_tenant(console.node, f"control-{uuid.uuid4().hex[:6]}")
    token = tenant["token"]
    job = create_job(
        console.node,
        token,
        name="invoice-sync",
        payload={"full": False},
        max_runs=100,
        on_failure={"after": 3, "pause": True},
        key="erp/invoice-sync",
        labels={"team": "finance", "schedd.set": "erp"},
    )
    create_job(console.node, token, name="other", labels={"team": "ops"})
    console.sign_in(token)
    console.go(f"#/jobs/{job['job_id']}")
    page = console.page
    page.wait_for_selector("#job-runs-limit")
    assert page.text_content("#job-runs-limit") == "0 of max 100"
    assert page.text_content("#job-on-failure") == "after 3 dead runs in a row: pause"
    assert page.text_content("#job-key") == "erp/invoice-sync"
    labels = page.locator("#job-labels a.label").all_text_contents()
    assert labels == ["schedd.set=erp", "team=finance"]
    page.click("#job-labels a.label >> text=team=finance")  # the jobs that have the label
    page.wait_for_function("() => location.hash.includes('label=team%3Dfinance')")
    page.wait_for_function("() => document.querySelectorAll('#jobs tr[data-job]').length === 1")
    assert page.locator("#jobs a.job-name").all_text_contents() == ["invoice-sync"]
    assert page.input_value("#filter-label") == "team=finance"
    console.go(f"#/jobs/{job['job_id']}")
    page.wait_for_selector("#job-runs-limit")

    page.click("details.trigger-payload summary")
    page.fill("#trigger-payload", '{"full": true}')
    page.click("[data-action=trigger-payload]")
    console.confirm()
    page.wait_for_selector("#runs-table .mark")
    assert page.locator("#runs-table .mark").all_text_contents() == ["own payload"]

    page.click("[data-action=pause]")
    page.fill("dialog.confirm #pause-reason", "ERP maintenance window")
    console.confirm()
    page.wait_for_selector("#job-paused-reason")
    assert page.text_content("#job-paused-reason") == "paused: ERP maintenance window"
    assert page.text_content("#job-status") == "paused"
    console.shot("job-paused-reason")
    status, shown, _ = http("GET", f"{console.node.url}/v1/jobs/{job['job_id']}", token=token)
    assert status == 200 and shown["paused_reason"] == "ERP maintenance window"


def test_the_queues_page_pauses_a_queue_with_a_reason_and_resumes_it(console: Console) -> None:
    tenant = new_tenant(console.node, f"queues-{uuid.uuid4().hex[:6]}")
    token = tenant["token"]
    create_job(
        console.node, token, schedule={"delay": "0s"}, target={"type": "queue", "name": "mail"}
    )

    def ready() -> bool:
        _, answer, _ = http("GET", f"{console.node.url}/v1/queues", token=token)
        return any(q["name"] == "mail" and q["ready"] == 1 for q in answer["queues"])

    wait_for(ready, 15, "the run in its queue")
    console.sign_in(token)
    console.go("#/queues")
    page = console.page
    row = "#queues tr[data-queue='mail']"
    page.wait_for_selector(f"{row} [data-action=pause]")
    page.click(f"{row} [data-action=pause]")
    page.fill("dialog.confirm #pause-reason", "SMTP relay swap")
    console.confirm()
    page.wait_for_selector(f"{row} [data-action=resume]")
    assert page.text_content(f"{row} td.state .status") == "paused: SMTP relay swap"
    console.shot("queue-paused")
    status, answer, _ = http(
        "POST", f"{console.node.url}/v1/queues/mail/receive", {"max": 1}, token=token
    )
    assert status == 200 and answer["messages"] == []
    page.click(f"{row} [data-action=resume]")
    console.confirm()
    page.wait_for_selector(f"{row} [data-action=pause]")
    status, answer, _ = http(
        "POST", f"{console.node.url}/v1/queues/mail/receive", {"max": 1}, token=token
    )
    assert status == 200 and len(answer["messages"]) == 1


def test_the_admin_pauses_a_tenant_with_a_reason_and_resumes_it(console: Console) -> None:
    tenant = new_tenant(console.node, f"paused-{uuid.uuid4().hex[:6]}")
    console.sign_in(ADMIN_TOKEN)
    console.go(f"#/tenants/{tenant['tenant_id']}")
    page = console.page
    page.wait_for_selector("#tenant-state")
    assert page.text_content("#tenant-state") == "active"
    page.click("[data-action=pause]")
    page.fill("dialog.confirm #pause-reason", "storage migration")
    console.confirm()
    page.wait_for_selector("[data-action=resume]")
    assert page.text_content("#tenant-state") == "paused: storage migration"
    console.shot("tenant-paused")
    status, shown, _ = http("GET", f"{console.node.url}/v1/tenants/{tenant['tenant_id']}")
    assert status == 200 and shown["paused"] is True
    page.click("[data-action=resume]")
    console.confirm()
    page.wait_for_selector("[data-action=pause]")
    assert page.text_content("#tenant-state") == "active"


def test_the_calendars_page_creates_shows_replaces_and_deletes_a_calendar(
    console: Console,
) -> None:
    """Issue 33: a calendar created from text, its dates by year and the jobs that exclude it,
    its dates replaced; deleting is offered only once no job uses it."""
    tenant = new_tenant(console.node, f"calendars-{uuid.uuid4().hex[:6]}")
    token = tenant["token"]
    console.sign_in(token)
    console.go("#/calendars")
    page = console.page
    page.wait_for_selector("#calendar-create")
    page.fill("#calendar-name", "us-holidays")
    page.fill("#calendar-dates", "2026-12-25\n2027-01-01\n2027-07-04")
    page.click("#calendar-create button[type=submit]")
    page.wait_for_selector("#calendar-title")
    assert page.text_content("#calendar-title") == "us-holidays"
    assert page.locator("#calendar-dates-table td.dates").all_text_contents() == [
        "2026-12-25",
        "2027-01-01  2027-07-04",
    ]
    schedule = {"cron": "0 9 * * *", "timezone": "America/New_York", "exclude": ["us-holidays"]}
    job = create_job(console.node, token, name="payroll", schedule=schedule)
    page.reload()  # the same hash: read it again
    page.wait_for_selector("#calendar-used-by")
    assert page.text_content("#calendar-used-by") == "excluded by 1 job(s)"
    assert page.is_disabled("[data-action=delete-calendar]")
    page.fill("#calendar-edit-dates", "2027-11-25")
    page.click("[data-action=save-dates]")
    console.confirm()
    page.wait_for_function(
        "() => document.querySelector('#calendar-summary')?.textContent.startsWith('1 date,')"
    )
    console.shot("calendar")
    status, shown, _ = http("GET", f"{console.node.url}/v1/calendars/us-holidays", token=token)
    assert status == 200 and shown["dates"] == ["2027-11-25"], shown
    http("DELETE", f"{console.node.url}/v1/jobs/{job['job_id']}", token=token)
    page.reload()
    page.wait_for_selector("[data-action=delete-calendar]:not([disabled])")
    page.click("[data-action=delete-calendar]")
    console.confirm()
    page.wait_for_selector("#calendar-create")
    assert http("GET", f"{console.node.url}/v1/calendars/us-holidays", token=token)[0] == 404


def test_the_job_page_shows_runs_in_their_zone_and_previews_a_change_side_by_side(
    console: Console,
) -> None:
    tenant = new_tenant(console.node, f"zones-{uuid.uuid4().hex[:6]}")
    # Sundays of March at 02:30 in Berlin: the next 10 always hold a last Sunday (the gap).
    spring = {"cron": "30 2 * 3 SUN", "timezone": "Europe/Berlin"}
    autumn = {"cron": "30 2 * 10 SUN", "timezone": "Europe/Berlin"}
    job = create_job(console.node, tenant["token"], schedule=spring)
    console.sign_in(tenant["token"])
    console.go(f"#/jobs/{job['job_id']}")
    page = console.page
    page.wait_for_selector("#upcoming-table tbody tr")
    assert page.text_content("#upcoming-table th") == "Local (Europe/Berlin)"
    notes = [n for n in page.locator("#upcoming-table td.note").all_text_contents() if n]
    assert notes and all(n.startswith("02:30 does not exist on ") for n in notes), notes
    assert notes[0].endswith(" March: runs at 03:00")
    assert "03:00 CEST (+02:00)" in page.text_content("#upcoming-table tr:has(td.dst) td.local")

    page.click("details.reschedule summary")
    assert page.is_disabled("[data-action=reschedule]")  # nothing previewed yet
    page.fill("#new-schedule", json.dumps(autumn))
    page.click("[data-action=preview-schedule]")
    page.wait_for_selector("#compare-proposed tbody tr")
    assert page.locator("#compare-current tbody tr").count() == 10
    assert page.locator("#compare-proposed tbody tr").count() == 10
    proposed = page.locator("#compare-proposed td.dst").all_text_contents()
    assert proposed and all("happens twice" in n and "in the first (CEST)" in n for n in proposed)
    assert page.locator("#compare-current td.dst").count() == len(notes)
    console.shot("job-schedule-compare")
    page.click("[data-action=reschedule]")
    console.confirm()
    page.wait_for_function(
        "() => document.querySelector('#upcoming-table td.dst')?.textContent.includes('twice')"
    )
    _, shown, _ = http("GET", f"{console.node.url}/v1/jobs/{job['job_id']}", token=tenant["token"])
    assert shown["schedule"] == autumn
