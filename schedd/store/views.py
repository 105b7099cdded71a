"""The store's own read models that are not yet an answer: a queue's counts, added up by
queue_reads as it reads. The API's answers are schedd.wire's structs."""

from __future__ import annotations

import msgspec


class QueueSummary(msgspec.Struct, kw_only=True):
    """A built-in queue's counts (queue_reads.queue_summaries adds them up as it reads, hence
    not frozen): messages ready, in flight and delayed, its dead letters, and the age of its
    oldest ready or in-flight message (None without one). A new one is an empty queue."""

    name: str
    ready: int = 0
    in_flight: int = 0
    delayed: int = 0
    dead: int = 0
    oldest_age_s: float | None = None
