"""A claim copies a job's target, payload and retry policy as slices of the stored spec's text:
the same text compact_json gives each value after a parse (the code before parsed the spec and
re-encoded them), for any JSON the API accepts, so replicas on either code agree byte for byte."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from schedd.store import ledger
from schedd.store.command import compact_json

# What a payload may hold after the API's checks: finite numbers, any text (no lone surrogates).
TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
LEAF = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
JSON = st.recursive(
    LEAF | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)
TARGETS = st.sampled_from(
    [
        {"type": "queue", "name": "digests"},
        {"type": "http", "url": "https://example.com/hook?a=1&b=é", "headers": {"X-K": "v\n"}},
    ]
)


@given(target=TARGETS, payload=JSON, retry=JSON, has_payload=st.booleans(), extra=JSON)
def test_slices_equal_the_parsed_and_reencoded_values(
    target: dict[str, Any], payload: Any, retry: Any, has_payload: bool, extra: Any
) -> None:
    spec = {"schedule": {"run_at": "2026-12-02T10:00:00Z"}, "target": target, "retry": retry}
    if has_payload:
        spec["payload"] = payload
    spec["z_later"] = extra  # fields around the copied ones are skipped, whatever they hold
    stored = compact_json(spec)

    job = ledger.job_delivery(stored)

    parsed = json.loads(stored)
    assert job.target == compact_json(parsed["target"])
    assert job.payload == compact_json(parsed.get("payload"))
    assert job.retry == compact_json(parsed["retry"])
    assert (job.kind, job.queue) == (target["type"], target.get("name", msgspec.UNSET))


def test_a_queue_target_without_a_name_fails_as_the_dict_read_did() -> None:
    """Not a spec the API writes; apply records the same error text as before (KeyError)."""
    job = ledger.job_delivery(compact_json({"target": {"type": "queue"}, "retry": {}}))
    run = ledger.NewRun("j1", 1, "t1", 1, None)
    with pytest.raises(KeyError) as raised:
        ledger.claimed_delivery(run, partition=0, job=job, now_ms=1)
    assert str(raised.value) == "'name'"
