"""The cluster routes (admin), the audit trail, and the node's own: health, readiness,
metrics, this document, and the web console (served beside the API: documented here)."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from schedd.api import (
    audit,
    cells,
    cluster,
    health,
    membership,
    openapi,
    retention,
    segments,
    stats,
)
from schedd.api.operation import JSON, RETRY_AFTER, Access, Answer, Operation, Parameter
from schedd.api.operations.parameters import (
    ADMIN,
    ANY_TOKEN,
    AUDIT_JOB_ID,
    CONSOLE_FILE,
    CURSOR,
    LIMIT,
    NODE_NAME,
    PUBLIC,
)
from schedd.wire.cluster import (
    AdminState,
    AuditList,
    Cells,
    Cluster,
    Health,
    NodeAdded,
    NodeRemoved,
    NodeToAdd,
    Readiness,
    SteppedDown,
)
from schedd.wire.retention_status import RetentionStatus
from schedd.wire.segments import SEGMENT_NAME, SegmentManifest

TEXT = {"text/plain": {"type": "string"}}
SQLITE_FILE = {"application/vnd.sqlite3": {"type": "string", "format": "binary"}}
SEGMENT = Parameter(
    component="SegmentName",
    name="name",
    where="path",
    kind=Annotated[str, Meta(pattern=SEGMENT_NAME)],
    description="A segment's name: its family and UTC hour (runs-2026120514).",
)
STATS_SCOPE = Parameter(
    component="StatsScope",
    name="scope",
    where="query",
    kind=Annotated[Literal["node", "cluster"], Meta(extra_json_schema={"default": "node"})],
    description="node: this node's NodeStats; cluster: ClusterStats.",
)

OPERATIONS = (
    Operation(
        method="GET",
        path="/v1/cluster",
        handler=cluster.cluster,
        operation_id="getCluster",
        tag="cluster",
        summary="The cluster's nodes as this node sees them",
        access=ADMIN,
        answers={
            200: Answer("Leader and nodes.", body=Cluster),
        },
    ),
    Operation(
        method="GET",
        path="/v1/cells",
        handler=cells.get_cells,
        operation_id="getCells",
        tag="cluster",
        summary="The directory of cells as this node last read it",
        description="Which cell owns which partition ranges, each cell's API URLs, and the "
        "directory's revision in etcd (docs/scaling.md §4). A cluster without [cells] is one "
        'cell, "default", owning every partition (revision 0). A request for another cell\'s '
        "partition answers 307 wrong_cell naming that cell's URLs.",
        access=ANY_TOKEN,
        answers={
            200: Answer("The directory.", body=Cells),
        },
    ),
    Operation(
        method="POST",
        path="/v1/cluster/nodes",
        handler=membership.add_node,
        operation_id="addNode",
        tag="cluster",
        summary="Add a node to the Raft group (one change at a time)",
        access=ADMIN,
        body=NodeToAdd,
        answers={
            200: Answer("Committed: the node is a member and catches up.", body=NodeAdded),
        },
        errors=(400, 409),
    ),
    Operation(
        method="DELETE",
        path="/v1/cluster/nodes/{node}",
        handler=membership.remove_node,
        operation_id="removeNode",
        tag="cluster",
        summary="Remove a member (not this node, not the leader: step it down first)",
        access=ADMIN,
        parameters=(NODE_NAME,),
        answers={
            200: Answer("Committed: the node is no longer a member.", body=NodeRemoved),
        },
        errors=(404, 409),
    ),
    Operation(
        method="POST",
        path="/v1/cluster/leader/step-down",
        handler=membership.step_down,
        operation_id="stepDown",
        tag="cluster",
        summary="Sent to the leader: hand leadership to a caught-up follower",
        access=ADMIN,
        answers={
            200: Answer("Another node leads (its Raft address).", body=SteppedDown),
        },
        errors=(409,),
    ),
    Operation(
        method="GET",
        path="/v1/admin/state",
        handler=cluster.admin_state,
        operation_id="getAdminState",
        tag="cluster",
        summary="This node's Raft state and state digest",
        access=ADMIN,
        answers={
            200: Answer("Equal digests at equal applied_index on every replica.", body=AdminState),
        },
    ),
    Operation(
        method="GET",
        path="/v1/stats",
        handler=stats.stats,
        operation_id="getStats",
        tag="cluster",
        summary="This node's last 15 minutes in 5-second samples, and its Raft state now",
        access=ADMIN,
        parameters=(STATS_SCOPE,),
        answers={
            200: Answer(
                "Claims/s, first deliveries/s by target kind, claim lag p50/p99 and the"
                " due backlog, from this node's own metrics (the web console's "
                "overview); with scope=cluster, every node's, asked by this one.",
                body=(stats.NodeStats, stats.ClusterStats),
            ),
        },
        errors=(400,),
    ),
    Operation(
        method="GET",
        path="/v1/admin/retention",
        handler=retention.retention_status,
        operation_id="getRetentionStatus",
        tag="cluster",
        summary="What this node keeps: rows and the oldest per kind, file sizes, free disk",
        access=ADMIN,
        answers={
            200: Answer(
                "This node's [retention], its store per kind, its data files and disk, "
                "and whether writes are accepted.",
                body=RetentionStatus,
            ),
        },
    ),
    Operation(
        method="GET",
        path="/v1/admin/segments",
        handler=segments.list_segments,
        operation_id="listSegments",
        tag="cluster",
        summary="The closed history segments this node offers its peers",
        description="Read by a new or wiped node fetching the closed segments it lacks "
        "(docs/scaling.md, section 1).",
        access=ADMIN,
        answers={
            200: Answer(
                "Each closed segment held here, with its size and sha256.", body=SegmentManifest
            ),
        },
    ),
    Operation(
        method="GET",
        path="/v1/admin/segments/{name}",
        handler=segments.get_segment,
        operation_id="getSegment",
        tag="cluster",
        summary="One closed history segment's file (HTTP Range for a resumed copy)",
        access=ADMIN,
        parameters=(SEGMENT,),
        answers={
            200: Answer("The whole file.", body=SQLITE_FILE),
            206: Answer("The byte range asked for with Range.", body=SQLITE_FILE),
        },
        errors=(404,),
    ),
    Operation(
        method="GET",
        path="/v1/audit",
        handler=audit.audit,
        operation_id="listAudit",
        tag="cluster",
        summary="Audit records (sequence order)",
        description="The admin sees every tenant's records (or one tenant's with X-Tenant); a "
        "tenant sees its own. With job_id, only that job's.",
        access=ANY_TOKEN,
        parameters=(AUDIT_JOB_ID, CURSOR, LIMIT),
        answers={
            200: Answer("A page of audit records.", body=AuditList),
        },
    ),
    Operation(
        method="GET",
        path="/healthz",
        handler=health.healthz,
        operation_id="healthz",
        tag="node",
        summary="The process is up",
        access=PUBLIC,
        answers={
            200: Answer("Up.", body=Health),
        },
    ),
    Operation(
        method="GET",
        path="/readyz",
        handler=health.readyz,
        operation_id="readyz",
        tag="node",
        summary="Has a leader and has caught up",
        access=PUBLIC,
        answers={
            200: Answer("Ready.", body=Readiness),
            503: Answer(
                "Not ready: no leader, still catching up, or its clock disagrees with "
                "its peers' (it dispatches nothing meanwhile).",
                body=Readiness,
                headers=RETRY_AFTER,
            ),
        },
    ),
    Operation(
        method="GET",
        path="/metrics",
        handler=health.metrics,
        operation_id="metrics",
        tag="node",
        summary="Prometheus metrics (text format)",
        description="The admin token or the `[metrics] token`; never a tenant's. 404 when "
        "`[metrics] listen` serves it on its own address instead.",
        access=Access(schemes=("adminToken",), errors=()),
        answers={
            200: Answer("docs/metrics.md lists them.", body=TEXT),
        },
        errors=(401, 404),
    ),
    Operation(
        method="GET",
        path="/ui",
        handler=None,
        operation_id="consoleRedirect",
        tag="node",
        summary="The web console: redirects to /ui/",
        access=PUBLIC,
        answers={
            308: Answer("Location: /ui/."),
        },
    ),
    Operation(
        method="GET",
        path="/ui/{path}",
        handler=None,
        operation_id="consoleFile",
        tag="node",
        summary="The web console's static files (docs/console.md)",
        description="No token: the pages call this API with the user's token. Every answer carries "
        "a strict Content-Security-Policy, X-Frame-Options: DENY and "
        "X-Content-Type-Options: nosniff.",
        access=PUBLIC,
        parameters=(CONSOLE_FILE,),
        answers={
            200: Answer(
                "A shipped file (the empty path is index.html).",
                body={
                    kind: {"type": "string"}
                    for kind in ("text/html", "text/javascript", "text/css")
                },
            ),
            304: Answer("Unchanged since the ETag sent in If-None-Match."),
            404: Answer("No such file.", body=TEXT),
        },
    ),
    Operation(
        method="GET",
        path="/v1/openapi.json",
        handler=openapi.openapi,
        operation_id="getOpenApi",
        tag="node",
        summary="This document",
        access=PUBLIC,
        answers={
            200: Answer("OpenAPI 3.1.", body={JSON: {"type": "object"}}),
        },
    ),
)
