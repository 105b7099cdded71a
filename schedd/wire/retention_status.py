"""The answer of GET /v1/admin/retention: what one node keeps under its retention, its data
files and its disk (api/retention.py encodes it, schedctl gc status reads it)."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import UNSET, Meta, UnsetType

from schedd.wire.fields import Count, Instant
from schedd.wire.tenants import Retention

KINDS_SHOWN = ("runs", "jobs", "deadletters", "messages", "audit")  # store.retained's order
ROW_COUNT_CAP = 100_000  # counting walks an index (~1 us a row): past this, "at least"


class RetainedKind(msgspec.Struct, frozen=True, kw_only=True):
    """What the store holds of one kind."""

    kind: Annotated[
        str,
        Meta(
            description="jobs: finished (completed or cancelled) jobs, kept as long as runs.",
            extra_json_schema={"enum": list(KINDS_SHOWN)},
        ),
    ]
    rows: Annotated[int, Meta(extra_json_schema={"minimum": 0, "maximum": ROW_COUNT_CAP})]
    rows_capped: Annotated[
        bool, Meta(description=f"rows is a lower bound: counting stops at {ROW_COUNT_CAP:,}.")
    ]
    oldest: Annotated[
        Instant | None,
        Meta(
            description="Where the oldest row's retention counts from (a run's or job's finish, "
            "a dead letter's creation, a message's visible time, an audit record's time); null "
            "when there is none."
        ),
    ]


class SegmentView(msgspec.Struct, frozen=True, kw_only=True):
    """One history segment (issue 35 §1): a file of one family's rows that ended in one hour,
    `data_dir/history/<name>.db`, as the replicated `segments` table lists it."""

    name: str
    family: Annotated[str, Meta(extra_json_schema={"enum": ["runs", "deadletters", "audit"]})]
    period_start: Instant
    state: Annotated[
        str,
        Meta(
            description="open: moves may still add rows; closed: immutable, its rows' digest "
            "recorded (deleted whole once older than its family's retention).",
            extra_json_schema={"enum": ["open", "closed"]},
        ),
    ]
    rows: Count
    bytes: Annotated[
        int | None,
        Meta(description="The file's size on this node; null when it is not here (yet)."),
    ]


class FileSizes(msgspec.Struct, frozen=True, kw_only=True):
    """Bytes in the data directory: the database with its WAL, the Raft journal, the
    snapshot."""

    database: Count
    journal: Count
    snapshot: Count


class DiskState(msgspec.Struct, frozen=True, kw_only=True):
    """The data directory's file system on this node: min_free_bytes is [storage] min_free in
    bytes (a percentage is taken of total_bytes); low when free_bytes is below it."""

    free_bytes: Count
    total_bytes: Count
    min_free_bytes: Count
    low: bool


class RetentionStatus(msgspec.Struct, frozen=True, kw_only=True):
    """This node's [retention], its store per kind, its data files and disk, and whether
    writes are accepted."""

    node_id: str
    retention: Annotated[Retention, Meta(description="This node's [retention].")]
    kinds: Annotated[
        list[RetainedKind],
        Meta(
            description="What the store holds, one entry per kind in this order: "
            f"{', '.join(KINDS_SHOWN)}.",
            # documented, not enforced when read: a later kind must not break a client
            extra_json_schema={"minItems": len(KINDS_SHOWN), "maxItems": len(KINDS_SHOWN)},
        ),
    ]
    last_prune: Annotated[
        Instant | None,
        Meta(
            description="The time of the last prune command applied (the leader proposes "
            "them, paced); null before the first."
        ),
    ]
    # These four are absent on a node without a storage guard (no data directory to watch).
    files: FileSizes | UnsetType = UNSET
    disk: DiskState | UnsetType = UNSET
    writes: (
        Annotated[
            str,
            Meta(
                description="refused while this node is low on disk, or a majority of the nodes "
                "are: writes that add data answer 507 storage_low.",
                extra_json_schema={"enum": ["accepted", "refused"]},
            ),
        ]
        | UnsetType
    ) = UNSET
    reason: (
        Annotated[str | None, Meta(description="Why writes are refused; null when accepted.")]
        | UnsetType
    ) = UNSET
    segments: (
        Annotated[
            list[SegmentView],
            Meta(description="The history segments, oldest first (absent: none yet)."),
        ]
        | UnsetType
    ) = UNSET
