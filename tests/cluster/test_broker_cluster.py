"""Broker targets end to end on three real nodes, as a tenant uses them: connections created
through the API, jobs due in a moment, every message read back from the loopback broker with its
own client library (tests/broker_readers.py), every run recorded `succeeded`.

Also: kill -9 of the leader while it publishes (every run arrives, copies only under the same
idempotency key, none in JetStream, replicas agree); a broker that is down (retries, a dead
letter with the cause, redriven after the connection is made again, other tenants on time);
bad targets and connections through the API; the connection test from any node; and the
connections' credentials in no answer, audit record, metric or log line of any node.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from schedd.model import partition_of
from schedd.timeformat import format_instant
from tests.broker_readers import (
    KINDS,
    NatsStream,
    Received,
    RedisStream,
    destination,
    reading,
)
from tests.brokers import closed_port, require
from tests.cluster.test_dispatch_cluster import (
    assert_replicas_agree,
    leader_of,
    runs_of,
    wait_balanced,
)
from tests.integration.api_helpers import Tenant, all_audit, assert_error, job_body, new_tenant
from tests.servers import (
    ADMIN_TOKEN,
    NodeProcess,
    http,
    make_nodes,
    metrics_text,
    ms,
    now_ms,
    running,
    wait_for,
    wait_ready,
)

pytestmark = pytest.mark.cluster
PARTITIONS = 256
LEASE_TTL_S = 2.0
SECTIONS = (
    f'[dispatch]\nlease_ttl = "{LEASE_TTL_S:g}s"\n\n[delivery]\nallow_cidrs = ["127.0.0.0/8"]\n'
)
SECRET = "e2e-pa55w0rd-never-shown"
URLS = {  # Redis and NATS on loopback take any password for these users: it must travel
    "redis_stream": f"redis://default:{SECRET}@127.0.0.1:6379/0",
    "rabbitmq": "amqp://guest:guest@127.0.0.1:5672/",
    "nats": f"nats://schedd:{SECRET}@127.0.0.1:4222",
}
SERVICE = {"redis_stream": "redis", "rabbitmq": "rabbitmq", "nats": "nats"}
E2E_JOBS = 100
KILL_JOBS = 150  # per kind
FAST_RETRY = {"max_attempts": 8, "backoff": "fixed", "initial_delay": "400ms", "max_delay": "400ms"}
PATIENT_RETRY = {"max_attempts": 10, "backoff": "fixed", "initial_delay": "1s", "max_delay": "1s"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[NodeProcess]]:
    """Three nodes shared by the module; the kill test starts its victim again."""
    for service in ("redis", "rabbitmq", "nats"):
        require(service)
    base: Path = tmp_path_factory.mktemp("broker-cluster")
    with running(make_nodes(base, 3, extra_sections=SECTIONS)) as nodes:
        yield nodes


# ------------------------------------------------------------------ helpers


def call(
    node: NodeProcess, tenant: Tenant, method: str, path: str, body: Any = None
) -> tuple[int, Any]:
    status, answer, _ = http(method, f"{node.url}{path}", body, token=tenant.token)
    return status, answer


def connect(node: NodeProcess, tenant: Tenant, name: str, url: str) -> None:
    status, created = call(node, tenant, "POST", "/v1/connections", {"name": name, "url": url})
    assert status == 201, created


def connect_all(node: NodeProcess, tenant: Tenant) -> None:
    """The tenant's connection to each loopback broker, named after its target type."""
    for kind in KINDS:
        connect(node, tenant, kind, URLS[kind])


def create_jobs(
    node: NodeProcess, tenant: Tenant, bodies: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The jobs, in batches of at most 1,000; each must be created."""
    results: list[dict[str, Any]] = []
    for start in range(0, len(bodies), 1000):
        batch = {"jobs": bodies[start : start + 1000]}
        status, created, _ = http("POST", f"{node.url}/v1/jobs:batch", batch, token=tenant.token)
        assert status == 200, created
        assert all("job_id" in r for r in created["results"]), created["results"][:3]
        results += created["results"]
    return results


def one_time(due_ms: int, target: dict[str, Any], payload: Any, **extra: Any) -> dict[str, Any]:
    schedule = {"run_at": format_instant(due_ms)}
    return {"schedule": schedule, "target": target, "payload": payload, **extra}


def all_runs(
    node: NodeProcess, tenant: Tenant, job_ids: list[str]
) -> dict[str, list[dict[str, Any]]]:
    with ThreadPoolExecutor(8) as pool:
        return dict(
            zip(job_ids, pool.map(lambda j: runs_of(node, tenant, j), job_ids), strict=True)
        )


def wait_succeeded(
    node: NodeProcess, tenant: Tenant, job_ids: list[str], timeout_s: float
) -> dict[str, dict[str, Any]]:
    """Until each job's one run is `succeeded` (a run recorded twice fails); the runs."""
    done: dict[str, dict[str, Any]] = {}

    def check() -> bool:
        pending = [j for j in job_ids if j not in done]
        for job_id, runs in all_runs(node, tenant, pending).items():
            assert len(runs) <= 1, f"{job_id} has {len(runs)} runs: {runs}"
            if runs and runs[0]["status"] == "succeeded":
                done[job_id] = runs[0]
        return len(done) == len(job_ids)

    wait_for(check, timeout_s, f"{len(job_ids)} runs succeeded")
    return done


def wait_arrived(reader: Any, keys: set[str], timeout_s: float) -> None:
    wait_for(lambda: keys <= reader.keys(), timeout_s, f"{len(keys)} messages in the brokers")


def assert_exact(
    message: Received, run: dict[str, Any], payload: Any, attempt: int, dest: Any
) -> None:
    """The message carries exactly the run: its JSON or fields, and the broker's own
    properties or headers, as docs/api.md "Broker targets" gives them."""
    key = f"{run['job_id']}:{run['scheduled_at']}"
    body = {
        "job_id": run["job_id"],
        "scheduled_at": run["scheduled_at"],
        "attempt": attempt,
        "idempotency_key": key,
        "payload": payload,
    }
    assert message.body == body, message
    if message.kind == "redis_stream":
        assert set(message.meta["fields"]) == set(body), message.meta
        assert message.meta["fields"]["attempt"] == str(attempt)
    elif message.kind == "rabbitmq":
        assert message.meta == {
            "content_type": "application/json",
            "delivery_mode": 2,  # persistent
            "message_id": key,
            "headers": {
                "job_id": run["job_id"],
                "scheduled_at": run["scheduled_at"],
                "attempt": attempt,
            },
            "exchange": dest.exchange,
            "routing_key": dest.routing_key,
        }
    else:
        assert message.meta == {
            "subject": dest.subject,
            "headers": {
                "Nats-Msg-Id": key,
                "Schedd-Job-Id": run["job_id"],
                "Schedd-Scheduled-At": run["scheduled_at"],
                "Schedd-Attempt": str(attempt),
            },
        }


def assert_secret_nowhere(cluster: list[NodeProcess], tenant: Tenant) -> None:
    """No connection password in the tenant's answers, the audit trail, any node's metrics or
    log (the log is flushed as lines are written)."""
    _, listed = call(cluster[0], tenant, "GET", "/v1/connections")
    seen: list[Any] = [
        listed,
        all_audit(cluster[0], tenant.token),
        all_audit(cluster[0], ADMIN_TOKEN),
    ]
    _, deadletters = call(cluster[0], tenant, "GET", "/v1/deadletters?limit=1000")
    seen.append(deadletters)
    for node in cluster:
        if node.is_running():
            seen.append(metrics_text(node.url))
        seen.append(node.log_path.read_text(errors="replace"))
    for text in seen:
        assert SECRET not in str(text)


# ------------------------------------------------------------------ end to end


@pytest.mark.parametrize("kind", KINDS)
def test_every_run_arrives_in_the_broker_exactly_as_given(
    cluster: list[NodeProcess], kind: str
) -> None:
    wait_ready(cluster)
    node = cluster[1]
    tenant = new_tenant(node)
    connect(node, tenant, "main", URLS[kind])
    dest = destination(kind)
    with reading([dest]) as reader:
        due_ms = now_ms() + 2_000
        payloads = [
            {"i": i, "kind": kind, "text": "é ✓", "list": [i, None, True]} for i in range(E2E_JOBS)
        ]
        bodies = [one_time(due_ms, dest.target("main"), p) for p in payloads]
        jobs = create_jobs(node, tenant, bodies)
        assert now_ms() < due_ms, "creating the jobs took past their due time"
        job_ids = [j["job_id"] for j in jobs]
        keys = {f"{j}:{format_instant(due_ms)}" for j in job_ids}
        wait_arrived(reader, keys, 20)
        runs = wait_succeeded(node, tenant, job_ids, 20)
        messages = reader.received()
    by_job: dict[str, list[Received]] = defaultdict(list)
    for message in messages:
        by_job[message.job_id].append(message)
    assert set(by_job) == set(job_ids)
    for job_id, payload in zip(job_ids, payloads, strict=True):
        run = runs[job_id]
        assert ms(run["scheduled_at"]) == due_ms
        assert [a["attempt"] for a in run["attempts"]] == [1], run
        for message in by_job[job_id]:  # at least once: a copy is the same message
            assert_exact(message, run, payload, 1, dest)
            lag_ms = message.at * 1000 - due_ms
            assert -50 <= lag_ms < 5_000, f"received {lag_ms:.0f} ms after its time"
    assert_secret_nowhere(cluster, tenant)


# ------------------------------------------------------------------ kill -9 mid-publish


def test_kill_9_of_the_leader_mid_publish_loses_no_run_and_copies_keep_their_key(
    cluster: list[NodeProcess],
) -> None:
    """Many runs of every kind due at once; the leader is killed as the first of its runs
    reaches a broker: the survivors publish what it had not recorded, with the same key."""
    wait_ready(cluster)
    held = wait_balanced(cluster[0])
    victim = leader_of(cluster)
    watcher = next(n for n in cluster if n is not victim)
    tenant = new_tenant(watcher)  # everything through one survivor: it reads its own writes
    connect_all(watcher, tenant)
    dests = {kind: destination(kind) for kind in KINDS}
    with reading(list(dests.values())) as reader:
        due_ms = now_ms() + 2_500
        bodies = [
            one_time(due_ms, dests[kind].target(kind), {"n": i}, retry=PATIENT_RETRY)
            for i in range(KILL_JOBS)
            for kind in KINDS
        ]
        jobs = create_jobs(watcher, tenant, bodies)
        assert now_ms() < due_ms, "creating the jobs took past their due time"
        job_ids = [j["job_id"] for j in jobs]
        kind_of = {j: b["target"]["type"] for j, b in zip(job_ids, bodies, strict=True)}
        payload_of = {j: b["payload"] for j, b in zip(job_ids, bodies, strict=True)}
        victims = {j for j in job_ids if partition_of(j, PARTITIONS) in held[victim.node_id]}
        assert len(victims) >= 50, f"{len(victims)} of {len(job_ids)} jobs on the victim"

        # JetStream drops a copy: the kill waits for a run of the victim's in the others.
        def seen() -> set[str]:
            return {r.key for r in reader.received() if r.kind != "nats" and r.job_id in victims}

        deadline = time.monotonic() + 20
        while not seen():
            assert time.monotonic() < deadline, "no run of the victim's reached a broker"
            time.sleep(0.005)
        victim.kill()
        killed_ms = now_ms()
        try:
            published = seen()
            at_kill = all_runs(watcher, tenant, sorted(victims))
            recorded = [
                j for j, runs in at_kill.items() if runs and runs[0]["status"] == "succeeded"
            ]
            assert len(recorded) < len(victims), "the victim recorded every run before it died"
            keys = {f"{j}:{format_instant(due_ms)}" for j in job_ids}
            wait_arrived(reader, keys, LEASE_TTL_S + 30)  # an election, then a lease move
            runs = wait_succeeded(watcher, tenant, job_ids, 30)
        finally:
            victim.start()
        messages = reader.received()
        jetstream = dests["nats"]
        assert isinstance(jetstream, NatsStream)
        stored = asyncio.run(jetstream.stored())
    copies = Counter(m.key for m in messages)
    for message in messages:
        assert message.kind == kind_of[message.job_id]
        assert_exact(
            message, runs[message.job_id], payload_of[message.job_id], 1, dests[message.kind]
        )
    for run in runs.values():  # a publish made again after the crash is the same attempt
        assert [a["attempt"] for a in run["attempts"]] == [1], run
    # What the victim published but had not recorded was published again by a survivor (its
    # attempt finished after the kill); JetStream kept one of each.
    again = {
        k
        for k in published
        if ms(runs[k.split(":", 1)[0]]["attempts"][0]["finished_at"]) > killed_ms
    }
    assert all(copies[k] >= 2 for k in again), {k: copies[k] for k in again}
    doubled = {k for k, n in copies.items() if n > 1}
    assert all(k.split(":", 1)[0] in victims for k in doubled), doubled  # only the crash's
    nats_keys = [m.key for m in messages if m.kind == "nats"]
    assert len(nats_keys) == len(set(nats_keys)) == KILL_JOBS == stored
    twice = dict(Counter(kind_of[k.split(":", 1)[0]] for k in doubled))
    sys.stderr.write(
        f"victim {victim.node_id}: {len(victims)} runs, {len(recorded)} recorded before the "
        f"kill, {len(published)} seen in Redis or RabbitMQ then, {len(again)} of those published "
        f"again; published twice in all: {twice}\n"
    )
    wait_ready(cluster)
    assert_replicas_agree(cluster)
    assert_secret_nowhere(cluster, tenant)


# ------------------------------------------------------------------ the broker is down


def test_a_broker_that_is_down_makes_dead_letters_that_a_redrive_delivers_later(
    cluster: list[NodeProcess],
) -> None:
    wait_ready(cluster)
    node, other_node = cluster[0], cluster[2]
    tenant, neighbour = new_tenant(node), new_tenant(node)
    down_url = URLS["redis_stream"].replace(":6379/", f":{closed_port()}/")
    connect(node, tenant, "r", down_url)
    connect(node, neighbour, "r", URLS["redis_stream"])
    stream, on_time = RedisStream(), RedisStream()
    with reading([stream, on_time]) as reader:
        failing = create_jobs(
            node,
            tenant,
            [one_time(now_ms(), stream.target("r"), {"n": i}, retry=FAST_RETRY) for i in range(40)],
        )
        # The neighbour's runs fall due while the tenant's retries go on (8 attempts, 0.2-0.4 s
        # apart): a built-in queue's and one on the same kind of broker.
        due_ms = now_ms() + 600
        create_jobs(
            node,
            neighbour,
            [
                one_time(due_ms, {"type": "queue", "name": "q"}, {"queue": True}),
                one_time(due_ms, on_time.target("r"), {"stream": True}),
            ],
        )
        status, got = call(
            other_node, neighbour, "POST", "/v1/queues/q/receive", {"max": 1, "wait": "10s"}
        )
        received_ms = now_ms()
        assert status == 200 and len(got["messages"]) == 1, got
        assert received_ms - due_ms < 2_000, f"the queue run came {received_ms - due_ms} ms late"
        wait_for(lambda: reader.received("redis_stream"), 5, "the neighbour's stream run")
        [neighbours] = [m for m in reader.received() if m.body["payload"] == {"stream": True}]
        assert neighbours.at * 1000 - due_ms < 2_000, "the neighbour's broker run came late"
        _, early = call(node, tenant, "GET", "/v1/deadletters?limit=1000")
        assert len(early["deadletters"]) < len(failing), "the outage was over before"

        def dead() -> list[dict[str, Any]] | None:
            _, page = call(node, tenant, "GET", "/v1/deadletters?limit=1000")
            return page["deadletters"] if len(page["deadletters"]) == len(failing) else None

        deadletters = wait_for(dead, 20, "every failing run dead")
        assert {d["job_id"] for d in deadletters} == {j["job_id"] for j in failing}
        cause = re.compile(r"connection down: connect to 127\.0\.0\.1 (failed|timed out)")
        for letter in deadletters:
            assert cause.match(letter["error"]), letter
        [run] = runs_of(node, tenant, failing[0]["job_id"])
        assert run["status"] == "dead"
        attempts = run["attempts"]
        assert [a["attempt"] for a in attempts] == list(range(1, 9))
        assert all(cause.match(a["error"]) for a in attempts), attempts
        # A retry waits a point in the upper half of the policy's delay: 0.2-0.4 s here.
        gaps = [ms(b["started_at"]) - ms(a["finished_at"]) for a, b in itertools.pairwise(attempts)]
        assert all(190 <= gap <= 1_000 for gap in gaps), gaps
        assert reader.keys(None) == {neighbours.key}, "something reached the real broker"
        # The broker is back (a connection made again under the name), and the dead runs
        # are redriven: one more attempt each, delivered.
        assert call(node, tenant, "DELETE", "/v1/connections/r") == (204, None)
        connect(node, tenant, "r", URLS["redis_stream"])
        for letter in deadletters:
            status, answer = call(node, tenant, "POST", f"/v1/deadletters/{letter['id']}/redrive")
            assert status == 202, answer
        keys = {f"{d['job_id']}:{d['scheduled_at']}" for d in deadletters}
        wait_for(lambda: keys <= reader.keys(), 10, "every redriven run in the stream")
        runs = wait_succeeded(node, tenant, [j["job_id"] for j in failing], 10)
        redriven = [m for m in reader.received() if m.key in keys]
    assert {m.body["attempt"] for m in redriven} == {9}
    for run in runs.values():
        assert [a["attempt"] for a in run["attempts"]] == list(range(1, 10)), run
        assert run["attempts"][-1]["error"] is None
    assert_secret_nowhere(cluster, tenant)


# ------------------------------------------------------------------ bad input


def test_a_connection_made_through_one_node_serves_jobs_made_through_another(
    cluster: list[NodeProcess],
) -> None:
    """A tenant behind a load balancer: the connection's create and the job's land on
    different nodes, the job's at once after."""
    wait_ready(cluster)
    tenant = new_tenant(cluster[0])
    for i in range(20):
        name = f"c{i}"
        connect(cluster[i % 3], tenant, name, URLS["nats"])
        target = {"type": "nats", "connection": name, "subject": "runs.later"}
        status, job = call(
            cluster[(i + 1) % 3], tenant, "POST", "/v1/jobs", job_body(target=target)
        )
        assert status == 201, job


@pytest.mark.parametrize(
    ("target", "field"),
    [
        ({"type": "redis_stream", "connection": "redis_stream", "stream": ""}, "stream"),
        ({"type": "redis_stream", "connection": "redis_stream", "stream": "a b"}, "stream"),
        ({"type": "redis_stream", "connection": "redis_stream", "stream": "a\x07b"}, "stream"),
        ({"type": "redis_stream", "connection": "redis_stream", "stream": "s" * 257}, "stream"),
        (
            {"type": "redis_stream", "connection": "redis_stream", "stream": "s", "maxlen": 0},
            "maxlen",
        ),
        ({"type": "redis_stream", "connection": "redis_stream"}, "stream"),
        (
            {"type": "rabbitmq", "connection": "rabbitmq", "exchange": "a/b", "routing_key": "k"},
            "exchange",
        ),
        (
            {"type": "rabbitmq", "connection": "rabbitmq", "exchange": "", "routing_key": ""},
            "routing_key",
        ),
        (
            {
                "type": "rabbitmq",
                "connection": "rabbitmq",
                "exchange": "x",
                "routing_key": "k" * 256,
            },
            "routing_key",
        ),
        ({"type": "nats", "connection": "nats", "subject": "a..b"}, "subject"),
        ({"type": "nats", "connection": "nats", "subject": "a.>"}, "subject"),
        ({"type": "nats", "connection": "nats", "subject": "a b"}, "subject"),
        ({"type": "nats", "connection": "nats", "subject": "runs."}, "subject"),
        ({"type": "nats", "connection": "nats", "subject": "s" * 256}, "subject"),
        ({"type": "nats", "connection": "nats", "subject": "a", "stream": "x"}, "stream"),
        ({"type": "nats", "connection": "missing", "subject": "a"}, "connection"),
        ({"type": "nats", "connection": "redis_stream", "subject": "a"}, "connection"),
        ({"type": "nats", "connection": "a b", "subject": "a"}, "connection"),
    ],
)
def test_bad_broker_targets_are_refused_naming_the_field(
    cluster: list[NodeProcess], bad_input_tenant: Tenant, target: dict[str, Any], field: str
) -> None:
    node = cluster[2]
    status, answer = call(node, bad_input_tenant, "POST", "/v1/jobs", job_body(target=target))
    error = assert_error(status, answer, 400, "invalid_request")
    assert error["message"].startswith(f"target.{field}: "), error


@pytest.fixture(scope="module")
def bad_input_tenant(cluster: list[NodeProcess]) -> Tenant:
    tenant = new_tenant(cluster[0])
    connect_all(cluster[0], tenant)
    return tenant


@pytest.mark.parametrize(
    ("url", "status", "code"),
    [
        (f"redis://default:{SECRET}@[::1]:6379/0", 422, "blocked_target"),  # not in allow_cidrs
        (f"nats://schedd:{SECRET}@192.168.7.7:4222", 422, "blocked_target"),
        (f"amqp://guest:{SECRET}@100.64.0.1/", 422, "blocked_target"),
        (f"rediss://default:{SECRET}@[::ffff:10.0.0.1]:6380", 422, "blocked_target"),
        (f"redis://default:{SECRET}@0.0.0.0:6379", 422, "blocked_target"),
        (f"postgres://u:{SECRET}@127.0.0.1:5432/db", 400, "invalid_request"),
        (f"redis+sentinel://u:{SECRET}@127.0.0.1:26379", 400, "invalid_request"),
        (f"redis://default:{SECRET}@127.0.0.1:0", 400, "invalid_request"),
        (f"nats://schedd:{SECRET}@127.0.0.1:4222/ä", 400, "invalid_request"),
    ],
)
def test_bad_connections_are_refused_without_their_credentials(
    cluster: list[NodeProcess], url: str, status: int, code: str
) -> None:
    node = cluster[1]
    tenant = new_tenant(node)
    got, answer = call(node, tenant, "POST", "/v1/connections", {"name": "x", "url": url})
    error = assert_error(got, answer, status, code)
    assert error["message"].startswith("url: "), error
    assert SECRET not in error["message"]
    assert call(node, tenant, "GET", "/v1/connections") == (200, {"connections": []})


@pytest.fixture(scope="module")
def node_without_cidrs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    """One node without `[delivery] allow_cidrs`: brokers on private addresses are refused."""
    base: Path = tmp_path_factory.mktemp("broker-no-cidrs")
    with running(make_nodes(base, 1)) as nodes:
        yield nodes[0]


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        (f"redis://default:{SECRET}@127.0.0.1:6379/0", "loopback"),
        (f"amqp://guest:{SECRET}@127.1/", "loopback"),
        (f"nats://schedd:{SECRET}@10.1.2.3:4222", "private"),
        (f"rediss://default:{SECRET}@172.16.0.1", "private"),
        (f"nats://schedd:{SECRET}@[fe80::1]:4222", "link-local"),
    ],
)
def test_without_allow_cidrs_a_broker_on_a_private_address_is_refused(
    node_without_cidrs: NodeProcess, url: str, reason: str
) -> None:
    tenant = new_tenant(node_without_cidrs)
    got, answer = call(
        node_without_cidrs, tenant, "POST", "/v1/connections", {"name": "x", "url": url}
    )
    error = assert_error(got, answer, 422, "blocked_target")
    assert error["message"].startswith("url: ") and reason in error["message"], error
    assert SECRET not in error["message"]


# ------------------------------------------------------------------ the connection test


@pytest.mark.parametrize(
    ("kind", "version"),
    [
        ("redis_stream", r"redis \d+\.\d+\.\d+"),
        ("rabbitmq", r"RabbitMQ \d+\.\d+\.\d+"),
        ("nats", r"nats-server \d+\.\d+\.\d+"),
    ],
)
def test_the_connection_test_names_the_broker_from_any_node(
    cluster: list[NodeProcess], kind: str, version: str
) -> None:
    wait_ready(cluster)
    tenant = new_tenant(cluster[0])
    connect(cluster[0], tenant, "up", URLS[kind])
    connect(cluster[0], tenant, "down", URLS[kind].replace(str(_port(kind)), str(closed_port())))
    for node in cluster:
        status, answer = call(node, tenant, "POST", "/v1/connections/up/test")
        assert status == 200 and answer["ok"] is True, answer
        assert re.fullmatch(version, answer["detail"]), answer
    status, answer = call(cluster[1], tenant, "POST", "/v1/connections/down/test")
    assert status == 200 and answer["ok"] is False, answer
    assert answer["detail"].startswith("connect to 127.0.0.1 failed: "), answer
    assert SECRET not in answer["detail"] and "guest:guest" not in answer["detail"]
    if kind == "rabbitmq":  # the only loopback broker that checks a password
        connect(cluster[0], tenant, "refused", f"amqp://guest:{SECRET}@127.0.0.1:5672/")
        status, answer = call(cluster[2], tenant, "POST", "/v1/connections/refused/test")
        assert status == 200 and answer["ok"] is False, answer
        assert "ACCESS_REFUSED" in answer["detail"] and SECRET not in answer["detail"], answer
    assert_secret_nowhere(cluster, tenant)


def test_no_node_logs_a_traceback_for_a_broker_delivery(cluster: list[NodeProcess]) -> None:
    wait_ready(cluster)
    tenant = new_tenant(cluster[0])
    connect_all(cluster[0], tenant)
    dests = [destination(kind) for kind in KINDS]
    with reading(dests) as reader:
        due_ms = now_ms() + 500
        bodies = [one_time(due_ms, d.target(d.kind), {"n": 1}) for d in dests for _ in range(10)]
        jobs = create_jobs(cluster[0], tenant, bodies)
        wait_arrived(reader, {f"{j['job_id']}:{format_instant(due_ms)}" for j in jobs}, 20)
        wait_succeeded(cluster[0], tenant, [j["job_id"] for j in jobs], 20)
    for node in cluster:
        log = node.log_path.read_text(errors="replace")
        assert "Traceback" not in log, log[log.index("Traceback") - 300 :][:1500]


def _port(kind: str) -> int:
    return {"redis_stream": 6379, "rabbitmq": 5672, "nats": 4222}[kind]
