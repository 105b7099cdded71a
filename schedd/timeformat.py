"""Instants and durations at the edges: RFC 3339 and "90s"/"10m"/"2h"/"1d" strings <-> epoch ms.

Core code holds integer epoch milliseconds; only this module turns them into text and back.
"""

from __future__ import annotations

import functools
import math
import re
import time
from datetime import UTC, datetime, timedelta

from schedd.errors import InvalidRequest

_RFC3339 = re.compile(  # ASCII: \d would also match '٣', which int() reads as 3
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?([Zz]|[+-]\d{2}:\d{2})", re.ASCII
)
_NAIVE = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ][\d:.]+", re.ASCII)
_DURATION_PART = re.compile(r"([0-9]{1,15}(?:\.[0-9]{1,9})?)(ms|s|m|h|d)", re.ASCII)
_SECONDS = re.compile(r"[0-9]{1,15}(?:\.[0-9]{1,9})?", re.ASCII)
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
MAX_DURATION_MS = 100 * 365 * 86_400_000
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Instants schedd accepts: from the epoch to the year 3000 (far enough for any schedule, and
# far enough from datetime's year 9999 that every computation on them stays in range).
MIN_INSTANT_MS = 0
MAX_INSTANT_MS = 32_503_680_000_000  # 3000-01-01T00:00:00Z


def parse_instant(value: object, *, field: str) -> int:
    """Parse an RFC 3339 string with an offset into epoch ms; a naive time is an error."""
    if not isinstance(value, str):
        raise InvalidRequest(field, f"must be an RFC 3339 string, got {_shown(value)}")
    return _parse_text(value, field)


@functools.lru_cache(maxsize=4096)  # a spike's runs share one instant; only valid text is kept
def _parse_text(value: str, field: str) -> int:
    if not _RFC3339.fullmatch(value):
        if _NAIVE.fullmatch(value):
            raise InvalidRequest(
                field, f"{_shown(value)} has no UTC offset: add 'Z' or one like '+05:30'"
            )
        raise InvalidRequest(
            field,
            f"must be an RFC 3339 instant like '2026-10-12T08:00:00+05:30', got {_shown(value)}",
        )
    text = value.upper().replace(" ", "T")
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    # fromisoformat takes at most 6 fractional digits: truncate nanoseconds.
    text = re.sub(r"(\.\d{6})\d+", r"\1", text, flags=re.ASCII)
    try:
        ms = to_ms(datetime.fromisoformat(text))
    except (ValueError, OverflowError) as exc:
        raise InvalidRequest(
            field, f"{_shown(value)} is not a real date and time ({exc})"
        ) from None
    if not MIN_INSTANT_MS <= ms < MAX_INSTANT_MS:
        raise InvalidRequest(field, f"must be between 1970 and 2999 (UTC), got {_shown(value)}")
    return ms


def to_ms(instant: datetime) -> int:
    """Epoch milliseconds of an aware datetime."""
    if instant.tzinfo is None:
        raise ValueError("naive datetime")
    delta = instant - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000 + delta.microseconds // 1_000


def from_ms(ms: int) -> datetime:
    """Aware UTC datetime of epoch milliseconds."""
    return EPOCH + timedelta(milliseconds=ms)


def format_instant(ms: int) -> str:
    """RFC 3339 in UTC with a 'Z' suffix; milliseconds only when there are some."""
    text = _second_text(ms // 1_000)
    if ms % 1_000:
        return f"{text}.{ms % 1_000:03d}Z"
    return text + "Z"


@functools.lru_cache(maxsize=4096)  # a spike's runs share one second: formatted once
def _second_text(seconds: int) -> str:
    t = time.gmtime(seconds)
    date = f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}"
    return f"{date}T{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}"


def parse_duration(value: object, *, field: str, minimum_ms: int = 0) -> int:
    """Parse "90s", "10m", "2h", "1d", "1h30m", "2.5s", "250ms" or a number of seconds into ms."""
    if isinstance(value, bool):
        raise InvalidRequest(
            field, f"must be a duration like '10m' or seconds, got {_shown(value)}"
        )
    if isinstance(value, int | float):
        # Compare before any arithmetic: a huge int cannot even become a float.
        if value < 0 or value > MAX_DURATION_MS // 1_000 or not math.isfinite(value):
            raise InvalidRequest(
                field, f"must be a non-negative number of seconds, got {_shown(value)}"
            )
        ms = round(value * 1_000)
    elif isinstance(value, str) and _SECONDS.fullmatch(value.strip()):
        ms = round(float(value) * 1_000)
    elif isinstance(value, str) and value and _is_duration_text(value):
        ms = round(sum(float(n) * _UNIT_MS[u] for n, u in _DURATION_PART.findall(value)))
    else:
        raise InvalidRequest(
            field,
            f"must be a duration like '90s', '10m', '2h', '1d' or a number of seconds, "
            f"got {_shown(value)}",
        )
    if ms < minimum_ms:
        raise InvalidRequest(
            field, f"must be at least {format_duration(minimum_ms)}, got {_shown(value)}"
        )
    if ms > MAX_DURATION_MS:
        raise InvalidRequest(field, f"must be at most 100 years, got {_shown(value)}")
    return ms


def _is_duration_text(value: str) -> bool:
    return _DURATION_PART.sub("", value) == "" and len(value) <= 64


def format_duration(ms: int) -> str:
    """The shortest exact text for a duration: 90000 -> '90s', 600000 -> '10m', 86400000 -> '1d'."""
    for unit in ("d", "h", "m", "s"):
        size = _UNIT_MS[unit]
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def _shown(value: object, limit: int = 60) -> str:
    """A value for an error message, clipped: input can be arbitrarily long."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
