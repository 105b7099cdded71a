"""Apply reads a stored spec through stored_spec.load_spec exactly as its readers before did
(issue 30, point 1): for every spec a release could store, old and odd ones alike, the same
values; for a malformed one (none was ever stored) the same error, type and text, since apply
records that text in a command's rejection (applied_commands, inside the digest).

The readers of the code before are copied here verbatim as the oracle (store/ledger/deliveries
`job_delivery`, apply/creates' connection read, apply/deadletters' target read, apply/delivery's
retry read at bdcc825)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedd.store import ledger
from schedd.store.apply import StateMachine, deadletters, delivery
from schedd.store.command import compact_json
from schedd.store.commands import (
    CallbackOutcome,
    Claim,
    ClaimBatch,
    ClaimRow,
    ClaimRuns,
    CreateConnection,
    RecordCallbacks,
)
from schedd.store.db import Database
from schedd.store.digest import state_digest
from schedd.stored_spec import load_plan, load_retry, load_spec, queue_name, stored_retry
from schedd.targets import CONNECTION_KIND_OF_TARGET
from tests.conftest import NOW_MS, Applier
from tests.unit.test_job_delivery import JSON, TEXT  # what a payload may hold, any text
from tests.unit.test_store_dispatch import MIN, setup, spec

# ---------------------------------------------------------------------------- the oracle


class _OldTarget(msgspec.Struct):
    type: Any
    name: Any = msgspec.UNSET


class _OldSpec(msgspec.Struct):
    target: msgspec.Raw
    retry: msgspec.Raw
    payload: msgspec.Raw = msgspec.Raw(b"null")


class _OldCreateSpec(msgspec.Struct):
    target: Any = None


class _OldPlanFields(msgspec.Struct, frozen=True):  # store/dispatch_reads.PlanFields
    schedule: Any = msgspec.field(default_factory=dict)
    overlap_policy: Any = "allow"
    misfire_policy: Any = "run_once"
    window: Any = None


def old_job_delivery(spec: str) -> tuple[Any, ...]:
    fields = msgspec.json.decode(spec, type=_OldSpec)
    target = msgspec.json.decode(fields.target, type=_OldTarget)
    return (
        target.type,
        target.name,
        bytes(fields.target).decode(),
        bytes(fields.payload).decode(),
        bytes(fields.retry).decode(),
    )


def old_broker_connection_of(target: object) -> tuple[str, str] | None:
    if not isinstance(target, Mapping):
        return None
    kind = CONNECTION_KIND_OF_TARGET.get(str(target.get("type")))
    name = target.get("connection")
    if kind is None or not isinstance(name, str):
        return None
    return name, kind


def old_create_connection(spec: str) -> tuple[str, str] | None:
    return old_broker_connection_of(msgspec.json.decode(spec, type=_OldCreateSpec).target)


def old_redrive_target(target_json: str) -> tuple[Any, Any]:
    target = json.loads(target_json)
    kind = target["type"]
    return kind, target["name"] if kind in ledger.PULLED_KINDS else None


# ---------------------------------------------------------------------------- today's readers


def new_job_delivery(spec: str) -> tuple[Any, ...]:
    """The delivery fields the old reader gave (the run limit, level 8, came after it: specs of
    a release before it hold none, and it is tested in test_store_schedule_control)."""
    return msgspec.structs.astuple(ledger.job_delivery(spec))[:5]


def new_redrive_target(target_json: str) -> tuple[Any, Any]:
    target = deadletters._target_of(target_json)
    kind = target.type
    return kind, queue_name(target.name) if kind in ledger.PULLED_KINDS else None


def outcome(read: Callable[[str], Any], text: str) -> Any:
    """What a reader gives: its value, or its error as apply records it (type and text)."""
    try:
        return ("value", read(text))
    except Exception as exc:
        return ("error", type(exc).__name__, str(exc))


def assert_alike(old: Callable[[str], Any], new: Callable[[str], Any], text: str) -> None:
    assert outcome(new, text) == outcome(old, text)


# ---------------------------------------------------------------------------- specs


DURATION = st.sampled_from(["1s", "2.5s", "250ms", "10m", "1h30m", "1d", "48h", "0s"])
SCHEDULES = st.sampled_from(
    [
        {"run_at": "2026-12-02T10:00:00Z"},
        {"cron": "*/5 * * * *", "timezone": "UTC"},
        {"cron": "*/\u0663 * * * *", "timezone": "Europe/Berlin"},  # Unicode digits (< 12-01)
        {"every": "10m", "start_at": "2026-06-01T12:03:00Z", "end_at": "2027-01-01T00:00:00Z"},
    ]
)
# Targets as releases stored them, today's rules or looser ones (reserved headers, long URLs,
# timeouts out of range, exchange names with a slash, odd queue names).
TARGETS = st.one_of(
    st.builds(lambda name: {"type": "queue", "name": name}, TEXT),
    st.builds(
        lambda url, headers, timeout: {
            "type": "http",
            "url": url,
            "method": "POST",
            "headers": headers,
            "timeout": timeout,
        },
        st.sampled_from(["https://hooks.example/x?a=1&b=é", "http://h:8080/" + "p" * 2100]),
        st.dictionaries(st.sampled_from(["Host", "webhook-id", "X-K", "Content-Type"]), TEXT),
        DURATION | st.sampled_from(["10m", "5ms"]),
    ),
    st.builds(
        lambda kind, connection, extra: {"type": kind, "connection": connection, **extra},
        st.sampled_from(["redis_stream", "rabbitmq", "nats"]),
        TEXT,
        st.dictionaries(st.sampled_from(["stream", "exchange", "routing_key", "maxlen"]), JSON),
    ),
)
RETRIES = st.fixed_dictionaries(
    {
        "max_attempts": st.integers(min_value=-5, max_value=2_000_000),
        "backoff": st.sampled_from(["exponential", "fixed", "linear", "odd"]),
        "initial_delay": DURATION,
        "max_delay": DURATION,
    }
)
SPECS = st.fixed_dictionaries(
    {
        "name": st.none() | TEXT,
        "schedule": SCHEDULES,
        "window": st.none() | DURATION,
        "target": TARGETS,
        "payload": JSON,
        "retry": RETRIES,
        "misfire_policy": st.sampled_from(["run_once", "skip", "run_all"]),
        "overlap_policy": st.sampled_from(["allow", "skip", "delay"]),
    }
)


@settings(max_examples=300)
@given(spec=SPECS)
def test_a_spec_a_release_stored_reads_as_before(spec: dict[str, Any]) -> None:
    text = compact_json(spec)
    assert_alike(old_job_delivery, new_job_delivery, text)
    assert_alike(old_create_connection, lambda t: load_spec(t).connection(), text)
    target_text = new_job_delivery(text)[2]  # the outbox row's and the dead letter's target
    assert_alike(old_redrive_target, new_redrive_target, target_text)
    retry_text = new_job_delivery(text)[4]
    assert load_retry(retry_text) == stored_retry(json.loads(retry_text))


@given(spec=SPECS, drop=st.sets(st.sampled_from(["window", "schedule", "overlap_policy"])))
def test_a_spec_a_release_stored_plans_from_the_values_it_planned_from(
    spec: dict[str, Any], drop: set[str]
) -> None:
    """The dispatcher (not apply: its claims carry what it planned) plans from the same values;
    the typed pass and the lenient one agree."""
    text = compact_json({key: value for key, value in spec.items() if key not in drop})
    old = msgspec.json.decode(text, type=_OldPlanFields)
    plan = load_plan(text)
    assert plan == load_spec(text).plan()
    assert (plan.schedule, plan.window, plan.overlap_policy, plan.misfire_policy) == (
        old.schedule,
        old.window,
        old.overlap_policy,
        old.misfire_policy,
    )


@given(spec=SPECS, drop=st.sets(st.sampled_from(["payload", "window", "schedule", "name"])))
def test_a_spec_missing_keys_reads_as_before(spec: dict[str, Any], drop: set[str]) -> None:
    """The store's own tests write specs with keys missing (no release did)."""
    text = compact_json({key: value for key, value in spec.items() if key not in drop})
    assert_alike(old_job_delivery, new_job_delivery, text)
    assert_alike(old_create_connection, lambda t: load_spec(t).connection(), text)


MALFORMED_SPECS = [
    "not json",
    "[1]",
    '"spec"',
    "{}",
    '{"retry": {}}',
    '{"target": {"type": "queue", "name": "q"}}',
    '{"target": "queue", "retry": {}}',
    '{"target": [1], "retry": {}}',
    '{"target": null, "retry": {}}',
    '{"target": {}, "retry": {}}',
    '{"target": {"name": "q"}}',
    '{"target": [1]}',
    '{"target": {"type": "queue"}, "retry": {}}',
    '{"target": {"type": 5, "name": "q"}, "retry": {}}',
    '{"target": {"type": "rabbitmq", "connection": 5}, "retry": {}}',
    '{"target": {"type": "nats", "connection": "n"}, "retry": null, "payload": null}',
    '{"target": {"type": "queue", "name": "q"}, "retry": {}, "target": {"type": "http"}}',
    '{"target": {"type": "queue", "name": "q"}, "retry": {} trailing',
    '{"target": {"type": "queue", "name": "q"}, "retry": {}, "window": "1e400s"}',
    '{"target": {"type": "queue", "name": "q"}, "retry": {}, "overlap_policy": {"a": 1}}',
    '{"target": {"type": "queue", "name": "q"}, "retry": {}, "schedule": [1]}',
]


@pytest.mark.parametrize("text", MALFORMED_SPECS)
def test_a_malformed_spec_fails_or_reads_as_before(text: str) -> None:
    assert_alike(old_job_delivery, new_job_delivery, text)
    assert_alike(old_create_connection, lambda t: load_spec(t).connection(), text)


@pytest.mark.parametrize(
    "target",
    [
        '{"type": "queue", "name": "q"}',
        '{"type":"queue","name":"a.b-c_9"}',
        '{"type": "queue"}',
        '{"type": "queue", "name": 5}',
        '{"type": "http", "url": "https://h.example/"}',
        '{"type": "redis_stream", "connection": "main", "stream": "s"}',
        '{"name": "q"}',
    ],
)
def test_a_dead_letters_target_reads_as_before(target: str) -> None:
    assert_alike(old_redrive_target, new_redrive_target, target)


# ---------------------------------------------------------------------------- whole logs

# Jobs as releases stored them (odd values included) and as none did: claimed, called back
# (HTTP: a retry, a failure), dead-lettered and redriven, on two stores, one with the readers
# before patched in; both must answer alike and end with equal digests.
LOG_SPECS: list[dict[str, Any]] = [
    {"type": "queue", "name": "digests"},
    {"type": "queue", "name": "odd name/é"},  # a name a later release would refuse
    {"type": "http", "url": "https://h.example/" + "p" * 2100, "headers": {"Host": "x"}},
    {"type": "http", "url": "https://h.example/", "timeout": "10m"},
    {"type": "redis_stream", "connection": "main", "stream": "s", "maxlen": 0},
    {"type": "nats", "connection": "main", "subject": "x"},  # another kind's connection: refused
    {"type": "queue"},  # no name: no release wrote it; the claim fails as before
]
ODD_RETRY = {"max_attempts": 5_000_000, "backoff": "odd", "initial_delay": "2d", "max_delay": 1}


def _old_readers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        ledger, "job_delivery", lambda spec: ledger.JobDelivery(*old_job_delivery(spec))
    )
    monkeypatch.setattr(delivery, "load_retry", lambda text: stored_retry(json.loads(text)))


def _apply_the_log(apply: Applier) -> list[Any]:
    setup(apply, job_id="j0", schedule={"run_at": "2026-12-02T10:00:00Z"})
    main = CreateConnection(
        tenant_id="t1", name="main", kind="redis", url="redis://r", host="r", addresses=("1.2.3.4",)
    )
    answers: list[Any] = [apply.typed(main)]
    jobs = [
        {
            "job_id": f"j{i + 1}",
            "partition": 3,
            "spec": spec({"every": "1m"}, target=target, retry=ODD_RETRY, window="2h"),
            "next_run_at_ms": NOW_MS,
            "next_fire_at_ms": NOW_MS,
            "idempotency_key": None,
            "request_hash": None,
        }
        for i, target in enumerate(LOG_SPECS)
    ]
    answers.append(apply("create_jobs", {"tenant_id": "t1", "jobs": jobs}))
    for i in range(len(LOG_SPECS) + 1):
        row = ClaimRow(f"j{i}", NOW_MS, NOW_MS, 3, 1, 1, False, NOW_MS + MIN, NOW_MS + MIN)
        kind = ClaimBatch if i % 2 else ClaimRuns
        claims = (row,) if kind is ClaimBatch else (Claim(**msgspec.structs.asdict(row)),)
        answers.append(apply.typed(kind(node_id="n1", claims=claims)))  # type: ignore[arg-type]
    outbox = apply.machine.db.conn.execute("SELECT seq, job_id FROM outbox ORDER BY seq")
    for seq, job_id in outbox.fetchall():
        for attempt, verdict in ((1, "retry"), (2, "failed")):
            outcome = CallbackOutcome(
                seq=seq,
                job_id=job_id,
                scheduled_at_ms=NOW_MS,
                attempt=attempt,
                started_at_ms=NOW_MS,
                finished_at_ms=NOW_MS + 1,
                verdict=verdict,
                error="boom",
                retry_at_ms=NOW_MS + 2,
            )
            answers.append(apply.typed(RecordCallbacks(node_id="n1", outcomes=(outcome,))))
    for (dl_id,) in apply.machine.db.conn.execute("SELECT id FROM deadletters ORDER BY id"):
        answers.append(apply("redrive_deadletter", {"tenant_id": "t1", "id": dl_id}))
    return answers


def test_a_log_of_old_and_odd_specs_applies_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = []
    for name in ("before", "today"):
        db = Database(tmp_path / f"{name}.db")
        try:
            with monkeypatch.context() as patch:
                if name == "before":
                    _old_readers(patch)
                answers = _apply_the_log(Applier(StateMachine(db)))
            results.append((answers, state_digest(db.conn)))
        finally:
            db.close()
    (before, digest_before), (today, digest_today) = results
    assert today == before
    assert digest_today == digest_before
    assert any(a.get("code") == "internal" for a in today)  # the job without a queue name
    assert any(a.get("dead") for a in today)  # an HTTP run died and was redriven
