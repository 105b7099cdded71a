"""The one retry policy (schedd/retry.py): backoff, deterministic jitter, the Retry-After floor;
and the keys it and the consumers know a run by (model.delivery_id, model.idempotency_key)."""

from __future__ import annotations

from schedd.model import Backoff, RetryPolicy, delivery_id, idempotency_key
from schedd.retry import backoff_ms, has_attempts_left, retry_delay_ms

POLICY = RetryPolicy(
    max_attempts=4, backoff=Backoff.EXPONENTIAL, initial_delay_ms=1_000, max_delay_ms=30_000
)


def test_backoff_grows_per_kind_and_is_capped() -> None:
    assert [backoff_ms(POLICY, n) for n in (1, 2, 3, 6)] == [1_000, 2_000, 4_000, 30_000]
    linear = RetryPolicy(
        max_attempts=4, backoff=Backoff.LINEAR, initial_delay_ms=1_000, max_delay_ms=2_500
    )
    assert [backoff_ms(linear, n) for n in (1, 2, 3)] == [1_000, 2_000, 2_500]


def test_delay_is_a_stable_point_in_the_upper_half_of_the_backoff() -> None:
    delays = [retry_delay_ms(POLICY, 3, f"j{i}:1000") for i in range(200)]
    assert all(2_000 <= d <= 4_000 for d in delays)
    assert len(set(delays)) > 100
    assert delays == [retry_delay_ms(POLICY, 3, f"j{i}:1000") for i in range(200)]
    assert retry_delay_ms(POLICY, 3, "j1:1000") != retry_delay_ms(POLICY, 3, "j1:2000")


def test_a_floor_raises_the_delay_but_never_past_max_delay() -> None:
    plain = retry_delay_ms(POLICY, 1, "j:1")
    assert retry_delay_ms(POLICY, 1, "j:1", floor_ms=None) == plain
    assert retry_delay_ms(POLICY, 1, "j:1", floor_ms=0) == plain
    assert retry_delay_ms(POLICY, 1, "j:1", floor_ms=20_000) == 20_000
    assert retry_delay_ms(POLICY, 1, "j:1", floor_ms=90_000) == 30_000


def test_attempts_left_counts_against_max_attempts() -> None:
    assert has_attempts_left(POLICY, 3) and not has_attempts_left(POLICY, 4)


def test_a_runs_delivery_id_and_idempotency_key() -> None:
    assert delivery_id("job_1", 1_790_000_000_000) == "job_1:1790000000000"
    assert idempotency_key("job_1", 1_790_000_000_000) == "job_1:2026-09-21T14:13:20Z"
