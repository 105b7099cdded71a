"""metrics.observe_many: the same samples as observing one value that many times."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Histogram

from schedd import metrics


def _samples(histogram: Histogram) -> list[tuple[str, dict[str, str], float]]:
    return [
        (s.name, s.labels, s.value)
        for m in histogram.collect()
        for s in m.samples
        if "created" not in s.name
    ]


@pytest.mark.parametrize(("amount", "count"), [(0.0, 1), (0.3, 7), (2.5, 500), (1e9, 3)])
def test_observe_many_equals_observing_count_times(amount: float, count: int) -> None:
    buckets = (0.1, 0.5, 1.0, 5.0)
    one_step = Histogram("one", "h", buckets=buckets, registry=CollectorRegistry())
    each = Histogram("each", "h", buckets=buckets, registry=CollectorRegistry())
    one_step.observe(0.2)
    each.observe(0.2)
    metrics.observe_many(one_step, amount, count)
    for _ in range(count):
        each.observe(amount)
    got = [(n.replace("one", "each"), lab, v) for n, lab, v in _samples(one_step)]
    want = _samples(each)
    assert [s for s in got if s[0] != "each_sum"] == [s for s in want if s[0] != "each_sum"]
    [got_sum] = [v for n, _, v in got if n == "each_sum"]
    [want_sum] = [v for n, _, v in want if n == "each_sum"]
    assert got_sum == pytest.approx(want_sum)  # one multiplication, not `count` additions


def test_observe_many_falls_back_on_a_labelled_parent() -> None:
    parent = Histogram("lab", "h", ["k"], registry=CollectorRegistry())
    with pytest.raises(ValueError):  # observing a parent of labelled children is an error
        metrics.observe_many(parent, 1.0, 2)
