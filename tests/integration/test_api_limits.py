"""Server limits on one real node: slow clients are cut off, bodies read at once and long polls
per tenant are capped, and /metrics is served on its own `[metrics] listen` address only."""

from __future__ import annotations

import json
import queue
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.api_helpers import Tenant, assert_error, new_tenant
from tests.servers import NodeProcess, free_ports, http, make_nodes, metrics_text, running

HEADER_TIMEOUT_S = 1.0
BODY_TIMEOUT_S = 3.0
LINGERING_S = 2.0  # schedd.api.limits.LINGERING_S
SLACK_S = 1.5  # scheduling on 2 shared cores
API = (
    f'header_timeout = "{HEADER_TIMEOUT_S}s"\nbody_timeout = "{BODY_TIMEOUT_S}s"\n'
    "max_body_reads = 2\nlong_polls_per_tenant = 2\n"
)
METRICS_PORT = free_ports(1)[0]


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    base: Path = tmp_path_factory.mktemp("limits")
    metrics = f'[metrics]\nlisten = "127.0.0.1:{METRICS_PORT}"\n'
    with running(make_nodes(base, 1, api_extra=API, extra_sections=metrics)) as nodes:
        yield nodes[0]


def _connect(node: NodeProcess) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", node.api_port), timeout=10)
    sock.settimeout(0.2)
    return sock


def _closed_after(sock: socket.socket, trickle: bytes, bound_s: float) -> tuple[float, bytes]:
    """Send `trickle` a byte every 0.2 s until the server closes the connection; (seconds it
    took, what the server answered). Fails past `bound_s`."""
    started, answer = time.monotonic(), b""
    for i in range(int(bound_s / 0.2) + 1):
        try:
            sock.sendall(trickle[i % len(trickle) : i % len(trickle) + 1])
        except OSError:  # reset: closed
            return time.monotonic() - started, answer
        try:
            chunk = sock.recv(65536)
            if not chunk:
                return time.monotonic() - started, answer
            answer += chunk
        except TimeoutError:
            continue
        except OSError:
            return time.monotonic() - started, answer
    raise AssertionError(f"still connected after {bound_s}s; answered {answer[:200]!r}")


def test_a_client_sending_headers_slowly_is_cut_off(node: NodeProcess) -> None:
    with _connect(node) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        took, answer = _closed_after(sock, b"X-Slow: 1\r\n", HEADER_TIMEOUT_S + SLACK_S)
    assert answer == b""  # never a complete request: nothing to answer
    assert took <= HEADER_TIMEOUT_S + SLACK_S


@pytest.mark.slow
def test_a_client_sending_a_body_slowly_gets_408_and_is_cut_off(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    head = (
        f"POST /v1/queues/q/ack HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {tenant.token}\r\n"
        "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
    )
    bound_s = BODY_TIMEOUT_S + LINGERING_S + SLACK_S
    with _connect(node) as sock:
        sock.sendall(head.encode() + b'{"receipts": [')
        took, answer = _closed_after(sock, b'"r",', bound_s)
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert b"api.body_timeout" in answer
    assert BODY_TIMEOUT_S - 0.5 <= took <= bound_s


def test_bodies_read_at_once_are_capped_node_wide(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    head = (
        f"POST /v1/queues/q/ack HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {tenant.token}\r\n"
        "Content-Length: 1000\r\n\r\n{"
    ).encode()
    slow = [_connect(node), _connect(node)]  # max_body_reads = 2, both held mid-body
    try:
        for sock in slow:
            sock.sendall(head)
        deadline = time.monotonic() + BODY_TIMEOUT_S - 0.5
        status, body, headers = 0, None, dict[str, str]()
        while time.monotonic() < deadline:  # until both slow bodies hold their slots
            status, body, headers = http(
                "POST", f"{node.url}/v1/queues/q/ack", {"receipts": ["r"]}, token=tenant.token
            )
            if status == 503:
                break
        error = assert_error(status, body, 503, "server_busy")
        assert "api.max_body_reads = 2" in error["message"]
        assert headers["Retry-After"] == "1"
    finally:
        for sock in slow:
            sock.close()
    status, body, _ = http(  # the slots are free again once those clients are gone
        "POST", f"{node.url}/v1/queues/q/ack", {"receipts": ["r"]}, token=tenant.token
    )
    assert status == 200, body


def _receive(node: NodeProcess, tenant: Tenant, wait: str) -> tuple[int, Any, dict[str, str]]:
    body = {"max": 1, "wait": wait}
    url = f"{node.url}/v1/queues/idle/receive"
    return http("POST", url, body, token=tenant.token, timeout_s=30)


@pytest.mark.slow
def test_long_polls_over_the_tenant_cap_are_429_while_another_tenant_polls(
    node: NodeProcess,
) -> None:
    busy, other = new_tenant(node), new_tenant(node)
    answers: queue.Queue[tuple[int, Any, dict[str, str]]] = queue.Queue()
    polls = [  # three long polls at once, two allowed: whichever comes last is refused
        threading.Thread(target=lambda: answers.put(_receive(node, busy, "6s"))) for _ in range(3)
    ]
    for thread in polls:
        thread.start()
    try:
        status, body, headers = answers.get(timeout=5)  # the refused one answers at once
        error = assert_error(status, body, 429, "quota_exceeded")
        assert "api.long_polls_per_tenant = 2" in error["message"]
        assert headers["Retry-After"] == "1"
        status, body, _ = _receive(node, busy, "0s")  # not a long poll: never capped
        assert (status, body) == (200, {"messages": []})
        status, body, _ = _receive(node, other, "0.5s")  # another tenant is not held back
        assert (status, body) == (200, {"messages": []})
    finally:
        for thread in polls:
            thread.join(timeout=15)
    held = [answers.get_nowait() for _ in range(2)]
    assert [(status, body) for status, body, _ in held] == [(200, {"messages": []})] * 2


def test_metrics_are_served_on_their_own_listener_only(node: NodeProcess) -> None:
    status, body, _ = http("GET", f"{node.url}/metrics")  # the admin token, on the API port
    assert_error(status, body, 404, "not_found")
    text = metrics_text(f"http://127.0.0.1:{METRICS_PORT}", token=None)  # loopback: no token
    assert "schedd_raft_applied_index" in text
    status, body, _ = http("GET", f"http://127.0.0.1:{METRICS_PORT}/v1/cluster")
    assert status == 404, body  # that listener serves /metrics and nothing else


def test_limits_do_not_disturb_ordinary_requests(node: NodeProcess) -> None:
    tenant = new_tenant(node)
    body = {"schedule": {"delay": "1h"}, "target": {"type": "queue", "name": "q"}}
    status, job, _ = http("POST", f"{node.url}/v1/jobs", body, token=tenant.token)
    assert status == 201, job
    assert json.loads(json.dumps(job))["job_id"].startswith("job_")
