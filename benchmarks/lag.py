"""What the dispatch and delivery benchmarks report of the messages or callbacks they saw."""

from __future__ import annotations

import json
import statistics
from typing import Any

Record = tuple[float, float, str]  # (seen at, lag in s, idempotency key)


def summarize(name: str, seen: list[Record], expected: int, **extra: Any) -> dict[str, Any]:
    """Count lost and doubled deliveries, lag percentiles and throughput; print it as JSON."""
    lags = sorted(lag for _, lag, _ in seen)
    keys = [key for _, _, key in seen]
    span = (max(t for t, _, _ in seen) - min(t for t, _, _ in seen)) if seen else 0.0
    result = {
        "scenario": name,
        "expected": expected,
        "received": len(seen),
        "duplicates": len(keys) - len(set(keys)),
        "lost": expected - len(set(keys)),
        "p50_lag_s": round(statistics.median(lags), 3) if lags else None,
        "p99_lag_s": round(lags[int(len(lags) * 0.99) - 1], 3) if lags else None,
        "max_lag_s": round(lags[-1], 3) if lags else None,
        "drain_s": round(span, 2),
        "throughput_per_s": round(len(seen) / span) if span else None,
        **extra,
    }
    print(json.dumps(result), flush=True)
    return result


def percentiles(lags: list[float]) -> dict[str, float | None]:
    """p50, p99 and max of `lags` (s), computed and rounded as `summarize` does."""
    ordered = sorted(lags)
    if not ordered:
        return {"p50_lag_s": None, "p99_lag_s": None, "max_lag_s": None}
    return {
        "p50_lag_s": round(statistics.median(ordered), 3),
        "p99_lag_s": round(ordered[int(len(ordered) * 0.99) - 1], 3),
        "max_lag_s": round(ordered[-1], 3),
    }
