"""The leader's lease plan (schedd/dispatch/leases.py plan_moves): every partition it is given
gets a live holder, counts even; a cell's plan covers its own range only."""

from __future__ import annotations

from collections import Counter

from schedd.dispatch.leases import plan_moves

NOW_MS = 1_790_000_000_000


def test_a_count_leases_every_partition_evenly() -> None:
    moves = plan_moves(16, {}, ["n1", "n2", "n3"], NOW_MS)
    assert sorted(m.partition for m in moves) == list(range(16))
    assert sorted(Counter(m.node_id for m in moves).values()) == [5, 5, 6]


def test_a_cells_range_leases_only_its_own_partitions() -> None:
    moves = plan_moves(range(512, 1024), {}, ["n1", "n2", "n3"], NOW_MS)
    assert sorted(m.partition for m in moves) == list(range(512, 1024))
    assert sorted(Counter(m.node_id for m in moves).values()) == [170, 171, 171]
