"""Payloads encrypted at rest on a real node: nothing readable in the log or the database,
plain payloads in every answer, the queue and HTTP callbacks."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from schedd.sealing import PREFIX, VERBATIM, new_key_line
from tests.integration.api_helpers import Tenant, new_tenant
from tests.receiver import receiving
from tests.servers import NodeProcess, http, make_nodes, running

MARKER = "payload-marker-7f3a9c"


def _serve(base: Path, *, has_keys: bool) -> Iterator[NodeProcess]:
    extra = '[delivery]\nallow_cidrs = ["127.0.0.0/8"]\n[dispatch]\nlease_ttl = "2s"\n'
    if has_keys:
        keys = base / "payload.keys"
        keys.write_text(new_key_line("k2") + "\n" + new_key_line("k1") + "\n")
        extra = f'[encryption]\npayload_keys_file = "{keys}"\n' + extra
    with running(make_nodes(base, 1, extra_sections=extra)) as nodes:
        yield nodes[0]


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    yield from _serve(tmp_path_factory.mktemp("sealing"), has_keys=True)


@pytest.fixture(scope="module")
def keyless_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    yield from _serve(tmp_path_factory.mktemp("keyless"), has_keys=False)


@pytest.fixture(scope="module")
def tenant(node: NodeProcess) -> Tenant:
    return new_tenant(node)


def files_under(directory: Path) -> Iterator[Path]:
    return (path for path in directory.rglob("*") if path.is_file())


def test_payloads_are_sealed_at_rest_and_plain_to_the_tenant(
    node: NodeProcess, tenant: Tenant
) -> None:
    payload = {"note": MARKER, "n": [1, 2.5, None]}
    body = {"schedule": {"delay": "0s"}, "target": {"type": "queue", "name": "sealed"}}
    status, job, _ = http(
        "POST", f"{node.url}/v1/jobs", body | {"payload": payload}, token=tenant.token
    )
    assert status == 201 and job["payload"] == payload
    status, again, _ = http("GET", f"{node.url}/v1/jobs/{job['job_id']}", token=tenant.token)
    assert status == 200 and again["payload"] == payload
    status, listed, _ = http("GET", f"{node.url}/v1/jobs?limit=100", token=tenant.token)
    assert [j["payload"] for j in listed["jobs"] if j["job_id"] == job["job_id"]] == [payload]

    receive = {"max": 1, "wait": "10s", "visibility_timeout": "30s"}
    status, got, _ = http(
        "POST", f"{node.url}/v1/queues/sealed/receive", receive, token=tenant.token, timeout_s=30
    )
    assert status == 200 and [m["payload"] for m in got["messages"]] == [payload]

    for path in files_under(node.data_dir):  # the Raft journal, snapshots, SQLite and its WAL
        assert MARKER.encode() not in path.read_bytes(), path


def test_http_callbacks_carry_the_plain_payload(node: NodeProcess, tenant: Tenant) -> None:
    with receiving() as receiver:
        target = {"type": "http", "url": receiver.url("hook")}
        body = {"schedule": {"delay": "0s"}, "target": target, "payload": {"note": MARKER}}
        status, job, _ = http("POST", f"{node.url}/v1/jobs", body, token=tenant.token)
        assert status == 201
        [request] = receiver.wait_for(1, "hook")
        assert json.loads(request.body)["payload"] == {"note": MARKER}
        assert json.loads(request.body)["job_id"] == job["job_id"]


def test_a_changed_payload_is_sealed_again(node: NodeProcess, tenant: Tenant) -> None:
    body = {"schedule": {"delay": "1h"}, "target": {"type": "queue", "name": "later"}}
    status, job, _ = http("POST", f"{node.url}/v1/jobs", body | {"payload": 1}, token=tenant.token)
    assert status == 201
    url = f"{node.url}/v1/jobs/{job['job_id']}"
    status, changed, _ = http("PATCH", url, {"payload": {"new": MARKER}}, token=tenant.token)
    assert status == 200 and changed["payload"] == {"new": MARKER}
    for path in files_under(node.data_dir):
        assert MARKER.encode() not in path.read_bytes(), path


# Strings a tenant may send that look like sealed payloads (k2 is a key id of `node`).
LOOKALIKES = [
    PREFIX + "junk",
    PREFIX + "k2:" + base64.b64encode(bytes(40)).decode(),
    VERBATIM + "x",
]


@pytest.mark.parametrize("payload", LOOKALIKES)
@pytest.mark.parametrize("has_keys", [False, True], ids=["without-keys", "with-keys"])
@pytest.mark.slow
def test_a_string_like_a_sealed_payload_round_trips_through_answers_and_delivery(
    request: pytest.FixtureRequest, has_keys: bool, payload: str
) -> None:
    server: NodeProcess = request.getfixturevalue("node" if has_keys else "keyless_node")
    tenant = new_tenant(server)
    queue = f"lookalike-{LOOKALIKES.index(payload)}"
    with receiving() as receiver:
        targets = [{"type": "queue", "name": queue}, {"type": "http", "url": receiver.url("h")}]
        for target in targets:
            body = {"schedule": {"delay": "0s"}, "target": target, "payload": payload}
            status, job, _ = http("POST", f"{server.url}/v1/jobs", body, token=tenant.token)
            assert status == 201 and job["payload"] == payload, job
            url = f"{server.url}/v1/jobs/{job['job_id']}"
            status, again, _ = http("GET", url, token=tenant.token)
            assert status == 200 and again["payload"] == payload, again
        [callback] = receiver.wait_for(1, "h")
        assert json.loads(callback.body)["payload"] == payload
    receive = {"max": 1, "wait": "10s", "visibility_timeout": "30s"}
    url = f"{server.url}/v1/queues/{queue}/receive"
    status, got, _ = http("POST", url, receive, token=tenant.token, timeout_s=30)
    assert status == 200 and [m["payload"] for m in got["messages"]] == [payload], got


@pytest.fixture(scope="module")
def shipped_single(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    """A node of config/single.toml as shipped (data_dir and ports moved; loopback targets
    allowed, so a connection to 127.0.0.1 can be made)."""
    from tests.integration.test_raft_port import single_node

    node = single_node(tmp_path_factory.mktemp("single"))
    text = node.config_path.read_text()
    assert text.count("allow_cidrs = []") == 1
    node.config_path.write_text(text.replace("allow_cidrs = []", 'allow_cidrs = ["127.0.0.0/8"]'))
    with running([node]) as nodes:
        yield nodes[0]


def test_the_shipped_single_node_config_seals_payloads_and_connection_urls(
    shipped_single: NodeProcess,
) -> None:
    password = "hunter2-single-c0nn3ction-pw"
    tenant = new_tenant(shipped_single)
    connection = {"name": "r", "url": f"redis://sender:{password}@127.0.0.1:6390/2"}
    status, answer, _ = http(
        "POST", f"{shipped_single.url}/v1/connections", connection, token=tenant.token
    )
    assert status == 201, answer
    job = {"schedule": {"cron": "0 3 * * *"}, "target": {"type": "queue", "name": "q"}}
    status, answer, _ = http(
        "POST", f"{shipped_single.url}/v1/jobs", job | {"payload": MARKER}, token=tenant.token
    )
    assert status == 201 and answer["payload"] == MARKER, answer
    for path in files_under(shipped_single.data_dir):  # Raft journal, SQLite and its WAL
        content = path.read_bytes()
        assert password.encode() not in content and MARKER.encode() not in content, path
    keys = shipped_single.data_dir / "payload.keys"
    assert keys.exists() and oct(keys.stat().st_mode & 0o777) == "0o600"
