"""Classify one delivery attempt (status, transport error, Retry-After) into an outcome.

Pure: the caller supplies "now"; nothing here touches the network, the store or a clock.
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime

from schedd.model import Verdict as Verdict  # declared beside RunStatus: apply records it too

MAX_DELTA_DIGITS = 9  # ~31 years: longer than any max_delay, so more digits mean "the cap"
MAX_DATE_CHARS = 64  # an HTTP date is 29; anything much longer is not one


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What one attempt came to (of any target kind); `error` is short text for the attempt
    record."""

    verdict: Verdict
    status: int | None  # the HTTP status; None without one (no response, or not HTTP)
    error: str | None = None
    retry_after_ms: int | None = None  # the remote's Retry-After: the retry's floor (retry.py)

    @property
    def is_retryable(self) -> bool:
        return self.verdict is Verdict.RETRY

    @property
    def cancels_job(self) -> bool:
        return self.verdict is Verdict.GONE


def classify(
    status: int | None,
    *,
    error: str | None,
    retry_after: str | None,
    now_s: float,
    max_delay_ms: int,
) -> Outcome:
    """Judge an attempt: `status` None means no response (timeout, connection error).

    `error` is the transport error when there was no response, else an optional body excerpt.
    """
    if status is None:
        return Outcome(verdict=Verdict.RETRY, status=None, error=error or "no response")
    detail = f"http {status}: {error}" if error else f"http {status}"
    if 200 <= status <= 299:
        return Outcome(verdict=Verdict.SUCCEEDED, status=status)
    if 300 <= status <= 399:
        return Outcome(
            verdict=Verdict.FAILED, status=status, error=f"{detail} (redirects are not followed)"
        )
    if status == 410:
        return Outcome(verdict=Verdict.GONE, status=status, error=detail)
    if 400 <= status <= 499 and status not in (408, 429):
        return Outcome(verdict=Verdict.FAILED, status=status, error=detail)
    # 408, 429, 5xx, and anything outside 200-499 (a server that does not speak HTTP well).
    delay_ms = retry_after_ms(retry_after, now_s=now_s, max_delay_ms=max_delay_ms)
    return Outcome(verdict=Verdict.RETRY, status=status, error=detail, retry_after_ms=delay_ms)


def retry_after_ms(value: str | None, *, now_s: float, max_delay_ms: int) -> int | None:
    """A Retry-After header (delta seconds or HTTP date) in ms, capped; None if unusable."""
    if value is None:
        return None
    text = value.strip()
    if not (text.isascii() and text.isdigit()):
        delay_ms = _date_delay_ms(text, now_s)
        return None if delay_ms is None else min(delay_ms, max_delay_ms)
    digits = text.lstrip("0") or "0"
    if len(digits) > MAX_DELTA_DIGITS:  # never int() thousands of digits: it raises
        return max_delay_ms
    return min(int(digits) * 1000, max_delay_ms)


def _date_delay_ms(text: str, now_s: float) -> int | None:
    """Milliseconds from `now_s` until an HTTP date; None if it is not one or already past."""
    if len(text) > MAX_DATE_CHARS:
        return None
    try:
        when = parsedate_to_datetime(text)
        if when.tzinfo is None:  # "-0000": UTC with no claim about local time
            when = when.replace(tzinfo=UTC)
        delay_ms = math.ceil((when.timestamp() - now_s) * 1000)
    except (ValueError, TypeError, IndexError, OverflowError):  # not a date, or out of range
        return None
    return None if delay_ms < 0 else delay_ms


def excerpt(body: bytes, limit: int = 256) -> str:
    """Up to `limit` characters of `body` for an error text: decoded, controls stripped."""
    text = body[: limit * 4].decode("utf-8", errors="replace")
    kept = "".join(ch for ch in text if ch.isspace() or unicodedata.category(ch)[0] != "C")
    clean = " ".join(kept.split())  # newlines and tabs become single spaces
    return clean if len(clean) <= limit else clean[: limit - 1] + "…"
