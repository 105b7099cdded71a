"""benchmarks/compare.py's pure parts: the summary of first deliveries, T, ratios and the table."""

from __future__ import annotations

from typing import Any

from benchmarks.compare import due_at, latency_row, ratios, single_table, summarize, table


def test_summary_counts_lost_twice_and_early_and_drains_to_the_last_first_delivery() -> None:
    deliveries = [("a", 99.5), ("b", 100.2), ("a", 101.0), ("c", 103.25), ("b", 100.1)]
    summary = summarize(deliveries, {"a", "b", "c", "d"}, due_s=100.0)
    assert summary["received"] == 3
    assert summary["lost"] == 1  # d
    assert summary["twice"] == 2  # a and b again
    assert summary["early"] == 1  # a, first seen before T
    assert summary["drain_s"] == 3.25
    assert summary["first"] == [-0.5, 0.1, 3.25]  # b's first delivery is the earlier one
    assert summary["unexpected"] == 0


def test_summary_of_nothing_received_and_of_unknown_keys() -> None:
    summary = summarize([("x", 101.0)], {"a"}, due_s=100.0)
    assert (summary["received"], summary["lost"], summary["unexpected"]) == (0, 1, 1)
    assert summary["drain_s"] is None
    assert summary["first"] == []


def test_due_at_is_a_whole_second_after_the_estimated_creation_and_the_lead() -> None:
    assert due_at(1000.2, 4_000, 1000.0, None) == 1017  # 6 s to create, then at least 10 s
    assert due_at(1000.2, 100_000, 1000.0, None) == 1226  # 150 s to create, then half of it
    assert due_at(1000.2, 10_000, 1000.0, 3.0) == 1019  # 15 s to create, then the lead given


def row(system: str, drain: float | None, rate: float, timed_out: bool = False) -> dict[str, Any]:
    return {
        "system": system,
        "n": 100_000,
        "create_rate": rate,
        "drain_s": drain,
        "timed_out": timed_out,
        "lost": 0,
        "twice": 0,
        "early": 0,
    }


def test_ratios_are_to_bullmq_and_the_table_shows_them() -> None:
    rows = [row("bullmq", 15.0, 10_000.0), row("schedd3", 60.0, 2_500.0), row("schedd1", None, 1)]
    rows[2]["timed_out"] = True
    rows[1]["peak_rss_mb"] = [210, 198, 205]
    rows[1]["node_cpu_us"] = 346.2
    ratios(rows)
    assert (rows[0]["drain_s_ratio"], rows[0]["create_rate_ratio"]) == (1.0, 1.0)
    assert (rows[1]["drain_s_ratio"], rows[1]["create_rate_ratio"]) == (4.0, 0.25)
    assert rows[2]["drain_s_ratio"] is None
    lines = table(rows).splitlines()
    assert lines[1].endswith("| 0 | 0 | 0 | - | -")  # BullMQ: no node processes sampled
    assert lines[2] == (
        "schedd3 | 100,000 | 2,500 | 0.25 | 60.0 | 4.0 | 0 | 0 | 0 | 210/198/205 | 346.2"
    )
    assert lines[3].split(" | ")[4] == "timeout"


def test_without_bullmq_there_are_no_ratios() -> None:
    rows = [row("schedd1", 20.0, 3_000.0)]
    ratios(rows)
    assert rows[0]["drain_s_ratio"] is None and rows[0]["create_rate_ratio"] is None


def test_single_creates_rate_percentiles_and_ratio() -> None:
    bullmq = latency_row("bullmq", 1_000, 0.5, [float(i % 10) for i in range(1_000)])
    assert (bullmq["rate"], bullmq["p50_ms"], bullmq["p99_ms"]) == (2_000.0, 4.5, 9.0)
    schedd = latency_row("schedd3", 100, 0.5, [20.0] * 100) | {"node_cpu_us": 900.0}
    lines = single_table([bullmq, schedd]).splitlines()
    assert lines[1].startswith("bullmq | 2,000 | 1.000 |")
    assert lines[2] == "schedd3 | 200 | 0.100 | 20.0 | 20.0 | 900.0"
