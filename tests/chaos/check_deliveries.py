"""The delivery check: every claimed run reached its consumer or its HTTP endpoint at least once
and ended succeeded (dead: the workload's doomed jobs), never before its fire time (minus
EARLY_TOLERANCE_MS), always under its run's idempotency key, signed with the tenant's secret;
a queue attempt is handed out once; nothing delivered that was never claimed or was skipped."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from tests.chaos.check_runs import EARLY_TOLERANCE_MS, Violation
from tests.chaos.collect import NodeView
from tests.chaos.history import QueueDelivery
from tests.chaos.workload import Tenant
from tests.receiver import Received


@dataclass(frozen=True, slots=True)
class Seen:
    """One delivery of a run: a queue message received, or an HTTP call that arrived."""

    key: str
    at_ms: int
    attempt: int
    via: str


def check_deliveries(
    queue_deliveries: list[QueueDelivery],
    http_calls: list[Received],
    tenants: list[Tenant],
    ref: NodeView,
) -> tuple[dict[str, list[Seen]], list[Violation]]:
    """(run key -> its deliveries, violations)."""
    runs = {
        f"{job_id}:{run['scheduled_at']}": (job_id, run)
        for job_id, rs in ref.runs.items()
        for run in rs
    }
    seen: dict[str, list[Seen]] = defaultdict(list)
    found = []
    for d in queue_deliveries:
        key = f"{d.job_id}:{d.scheduled_at}"
        if d.idempotency_key != key:
            found.append(Violation("bad_idempotency_key", d.job_id, f"{d.idempotency_key}"))
        seen[key].append(Seen(key, d.at_ms, d.attempt, "queue"))
    secrets = {t.tenant_id: t.signing_secret for t in tenants}
    for call in http_calls:
        item, problems = _http_delivery(call, secrets, ref)
        found += problems
        if item is not None:
            seen[item.key].append(item)
    for key, items in seen.items():
        found += _delivered_run(key, items, runs.get(key))
    for key, (job_id, run) in runs.items():
        found += _run_outcome(key, job_id, run, seen.get(key, []), is_doomed(ref.jobs.get(job_id)))
    return seen, found


def is_doomed(job: dict[str, Any] | None) -> bool:
    """A job of the workload's whose every run must end dead (workload.DOOMED)."""
    payload = None if job is None else job.get("payload")
    return isinstance(payload, dict) and payload.get("doomed") is True


def _http_delivery(
    call: Received, secrets: dict[str, str], ref: NodeView
) -> tuple[Seen | None, list[Violation]]:
    if not call.path.startswith("/cb/"):
        return None, []
    try:
        body = json.loads(call.body)
        key = f"{body['job_id']}:{body['scheduled_at']}"
    except (ValueError, KeyError, TypeError):
        return None, [Violation("bad_callback", None, f"{call.path}: {call.body[:200]!r}")]
    headers = {k.lower(): v for k, v in call.headers.items()}
    found = []
    if headers.get("idempotency-key") != key or headers.get("webhook-id") != key:
        found.append(Violation("bad_idempotency_key", body["job_id"], f"{headers} for {key}"))
    job = ref.jobs.get(body["job_id"])
    secret = secrets.get(job["tenant_id"]) if job else None
    if secret is not None and not _signed(secret, headers, call.body):
        found.append(Violation("bad_signature", body["job_id"], key))
    return Seen(key, int(call.at * 1000), int(body.get("attempt", 0)), "http"), found


def _signed(secret: str, headers: dict[str, str], body: bytes) -> bool:
    """Standard Webhooks: v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">."""
    try:
        key = base64.b64decode(secret.removeprefix("whsec_"))
        signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    except (KeyError, ValueError):
        return False
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return any(
        hmac.compare_digest(expected, s.partition(",")[2])
        for s in headers.get("webhook-signature", "").split()
    )


def _delivered_run(
    key: str, items: list[Seen], found_run: tuple[str, dict[str, Any]] | None
) -> list[Violation]:
    """Deliveries of one key: of a claimed run, not early, a queue attempt handed out once."""
    if found_run is None:
        return [Violation("delivery_without_run", key.partition(":")[0], key)]
    job_id, run = found_run
    found = []
    early = [s for s in items if s.at_ms < run["fire_at_ms"] - EARLY_TOLERANCE_MS]
    if early:
        ahead = run["fire_at_ms"] - early[0].at_ms
        found.append(Violation("early_delivery", job_id, f"{key} delivered {ahead} ms early"))
    if run["status"] == "skipped":
        found.append(Violation("skipped_run_delivered", job_id, key))
    twice = [a for a, n in Counter(s.attempt for s in items if s.via == "queue").items() if n > 1]
    if twice:
        found.append(Violation("queue_attempt_twice", job_id, f"{key} attempts {twice}"))
    return found


def _run_outcome(
    key: str, job_id: str, run: dict[str, Any], items: list[Seen], doomed: bool = False
) -> list[Violation]:
    """A claimed run was delivered at least once and, with this workload, ended succeeded (a
    doomed job's: dead, its every attempt failed)."""
    if run["status"] == "skipped":
        return []
    found = []
    if not items:
        found.append(Violation("undelivered_run", job_id, f"{key} is {run['status']}"))
    if doomed and run["status"] != "dead":
        found.append(Violation("doomed_run_not_dead", job_id, f"{key} is {run['status']}"))
    elif not doomed and run["status"] != "succeeded":
        found.append(Violation("run_not_succeeded", job_id, f"{key} is {run['status']}"))
    # An attempt the run history dates before the run was even claimed was made for something
    # else: an outcome recorded against the wrong run.
    found.extend(
        Violation("attempt_before_claim", job_id, f"{key} claimed {run['dispatched_at']}: {a}")
        for a in run.get("attempts", [])
        if a["started_at_ms"] < run["dispatched_at_ms"] - EARLY_TOLERANCE_MS
    )
    return found
