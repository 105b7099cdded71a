"""Per-tenant dispatch rates: token buckets, so one tenant's midnight spike waits its turn
instead of starving every other tenant's runs."""

from __future__ import annotations

DEFAULT_RATE = 5_000
UNLIMITED = 2**62


class TenantBuckets:
    """A bucket per tenant holding up to one second of its `dispatch_rate` (runs/s, per node).

    A rate of 0 or less means no limit.
    """

    def __init__(self) -> None:
        self._rates: dict[str, int] = {}
        self._tokens: dict[str, float] = {}
        self._stamps: dict[str, int] = {}

    def set_rates(self, rates: dict[str, int]) -> None:
        self._rates = rates

    def admit(self, tenant_id: str, now_ms: int) -> bool:
        """Take one token for a run of this tenant; False when its bucket is empty."""
        return self.admit_many(tenant_id, 1, now_ms) == 1

    def admit_many(self, tenant_id: str, count: int, now_ms: int) -> int:
        """Take a token for each of `count` runs of this tenant while there are whole ones: how
        many were taken (what `count` calls of `admit` at `now_ms` would admit, in one call)."""
        if count <= 0 or self._rates.get(tenant_id, DEFAULT_RATE) <= 0:
            return max(count, 0)
        tokens = self._refill(tenant_id, now_ms)
        taken = min(count, int(tokens))  # tokens >= 0: int() is its floor
        self._tokens[tenant_id] = tokens - taken  # exact: whole numbers off a float below 2**53
        return taken

    def available(self, tenant_id: str, now_ms: int) -> int:
        """How many runs of this tenant `admit` would take now (without taking them)."""
        if self._rates.get(tenant_id, DEFAULT_RATE) <= 0:
            return UNLIMITED
        return int(self._refill(tenant_id, now_ms))

    def _refill(self, tenant_id: str, now_ms: int) -> float:
        rate = self._rates.get(tenant_id, DEFAULT_RATE)
        elapsed_s = max(0, now_ms - self._stamps.get(tenant_id, now_ms)) / 1000
        tokens = min(float(rate), self._tokens.get(tenant_id, float(rate)) + elapsed_s * rate)
        self._stamps[tenant_id] = now_ms
        self._tokens[tenant_id] = tokens
        return tokens
