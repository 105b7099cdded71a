"""GET /v1/alerts (issue 31 §5): a tenant's failure alerts, newest first, with their delivery
(store/alerts.py reads them; the leader's sender, delivery/alerts.py, posts them)."""

from __future__ import annotations

import re

from aiohttp import web

from schedd.api.context import CONTEXT
from schedd.api.http import decode_cursor, json_response, page, principal, query_limit
from schedd.errors import InvalidRequest
from schedd.store.alerts import AlertRecord, list_alerts
from schedd.store.command import stored_json
from schedd.timeformat import format_instant
from schedd.wire.alerts import AlertList, AlertView

_CURSOR = re.compile(r"[0-9]{1,18}\.[0-9]{1,18}")


async def list_tenant_alerts(request: web.Request) -> web.Response:
    ctx, tenant_id = request.app[CONTEXT], principal(request).tenant()
    limit, before = query_limit(request), _cursor(request)
    found = await ctx.reads.read(
        lambda conn: list_alerts(conn, tenant_id, before=before, limit=limit)
    )
    cursor = page(found, limit, lambda a: f"{a.created_at_ms}.{a.alert_id}")
    return json_response(AlertList(alerts=[alert_view(a) for a in found], next_cursor=cursor))


def _cursor(request: web.Request) -> tuple[int, int] | None:
    """(created_at_ms, alert_id) of the last alert of the page before, or None."""
    text = decode_cursor(request)
    if text is None:
        return None
    if not _CURSOR.fullmatch(text):
        raise InvalidRequest("cursor", "is not a cursor this API returned")
    created_at_ms, alert_id = text.split(".")
    return int(created_at_ms), int(alert_id)


def alert_view(alert: AlertRecord) -> AlertView:
    return AlertView(
        alert_id=alert.alert_id,
        job_id=alert.job_id,
        url=alert.url,
        created_at=format_instant(alert.created_at_ms),
        attempts=alert.attempts,
        sent_at=_instant(alert.sent_at_ms),
        next_at=_instant(alert.next_at_ms),
        last_error=alert.last_error,
        body=stored_json(alert.body),
    )


def _instant(ms: int | None) -> str | None:
    return None if ms is None else format_instant(ms)
