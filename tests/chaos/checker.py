"""The history checker: acknowledged creates are on every node, run rows match the schedules
(check_runs.py), every claimed run was delivered with its idempotency key and not early,
acknowledged changes took effect and failed ones did not, replicas agree, and a partitioned
minority acknowledged nothing. Pure: it reads what the runner collected."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from schedd.calendars import split_exclude
from schedd.schedule import load_schedule, parse_schedule
from schedd.timeformat import parse_duration, parse_instant
from tests.chaos.check_deliveries import Seen, check_deliveries
from tests.chaos.check_runs import (
    JobTimeline,
    Violation,
    check_after,
    check_job,
    owed_after_runs,
)
from tests.chaos.collect import NodeView
from tests.chaos.history import FaultEvent, Op, QueueDelivery
from tests.chaos.workload import Tenant
from tests.receiver import Received

WRITES = frozenset(
    {
        "create",
        "batch",
        "cancel",
        "reschedule",
        "pause",
        "resume",
        "trigger",
        "backfill",
        "pause_queue",
        "resume_queue",
        "receive",
        "ack",
        "nack",
    }
)
CHANGES = (  # audit action -> the workload's operation
    ("cancel_job", "cancel"),
    ("update_job", "reschedule"),
    ("pause_job", "pause"),
    ("resume_job", "resume"),
)
MINORITY_GRACE_MS = 200


@dataclass(slots=True)
class Observed:
    """Everything the checker needs from one round."""

    ops: list[Op]
    queue_deliveries: list[QueueDelivery]
    http_calls: list[Received]
    faults: list[FaultEvent]
    tenants: list[Tenant]
    views: dict[str, NodeView]
    digests: dict[str, Any]
    threshold_ms: int
    notes: list[Violation] = field(default_factory=list)  # runner-found problems
    leader_terms: dict[str, list[int]] = field(default_factory=dict)  # node -> terms it led
    collected_ms: int | None = None  # when the views were read (None: the last op's end)


@dataclass(frozen=True, slots=True)
class Claim:
    """One attempt to create the job named so: its outcome and what it sent."""

    outcome: str
    job_id: str | None
    op: Op
    body: dict[str, Any]


def ms(instant: str) -> int:
    return parse_instant(instant, field="instant")


def check(obs: Observed) -> tuple[list[Violation], dict[str, Any]]:
    found = list(obs.notes) + two_leaders(obs.leader_terms)
    ref = _reference(obs, found)
    if ref is None:
        return found, {}
    claims = _claims(obs.ops)
    found += _creates(claims, obs.views)
    found += _changes(obs.ops, ref)
    job_violations, owed = _jobs(obs, ref, claims)
    found += job_violations
    deliveries, more = check_deliveries(obs.queue_deliveries, obs.http_calls, obs.tenants, ref)
    found += more
    found += queue_pauses(obs.ops)
    found += _minority(obs.ops, obs.faults)
    found += _digests(obs.digests)
    found += _outputs_placed(ref)
    return found, _stats(obs, ref, deliveries) | {"after_runs_owed": owed}


def _outputs_placed(ref: NodeView) -> list[Violation]:
    """Issue 34: each output kept is the one the consumer reported for that very attempt (its
    run's key and attempt: consumer.output_of): output_misplaced otherwise."""
    found = []
    for job_id, runs in ref.runs.items():
        for run in runs:
            for attempt in run.get("attempts", []):
                output = attempt.get("output")
                wanted = f"{job_id}:{run['scheduled_at']}#{attempt['attempt']}"
                if output is not None and output != wanted:
                    detail = f"{run['scheduled_at']} attempt {attempt['attempt']}: {output[:120]!r}"
                    found.append(Violation("output_misplaced", job_id, detail))
    return found


# ------------------------------------------------------------------ replicas


def _reference(obs: Observed, found: list[Violation]) -> NodeView | None:
    """The first readable node's view; every other view must be equal to it."""
    readable = [v for v in obs.views.values() if not v.errors]
    found.extend(
        Violation("unreadable_node", None, f"{view.node_id}: {view.errors}")
        for view in obs.views.values()
        if view.errors
    )
    if not readable:
        return None
    ref = readable[0]
    for view in readable[1:]:
        found += _compare(ref, view)
    return ref


def _compare(a: NodeView, b: NodeView) -> list[Violation]:
    found = [
        Violation("replica_divergence", job_id, f"{a.node_id} and {b.node_id} differ")
        for job_id in sorted(set(a.jobs) | set(b.jobs))
        if a.jobs.get(job_id) != b.jobs.get(job_id) or a.runs.get(job_id) != b.runs.get(job_id)
    ]
    if a.audit != b.audit:
        found.append(Violation("replica_divergence", None, f"audit of {a.node_id}/{b.node_id}"))
    return found


def two_leaders(leader_terms: dict[str, list[int]]) -> list[Violation]:
    """Raft's election safety: at most one node leads any term (issue 27: a node that lost its
    data directory could vote twice in one)."""
    leaders: dict[int, set[str]] = defaultdict(set)
    for node_id, terms in leader_terms.items():
        for term in terms:
            leaders[term].add(node_id)
    return [
        Violation("two_leaders_in_term", None, f"term {term}: {sorted(nodes)}")
        for term, nodes in sorted(leaders.items())
        if len(nodes) > 1
    ]


def _digests(digests: dict[str, Any]) -> list[Violation]:
    return [
        Violation("digest_mismatch", None, f"applied_index {index}: {by_node}")
        for index, by_node in digests.get("shared", {}).items()
        if len(set(by_node.values())) > 1
    ]


# ------------------------------------------------------------------ creates


def _claims(ops: list[Op]) -> dict[str, list[Claim]]:
    """Job name -> every create attempt for it (names are unique per round)."""
    claims: dict[str, list[Claim]] = defaultdict(list)
    for op in ops:
        if op.kind == "create":
            job_id = op.response.get("job_id") if op.outcome == "ok" else None
            claims[op.request["name"]].append(Claim(op.outcome, job_id, op, op.request["body"]))
        elif op.kind == "batch":
            results = op.response.get("results") or [None] * len(op.request["names"])
            for name, body, result in zip(
                op.request["names"], op.request["bodies"], results, strict=True
            ):
                if op.outcome != "ok":
                    claims[name].append(Claim(op.outcome, None, op, body))
                elif "job_id" in result:
                    claims[name].append(Claim("ok", result["job_id"], op, body))
                else:
                    claims[name].append(Claim("failed", None, op, body))
    return claims


def _creates(claims: dict[str, list[Claim]], views: dict[str, NodeView]) -> list[Violation]:
    """Acked creates exist on every node, once; failed ones nowhere; unknown ones at most once."""
    found = []
    for view in views.values():
        if view.errors:
            continue
        by_name: dict[str, list[str]] = defaultdict(list)
        for job_id, job in view.jobs.items():
            by_name[job.get("name") or ""].append(job_id)
        for name, ids in by_name.items():
            if name not in claims:
                found.append(Violation("phantom_job", ids[0], f"{view.node_id}: name {name!r}"))
        for name, attempts in claims.items():
            found += _one_name(view, name, attempts, by_name.get(name, []))
    return found


def _one_name(view: NodeView, name: str, attempts: list[Claim], ids: list[str]) -> list[Violation]:
    found = []
    where = f"{view.node_id}: {name}"
    acked = {c.job_id for c in attempts if c.outcome == "ok" and c.job_id is not None}
    if len(acked) > 1:
        found.append(Violation("idempotency_broken", None, f"{where} acked as {sorted(acked)}"))
    found.extend(
        Violation("acked_create_lost", job_id, where) for job_id in acked if job_id not in view.jobs
    )
    if len(ids) > 1:
        found.append(Violation("duplicate_job", ids[0], f"{where} exists {len(ids)} times: {ids}"))
    if ids and all(c.outcome == "failed" for c in attempts):
        found.append(Violation("failed_request_applied", ids[0], f"{where}: create failed"))
    return found


# ------------------------------------------------------------------ cancels and reschedules


def _audit_by_job(ref: NodeView) -> dict[str, list[dict[str, Any]]]:
    by_job: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in ref.audit:
        if record.get("job_id"):
            by_job[record["job_id"]].append(record)
    return by_job


def _changes(ops: list[Op], ref: NodeView) -> list[Violation]:
    """An acknowledged change (cancel, reschedule, pause, resume, trigger) took effect; a failed
    one changed nothing."""
    audit = _audit_by_job(ref)
    found = _triggers(ops, audit) + _backfills(ops, audit)
    paused_by = _first_acks(ops, "pause")
    for action, kind in CHANGES:
        by_job: dict[str, list[Op]] = defaultdict(list)
        for op in ops:
            if op.kind == kind:
                by_job[op.request["job_id"]].append(op)
        for job_id, job_ops in by_job.items():
            applied = any(r["action"] == action for r in audit.get(job_id, []))
            outcomes = {op.outcome for op in job_ops}
            is_noop = kind == "resume" and not _was_paused(job_ops, paused_by.get(job_id))
            if "ok" in outcomes and not applied and not is_noop:
                found.append(Violation(f"acked_{kind}_lost", job_id, "no audit record"))
            if outcomes == {"failed"} and applied:
                found.append(Violation("failed_request_applied", job_id, f"{kind} failed"))
            found += _job_shows(kind, job_id, ref.jobs.get(job_id), job_ops)
    return found


def _first_acks(ops: list[Op], kind: str) -> dict[str, int]:
    """job -> when its first acknowledged `kind` operation was answered."""
    first: dict[str, int] = {}
    for op in ops:
        if op.kind == kind and op.outcome == "ok":
            job_id = op.request["job_id"]
            first[job_id] = min(first.get(job_id, op.end_ms), op.end_ms)
    return first


def _was_paused(resumes: list[Op], paused_ms: int | None) -> bool:
    """Resuming a job that is not paused answers 200 and records nothing. Unless a pause was
    acknowledged before an acknowledged resume began, the job may not have been paused yet (a
    pause whose outcome was unknown can commit later: seed 1021)."""
    return paused_ms is not None and any(
        op.outcome == "ok" and paused_ms < op.start_ms for op in resumes
    )


def _job_shows(
    kind: str, job_id: str, job: dict[str, Any] | None, job_ops: list[Op]
) -> list[Violation]:
    """The final job object shows an acknowledged cancel or reschedule."""
    acked = [op for op in job_ops if op.outcome == "ok"]
    if job is None or not acked:
        return []
    if kind == "cancel" and job["status"] != "cancelled":
        return [Violation("acked_cancel_lost", job_id, job["status"])]
    if kind == "reschedule" and acked[0].response.get("schedule") != job["schedule"]:
        return [Violation("acked_reschedule_lost", job_id, str(job["schedule"]))]
    return []


def _triggers(ops: list[Op], audit: dict[str, list[dict[str, Any]]]) -> list[Violation]:
    """Each acknowledged trigger is in the audit trail with the instant it answered."""
    found = []
    for op in ops:
        if op.kind != "trigger" or op.outcome != "ok":
            continue
        job_id = op.request["job_id"]
        at = ms(op.response["scheduled_at"])
        recorded = [_trigger_ms(r) for r in audit.get(job_id, []) if r["action"] == "trigger_job"]
        if at not in recorded:
            found.append(Violation("acked_trigger_lost", job_id, op.response["scheduled_at"]))
    return found


def _backfills(ops: list[Op], audit: dict[str, list[dict[str, Any]]]) -> list[Violation]:
    """A backfill acknowledged with runs is in the audit trail; one that failed (every attempt
    of it, for its job) wrote nothing."""
    found = []
    by_job: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        if op.kind == "backfill":
            by_job[op.request["job_id"]].append(op)
    for job_id, job_ops in by_job.items():
        applied = any(r["action"] == "backfill_job" for r in audit.get(job_id, []))
        if any(op.outcome == "ok" and op.response.get("runs") for op in job_ops) and not applied:
            found.append(Violation("acked_backfill_lost", job_id, "no audit record"))
        if {op.outcome for op in job_ops} == {"failed"} and applied:
            found.append(Violation("failed_request_applied", job_id, "backfill failed"))
    return found


def _trigger_ms(record: dict[str, Any]) -> int:
    at: int = record["detail"]["scheduled_at_ms"]
    return at


# ------------------------------------------------------------------ runs


def _jobs(
    obs: Observed, ref: NodeView, claims: dict[str, list[Claim]]
) -> tuple[list[Violation], int]:
    """The run checks of every job, and how many upstream ends were owed a run (a figure)."""
    audit = _audit_by_job(ref)
    acked_end = {
        (kind, job_id): at
        for kind in ("cancel", "reschedule", "pause")
        for job_id, at in _first_acks(obs.ops, kind).items()
    }
    timelines: dict[str, JobTimeline] = {}
    for job_id, job in ref.jobs.items():
        attempts = claims.get(job.get("name") or "", [])
        if not attempts:
            continue  # a phantom: reported already
        timelines[job_id] = _timeline(obs, job_id, job, ref, audit[job_id], attempts, acked_end)
    found = [v for t in timelines.values() for v in check_job(t)]
    end_ms = obs.collected_ms or max((op.end_ms for op in obs.ops), default=0)
    return found + check_after(timelines, end_ms), owed_after_runs(timelines, end_ms)


def _timeline(
    obs: Observed,
    job_id: str,
    job: dict[str, Any],
    ref: NodeView,
    audit: list[dict[str, Any]],
    attempts: list[Claim],
    acked_end: dict[tuple[str, str], int],
) -> JobTimeline:
    created = ms(job["created_at"])
    final = load_schedule(job["schedule"])
    updates = [ms(r["at"]) for r in audit if r["action"] == "update_job"]
    cancels = [ms(r["at"]) for r in audit if r["action"] == "cancel_job"]
    pauses = [ms(r["at"]) for r in audit if r["action"] == "pause_job"]
    resumes = [ms(r["at"]) for r in audit if r["action"] == "resume_job"]
    return JobTimeline(
        job_id=job_id,
        job=job,
        runs=ref.runs.get(job_id, []),
        created_ms=created,
        first_schedule=parse_schedule(
            split_exclude(attempts[0].body["schedule"])[0], now_ms=created
        ),
        final_schedule=final,
        update_ms=updates[0] if updates else None,
        cancel_ms=cancels[0] if cancels else None,
        pause_ms=pauses[0] if pauses else None,
        resume_ms=resumes[0] if resumes else None,
        triggers=frozenset(_trigger_ms(r) for r in audit if r["action"] == "trigger_job"),
        update_acked_ms=acked_end.get(("reschedule", job_id)),
        cancel_acked_ms=acked_end.get(("cancel", job_id)),
        pause_acked_ms=acked_end.get(("pause", job_id)),
        window_ms=0 if job.get("window") is None else parse_duration(job["window"], field="w"),
        misfire=job["misfire_policy"],
        overlap=job.get("overlap_policy") or "allow",
        threshold_ms=obs.threshold_ms,
        backfills=tuple(
            (ms(op.request["from"]), ms(op.request["to"]), op.outcome, op.end_ms)
            for op in obs.ops
            if op.kind == "backfill" and op.request["job_id"] == job_id
        ),
        calendar=next(
            (frozenset(t.calendar) for t in obs.tenants if t.tenant_id == job.get("tenant_id")),
            frozenset(),
        ),
        excludes=bool(split_exclude(attempts[0].body["schedule"])[1]),
    )


# ------------------------------------------------------------------ partitions


def queue_pauses(ops: list[Op]) -> list[Violation]:
    """A paused queue hands out nothing (log level 8): a receive sent after a pause of its
    queue was acknowledged and answered before that queue's next resume was sent got no
    message (its proposal follows the pause in the log, whichever node it reached)."""
    by_queue: dict[tuple[str, str], list[Op]] = defaultdict(list)
    for op in ops:
        if op.kind in ("pause_queue", "resume_queue", "receive"):
            by_queue[(op.tenant, op.request.get("queue", ""))].append(op)
    found = []
    for (tenant, queue), queue_ops in by_queue.items():
        pauses = [op for op in queue_ops if op.kind == "pause_queue" and op.outcome == "ok"]
        resumes = sorted(op.start_ms for op in queue_ops if op.kind == "resume_queue")
        for pause in pauses:
            until = next((at for at in resumes if at > pause.end_ms), None)
            for op in queue_ops:
                if (
                    op.kind == "receive"
                    and op.response.get("keys")
                    and op.start_ms > pause.end_ms
                    and (until is None or op.end_ms < until)
                ):
                    what = f"{tenant}/{queue}: op {op.op_id} got {len(op.response['keys'])}"
                    found.append(Violation("received_while_paused", None, what))
    return found


def _minority(ops: list[Op], faults: list[FaultEvent]) -> list[Violation]:
    """A node cut off from the others acknowledged no write made while it was cut off."""
    return [
        Violation("minority_ack", None, f"op {op.op_id} {op.kind} on {op.node} during {fault}")
        for fault in faults
        if fault.kind == "partition"
        for op in ops
        if op.node == fault.target
        and op.kind in WRITES
        and op.outcome == "ok"
        and op.start_ms >= fault.start_ms + MINORITY_GRACE_MS
        and op.end_ms <= fault.end_ms
        and (op.kind != "receive" or op.response.get("keys"))
    ]


# ------------------------------------------------------------------ figures


def percentiles(values: list[float]) -> dict[str, float | None]:
    ordered = sorted(values)

    def at(q: float) -> float | None:
        if not ordered:
            return None
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)

    return {
        "count": len(ordered),
        "p50": at(0.5),
        "p90": at(0.9),
        "p99": at(0.99),
        "max": round(ordered[-1], 3) if ordered else None,
    }


def _op_name(op: Op) -> str:
    """An op's kind; a create by PUT /v1/jobs/by-key (issue 32) and a create or reschedule of a
    job that runs after another (issue 33 §2) counted apart."""
    if op.kind == "create" and op.request.get("by_key"):
        return "create_by_key"
    if op.kind == "create" and op.request.get("form") == "after":
        return "create_after"
    if op.kind == "reschedule" and op.request.get("from_after"):
        return "reschedule_after"
    return op.kind


def _stats(obs: Observed, ref: NodeView, seen: dict[str, list[Seen]]) -> dict[str, Any]:
    runs = [(ref.jobs[job_id], r) for job_id, rs in ref.runs.items() for r in rs]
    lags: dict[str, list[float]] = defaultdict(list)
    slowest = []
    for job, r in runs:
        lag = (r["dispatched_at_ms"] - r["fire_at_ms"]) / 1000
        policy = "overlap_delay" if job.get("overlap_policy") == "delay" else "other"
        lags[f"claim_lag_s:{policy}"].append(lag)
        slowest.append((lag, f"{job['job_id']}@{r['scheduled_at']}", job.get("overlap_policy")))
        key = f"{job['job_id']}:{r['scheduled_at']}"
        if key in seen:
            first = min(s.at_ms for s in seen[key])
            lags[f"first_delivery_lag_s:{job['target']['type']}"].append(
                (first - r["fire_at_ms"]) / 1000
            )
    cancels = [op for op in obs.ops if op.kind == "cancel" and op.outcome == "ok"]
    ops = Counter(f"{_op_name(op)}:{op.outcome}" for op in obs.ops)
    return {
        "ops": dict(sorted(ops.items())),
        "jobs": len(ref.jobs),
        "terms_led": len({term for terms in obs.leader_terms.values() for term in terms}),
        "job_status": dict(Counter(j["status"] for j in ref.jobs.values())),
        "runs": len(runs),
        "run_status": dict(Counter(r["status"] for _, r in runs)),
        "calendar_skips": sum(1 for _, r in runs if (r.get("error") or "").startswith("calendar:")),
        **_after_stats(ref, runs),
        "outputs_kept": sum(
            1 for _, r in runs for a in r.get("attempts", []) if a.get("output") is not None
        ),
        "deliveries": sum(len(v) for v in seen.values()),
        "runs_delivered_more_than_once": sum(1 for v in seen.values() if len(v) > 1),
        **{name: percentiles(values) for name, values in sorted(lags.items())},
        "slowest_claims": sorted(slowest, reverse=True)[:10],
        "cancel_latency_s": percentiles([(op.end_ms - op.start_ms) / 1000 for op in cancels]),
        "claims_during_cancel_request": _cancel_races(cancels, ref),
    }


def _after_stats(
    ref: NodeView, runs: list[tuple[dict[str, Any], dict[str, Any]]]
) -> dict[str, Any]:
    """Issue 33 §2: jobs that run after another (now), their runs made by another's end (by
    how that run ended), and how many jobs got one."""
    made = [(job, r) for job, r in runs if r.get("triggered_by")]
    return {
        "after_jobs": sum(1 for j in ref.jobs.values() if "after" in j["schedule"]),
        "after_runs": len(made),
        "after_runs_by_upstream_end": dict(Counter(r["triggered_by"]["status"] for _, r in made)),
        "jobs_with_after_runs": len({job["job_id"] for job, _ in made}),
    }


def _cancel_races(cancels: list[Op], ref: NodeView) -> int:
    """Runs claimed while a cancel of their job was in flight (the documented race)."""
    count = 0
    for op in cancels:
        for run in ref.runs.get(op.request["job_id"], []):
            if op.start_ms <= run["dispatched_at_ms"] <= op.end_ms:
                count += 1
    return count
