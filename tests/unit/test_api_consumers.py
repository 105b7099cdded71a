"""The consumer memory behind GET /v1/queues: per tenant and overall bounded, forgetting after
5 minutes of the monotonic clock whatever the wall clock does."""

from __future__ import annotations

import msgspec

from schedd.api.consumers import MAX_AGE_S, RecentConsumers, consumer_json

T0 = 1_796_000_000_000


class Monotonic:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def test_a_consumer_is_remembered_per_queue_with_its_last_time() -> None:
    seen = RecentConsumers()
    seen.saw("t1", "mail", "w1", T0)
    seen.saw("t1", "mail", "w2", T0 + 1)
    seen.saw("t1", "mail", "w1", T0 + 2)  # seen again: moves to the newest end
    seen.saw("t1", "jobs", "w1", T0 + 3)
    assert seen.recent("t1") == [
        ("mail", "w2", T0 + 1),
        ("mail", "w1", T0 + 2),
        ("jobs", "w1", T0 + 3),
    ]


def test_tenants_are_kept_apart() -> None:
    seen = RecentConsumers()
    seen.saw("t1", "mail", "w1", T0)
    seen.saw("t2", "mail", "w2", T0)
    assert seen.recent("t1") == [("mail", "w1", T0)]
    assert seen.recent("t2") == [("mail", "w2", T0)]
    assert seen.recent("t3") == []


def test_entries_older_than_the_window_are_dropped() -> None:
    clock = Monotonic()
    seen = RecentConsumers(monotonic=clock)
    seen.saw("t1", "mail", "old", T0)
    clock.now_s += 60
    seen.saw("t1", "mail", "new", T0 + 60_000)
    clock.now_s += MAX_AGE_S - 60
    assert seen.recent("t1") == [("mail", "old", T0), ("mail", "new", T0 + 60_000)]
    clock.now_s += 0.001
    assert seen.recent("t1") == [("mail", "new", T0 + 60_000)]
    clock.now_s += 60
    assert seen.recent("t1") == [] and len(seen) == 0


def test_expiry_follows_the_monotonic_clock_when_the_wall_clock_steps_back() -> None:
    clock = Monotonic()
    seen = RecentConsumers(max_age_s=10, monotonic=clock)
    seen.saw("t1", "mail", "before", T0)
    clock.now_s += 5
    seen.saw("t1", "mail", "after", T0 - 3_600_000)  # the wall clock went back an hour
    clock.now_s += 6
    assert seen.recent("t1") == [("mail", "after", T0 - 3_600_000)]  # shown as the clock said
    clock.now_s += 5
    assert seen.recent("t1") == []


def test_a_tenant_nobody_asks_about_is_swept_by_other_tenants_receives() -> None:
    clock = Monotonic()
    seen = RecentConsumers(max_age_s=1, monotonic=clock)
    seen.saw("quiet", "mail", "w1", T0)
    clock.now_s += 5
    seen.saw("busy", "mail", "w2", T0 + 5_000)  # quiet's only entry is too old
    assert list(seen._tenants) == ["busy"] and len(seen) == 1


def test_past_the_tenant_bound_the_least_recently_seen_is_forgotten() -> None:
    seen = RecentConsumers(max_per_tenant=3)
    for i in range(5):
        seen.saw("t1", "mail", f"w{i}", T0 + i)
    seen.saw("t2", "mail", "other", T0)
    assert [c for _, c, _ in seen.recent("t1")] == ["w2", "w3", "w4"]
    assert seen.recent("t2") == [("mail", "other", T0)]  # another tenant's bound
    assert len(seen) == 4


def test_past_the_overall_bound_the_least_recently_seen_of_any_tenant_is_forgotten() -> None:
    seen = RecentConsumers(max_per_tenant=3, max_entries=4)
    seen.saw("t1", "mail", "a", T0)
    seen.saw("t2", "mail", "b", T0 + 1)
    seen.saw("t1", "mail", "c", T0 + 2)
    seen.saw("t2", "mail", "d", T0 + 3)
    seen.saw("t1", "mail", "a", T0 + 4)  # seen again: now the most recent
    seen.saw("t3", "mail", "e", T0 + 5)  # over 4: t2's "b" goes
    assert len(seen) == 4
    assert seen.recent("t2") == [("mail", "d", T0 + 3)]
    assert [c for _, c, _ in seen.recent("t1")] == ["c", "a"]
    seen.saw("t3", "mail", "f", T0 + 6)  # over 4 again: t1's "c"
    seen.saw("t3", "mail", "g", T0 + 7)  # and t2's "d": a tenant left with none is dropped
    assert seen.recent("t1") == [("mail", "a", T0 + 4)]
    assert "t2" not in seen._tenants and len(seen) == 4


def test_consumer_json_gives_an_rfc3339_instant_and_the_node() -> None:
    seen = consumer_json("mail", "w1", 1_796_000_000_250, "n2")
    assert msgspec.json.encode(seen) == msgspec.json.encode(
        {"queue": "mail", "consumer": "w1", "last_seen": "2026-11-30T00:53:20.250Z", "node": "n2"}
    )
    assert msgspec.json.encode(seen.in_queue()) == msgspec.json.encode(
        {"consumer": "w1", "last_seen": "2026-11-30T00:53:20.250Z", "node": "n2"}
    )
