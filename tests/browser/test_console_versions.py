"""The job page's versions in chromium (issue 31): each change of the job listed newest first
with what it changed, and the job's version told apart from the claim fence."""

from __future__ import annotations

import uuid

import pytest

from tests.browser.conftest import Console, new_tenant
from tests.browser.test_console import create_job
from tests.servers import http

pytestmark = [pytest.mark.cluster, pytest.mark.browser]


def test_the_job_page_lists_its_versions_apart_from_the_claim_fence(console: Console) -> None:
    tenant = new_tenant(console.node, f"versions-{uuid.uuid4().hex[:6]}")
    token = tenant["token"]
    job = create_job(console.node, token, name="weekly-digest", payload={"week": 41})
    url = f"{console.node.url}/v1/jobs/{job['job_id']}"
    for body in (
        {"name": "weekday-digest", "payload": {"week": 42}},
        {"schedule": {"every": "2h"}},
    ):
        status, answer, _ = http("PATCH", url, body, token=token)
        assert status == 200, answer
    console.sign_in(token)
    console.go(f"#/jobs/{job['job_id']}")
    page = console.page
    page.wait_for_selector("#versions-table tr[data-version]")
    assert page.text_content("#job-spec-version").startswith("3 · reschedule ")
    label = page.locator("#job-version-label")
    assert label.text_content() == "Claim fence"
    assert "does not mean the spec changed" in (label.get_attribute("title") or "")

    page.click("[data-action=pause]")
    console.confirm()
    page.wait_for_function("() => document.querySelector('#job-status')?.textContent === 'paused'")
    page.wait_for_selector("#versions-table tr[data-version='4']")
    rows = page.locator("#versions-table tbody tr")
    assert [rows.nth(i).get_attribute("data-version") for i in range(rows.count())] == [
        "4",
        "3",
        "2",
        "1",
    ]
    changes = page.locator("#versions-table td.change").all_text_contents()
    assert changes == ["pause", "reschedule", "update", "create"]
    what = page.locator("#versions-table td.what").all_text_contents()
    assert what == ["status → paused", "schedule", "name, payload", "created"]
    assert page.text_content("#job-spec-version").startswith("4 · pause ")
    # The fence rose with the changes; the versions count them alone.
    assert int(page.text_content("#job-fence") or 0) >= 4
    page.click("#versions-table tr[data-version='2'] summary")
    shown = page.text_content("#versions-table tr[data-version='2'] pre") or ""
    assert '"week": 42' in shown and "weekday-digest" in shown
    console.shot("job-versions")
