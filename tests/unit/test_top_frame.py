"""`schedctl top`'s frame from two scrapes: delivery attempts per target kind, connections."""

from __future__ import annotations

from typing import Literal

from schedd.cli.ctl.top import Sample, frame
from schedd.wire.cluster import Cluster, ClusterNode


def node(node_id: str, role: Literal["leader", "follower"]) -> ClusterNode:
    return ClusterNode(
        node_id=node_id,
        api=None,
        raft="x:1",
        role=role,
        healthy=True,
        partitions=[],
        applied_index=None,
    )


def sample(at_s: float, values: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> Sample:
    return Sample(at_s, values)


def callbacks(kind: str, outcome: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return ("schedd_callbacks_total", (("kind", kind), ("outcome", outcome)))


def connections(kind: str, state: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return ("schedd_broker_connections", (("kind", kind), ("state", state)))


def test_callbacks_are_shown_per_target_kind_with_broker_connections() -> None:
    cluster = Cluster(
        leader="n1",
        members=["x:1", "x:2"],
        nodes=[node("n1", "leader"), node("n2", "follower")],
    )
    before = {
        "n1": sample(0, {callbacks("http", "succeeded"): 10, callbacks("nats", "retry"): 0}),
        "n2": sample(0, {callbacks("redis_stream", "succeeded"): 100}),
    }
    after = {
        "n1": sample(
            2,
            {
                callbacks("http", "succeeded"): 30,
                callbacks("nats", "retry"): 8,
                connections("nats", "down"): 1,
                ("schedd_outbox_depth", ()): 42,
            },
        ),
        "n2": sample(
            2, {callbacks("redis_stream", "succeeded"): 700, connections("redis_stream", "up"): 3}
        ),
    }
    shown = frame(cluster, before, after, tenants=[])
    answer = shown.as_json()
    assert answer["outbox"] == "42"
    assert answer["callbacks"] == [
        {
            "kind": "http",
            "succeeded_per_s": "10.0",
            "retry_per_s": "0.0",
            "failed_per_s": "0.0",
            "gone_per_s": "0.0",
            "connections_up": "-",
            "down": "-",
        },
        {
            "kind": "nats",
            "succeeded_per_s": "0.0",
            "retry_per_s": "4.0",
            "failed_per_s": "0.0",
            "gone_per_s": "0.0",
            "connections_up": "0",
            "down": "1",
        },
        {
            "kind": "redis_stream",
            "succeeded_per_s": "300.0",
            "retry_per_s": "0.0",
            "failed_per_s": "0.0",
            "gone_per_s": "0.0",
            "connections_up": "3",
            "down": "0",
        },
    ]
