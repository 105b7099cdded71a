"""The caller's pure decisions: fair slots per tenant, turn order, retry delays, request body."""

from __future__ import annotations

import json

import pytest

from schedd import retry
from schedd.delivery.caller import Caller, delay_after, take_turns
from schedd.delivery.http import _body
from schedd.delivery.outcome import Outcome, Verdict
from schedd.guard.targets import TargetGuard
from schedd.model import Backoff, RetryPolicy
from schedd.sealing import PayloadKeys
from schedd.store.commands import CallbackOutcome, LogCommand, R
from schedd.store.outbox import DueCall


def caller(concurrency: int = 256, tenant_concurrency: int = 32) -> Caller:
    async def propose(cmd: LogCommand[R]) -> R:
        raise AssertionError("not called here")

    return Caller(
        "n1",
        reads=None,  # type: ignore[arg-type]
        propose=propose,
        guard=TargetGuard(),
        payload_keys=PayloadKeys(),
        concurrency=concurrency,
        tenant_concurrency=tenant_concurrency,
    )


def call(tenant: str, seq: int) -> DueCall:
    return DueCall(seq, 0, tenant, f"job_{seq}", 1_000, 1, "{}", "null", "{}")


def test_one_tenant_gets_its_whole_tenant_concurrency() -> None:
    assert caller().free_slots(["a"], {}) == {"a": 32}
    assert caller().free_slots(["a"], {"a": 30}) == {"a": 2}


def test_stalled_tenants_always_leave_room_for_another() -> None:
    c = caller(concurrency=256, tenant_concurrency=32)
    stalled = {f"s{i}": 0 for i in range(8)}
    limits = c.free_slots(list(stalled), {})
    assert sum(limits.values()) < 256  # 8 x 32 would take every slot
    held = dict(limits)  # they hang on to all they got
    newcomer = c.free_slots(["fast"], held)
    assert newcomer["fast"] >= 256 // 10
    assert sum(held.values()) + newcomer["fast"] <= 256


def test_a_tenant_over_its_fair_share_starts_nothing_new() -> None:
    c = caller(concurrency=100, tenant_concurrency=50)
    assert c.free_slots(["a", "b", "c"], {"a": 50}) == {"a": -25, "b": 25, "c": 25}


def test_turns_interleave_tenants_and_rotate_who_goes_first() -> None:
    calls = [call("a", 1), call("a", 2), call("a", 3), call("b", 4), call("c", 5)]
    first = [c.seq for c in take_turns(calls, 0)]
    second = [c.seq for c in take_turns(calls, 1)]
    assert first == [1, 4, 5, 2, 3]
    assert second == [4, 5, 1, 2, 3]
    assert take_turns([], 3) == []


def test_http_retries_take_the_queues_deterministic_delay_keyed_by_run_and_attempt() -> None:
    policy = RetryPolicy(
        max_attempts=5, backoff=Backoff.EXPONENTIAL, initial_delay_ms=1_000, max_delay_ms=10_000
    )
    plain = Outcome(verdict=Verdict.RETRY, status=503)
    third = call("a", 1)._replace(attempt=3)
    delay = delay_after(policy, third, plain)
    assert delay == retry.retry_delay_ms(policy, 3, "job_1:1000")  # the queue's, for this run
    assert 2_000 <= delay <= 4_000  # the upper half of the 4 s backoff
    assert delay_after(policy, third, plain) == delay  # the same on every call
    others = {delay_after(policy, call("a", seq)._replace(attempt=3), plain) for seq in range(50)}
    assert len(others) > 25  # runs that failed together spread out


def test_http_retry_delay_is_at_least_retry_after_and_at_most_max_delay() -> None:
    policy = RetryPolicy(
        max_attempts=5, backoff=Backoff.EXPONENTIAL, initial_delay_ms=1_000, max_delay_ms=10_000
    )
    asked = Outcome(verdict=Verdict.RETRY, status=429, retry_after_ms=7_000)
    assert delay_after(policy, call("a", 1), asked) == 7_000  # the backoff alone is <= 1 s
    too_long = Outcome(verdict=Verdict.RETRY, status=429, retry_after_ms=3_600_000)
    assert delay_after(policy, call("a", 1), too_long) == 10_000
    short = Outcome(verdict=Verdict.RETRY, status=429, retry_after_ms=1)
    plain = Outcome(verdict=Verdict.RETRY, status=503)
    assert delay_after(policy, call("a", 1), short) == delay_after(policy, call("a", 1), plain)


def test_the_body_carries_the_payload_text_unchanged() -> None:
    body = _body(call("a", 9), '{"x":[1,"é"]}')
    assert json.loads(body) == {
        "job_id": "job_9",
        "scheduled_at": "1970-01-01T00:00:01Z",
        "attempt": 1,
        "payload": {"x": [1, "é"]},
    }


def _outcome(seq: int, verdict: str) -> CallbackOutcome:
    return CallbackOutcome(
        seq=seq,
        attempt=1,
        started_at_ms=1,
        finished_at_ms=2,
        verdict=verdict,
        error=None,
        retry_at_ms=None,
    )


@pytest.mark.parametrize(("lagging", "versioned"), [([], True), (["n2"], False)])
def test_an_outcome_cancelling_its_job_is_versioned_once_every_member_applies_level_8(
    lagging: list[str], versioned: bool
) -> None:
    one = caller()
    one._lagging = lambda level: lagging if level == 8 else []
    gone = one._record_command([_outcome(1, "succeeded"), _outcome(2, "gone")])
    assert gone.versioned is versioned and gone.needed_level() == (8 if versioned else 1)
    plain = one._record_command([_outcome(1, "succeeded"), _outcome(2, "retry")])
    assert "versioned" not in plain.to_body()  # the common command's bytes, as before
