"""The answers of the cluster, node and audit routes, and the body of adding a node."""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from schedd.bodies import Body
from schedd.model import RaftRole
from schedd.wire.fields import Count, HistoryComplete, Instant, NextCursor

Role = RaftRole  # what a node says it is
RoleText = Annotated[  # an answer's role: documented, read as any text (a newer node's too)
    str, Meta(extra_json_schema={"enum": list(typing.get_args(RaftRole))})
]
Members = list[str]


class ClusterNode(msgspec.Struct, frozen=True, kw_only=True):
    """A member: its addresses, role, health, the partitions it holds leases on, and how far it
    has applied (null: the leader has not heard)."""

    node_id: str
    api: str | None  # None: not registered yet
    raft: str
    role: Annotated[str, Meta(extra_json_schema={"enum": ["leader", "follower"]})]
    healthy: bool
    partitions: list[Count]
    applied_index: int | None


class Cluster(msgspec.Struct, frozen=True, kw_only=True):
    """Leader and nodes."""

    leader: str | None
    members: Annotated[
        Members,
        Meta(
            description="Raft addresses of the group's members, as this node knows them "
            "(dynamic membership: its journal, not its config)."
        ),
    ]
    nodes: list[ClusterNode]
    cell: Annotated[
        str | UnsetType,
        Meta(description="Only on a cell ([cells]): the cell these nodes form (GET /v1/cells)."),
    ] = UNSET


class NodeToAdd(Body):
    raft: Annotated[
        str, Meta(description="The new node's Raft address, host:port (IPv6 in brackets).")
    ]

    # raft.membership.parse_address's sentence (it checks the address: host, port 1-65535).
    field_messages: ClassVar[Mapping[str, str]] = {
        "raft": "must be a Raft address like '10.0.0.4:9701', got {value!r}",
    }


class NodeAdded(msgspec.Struct, frozen=True, kw_only=True):
    added: str
    members: Members


class NodeRemoved(msgspec.Struct, frozen=True, kw_only=True):
    removed: str
    node_id: str | None
    members: Members


class SteppedDown(msgspec.Struct, frozen=True, kw_only=True):
    leader: str


class AdminState(msgspec.Struct, frozen=True, kw_only=True):
    """This node's Raft state and the digest of its replicated tables."""

    node_id: str
    role: RoleText
    leader: str | None
    term: Count
    applied_index: Count
    digest: Annotated[str, Meta(description="Hash of the replicated tables at applied_index.")]


class AuditRecord(msgspec.Struct, frozen=True, kw_only=True):
    """Who did what, when, to which job; `detail` is the action's own, free-form JSON."""

    seq: Annotated[int, Meta(ge=1)]
    at: Instant
    tenant_id: str | None  # None: a cluster-wide action (the admin's)
    actor: Annotated[str, Meta(description="admin, tenant:<id>, or the system.")]
    action: str
    job_id: str | None
    detail: Annotated[Any, Meta(description="Any JSON value or null.")]


class AuditList(msgspec.Struct, frozen=True, kw_only=True):
    """A page of audit records."""

    audit: list[AuditRecord]
    next_cursor: NextCursor
    history_complete: HistoryComplete = msgspec.UNSET


class Health(msgspec.Struct, frozen=True, kw_only=True):
    """The process is up."""

    status: Literal["ok"]
    node_id: str
    now_ms: Annotated[
        int, Meta(description="The node's wall clock, epoch ms (peers compare clocks by it).")
    ]
    disk_low: Annotated[
        bool,
        Meta(
            description="Free disk space in this node's data directory is below its [storage] "
            "min_free (peers read it: when a majority is low, every node refuses writes that "
            "add data)."
        ),
    ]
    log_level: Annotated[
        int,
        Meta(
            ge=1,
            description="The log commands this node's version applies: a command type added at "
            "a level is proposed only once every member reports it (a rolling upgrade runs old "
            "and new nodes side by side).",
        ),
    ]


class Readiness(msgspec.Struct, frozen=True, kw_only=True):
    """Whether the node has a leader and has caught up."""

    status: Literal["ready", "not ready"]
    node_id: str
    writes: Annotated[
        Literal["refused"] | UnsetType,
        Meta(
            description="Only when ready: writes that add data are refused (507) for low disk "
            "space; the node stays ready (dispatch, receives, acks and deletes go on)."
        ),
    ] = UNSET
    reason: Annotated[
        str | UnsetType,
        Meta(
            description="Why not ready: no leader, catching up, or a distrusted clock; or, with "
            "writes, why writes are refused."
        ),
    ] = UNSET
    cell: Annotated[
        str | UnsetType, Meta(description="Only on a cell ([cells]): this node's cell.")
    ] = UNSET
    directory_revision: Annotated[
        int | UnsetType,
        Meta(description="Only on a cell: the revision of the directory it serves by (0: none)."),
    ] = UNSET


class CellEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One cell of the directory: its name, the partition ranges it owns, its API URLs."""

    cell: str
    ranges: Annotated[
        list[tuple[int, int]], Meta(description="[first, last] partition ranges, inclusive.")
    ]
    urls: list[str]


class Cells(msgspec.Struct, frozen=True, kw_only=True):
    """The directory of cells as this node last read it (docs/scaling.md §4). A cluster
    without [cells]: one cell, "default", owning every partition, revision 0."""

    directory_revision: Annotated[
        int, Meta(description="The directory key's mod_revision in etcd; 0 without cells.")
    ]
    partitions: int
    self_: str = msgspec.field(name="self")
    cells: list[CellEntry]
