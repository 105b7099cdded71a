"""Apply function for failure alerts' outcomes (log level 8): `record_alerts` writes what the
leader's alert sender (delivery/alerts.py) reports of each POST into the alert's row.

An outcome counts only for the alert's next attempt (`attempts + 1`) while it is not done, so a
retried proposal, or a second sender during a change of leader, changes nothing the second time.
"""

from __future__ import annotations

import sqlite3
from collections import Counter

from schedd.store.command import Command, Handler, Result, ok
from schedd.store.commands import AlertOutcome, RecordAlerts

_CURRENT = "SELECT 1 FROM alerts WHERE alert_id = ? AND attempts = ? AND next_at_ms IS NOT NULL"


def record_alerts(tx: sqlite3.Connection, cmd: Command[RecordAlerts]) -> Result:
    """Record each outcome; counts of alerts sent, retrying, given up, and stale outcomes."""
    fates: Counter[str] = Counter()
    for outcome in cmd.body.outcomes:
        fates[_record_one(tx, cmd.ts_ms, outcome)] += 1
    return ok(**{fate: n for fate, n in fates.items() if n})


def _record_one(tx: sqlite3.Connection, now_ms: int, o: AlertOutcome) -> str:
    if tx.execute(_CURRENT, (o.alert_id, o.attempt - 1)).fetchone() is None:
        return "stale"
    if o.sent:
        fate, next_at_ms, sent_at_ms, error = "sent", None, now_ms, None
    elif o.retry_at_ms is not None:
        fate, next_at_ms, sent_at_ms, error = "retrying", o.retry_at_ms, None, o.error
    else:
        fate, next_at_ms, sent_at_ms, error = "failed", None, None, o.error
    tx.execute(
        "UPDATE alerts SET attempts = ?, next_at_ms = ?, sent_at_ms = ?, "
        "last_error = coalesce(?, last_error) WHERE alert_id = ?",
        (o.attempt, next_at_ms, sent_at_ms, error, o.alert_id),
    )
    return fate


HANDLERS: dict[str, Handler] = {
    RecordAlerts.TYPE: record_alerts,
}
