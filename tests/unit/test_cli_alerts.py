"""`schedctl alerts`' STATE column from an alert's times alone."""

from __future__ import annotations

from schedd.cli.ctl.alerts import state
from schedd.wire.alerts import AlertView


def alert(**times: str | None) -> AlertView:
    fields = {"sent_at": None, "next_at": None, "last_error": None} | times
    return AlertView(
        alert_id=1,
        job_id="job_a",
        url="https://hooks.example/a",
        created_at="2026-12-04T00:00:00Z",
        attempts=1,
        body={},
        **fields,
    )


def test_an_alert_is_pending_until_done_then_sent_or_failed() -> None:
    assert state(alert(next_at="2026-12-04T00:00:05Z")) == "pending"
    assert state(alert(sent_at="2026-12-04T00:00:01Z")) == "sent"
    assert state(alert(last_error="blocked: loopback")) == "failed"
