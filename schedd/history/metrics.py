"""What a node still lacks of the closed history the log lists, as scrape-time gauges."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from schedd.history.fetcher import SegmentFetcher


class HistoryCollector(Collector):
    def __init__(self, fetcher: SegmentFetcher) -> None:
        self._fetcher = fetcher

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "schedd_history_missing_segments",
            "Closed history segments the log lists that this node has not fetched yet",
            value=self._fetcher.missing,
        )
        yield GaugeMetricFamily(
            "schedd_history_missing_bytes",
            "Bytes of those segments still to fetch, as the peers offer them (0: none offered)",
            value=self._fetcher.missing_bytes,
        )
