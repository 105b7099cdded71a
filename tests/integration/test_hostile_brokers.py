"""A tenant's broker is hostile, through a real node (issue 27): a Redis, NATS or RabbitMQ server
announcing a reply of a gigabyte or more costs the node under 32 MiB of RSS in `POST
/v1/connections/{name}/test` and in a real delivery, both failing with an error naming the bound,
while another tenant's deliveries go on; and `/test` passes the same guard check at connect as a
delivery, with the tenant's allowed_hosts as they are now."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from schedd.sealing import new_key_line
from tests.hostile_brokers import (
    HOSTILE,
    hostile,
    read_resp_command,
    simple_answer,
)
from tests.integration.api_helpers import Tenant, create_job, new_tenant
from tests.servers import NodeProcess, http, make_nodes, running

MIB = 1 << 20
RUN_TIMEOUT_S = 30.0
BOUND = "bytes is over the 1 MiB limit"
TARGETS: dict[str, dict[str, Any]] = {
    "redis": {"type": "redis_stream", "connection": "hostile", "stream": "s"},
    "nats": {"type": "nats", "connection": "hostile", "subject": "s.x"},
    "rabbitmq": {"type": "rabbitmq", "connection": "hostile", "exchange": "e", "routing_key": "k"},
}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    base: Path = tmp_path_factory.mktemp("hostile")
    keys = base / "payload.keys"
    keys.write_text(new_key_line("k1") + "\n")
    extra = (
        f'[encryption]\npayload_keys_file = "{keys}"\n[delivery]\nallow_cidrs = ["127.0.0.0/8"]\n'
    )
    with running(make_nodes(base, 1, extra_sections=extra)) as nodes:
        yield nodes[0]


def call(node: NodeProcess, tenant: Tenant, method: str, path: str, body: Any = None) -> Any:
    status, answer, _ = http(method, f"{node.url}{path}", body, token=tenant.token)
    assert status < 300, (status, answer)
    return answer


def status_kib(node: NodeProcess, field: str) -> int:
    assert node.process is not None
    for line in Path(f"/proc/{node.process.pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for the node")


@contextlib.contextmanager
def peak_rss_growth(node: NodeProcess) -> Iterator[list[int]]:
    """Yields a list that holds, after the block, how far the node's peak RSS rose above its
    RSS before it (the node's peak is reset first)."""
    assert node.process is not None
    Path(f"/proc/{node.process.pid}/clear_refs").write_text("5")
    before = status_kib(node, "VmRSS")
    growth: list[int] = []
    yield growth
    growth.append((status_kib(node, "VmHWM") - before) * 1024)


def last_error(node: NodeProcess, tenant: Tenant, job_id: str) -> str | None:
    """The error of the job's run once its one attempt has ended; None before."""
    path = f"{node.url}/v1/jobs/{job_id}/runs?limit=10"
    status, page, _ = http("GET", path, token=tenant.token)
    assert status == 200, page
    for run in page["runs"]:
        if run["status"] in ("dead", "failed") and run["attempts"]:
            error: str = run["attempts"][-1]["error"] or ""
            return error
    return None


def wait_for_error(node: NodeProcess, tenant: Tenant, job_id: str) -> str:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while (error := last_error(node, tenant, job_id)) is None:
        assert time.monotonic() < deadline, f"no failed attempt of {job_id} in {RUN_TIMEOUT_S}s"
        time.sleep(0.1)
    return error


def wait_succeeded(node: NodeProcess, tenant: Tenant, job_id: str) -> None:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while True:
        runs = call(node, tenant, "GET", f"/v1/jobs/{job_id}/runs?limit=10")["runs"]
        if runs and runs[0]["status"] == "succeeded":
            return
        assert time.monotonic() < deadline, f"{job_id} did not succeed: {runs}"
        time.sleep(0.1)


def due_now(target: dict[str, Any]) -> dict[str, Any]:
    return {"schedule": {"delay": "1s"}, "target": target, "retry": {"max_attempts": 1}}


@pytest.mark.parametrize("kind", ["redis", "nats", "rabbitmq"])
def test_a_hostile_broker_costs_the_node_under_32_mib(node: NodeProcess, kind: str) -> None:
    (handler, url), target = HOSTILE[kind], TARGETS[kind]
    hostile_tenant, other = new_tenant(node), new_tenant(node)
    call(node, other, "POST", "/v1/connections", {"name": "r", "url": "redis://127.0.0.1:6379/0"})
    with hostile(handler) as port, peak_rss_growth(node) as growth:
        body = {"name": "hostile", "url": url.format(port=port)}
        call(node, hostile_tenant, "POST", "/v1/connections", body)
        probed = call(node, hostile_tenant, "POST", "/v1/connections/hostile/test")
        job = create_job(node, hostile_tenant.token, due_now(target))
        bystander = create_job(
            node,
            other.token,
            due_now({"type": "redis_stream", "connection": "r", "stream": f"bystander-{kind}"}),
        )
        error = wait_for_error(node, hostile_tenant, job["job_id"])
        wait_succeeded(node, other, bystander["job_id"])
    assert growth[0] < 32 * MIB, f"the node's peak RSS grew {growth[0] / MIB:.0f} MiB"
    assert BOUND in error, error
    assert "pw" not in error
    if kind != "nats":  # the NATS probe ends at the server's INFO: it asks for no reply
        assert probed["ok"] is False and BOUND in probed["detail"], probed
    assert call(node, other, "GET", "/v1/connections/r")["name"] == "r"


class CountingRedis:
    """A Redis that answers PING and INFO, counting the connections made to it."""

    def __init__(self) -> None:
        self.connections = 0

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, ValueError):
            while True:
                name = (await read_resp_command(reader))[0].upper()
                if name == b"INFO":
                    info = b"redis_version:7.9.9\r\n"
                    writer.write(b"$%d\r\n%s\r\n" % (len(info), info))
                else:
                    writer.write(simple_answer(name))
                await writer.drain()


def test_the_test_route_passes_the_guard_of_now(node: NodeProcess) -> None:
    """After an admin narrows a tenant's allowed_hosts, `/test` connects no more (it did, and
    sent the credentials, while delivery already refused)."""
    tenant = new_tenant(node, allowed_hosts=["127.0.0.1"])
    server = CountingRedis()
    with hostile(server) as port:
        url = f"redis://alice:pw@127.0.0.1:{port}/0"
        call(node, tenant, "POST", "/v1/connections", {"name": "narrowed", "url": url})
        assert call(node, tenant, "POST", "/v1/connections/narrowed/test") == {
            "ok": True,
            "detail": "redis 7.9.9",
        }
        made = server.connections
        assert made >= 1
        status, _, _ = http(
            "PATCH", f"{node.url}/v1/tenants/{tenant.tenant_id}", {"allowed_hosts": ["x.test"]}
        )
        assert status == 200
        probed = call(node, tenant, "POST", "/v1/connections/narrowed/test")
    assert probed == {"ok": False, "detail": "blocked: host is not in the tenant's allowed_hosts"}
    assert server.connections == made
