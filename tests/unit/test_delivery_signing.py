"""Standard Webhooks signing, checked by a verifier written here from the spec."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schedd.delivery.signing import (
    decode_secret,
    sign,
    signature_header,
    webhook_headers,
)

# The example of the Standard Webhooks reference libraries (their "sign function" test).
SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SPEC_TS = 1614265330
SPEC_BODY = b'{"test": 2432232314}'
SPEC_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

OLD = "whsec_" + base64.b64encode(b"old-key-0123456789abcdef").decode()
NEW = "whsec_" + base64.b64encode(b"new-key-fedcba9876543210").decode()
NOW = 1_790_000_000
TOLERANCE_S = 5 * 60


def verify(secret: str, headers: Mapping[str, str], body: bytes, *, now_s: int) -> bool:
    """A receiver per the spec: strip whsec_, base64-decode, HMAC, constant-time compare."""
    try:
        msg_id = headers["webhook-id"]
        timestamp = int(headers["webhook-timestamp"])
        signatures = headers["webhook-signature"]
    except (KeyError, ValueError):
        return False
    if abs(now_s - timestamp) > TOLERANCE_S:
        return False
    key = base64.b64decode(secret.split("_", 1)[1])
    signed = msg_id.encode() + b"." + str(timestamp).encode() + b"." + body
    expected = base64.b64encode(hmac.digest(key, signed, hashlib.sha256))
    for entry in signatures.split(" "):
        version, _, value = entry.partition(",")
        if version == "v1" and hmac.compare_digest(value.encode(), expected):
            return True
    return False


def headers_for(secrets: list[str], body: bytes = b'{"a":1}') -> dict[str, str]:
    return webhook_headers(secrets, "job_1:2026-09-21T14:13:20Z", NOW, body)


def test_the_spec_example_signs_to_its_published_signature() -> None:
    assert sign(SPEC_SECRET, SPEC_ID, SPEC_TS, SPEC_BODY) == SPEC_SIGNATURE
    headers = webhook_headers([SPEC_SECRET], SPEC_ID, SPEC_TS, SPEC_BODY)
    assert verify(SPEC_SECRET, headers, SPEC_BODY, now_s=SPEC_TS)


def test_headers_carry_id_timestamp_and_signature() -> None:
    headers = headers_for([NEW])
    assert headers["webhook-id"] == "job_1:2026-09-21T14:13:20Z"
    assert headers["webhook-timestamp"] == str(NOW)
    assert headers["webhook-signature"].startswith("v1,")
    assert set(headers) == {"webhook-id", "webhook-timestamp", "webhook-signature"}
    assert verify(NEW, headers, b'{"a":1}', now_s=NOW)


def test_during_rotation_both_secrets_verify() -> None:
    headers = headers_for([OLD, NEW])
    assert len(headers["webhook-signature"].split(" ")) == 2
    assert verify(OLD, headers, b'{"a":1}', now_s=NOW)
    assert verify(NEW, headers, b'{"a":1}', now_s=NOW)
    other = "whsec_" + base64.b64encode(b"someone-else").decode()
    assert not verify(other, headers, b'{"a":1}', now_s=NOW)


def test_after_rotation_the_old_secret_no_longer_verifies() -> None:
    headers = headers_for([NEW])
    assert not verify(OLD, headers, b'{"a":1}', now_s=NOW)


def test_the_same_secret_twice_signs_once() -> None:
    assert signature_header([NEW, NEW], "m", NOW, b"") == sign(NEW, "m", NOW, b"")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("webhook-id", "job_2:2026-09-21T14:13:20Z"),
        ("webhook-timestamp", str(NOW + 1)),
        ("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="),
        ("webhook-signature", "v2,AAAA"),
    ],
)
def test_a_tampered_header_fails(field: str, value: str) -> None:
    headers = headers_for([NEW])
    headers[field] = value
    assert not verify(NEW, headers, b'{"a":1}', now_s=NOW)


@pytest.mark.parametrize("body", [b'{"a":2}', b'{"a":1} ', b"", b'{"a": 1}'])
def test_a_tampered_body_fails(body: bytes) -> None:
    assert not verify(NEW, headers_for([NEW]), body, now_s=NOW)


def test_a_stale_or_future_timestamp_fails_the_tolerance() -> None:
    headers = headers_for([NEW])
    assert verify(NEW, headers, b'{"a":1}', now_s=NOW + TOLERANCE_S)
    assert not verify(NEW, headers, b'{"a":1}', now_s=NOW + TOLERANCE_S + 1)
    assert not verify(NEW, headers, b'{"a":1}', now_s=NOW - TOLERANCE_S - 1)


@given(
    body=st.binary(max_size=512), msg_id=st.from_regex(r"[A-Za-z0-9_:.\-]{1,40}", fullmatch=True)
)
def test_any_body_and_id_verify(body: bytes, msg_id: str) -> None:
    headers = webhook_headers([OLD, NEW], msg_id, NOW, body)
    assert verify(NEW, headers, body, now_s=NOW)
    assert not verify(NEW, headers, body + b"x", now_s=NOW)


def test_decode_secret() -> None:
    assert decode_secret(NEW) == b"new-key-fedcba9876543210"


@pytest.mark.parametrize(
    "secret", ["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not*base64", "whsec_", "whsec_@@@@"]
)
def test_bad_secrets_are_refused_without_quoting_them(secret: str) -> None:
    with pytest.raises(ValueError) as info:
        sign(secret, "m", NOW, b"")
    remainder = secret.removeprefix("whsec_")
    assert not remainder or remainder not in str(info.value)


@pytest.mark.parametrize(("msg_id", "ts"), [("", NOW), ("a\r\nb", NOW), ("m", -1)])
def test_bad_ids_and_timestamps_are_refused(msg_id: str, ts: int) -> None:
    with pytest.raises(ValueError):
        sign(NEW, msg_id, ts, b"")


def test_no_secrets_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one"):
        signature_header([], "m", NOW, b"")
