"""The API's answer items that are Structs encode to the bytes their dicts did."""

from __future__ import annotations

import msgspec

from schedd.api.cluster import _node_json
from schedd.api.retention import DiskState, FileSizes, RetainedKind, RetentionStatus, _durations
from schedd.api.stats import NODE_FIELDS, NodeState, NodeStats, Sample
from schedd.model import RaftView
from schedd.retention import DEFAULTS_MS, retention_json
from schedd.wire.deadletters import NotRedriven, Redriven
from schedd.wire.errors import ErrorDetail, Failure
from schedd.wire.jobs import Created
from schedd.wire.tenants import Retention


def same(struct: msgspec.Struct, as_dict: dict[str, object]) -> bool:
    return msgspec.json.encode(struct) == msgspec.json.encode(as_dict)


def test_an_error_body_and_the_batch_items_encode_as_their_dicts_did() -> None:
    error = {"code": "invalid_request", "message": "jobs[0].name: too long"}
    assert same(Failure.of("invalid_request", "jobs[0].name: too long"), {"error": error})
    assert same(Created(job_id="job_a", next_run_at=None), {"job_id": "job_a", "next_run_at": None})
    assert same(Redriven(id="job_a:5", redriven=True), {"id": "job_a:5", "redriven": True})
    detail = ErrorDetail(code="deadletter_not_found", message="no")
    as_dict = {"id": "x", "error": {"code": "deadletter_not_found", "message": "no"}}
    assert same(NotRedriven(id="x", error=detail), as_dict)


def test_a_cluster_member_encodes_as_its_dict_did() -> None:
    status = RaftView(address="h:2", role="follower", leader="h:1", term=1, applied_index=7)
    as_dict = {
        "node_id": "n2",
        "api": "http://h:8",
        "raft": "h:2",
        "role": "follower",
        "healthy": True,
        "partitions": [0, 3],
        "applied_index": 7,
    }
    assert same(_node_json(status, "n2", "http://h:8", "h:2", [0, 3]), as_dict)


def test_a_nodes_stats_encode_as_their_dicts_did() -> None:
    sample = Sample(
        at="2026-11-30T00:53:20Z",
        claims_per_s=2.0,
        deliveries_per_s={"http": 1.5},
        claim_lag_p50_s=None,
        claim_lag_p99_s=0.25,
        backlog=3,
    )
    state = NodeState(
        role="leader",
        term=2,
        applied_index=9,
        commit_index=None,
        lag=None,
        partitions=4,
        clock_trusted=True,
        ready=False,
    )
    stats = NodeStats(node_id="n1", interval_s=5.0, window_s=900.0, node=state, samples=[sample])
    as_dict = {
        "node_id": "n1",
        "interval_s": 5.0,
        "window_s": 900.0,
        "node": {
            "role": "leader",
            "term": 2,
            "applied_index": 9,
            "commit_index": None,
            "lag": None,
            "partitions": 4,
            "clock_trusted": True,
            "ready": False,
        },
        "samples": [
            {
                "at": "2026-11-30T00:53:20Z",
                "claims_per_s": 2.0,
                "deliveries_per_s": {"http": 1.5},
                "claim_lag_p50_s": None,
                "claim_lag_p99_s": 0.25,
                "backlog": 3,
            }
        ],
    }
    assert same(stats, as_dict)
    assert list(NODE_FIELDS) == list(NodeState.__struct_fields__)


def test_the_retention_status_encodes_as_its_dict_did_with_and_without_a_storage_guard() -> None:
    ms = dict(DEFAULTS_MS)
    kinds = [{"kind": "runs", "rows": 3, "rows_capped": False, "oldest": "2026-12-02T17:00:00Z"}]
    as_dict = {"node_id": "n1", "retention": retention_json(ms), "kinds": kinds, "last_prune": None}
    status = RetentionStatus(
        node_id="n1",
        retention=_durations(ms, Retention),
        kinds=[msgspec.convert(kind, RetainedKind) for kind in kinds],
        last_prune=None,
    )
    assert same(status, as_dict), "files, disk, writes and reason absent: no storage guard"
    storage = {
        "files": {"database": 1, "journal": 2, "snapshot": 3},
        "disk": {"free_bytes": 1, "total_bytes": 2, "min_free_bytes": 0, "low": False},
        "writes": "accepted",
        "reason": None,
    }
    guarded = msgspec.structs.replace(
        status,
        files=FileSizes(database=1, journal=2, snapshot=3),
        disk=DiskState(free_bytes=1, total_bytes=2, min_free_bytes=0, low=False),
        writes="accepted",
        reason=None,
    )
    assert same(guarded, as_dict | storage)
