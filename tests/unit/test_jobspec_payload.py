"""The payload limit counts the bytes the store keeps and delivers: the stdlib's compact JSON,
where some floats take more room than in msgspec's shortest form (1e+16 against 1e16)."""

from __future__ import annotations

import json

import pytest

from schedd.errors import PayloadTooLarge
from schedd.jobspec import parse_job

NOW_MS = 1_790_000_000_000
BODY = {"schedule": {"run_at": "2030-01-01T00:00:00Z"}, "target": {"type": "queue", "name": "q"}}


def test_a_payload_is_measured_as_the_store_keeps_it() -> None:
    payload = [1e16] * 100  # stored as "1e+16" each: 6 bytes, where msgspec writes 4
    stored = len(json.dumps(payload, separators=(",", ":")).encode())
    spec = parse_job(BODY | {"payload": payload}, now_ms=NOW_MS, payload_limit=stored)
    assert spec.payload == payload
    with pytest.raises(PayloadTooLarge, match=f"is {stored} bytes"):
        parse_job(BODY | {"payload": payload}, now_ms=NOW_MS, payload_limit=stored - 1)
