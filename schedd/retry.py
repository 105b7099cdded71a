"""Retry timing: how long a failed attempt waits before the next one (backoff with jitter).

Pure and deterministic: the jitter comes from a stable hash, so every replica computes the same.
"""

from __future__ import annotations

import hashlib

from schedd.model import Backoff, RetryPolicy


def retry_delay_ms(
    policy: RetryPolicy, attempt: int, key: str, *, floor_ms: int | None = None
) -> int:
    """Delay after failed attempt number `attempt` (1-based) of the run named `key`
    (`model.delivery_id`), at least `floor_ms` (a Retry-After), at most the policy's max_delay.

    The backoff grows per the policy up to max_delay; the jitter picks a point in the upper half
    of it, so retries of many runs that failed together spread out.
    """
    capped = backoff_ms(policy, attempt)
    digest = hashlib.blake2b(f"{key}:{attempt}".encode(), digest_size=8).digest()
    low = capped // 2
    delay = low + int.from_bytes(digest, "big") % (capped - low + 1)
    if floor_ms is None:
        return delay  # already at most max_delay: the backoff is capped
    return min(max(delay, floor_ms), policy.max_delay_ms)


def backoff_ms(policy: RetryPolicy, attempt: int) -> int:
    """The policy's delay after failed attempt number `attempt`, before jitter, capped."""
    if policy.backoff is Backoff.EXPONENTIAL:
        base = policy.initial_delay_ms << min(attempt - 1, 40)
    elif policy.backoff is Backoff.LINEAR:
        base = policy.initial_delay_ms * attempt
    else:
        base = policy.initial_delay_ms
    return min(base, policy.max_delay_ms)


def has_attempts_left(policy: RetryPolicy, attempts_made: int) -> bool:
    return attempts_made < policy.max_attempts
