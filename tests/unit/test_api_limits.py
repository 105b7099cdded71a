"""schedd/api/limits.py: the budget of Raft barrier entries that unknown tokens may cause."""

from __future__ import annotations

import pytest

from schedd.api.limits import AddressBudget


def spend(budget: AddressBudget, address: str, times: int, now_s: float = 100.0) -> int:
    return sum(budget.allow(address, now_s) for _ in range(times))


def test_an_address_gets_its_burst_then_its_rate() -> None:
    budget = AddressBudget(2.0, 4, node_per_s=1000.0, node_burst=1000)
    assert spend(budget, "192.0.2.1", 10) == 4
    assert spend(budget, "192.0.2.1", 10, now_s=101.0) == 2  # one second later: two more
    assert spend(budget, "192.0.2.2", 10) == 4  # another address has its own


def test_many_addresses_together_stay_within_the_node_budget() -> None:
    budget = AddressBudget(2.0, 4, node_per_s=20.0, node_burst=40)
    allowed = sum(spend(budget, f"10.0.{i // 256}.{i % 256}", 4) for i in range(1000))
    assert allowed == 40
    allowed = sum(spend(budget, f"10.1.{i // 256}.{i % 256}", 4, now_s=101.0) for i in range(1000))
    assert allowed == 20


def test_ipv6_addresses_of_one_64_share_a_budget() -> None:
    budget = AddressBudget(2.0, 4, node_per_s=1000.0, node_burst=1000)
    assert spend(budget, "2001:db8:1:2::1", 3) == 3
    assert spend(budget, "2001:db8:1:2:ffff::9", 3) == 1  # the same /64
    assert spend(budget, "2001:db8:1:3::1", 3) == 3  # the next /64 is another client
    assert spend(budget, "::ffff:192.0.2.7", 5) == 4  # v4-mapped: the IPv4 address itself
    assert spend(budget, "192.0.2.7", 1) == 0


def test_a_flood_of_new_addresses_forgets_the_oldest_not_an_active_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(AddressBudget, "MAX_ADDRESSES", 3)
    budget = AddressBudget(0.001, 2, node_per_s=1000.0, node_burst=1000)
    assert spend(budget, "192.0.2.1", 5) == 2  # spent
    for i in range(2, 10):
        spend(budget, f"192.0.2.{i}", 1)
        assert spend(budget, "192.0.2.1", 1) == 0  # still spent: it was seen most recently
