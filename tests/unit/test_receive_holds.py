"""ReceiveHolds' count of visible messages: a long poll woken by another receive's end proposes
from the count its node made, less what its receives took since, instead of counting again."""

from __future__ import annotations

from schedd.api.context import VISIBLE_FOR_S, QueueSignal, ReceiveHolds

KEY = ("t1", "q")


def test_a_count_is_used_less_what_receives_took_until_one_comes_back_short() -> None:
    holds = ReceiveHolds(QueueSignal())
    assert holds.visible(KEY, 10.0) is None  # never counted: the poll counts
    holds.counted(KEY, 500, 10.0)
    with holds.hold(KEY, 100):
        assert (holds.visible(KEY, 10.1), holds.held(KEY)) == (500, 100)
        holds.took(KEY, 100, 100)
    assert holds.visible(KEY, 10.2) == 400
    holds.took(KEY, 100, 40)  # fewer than asked: the count was wrong, count again
    assert holds.visible(KEY, 10.3) is None


def test_a_count_is_forgotten_after_its_time_and_names_one_queue() -> None:
    holds = ReceiveHolds(QueueSignal())
    holds.counted(KEY, 300, 10.0)
    assert holds.visible(("t1", "other"), 10.0) is None
    assert holds.visible(KEY, 10.0 + VISIBLE_FOR_S) == 300
    assert holds.visible(KEY, 10.0 + VISIBLE_FOR_S + 0.01) is None
    holds.took(("t1", "other"), 10, 0)  # no count for it: nothing to change
    assert holds.visible(("t1", "other"), 10.0) is None
