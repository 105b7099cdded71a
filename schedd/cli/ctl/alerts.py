"""`schedctl alerts`: the tenant's failure alerts (GET /v1/alerts), newest first, with how their
delivery went."""

from __future__ import annotations

import click

from schedd.cli.ctl import render
from schedd.cli.ctl.answers import Answer, all_pages
from schedd.cli.ctl.client import Client
from schedd.cli.ctl.render import json_option, page_options
from schedd.wire.alerts import AlertList, AlertView


@click.command(
    epilog="""\b
Examples:
  schedctl alerts
  schedctl alerts --all --json

\b
STATE is pending (NEXT AT says when the next attempt is due), sent, or
failed (given up after 10 attempts, or at once for a blocked URL). Alerts
sent or given up are kept as long as the audit trail ([retention] audit).""",
)
@page_options
@json_option('{"alerts": [...], "next_cursor": ...}')
@click.pass_obj
def alerts(client: Client, limit: int, cursor: str | None, is_all: bool, as_json: bool) -> None:
    """List the tenant's failure alerts, newest first: the job, the state of its delivery,
    attempts made and the last error."""

    def fetch(after: str | None) -> Answer[AlertList]:
        return client.list_alerts(cursor=after, limit=limit)

    page = all_pages(fetch, "alerts", cursor) if is_all else fetch(cursor)
    if as_json:
        render.print_json(page.raw)
        return
    headers = ("ALERT", "JOB", "CREATED AT (UTC)", "STATE", "ATTEMPTS", "NEXT AT", "LAST ERROR")
    rows = [
        (
            str(a.alert_id),
            a.job_id,
            a.created_at,
            state(a),
            str(a.attempts),
            a.next_at or "-",
            a.last_error or "-",
        )
        for a in page.view.alerts
    ]
    render.print_page(headers, rows, page.view.next_cursor, "alerts")


def state(alert: AlertView) -> str:
    """pending, sent or failed (given up)."""
    if alert.next_at is not None:
        return "pending"
    return "sent" if alert.sent_at is not None else "failed"


COMMANDS = (alerts,)
