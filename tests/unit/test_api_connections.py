"""The API's side of broker targets during a rolling upgrade (log level 3), and what a probe's
detail may show."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from schedd.api.connections import connection_verdicts, scrubbed
from schedd.api.context import ApiContext
from schedd.api.http import _check_cluster_can_take
from schedd.errors import ClusterUnavailable
from schedd.jobspec import parse_target
from schedd.model import BrokerConnection
from schedd.peers import PeerReport, PeerReports
from schedd.storage import DiskWatch, MinFree, StorageGuard
from schedd.store.commands import CreateConnection, CreateJobs, NewJob, UpdateJob

NATS = {"type": "nats", "connection": "n", "subject": "a.b"}
QUEUE = {"type": "queue", "name": "q"}
HTTP = {"type": "http", "url": "https://hooks.example/x"}


def guard(tmp_path: Path, level_of_n3: int) -> StorageGuard:
    peers = PeerReports("n1")
    reports = {"n2": PeerReport(log_level=3), "n3": PeerReport(log_level=level_of_n3)}
    peers.record(reports, ["n1", "n2", "n3"])
    return StorageGuard(DiskWatch(tmp_path, MinFree(bytes=0)), peers)


def create(*targets: dict[str, Any]) -> CreateJobs:
    items = tuple(
        NewJob(
            job_id=f"j{i}",
            partition=0,
            spec={"target": target},
            next_run_at_ms=None,
            next_fire_at_ms=None,
            idempotency_key=None,
            request_hash=None,
        )
        for i, target in enumerate(targets)
    )
    return CreateJobs(tenant_id="t1", jobs=items)


def test_broker_jobs_and_connections_wait_for_every_node_at_level_3(tmp_path: Path) -> None:
    old = guard(tmp_path, level_of_n3=2)
    _check_cluster_can_take(old, create(QUEUE))  # what a level-2 node applies alike: fine
    for cmd in (
        create(QUEUE, NATS),
        UpdateJob(
            tenant_id="t1",
            job_id="j",
            expected_version=1,
            spec={"target": NATS},
            next_run_at_ms=None,
            next_fire_at_ms=None,
        ),
        CreateConnection(
            tenant_id="t1", name="n", kind="nats", url="nats://x", host="x:4222", addresses=()
        ),
    ):
        with pytest.raises(ClusterUnavailable, match="n3 must run this schedd version first"):
            _check_cluster_can_take(old, cmd)
    upgraded = guard(tmp_path, level_of_n3=3)
    _check_cluster_can_take(upgraded, create(QUEUE, NATS))


def test_a_batch_refuses_only_its_broker_items_while_a_node_is_older(tmp_path: Path) -> None:
    ctx = cast(ApiContext, SimpleNamespace(storage=guard(tmp_path, level_of_n3=2)))
    targets = [parse_target(QUEUE), parse_target(NATS), parse_target(HTTP)]
    verdicts = asyncio.run(connection_verdicts(ctx, "t1", targets))
    assert verdicts[0] is None and verdicts[2] is None
    assert isinstance(verdicts[1], ClusterUnavailable)
    assert verdicts[1].http_status == 503


def test_a_probe_detail_never_shows_the_url_or_its_credentials() -> None:
    connection = BrokerConnection(
        tenant_id="t1",
        name="r",
        kind="redis",
        url="redis://sender:t0p-secret@redis.acme.example:6379/0",
        pinned_addresses=("93.184.216.34",),
        created_ms=1,
    )
    detail = (
        "Error connecting to redis://sender:t0p-secret@redis.acme.example:6379/0: "
        "WRONGPASS for user sender with password t0p-secret"
    )
    shown = scrubbed(detail, connection)
    assert "t0p-secret" not in shown and "sender" not in shown
    assert shown.startswith("Error connecting to ***: WRONGPASS")
    assert len(scrubbed("x" * 5000, connection)) == 512


def test_apply_refusing_a_jobs_connection_is_a_400_naming_the_field() -> None:
    from schedd.errors import InvalidRequest, rejection_error

    exc = rejection_error("invalid_request", "target.connection: no connection named 'r'")
    assert isinstance(exc, InvalidRequest) and exc.http_status == 400
    assert (exc.field, exc.reason) == ("target.connection", "no connection named 'r'")
    assert str(exc) == "target.connection: no connection named 'r'"


def test_connection_tests_are_limited_per_tenant_on_a_node() -> None:
    """Each test may hold sockets to a tenant's broker for the request timeout: a tenant gets
    CONNECTION_TESTS_PER_TENANT at once on a node, the next is a 429, another tenant is not
    held back, and a finished test frees its slot."""
    from schedd.api.context import CONNECTION_TESTS_PER_TENANT
    from schedd.api.limits import TenantSlots
    from schedd.errors import QuotaExceeded

    slots = TenantSlots(CONNECTION_TESTS_PER_TENANT, lambda held: f"{held} tests in progress")
    with contextlib.ExitStack() as held:
        for _ in range(CONNECTION_TESTS_PER_TENANT):
            held.enter_context(slots.hold("t1"))
        with pytest.raises(QuotaExceeded, match=f"{CONNECTION_TESTS_PER_TENANT} tests"):
            held.enter_context(slots.hold("t1"))
        with slots.hold("t2"):
            pass
    with slots.hold("t1"):
        pass
