"""Classifying delivery attempts: status classes, Retry-After forms, error excerpts."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schedd.delivery.outcome import Outcome, Verdict, classify, excerpt, retry_after_ms

NOW_S = 1_790_000_000.0  # 2026-09-21T14:13:20Z
MAX_DELAY_MS = 3_600_000


def judge(status: int | None, error: str | None = None, retry_after: str | None = None) -> Outcome:
    return classify(
        status, error=error, retry_after=retry_after, now_s=NOW_S, max_delay_ms=MAX_DELAY_MS
    )


def http_date(epoch_s: float) -> str:
    return format_datetime(datetime.fromtimestamp(epoch_s, UTC), usegmt=True)


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        (200, Verdict.SUCCEEDED),
        (201, Verdict.SUCCEEDED),
        (204, Verdict.SUCCEEDED),
        (299, Verdict.SUCCEEDED),
        (408, Verdict.RETRY),
        (429, Verdict.RETRY),
        (500, Verdict.RETRY),
        (502, Verdict.RETRY),
        (503, Verdict.RETRY),
        (599, Verdict.RETRY),
        (None, Verdict.RETRY),
        (400, Verdict.FAILED),
        (401, Verdict.FAILED),
        (403, Verdict.FAILED),
        (404, Verdict.FAILED),
        (409, Verdict.FAILED),
        (422, Verdict.FAILED),
        (499, Verdict.FAILED),
        (301, Verdict.FAILED),
        (302, Verdict.FAILED),
        (307, Verdict.FAILED),
        (308, Verdict.FAILED),
        (410, Verdict.GONE),
        (101, Verdict.RETRY),
        (600, Verdict.RETRY),
    ],
)
def test_status_classes(status: int | None, verdict: Verdict) -> None:
    outcome = judge(status)
    assert outcome.verdict is verdict and outcome.status == status
    assert outcome.is_retryable is (verdict is Verdict.RETRY)
    assert outcome.cancels_job is (verdict is Verdict.GONE)


def test_success_has_no_error() -> None:
    assert judge(200, error="ignored") == Outcome(verdict=Verdict.SUCCEEDED, status=200)


def test_a_redirect_fails_with_a_clear_error() -> None:
    outcome = judge(302)
    assert outcome.error is not None and "redirects are not followed" in outcome.error
    assert "302" in outcome.error


def test_gone_fails_and_cancels_the_job() -> None:
    outcome = judge(410, error="endpoint removed")
    assert outcome.cancels_job and not outcome.is_retryable
    assert outcome.error == "http 410: endpoint removed"


def test_no_response_keeps_the_transport_error() -> None:
    assert judge(None, error="timeout after 10s").error == "timeout after 10s"
    assert judge(None).error == "no response"


def test_an_error_status_carries_the_body_excerpt() -> None:
    assert judge(404, error="no such hook").error == "http 404: no such hook"
    assert judge(500).error == "http 500"


@pytest.mark.parametrize(
    ("header", "expected_ms"),
    [
        ("0", 0),
        ("7", 7_000),
        ("  120 ", 120_000),
        ("99999999", MAX_DELAY_MS),
        (http_date(NOW_S + 30), 30_000),
        (http_date(NOW_S + 10 * 3600), MAX_DELAY_MS),
        ("Mon, 21 Sep 2026 14:14:20 -0000", 60_000),
        ("Mon, 21 Sep 2026 16:14:20 +0200", 60_000),
        (http_date(NOW_S - 5), None),
        ("-5", None),
        ("1.5", None),
        ("soon", None),
        ("", None),
        ("\u0661\u0662", None),  # Arabic-Indic digits are not HTTP digits
        ("Mon, 99 Foo 2026 99:99:99 GMT", None),
        (None, None),
    ],
)
def test_retry_after_forms(header: str | None, expected_ms: int | None) -> None:
    assert judge(503, retry_after=header).retry_after_ms == expected_ms
    assert retry_after_ms(header, now_s=NOW_S, max_delay_ms=MAX_DELAY_MS) == expected_ms


def test_retry_after_is_read_for_429_and_408_but_not_for_final_outcomes() -> None:
    assert judge(429, retry_after="3").retry_after_ms == 3_000
    assert judge(408, retry_after="3").retry_after_ms == 3_000
    assert judge(None, retry_after="3").retry_after_ms is None  # no response, no header
    assert judge(404, retry_after="3").retry_after_ms is None
    assert judge(200, retry_after="3").retry_after_ms is None


def test_a_fractional_second_rounds_up() -> None:
    assert retry_after_ms(http_date(NOW_S + 2), now_s=NOW_S - 0.0004, max_delay_ms=10**9) == 2001


@given(st.integers(0, 10**12), st.integers(0, 10**9))
def test_delta_seconds_are_capped(seconds: int, cap_ms: int) -> None:
    got = retry_after_ms(str(seconds), now_s=NOW_S, max_delay_ms=cap_ms)
    assert got == min(seconds * 1000, cap_ms)


@given(st.text(max_size=40))
def test_retry_after_never_raises(header: str) -> None:
    got = retry_after_ms(header, now_s=NOW_S, max_delay_ms=MAX_DELAY_MS)
    assert got is None or 0 <= got <= MAX_DELAY_MS


def test_excerpt_decodes_with_replacement_and_strips_controls() -> None:
    assert excerpt(b"bad gateway\r\n\tupstream\x00 down\x1b[31m") == "bad gateway upstream down[31m"
    assert excerpt(b"caf\xc3\xa9 \xff!") == "café \ufffd!"
    assert excerpt("evil\u202etxt.exe".encode()) == "eviltxt.exe"
    assert excerpt(b"") == ""


def test_excerpt_is_limited() -> None:
    text = excerpt(b"x" * 10_000, limit=16)
    assert len(text) == 16 and text.endswith("…")
    assert excerpt(b"short", limit=16) == "short"
    assert excerpt(b"a" * 16, limit=16) == "a" * 16


@given(st.binary(max_size=2048), st.integers(1, 300))
def test_excerpt_is_short_printable_text(body: bytes, limit: int) -> None:
    text = excerpt(body, limit=limit)
    assert len(text) <= limit
    assert text.isprintable()


@pytest.mark.parametrize(
    ("header", "expected_ms"),
    [
        ("9" * 5_000, MAX_DELAY_MS),  # int() of over 4,300 digits raises ValueError
        (" " + "1" + "0" * 4_400 + " ", MAX_DELAY_MS),
        ("0" * 8_000 + "7", 7_000),  # leading zeros count for nothing
        ("1234567890", MAX_DELAY_MS),
        ("x" * 8_000, None),
        (http_date(NOW_S + 30) + " " * 100 + "x", None),  # too long to be a date
        ("Mon, 01 Jan 0001 00:00:00 +0100", None),  # before the epoch's range
        ("Fri, 31 Dec 9999 23:59:59 -1200", MAX_DELAY_MS),
    ],
)
def test_a_huge_or_garbage_retry_after_never_raises(header: str, expected_ms: int | None) -> None:
    outcome = judge(503, retry_after=header)
    assert outcome.verdict is Verdict.RETRY and outcome.retry_after_ms == expected_ms


@given(st.text(alphabet="0123456789", min_size=9, max_size=6_000))
def test_retry_after_of_many_digits_is_the_cap(digits: str) -> None:
    assert retry_after_ms("1" + digits, now_s=NOW_S, max_delay_ms=MAX_DELAY_MS) == MAX_DELAY_MS


@given(st.text(max_size=3_000))
def test_classify_never_raises_on_any_retry_after(header: str) -> None:
    outcome = judge(429, retry_after=header)
    assert outcome.retry_after_ms is None or 0 <= outcome.retry_after_ms <= MAX_DELAY_MS
