"""The consumer memory behind GET /v1/queues: per tenant, bounded, forgetting after 5 minutes."""

from __future__ import annotations

from schedd.api.consumers import MAX_AGE_MS, RecentConsumers, consumer_json

T0 = 1_796_000_000_000


def test_a_consumer_is_remembered_per_queue_with_its_last_time() -> None:
    seen = RecentConsumers()
    seen.saw("t1", "mail", "w1", T0)
    seen.saw("t1", "mail", "w2", T0 + 1)
    seen.saw("t1", "mail", "w1", T0 + 2)  # seen again: moves to the newest end
    seen.saw("t1", "jobs", "w1", T0 + 3)
    assert seen.recent("t1", T0 + 3) == [
        ("mail", "w2", T0 + 1),
        ("mail", "w1", T0 + 2),
        ("jobs", "w1", T0 + 3),
    ]


def test_tenants_are_kept_apart() -> None:
    seen = RecentConsumers()
    seen.saw("t1", "mail", "w1", T0)
    seen.saw("t2", "mail", "w2", T0)
    assert seen.recent("t1", T0) == [("mail", "w1", T0)]
    assert seen.recent("t2", T0) == [("mail", "w2", T0)]
    assert seen.recent("t3", T0) == []


def test_entries_older_than_the_window_are_dropped() -> None:
    seen = RecentConsumers()
    seen.saw("t1", "mail", "old", T0)
    seen.saw("t1", "mail", "new", T0 + 60_000)
    assert seen.recent("t1", T0 + MAX_AGE_MS) == [("mail", "old", T0), ("mail", "new", T0 + 60_000)]
    assert seen.recent("t1", T0 + MAX_AGE_MS + 1) == [("mail", "new", T0 + 60_000)]
    assert seen.recent("t1", T0 + 60_000 + MAX_AGE_MS + 1) == []


def test_a_tenant_nobody_asks_about_is_swept_by_other_tenants_receives() -> None:
    seen = RecentConsumers(max_age_ms=1_000)
    seen.saw("quiet", "mail", "w1", T0)
    seen.saw("busy", "mail", "w2", T0 + 5_000)  # a sweep: quiet's only entry is too old
    assert list(seen._tenants) == ["busy"]


def test_past_the_bound_the_least_recently_seen_is_forgotten() -> None:
    seen = RecentConsumers(max_per_tenant=3)
    for i in range(5):
        seen.saw("t1", "mail", f"w{i}", T0 + i)
    seen.saw("t2", "mail", "other", T0)
    assert [c for _, c, _ in seen.recent("t1", T0 + 5)] == ["w2", "w3", "w4"]
    assert seen.recent("t2", T0 + 5) == [("mail", "other", T0)]  # another tenant's bound


def test_consumer_json_gives_an_rfc3339_instant_and_the_node() -> None:
    assert consumer_json("mail", "w1", 1_796_000_000_250, "n2") == {
        "queue": "mail",
        "consumer": "w1",
        "last_seen": "2026-11-30T00:53:20.250Z",
        "node": "n2",
    }
