"""admission.py: per-tenant token buckets, one run at a time and a batch's runs at once."""

from __future__ import annotations

import random

import pytest

from schedd.admission import UNLIMITED, TenantBuckets

NOW_MS = 1_790_000_000_000


def test_a_bucket_holds_one_second_of_the_rate_and_refills_with_time() -> None:
    buckets = TenantBuckets()
    buckets.set_rates({"t1": 10})
    assert buckets.admit_many("t1", 25, NOW_MS) == 10
    assert not buckets.admit("t1", NOW_MS)
    assert buckets.admit_many("t1", 25, NOW_MS + 250) == 2  # 2.5 tokens: whole ones only
    assert buckets.available("t1", NOW_MS + 350) == 1  # the half left and one more


def test_a_rate_of_zero_admits_every_run() -> None:
    buckets = TenantBuckets()
    buckets.set_rates({"t1": 0})
    assert buckets.admit_many("t1", 10**6, NOW_MS) == 10**6
    assert buckets.available("t1", NOW_MS) == UNLIMITED


@pytest.mark.parametrize("seed", range(20))
def test_admitting_a_batch_at_once_is_admitting_its_runs_one_by_one(seed: int) -> None:
    rng = random.Random(seed)
    rates = {"t1": rng.choice([1, 7, 50, 5_000]), "t2": 0, "t3": rng.choice([3, 333])}
    one_by_one, at_once = TenantBuckets(), TenantBuckets()
    one_by_one.set_rates(rates)
    at_once.set_rates(rates)
    now_ms = NOW_MS
    for _ in range(200):
        now_ms += rng.choice([0, 0, 1, 37, 140, 1_000, 5_000])
        tenant_id, count = rng.choice(["t1", "t2", "t3", "t4"]), rng.randint(0, 700)
        admitted = sum(one_by_one.admit(tenant_id, now_ms) for _ in range(count))
        assert at_once.admit_many(tenant_id, count, now_ms) == admitted
        assert at_once._tokens == one_by_one._tokens  # to the last bit of each float
