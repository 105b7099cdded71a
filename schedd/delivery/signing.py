"""Standard Webhooks signatures: the `webhook-id`, `-timestamp` and `-signature` headers.

Pure: no clock and no I/O; the caller supplies the timestamp. Errors never quote a secret.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Sequence

SECRET_PREFIX = "whsec_"


def decode_secret(secret: str) -> bytes:
    """The HMAC key inside a `whsec_<base64>` signing secret."""
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError(f"signing secret must start with {SECRET_PREFIX!r}")
    try:
        key = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except binascii.Error:
        raise ValueError("signing secret is not valid base64 after the prefix") from None
    if not key:
        raise ValueError("signing secret has an empty key")
    return key


def sign(secret: str, msg_id: str, timestamp_s: int, body: bytes) -> str:
    """`v1,<base64 HMAC-SHA256(key, "<msg_id>.<timestamp_s>.<body>")>`."""
    if not msg_id or not msg_id.isprintable() or timestamp_s < 0:
        raise ValueError("msg_id must be printable text and timestamp_s not negative")
    content = f"{msg_id}.{timestamp_s}.".encode() + body
    digest = hmac.new(decode_secret(secret), content, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def signature_header(secrets: Sequence[str], msg_id: str, timestamp_s: int, body: bytes) -> str:
    """One signature per secret, space-separated (both keys sign during a rotation)."""
    if not secrets:
        raise ValueError("at least one signing secret is needed")
    unique = dict.fromkeys(secrets)
    return " ".join(sign(secret, msg_id, timestamp_s, body) for secret in unique)


def webhook_headers(
    secrets: Sequence[str], msg_id: str, timestamp_s: int, body: bytes
) -> dict[str, str]:
    """The three Standard Webhooks headers for one request."""
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp_s),
        "webhook-signature": signature_header(secrets, msg_id, timestamp_s, body),
    }
