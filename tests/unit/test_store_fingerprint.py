"""Error fingerprints (store/fingerprint.py): the parts of an error that vary between occurrences
of one failure are masked, what names the failure is kept."""

from __future__ import annotations

import ipaddress
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schedd.store.fingerprint import FINGERPRINT, MAX_CHARS, fingerprint, normalise


@pytest.mark.parametrize(
    ("error", "normalised"),
    [
        (
            "connection failed: ClientConnectorError: Cannot connect to host 127.0.0.1:41234 "
            "ssl:default [Connect call failed ('127.0.0.1', 41234)]",
            "connection failed: ClientConnectorError: Cannot connect to host <ip> ssl:default "
            "[Connect call failed ('<ip>', <n>)]",
        ),
        (
            "http 500: upstream id 9f8e7d6c5b4a3210 took 1234 ms",
            "http 500: upstream id <hex> took <n> ms",
        ),
        ("HTTP 404: order 77 not found", "HTTP 404: order <n> not found"),
        (
            "timed out after 10s calling https://h.example/run/5?id=1",
            "timed out after <n>s calling <url>",
        ),
        (
            "job job_0193a1b2c3d4e5f6a7b8c9d0 has no request 3fa85f64-5717-4562-b3fc-2c963f66afa6",
            "job job_<hex> has no request <uuid>",
        ),
        ("redis.acme.example:6379 refused", "<host:port> refused"),
        ("[2001:db8::1]:443 and fe80::1 down", "<ip> and <ip> down"),
        ("flag 0x1F at 12:30:45", "flag <hex> at <n>:<n>:<n>"),
        ("deadbeef is a word, 123456 a number", "deadbeef is a word, <n> a number"),
        ("  spaced\n\tout  ", "spaced out"),
        (None, ""),
        ("", ""),
    ],
)
def test_what_varies_is_masked_and_what_names_the_failure_is_kept(
    error: str | None, normalised: str
) -> None:
    assert normalise(error) == normalised


def test_a_fingerprint_is_16_hex_digits_and_the_status_tells_failures_apart() -> None:
    assert FINGERPRINT.fullmatch(fingerprint("http 500: boom"))
    assert fingerprint("http 500: boom") != fingerprint("http 502: boom")
    assert fingerprint("order 1 lost") == fingerprint("order 22 lost")
    assert fingerprint(None) == fingerprint("") == fingerprint("   ")


def test_only_the_first_characters_count() -> None:
    head = "x" * MAX_CHARS
    assert fingerprint(head + "a") == fingerprint(head + "b")


# Each kind of value that varies, and what it masks to.
KINDS = {
    "<n>": st.integers(0, 10**12).map(str),
    "<uuid>": st.uuids().map(str),
    "<ip>": st.one_of(
        st.ip_addresses(v=4).map(str),
        st.tuples(st.ip_addresses(v=4), st.integers(1, 65535)).map(lambda p: f"{p[0]}:{p[1]}"),
        st.ip_addresses(v=6).map(lambda a: f"[{a}]:443"),
    ),
    "req_<hex>": st.integers(2**40, 2**64).map(lambda n: f"req_{n:x}a1"),
    "<url>": st.integers(0, 10**6).map(lambda n: f"https://hooks.example.com/run/{n}?k={n}"),
    "<host:port>": st.tuples(st.sampled_from(["db", "cache.internal"]), st.integers(1, 65535)).map(
        lambda p: f"{p[0]}:{p[1]}"
    ),
}


@given(st.data(), st.sampled_from(sorted(KINDS)))
def test_the_same_failure_with_other_values_has_one_fingerprint(
    data: st.DataObject, mask: str
) -> None:
    first, second = data.draw(KINDS[mask]), data.draw(KINDS[mask])
    template = "call to {} failed ({}): retry later"
    assert normalise(template.format(first, first)) == template.format(mask, mask)
    assert fingerprint(template.format(first, first)) == fingerprint(
        template.format(second, second)
    )


@given(st.text(max_size=300))
def test_masking_twice_changes_nothing(text: str) -> None:
    once = normalise(text)
    assert normalise(once) == once


def test_an_address_of_any_form_is_masked() -> None:
    for value in (
        str(uuid.uuid4()),
        str(ipaddress.ip_address("10.1.2.3")),
        "[::1]:8080",
        "2001:db8:85a3::8a2e:370:7334",
    ):
        assert normalise(f"to {value} now") in ("to <uuid> now", "to <ip> now")
