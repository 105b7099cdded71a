"""An attempt's output in chromium (issue 34): the runs table folds each reported output under
its attempt, shown as text (markup in it is not markup)."""

from __future__ import annotations

import uuid

import pytest

from tests.browser.conftest import Console, new_tenant
from tests.browser.test_console import create_job
from tests.servers import http

pytestmark = [pytest.mark.cluster, pytest.mark.browser]


def test_an_attempts_output_is_shown_as_text_under_it(console: Console) -> None:
    tenant = new_tenant(console.node, f"out-{uuid.uuid4().hex[:6]}")
    token = tenant["token"]
    queue = f"backup-{uuid.uuid4().hex[:6]}"
    job = create_job(
        console.node,
        token,
        name="nightly-backup",
        schedule={"delay": "0s"},
        target={"type": "queue", "name": queue},
    )
    url = f"{console.node.url}/v1/queues/{queue}"
    status, got, _ = http("POST", f"{url}/receive", {"max": 1, "wait": "10s"}, token=token)
    assert status == 200 and len(got["messages"]) == 1, got
    receipt = got["messages"][0]["receipt"]
    printed = "dumping 3 tables\n<b>not bold</b> & done\n"
    body = {"receipts": [receipt], "outputs": {receipt: printed}}
    assert http("POST", f"{url}/ack", body, token=token)[0] == 200

    console.sign_in(token)
    console.go(f"#/jobs/{job['job_id']}")
    page = console.page
    page.wait_for_selector("#runs-table details.output")
    assert page.locator("#runs-table details.output b").count() == 0  # text, not markup
    page.click("#runs-table details.output summary")
    assert page.text_content("#runs-table details.output pre") == printed
    assert page.is_visible("#runs-table details.output pre")
