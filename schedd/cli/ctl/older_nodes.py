"""The answers schedctl reads whose wire struct gained a required field after the first
nodes shipped: here that field has a default, so a node of an earlier version still answers
(a rolling upgrade runs old and new nodes side by side). Each names the field and when it came.
"""

from __future__ import annotations

import msgspec

from schedd.wire.cluster import Cluster, Members
from schedd.wire.fields import Count, NextCursor
from schedd.wire.queues import ConsumerView, QueueView
from schedd.wire.tenants import TenantView


class ClusterAnswer(Cluster, frozen=True, kw_only=True):
    """GET /v1/cluster: `members` came on 2026-11-30 (668eb8d)."""

    members: Members = msgspec.field(default_factory=list)


class TenantRow(TenantView, frozen=True, kw_only=True):
    """A tenant as GET /v1/tenants lists it: `retention` came on 2026-12-01 (17dc7aa)."""

    retention: dict[str, str] = msgspec.field(default_factory=dict)


class Tenants(msgspec.Struct, frozen=True, kw_only=True):
    """A page of tenants."""

    tenants: list[TenantRow]
    next_cursor: NextCursor


class QueueCounts(QueueView, kw_only=True):
    """A queue as GET /v1/queues lists it: `delayed` came on 2026-11-30 (7b19c5b),
    `oldest_age_s` and `consumers` on 2026-12-02 (75c5ab8)."""

    delayed: Count = 0
    oldest_age_s: float | None = None
    consumers: list[ConsumerView] = msgspec.field(default_factory=list)


class Queues(msgspec.Struct, frozen=True, kw_only=True):
    """GET /v1/queues: `partial` came on 2026-12-02 (75c5ab8)."""

    queues: list[QueueCounts]
    partial: bool = False
