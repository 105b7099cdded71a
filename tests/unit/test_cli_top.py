"""`schedctl top`'s arithmetic: counter rates over the nodes, and p99 over an interval."""

from __future__ import annotations

from schedd.cli.ctl.top import Sample, rate, window_p99


def sample(at_s: float, **series: float) -> Sample:
    s = Sample(at_s)
    for key, value in series.items():
        name, _, label = key.partition("__")
        labels = tuple(sorted([tuple(label.split("_eq_"))])) if label else ()  # le_eq_0.5
        s.values[(name, labels)] = value  # type: ignore[index]
    return s


def test_rates_sum_the_nodes_and_ignore_restarts_and_new_nodes() -> None:
    before = {"n1": sample(10, c=100), "n2": sample(10, c=50)}
    after = {"n1": sample(12, c=300), "n2": sample(12, c=10), "n3": sample(12, c=999)}
    assert rate(before, after, "c") == 100.0  # n1: 200 in 2 s; n2 restarted; n3 unseen before


def test_p99_is_the_bound_of_the_bucket_holding_it_in_the_interval() -> None:
    def hist(at_s: float, fast: float, slow: float, total: float) -> Sample:
        return sample(
            at_s,
            **{
                "h_bucket__le_eq_0.1": fast,
                "h_bucket__le_eq_1.0": slow,
                "h_bucket__le_eq_+Inf": total,
            },
        )

    before = {"n1": hist(0, 1000, 1000, 1000)}  # old observations must not count
    after = {"n1": hist(5, 1098, 1100, 1100)}  # 100 new: 98 under 0.1 s, 2 under 1 s
    assert window_p99(before, after, "h") == 1.0
    assert window_p99(after, after, "h") is None  # nothing observed in between
