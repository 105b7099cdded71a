"""HTTP callback delivery end to end: real `schedd serve` nodes call a scripted local receiver.

Signed requests (checked by a verifier written here from the Standard Webhooks spec), retries
with Retry-After, timeouts, dead letters and redrive, 410 Gone, redirects, the SSRF guard at the
API and at delivery, tenant isolation, secret rotation, the alert webhook, a call cut short by
kill -9, and logs free of payloads and secrets.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Iterator, Mapping
from email.utils import formatdate
from pathlib import Path
from typing import Any

import pytest

from schedd import __version__
from schedd.timeformat import format_instant
from tests.integration.api_helpers import (
    Tenant,
    all_audit,
    assert_error,
    create_job,
    get_job,
    list_all_jobs,
    new_tenant,
)
from tests.receiver import Answer, Received, Receiver, receiving
from tests.servers import (
    NodeProcess,
    free_ports,
    http,
    make_nodes,
    metrics_text,
    ms,
    now_ms,
    running,
    wait_for,
    wait_ready,
)

DISPATCH = '[dispatch]\nlease_ttl = "2s"\n'
TENANT_CONCURRENCY = 2
SECRET_OVERLAP_MS = 4_000
DELIVERY = (
    '[delivery]\nallow_cidrs = ["127.0.0.0/8"]\n'
    f"tenant_concurrency = {TENANT_CONCURRENCY}\n"
    f'secret_overlap = "{SECRET_OVERLAP_MS}ms"\n'
)
FAST_RETRY = {"max_attempts": 3, "backoff": "fixed", "initial_delay": "1s", "max_delay": "1s"}
NO_RETRY = {**FAST_RETRY, "max_attempts": 1}
MARKER = "payload-marker-5c1e9f27d3"  # in every payload here: must never reach a log
HEADER_SECRET = "hdr-secret-8d2b6a41f0"  # a credential in a job's extra headers
SENSITIVE: list[str] = [MARKER, HEADER_SECRET]  # plus every token and signing secret made here
RUN_TIMEOUT_S = 20.0


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    """One node that may call loopback (the receiver), with a small per-tenant concurrency."""
    base: Path = tmp_path_factory.mktemp("delivery")
    with running(make_nodes(base, 1, extra_sections=DISPATCH + DELIVERY)) as nodes:
        yield nodes[0]


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    """A node with the default SSRF rules: no private network allowed."""
    base: Path = tmp_path_factory.mktemp("guarded")
    with running(make_nodes(base, 1, extra_sections=DISPATCH)) as nodes:
        yield nodes[0]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as started:
        yield started


# ------------------------------------------------------------------ helpers


def make_tenant(node: NodeProcess, **settings: Any) -> Tenant:
    """A new tenant whose token and signing secret the log test looks for."""
    tenant = new_tenant(node, **settings)
    SENSITIVE.extend([tenant.token, tenant.signing_secret])
    return tenant


def http_job(url: str, *, retry: Mapping[str, Any] | None = None, **target: Any) -> dict[str, Any]:
    """A job due now that calls `url`; `target` adds method, headers or timeout."""
    body: dict[str, Any] = {
        "schedule": {"delay": "0s"},
        "target": {"type": "http", "url": url, **target},
        "payload": {"marker": MARKER},
    }
    if retry is not None:
        body["retry"] = dict(retry)
    return body


def runs_of(node: NodeProcess, tenant: Tenant, job_id: str) -> list[dict[str, Any]]:
    """The job's runs, oldest first (one page is plenty here)."""
    status, page, _ = http("GET", f"{node.url}/v1/jobs/{job_id}/runs?limit=100", token=tenant.token)
    assert status == 200, page
    return sorted(page["runs"], key=lambda r: ms(r["scheduled_at"]))


def wait_run(
    node: NodeProcess, tenant: Tenant, job_id: str, status: str, timeout_s: float = RUN_TIMEOUT_S
) -> dict[str, Any]:
    """The job's only run, once it has `status`."""
    deadline = time.monotonic() + timeout_s
    while True:
        runs = runs_of(node, tenant, job_id)
        if len(runs) == 1 and runs[0]["status"] == status:
            return runs[0]
        if time.monotonic() > deadline:
            raise AssertionError(f"no {status} run of {job_id} in {timeout_s}s: {runs}")
        time.sleep(0.05)


def deadletters(node: NodeProcess, tenant: Tenant) -> list[dict[str, Any]]:
    status, page, _ = http("GET", f"{node.url}/v1/deadletters?limit=100", token=tenant.token)
    assert status == 200, page
    found: list[dict[str, Any]] = page["deadletters"]
    return found


def dead_letter_metric(node: NodeProcess) -> float:
    """The node's count of HTTP runs that died (Prometheus text from /metrics)."""
    return metric(node, "schedd_callback_dead_letters_total")


def metric(node: NodeProcess, name: str) -> float:
    """One unlabelled series of the node's /metrics."""
    for line in metrics_text(node.url).splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in /metrics")


def headers_of(request: Received) -> dict[str, str]:
    """The request's headers with lowercase names."""
    return {name.lower(): value for name, value in request.headers.items()}


def verified_by(secret: str, headers: Mapping[str, str], body: bytes) -> list[int]:
    """Which entries of `webhook-signature` `secret` verifies, per the Standard Webhooks spec:
    the key is the base64 after `whsec_`; each space-separated entry is `v1,<base64 of
    HMAC-SHA256(key, "<webhook-id>.<webhook-timestamp>.<body>")>`; other versions are skipped,
    and a timestamp more than 5 minutes away is refused."""
    assert secret.startswith("whsec_"), "not a Standard Webhooks secret"
    key = base64.b64decode(secret.removeprefix("whsec_"), validate=True)
    msg_id, timestamp = headers["webhook-id"], headers["webhook-timestamp"]
    assert timestamp.isdigit() and abs(time.time() - int(timestamp)) <= 300, timestamp
    signed = f"{msg_id}.{timestamp}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    matches = []
    for i, entry in enumerate(headers["webhook-signature"].split(" ")):
        version, _, signature = entry.partition(",")
        if version == "v1" and hmac.compare_digest(signature, expected):
            matches.append(i)
    return matches


def body_of(request: Received) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(request.body)
    return decoded


# ------------------------------------------------------------------ success


def test_successful_callback_is_one_signed_request_with_the_documented_body_and_headers(
    node: NodeProcess, receiver: Receiver
) -> None:
    tenant, other = make_tenant(node), make_tenant(node)
    text = 'quote " backslash \\ emoji \U0001f389 separator \u2028 end'
    payload = {"marker": MARKER, "n": 7, "nested": {"ü": [1, 2.5, None, True], "s": text}}
    extra = {"X-Trace": "trace-42", "X-Api-Key": HEADER_SECRET}
    job = create_job(
        node, tenant.token, {**http_job(receiver.url("ok"), headers=extra), "payload": payload}
    )
    [request] = receiver.wait_for(1, "ok")
    run = wait_run(node, tenant, job["job_id"], "succeeded")
    key = f"{job['job_id']}:{job['next_run_at']}"
    assert request.method == "POST"
    assert body_of(request) == {
        "job_id": job["job_id"],
        "scheduled_at": job["next_run_at"],
        "attempt": 1,
        "payload": payload,
    }
    headers = headers_of(request)
    assert headers["idempotency-key"] == key
    assert headers["content-type"] == "application/json"
    assert f"schedd/{__version__}" in headers["user-agent"], headers["user-agent"]
    assert headers["x-trace"] == "trace-42" and headers["x-api-key"] == HEADER_SECRET
    assert headers["webhook-id"] == key
    assert abs(int(headers["webhook-timestamp"]) - request.at) <= 2, headers
    assert verified_by(tenant.signing_secret, headers, request.body) == [0]
    assert verified_by(tenant.signing_secret, headers, request.body + b" ") == []
    assert verified_by(other.signing_secret, headers, request.body) == []
    assert run["scheduled_at"] == job["next_run_at"] and run["attempt"] == 1
    assert run["error"] is None and run["finished_at"] is not None
    [attempt] = run["attempts"]
    assert attempt["attempt"] == 1 and attempt["outcome"] == "succeeded", attempt
    started, finished = ms(attempt["started_at"]), ms(attempt["finished_at"])
    assert started - 50 <= request.at * 1000 <= finished + 50, (attempt, request.at)
    assert len(receiver.received("ok")) == 1


# ------------------------------------------------------------------ retries


def _retry_after_seconds() -> tuple[str, float]:
    return "2", 0.0


def _retry_after_date() -> tuple[str, float]:
    when = int(time.time()) + 4
    return formatdate(when, usegmt=True), float(when)


@pytest.mark.parametrize("form", ["seconds", "http-date"])
@pytest.mark.slow
def test_retry_honours_retry_after_then_succeeds(
    node: NodeProcess, receiver: Receiver, form: str
) -> None:
    tenant = make_tenant(node)
    value, not_before = _retry_after_seconds() if form == "seconds" else _retry_after_date()
    receiver.script("busy", Answer(503, {"Retry-After": value}, body="busy now"), Answer(200))
    retry = {"max_attempts": 3, "backoff": "fixed", "initial_delay": "1s", "max_delay": "10s"}
    job = create_job(node, tenant.token, http_job(receiver.url("busy"), retry=retry))
    first, second = receiver.wait_for(2, "busy")
    gap = second.at - first.at
    if form == "seconds":  # the 1 s backoff alone would allow a gap under a second
        assert 2.0 <= gap <= 4.0, gap
    else:
        assert not_before <= second.at <= not_before + 2.0, (second.at, not_before)
    assert [body_of(r)["attempt"] for r in (first, second)] == [1, 2]
    assert headers_of(first)["idempotency-key"] == headers_of(second)["idempotency-key"]
    run = wait_run(node, tenant, job["job_id"], "succeeded")
    assert run["attempt"] == 2
    failed, succeeded = run["attempts"]
    assert failed["outcome"] == "failed" and "503" in failed["error"], failed
    assert succeeded["outcome"] == "succeeded" and succeeded["attempt"] == 2, succeeded
    assert ms(succeeded["started_at"]) - ms(failed["finished_at"]) >= 1_900, run


def test_a_run_that_succeeds_after_a_500_has_no_error_its_failed_attempt_has(
    node: NodeProcess, receiver: Receiver
) -> None:
    tenant = make_tenant(node)
    receiver.script("boom", Answer(500, body="boom"), Answer(200))
    job = create_job(node, tenant.token, http_job(receiver.url("boom"), retry=FAST_RETRY))
    run = wait_run(node, tenant, job["job_id"], "succeeded")
    assert (run["attempt"], run["error"]) == (2, None), run
    failed, succeeded = run["attempts"]
    assert failed["outcome"] == "failed" and "500" in failed["error"], run
    assert (succeeded["outcome"], succeeded["error"]) == ("succeeded", None), run


def test_retry_after_is_capped_by_max_delay(node: NodeProcess, receiver: Receiver) -> None:
    tenant = make_tenant(node)
    receiver.script("capped", Answer(503, {"Retry-After": "3600"}), Answer(200))
    retry = {"max_attempts": 2, "backoff": "fixed", "initial_delay": "1s", "max_delay": "2s"}
    job = create_job(node, tenant.token, http_job(receiver.url("capped"), retry=retry))
    first, second = receiver.wait_for(2, "capped")
    assert 1.9 <= second.at - first.at <= 3.5, second.at - first.at
    assert wait_run(node, tenant, job["job_id"], "succeeded")["attempt"] == 2


def test_connection_refused_is_retried_then_dead(node: NodeProcess) -> None:
    tenant = make_tenant(node)
    [closed] = free_ports(1)  # nothing listens there
    job = create_job(node, tenant.token, http_job(f"http://127.0.0.1:{closed}/x", retry=FAST_RETRY))
    run = wait_run(node, tenant, job["job_id"], "dead")
    assert len(run["attempts"]) == 3, run
    assert all("connection" in a["error"] for a in run["attempts"]), run


@pytest.mark.slow
def test_429_408_and_timeouts_retry_then_the_run_is_dead_and_redrive_delivers_it(
    node: NodeProcess, receiver: Receiver
) -> None:
    tenant = make_tenant(node)
    receiver.script(
        "flaky", Answer(429, body="slow down"), Answer(408, body="late"), Answer(delay_s=3.0)
    )
    retry = {**FAST_RETRY, "max_attempts": 4}
    job = create_job(node, tenant.token, http_job(receiver.url("flaky"), retry=retry, timeout="1s"))
    run = wait_run(node, tenant, job["job_id"], "dead")
    assert run["attempt"] == 4 and len(receiver.received("flaky")) == 4
    too_many, too_late, *timed_out = run["attempts"]
    assert [a["outcome"] for a in run["attempts"]] == ["failed"] * 4, run
    assert "429" in too_many["error"] and "408" in too_late["error"], run
    assert all("timed out" in a["error"] for a in timed_out), timed_out
    assert all(ms(a["finished_at"]) - ms(a["started_at"]) < 2_500 for a in timed_out), timed_out
    assert "timed out" in run["error"], run
    [dead] = deadletters(node, tenant)
    assert dead["job_id"] == job["job_id"] and dead["scheduled_at"] == run["scheduled_at"]
    assert dead["attempts"] == 4 and "timed out" in dead["error"], dead
    assert dead["target"] == job["target"], dead
    status, shown, _ = http("GET", f"{node.url}/v1/deadletters/{dead['id']}", token=tenant.token)
    assert status == 200 and shown == dead, shown

    receiver.script("flaky", Answer(200))
    url = f"{node.url}/v1/deadletters/{dead['id']}/redrive"
    status, answer, _ = http("POST", url, token=tenant.token)
    assert status == 202, answer
    redriven = receiver.wait_for(5, "flaky")[4]
    assert body_of(redriven)["attempt"] == 5
    assert headers_of(redriven)["idempotency-key"] == f"{job['job_id']}:{run['scheduled_at']}"
    run = wait_run(node, tenant, job["job_id"], "succeeded")
    assert run["attempts"][-1]["outcome"] == "succeeded", run
    assert run["error"] is None and "timed out" in run["attempts"][-2]["error"], run
    assert deadletters(node, tenant) == []
    status, answer, _ = http("POST", url, token=tenant.token)  # redriven once, then gone
    assert_error(status, answer, 404)
    assert len(receiver.received("flaky")) == 5


# ------------------------------------------------------------------ failures without retry


def test_404_fails_without_retry(node: NodeProcess, receiver: Receiver) -> None:
    tenant = make_tenant(node)
    dead_before = dead_letter_metric(node)
    receiver.script("missing", Answer(404, body="no such hook " + "x" * 100_000))
    job = create_job(node, tenant.token, http_job(receiver.url("missing"), retry=FAST_RETRY))
    run = wait_run(node, tenant, job["job_id"], "dead")
    [attempt] = run["attempts"]
    assert attempt["outcome"] == "failed" and "404" in attempt["error"], attempt
    assert run["attempt"] == 1 and "404" in run["error"], run
    assert "no such hook" in attempt["error"] and len(attempt["error"]) <= 512, attempt
    [dead] = deadletters(node, tenant)
    assert dead["attempts"] == 1 and "404" in dead["error"], dead
    assert len(receiver.received("missing")) == 1
    assert dead_letter_metric(node) >= dead_before + 1
    stranger = make_tenant(node)  # another tenant's dead letter is "not found"
    url = f"{node.url}/v1/deadletters/{dead['id']}"
    for method, path in (("GET", url), ("POST", f"{url}/redrive"), ("DELETE", url)):
        status, answer, _ = http(method, path, token=stranger.token)
        assert_error(status, answer, 404)
    status, answer, _ = http("DELETE", url, token=tenant.token)
    assert status == 204, answer
    status, answer, _ = http("GET", url, token=tenant.token)
    assert_error(status, answer, 404)
    assert deadletters(node, tenant) == []


@pytest.mark.parametrize("status", [302, 307])
def test_redirect_is_a_failed_attempt_and_is_not_followed(
    node: NodeProcess, receiver: Receiver, status: int
) -> None:
    tenant = make_tenant(node)
    elsewhere = f"elsewhere-{status}"
    # The redirect points at a loopback address this node may call: following it would show.
    receiver.script("moved", Answer(status, {"Location": receiver.url(elsewhere)}))
    job = create_job(node, tenant.token, http_job(receiver.url("moved"), retry=FAST_RETRY))
    run = wait_run(node, tenant, job["job_id"], "dead")
    assert run["attempts"], run
    for attempt in run["attempts"]:
        assert attempt["outcome"] == "failed", attempt
        assert str(status) in attempt["error"] and "redirect" in attempt["error"].lower(), attempt
    assert len(receiver.received("moved")) == len(run["attempts"])
    assert receiver.received(elsewhere) == []


def test_410_gone_cancels_the_job_and_the_audit_log_says_delivery_did_it(
    node: NodeProcess, receiver: Receiver
) -> None:
    tenant = make_tenant(node)
    receiver.script("gone", Answer(410, body="gone"))
    body = {**http_job(receiver.url("gone"), retry=FAST_RETRY), "schedule": {"every": "1h"}}
    job = create_job(node, tenant.token, body)
    status, triggered, _ = http(
        "POST", f"{node.url}/v1/jobs/{job['job_id']}/trigger", token=tenant.token
    )
    assert status == 202, triggered
    run = wait_run(node, tenant, job["job_id"], "dead")
    assert run["scheduled_at"] == triggered["scheduled_at"] and len(run["attempts"]) == 1, run
    assert "410" in run["error"], run
    after = get_job(node, tenant.token, job["job_id"])
    assert after["status"] == "cancelled" and after["next_run_at"] is None, after
    assert after["version"] > job["version"]
    [cancelled] = [
        r
        for r in all_audit(node, tenant.token)
        if r["job_id"] == job["job_id"] and r["action"] == "cancel_job"
    ]
    assert "delivery" in cancelled["actor"] and "410" in cancelled["actor"], cancelled
    assert len(receiver.received("gone")) == 1


# ------------------------------------------------------------------ signing secrets and alerts


@pytest.mark.slow
def test_rotated_secret_signs_beside_the_old_one_during_the_overlap(
    node: NodeProcess, receiver: Receiver
) -> None:
    tenant = make_tenant(node)
    create_job(node, tenant.token, http_job(receiver.url("before")))
    [before] = receiver.wait_for(1, "before")
    assert verified_by(tenant.signing_secret, headers_of(before), before.body) == [0]
    url = f"{node.url}/v1/tenants/{tenant.tenant_id}/rotate"
    status, rotated, _ = http("POST", url)
    assert status == 200 and rotated["tenant_id"] == tenant.tenant_id, rotated
    SENSITIVE.extend([rotated["token"], rotated["signing_secret"]])
    assert rotated["signing_secret"] != tenant.signing_secret
    create_job(node, rotated["token"], http_job(receiver.url("after")))
    [after] = receiver.wait_for(1, "after")
    headers = headers_of(after)
    assert len(headers["webhook-signature"].split(" ")) == 2, headers["webhook-signature"]
    old = verified_by(tenant.signing_secret, headers, after.body)
    new = verified_by(rotated["signing_secret"], headers, after.body)
    assert len(old) == len(new) == 1 and old != new, (old, new)
    # After the overlap only the new secret signs.
    status, shown, _ = http("GET", f"{node.url}/v1/tenants/{tenant.tenant_id}")
    assert status == 200, shown
    overlap_ends_ms = ms(shown["updated_at"]) + SECRET_OVERLAP_MS
    later = {"run_at": format_instant(overlap_ends_ms + 500)}
    create_job(node, rotated["token"], {**http_job(receiver.url("later")), "schedule": later})
    [last] = receiver.wait_for(1, "later", timeout_s=SECRET_OVERLAP_MS / 1000 + 10)
    headers = headers_of(last)
    assert len(headers["webhook-signature"].split(" ")) == 1, headers["webhook-signature"]
    assert verified_by(rotated["signing_secret"], headers, last.body) == [0]
    assert verified_by(tenant.signing_secret, headers, last.body) == []


def test_dead_run_is_announced_on_the_tenant_alert_webhook(
    node: NodeProcess, receiver: Receiver
) -> None:
    tenant = make_tenant(node)
    url = f"{node.url}/v1/tenants/{tenant.tenant_id}"
    status, changed, _ = http("PATCH", url, {"alert_url": receiver.url("alerts")})
    assert status == 200 and changed["alert_url"] == receiver.url("alerts"), changed
    receiver.script("dead-end", Answer(404))
    job = create_job(node, tenant.token, http_job(receiver.url("dead-end"), retry=FAST_RETRY))
    run = wait_run(node, tenant, job["job_id"], "dead")
    [alert] = receiver.wait_for(1, "alerts")
    assert alert.method == "POST"
    assert body_of(alert) == {
        "type": "run.dead",
        "job_id": job["job_id"],
        "scheduled_at": run["scheduled_at"],
    }
    headers = headers_of(alert)
    assert headers["content-type"] == "application/json"
    assert job["job_id"] in headers["webhook-id"], headers
    assert verified_by(tenant.signing_secret, headers, alert.body) == [0]


# ------------------------------------------------------------------ names and the guard at delivery


def test_host_name_target_is_resolved_checked_and_called_with_its_host_header(
    node: NodeProcess, receiver: Receiver
) -> None:
    tenant = make_tenant(node)
    url = f"http://localhost:{receiver.port}/named"  # resolves to 127.0.0.1, which is allowed
    no_payload = {k: v for k, v in http_job(url, method="PUT").items() if k != "payload"}
    job = create_job(node, tenant.token, no_payload)
    [request] = receiver.wait_for(1, "named")
    assert request.method == "PUT"
    assert headers_of(request)["host"] == f"localhost:{receiver.port}"
    assert body_of(request) == {
        "job_id": job["job_id"],
        "scheduled_at": job["next_run_at"],
        "attempt": 1,
        "payload": None,
    }
    wait_run(node, tenant, job["job_id"], "succeeded")


def test_targets_are_checked_again_at_delivery(node: NodeProcess, receiver: Receiver) -> None:
    tenant = make_tenant(node)
    soon = {"run_at": format_instant(now_ms() + 2_000)}
    body = {**http_job(receiver.url("recheck"), retry=FAST_RETRY), "schedule": soon}
    job = create_job(node, tenant.token, body)
    url = f"{node.url}/v1/tenants/{tenant.tenant_id}"
    status, changed, _ = http("PATCH", url, {"allowed_hosts": ["*.example.com"]})
    assert status == 200 and changed["allowed_hosts"] == ["*.example.com"], changed
    run = wait_run(node, tenant, job["job_id"], "dead")
    assert all(a["outcome"] == "failed" for a in run["attempts"]), run
    assert "blocked" in run["error"] and "allowed_hosts" in run["error"], run
    assert receiver.received("recheck") == []


# ------------------------------------------------------------------ tenant isolation


def test_a_tenant_whose_endpoint_stalls_does_not_delay_another_tenant(
    node: NodeProcess, receiver: Receiver
) -> None:
    stalling, fast = make_tenant(node), make_tenant(node)
    receiver.script("stall", Answer(delay_s=8.0))
    due_ms = now_ms() + 2_000
    when = {"run_at": format_instant(due_ms)}
    slow_job = {
        **http_job(receiver.url("stall"), retry=NO_RETRY, timeout="5s"),
        "schedule": when,
    }
    fast_job = {**http_job(receiver.url("quick")), "schedule": when}
    for tenant, body in ((stalling, slow_job), (fast, fast_job)):
        status, created, _ = http(
            "POST", f"{node.url}/v1/jobs:batch", {"jobs": [body] * 20}, token=tenant.token
        )
        assert status == 200 and all("job_id" in r for r in created["results"]), created
    quick = receiver.wait_for(20, "quick", timeout_s=15)
    stalled = receiver.received("stall")
    lags = sorted(r.at * 1000 - due_ms for r in quick)
    assert lags[0] >= -50 and lags[-1] <= 3_000, lags
    # The stalling tenant holds its share of the callers: its first calls still hang.
    assert 1 <= len(stalled) <= TENANT_CONCURRENCY, [r.at * 1000 - due_ms for r in stalled]
    assert max(r.at for r in quick) < min(r.at for r in stalled) + 5.0


# ------------------------------------------------------------------ the SSRF guard at the API

BLOCKED_URLS = [
    # IPv4 loopback, in every spelling inet_aton accepts
    "http://127.0.0.1/x",
    "http://127.0.0.1:8080/x",
    "http://127.1/x",
    "http://2130706433/x",
    "http://0x7f000001/x",
    "http://0177.0.0.1/x",
    "http://0x7f.0.0.1/x",
    "http://127.0.0.1./x",
    "http://127.000.000.001/x",
    "http://0x7f.0x0.0x0.0x1/x",
    "http://000177.0.0.01/x",
    "http://127.0.0.1%2e/x",
    "http://\uff11\uff12\uff17.\uff10.\uff10.\uff11/x",  # fullwidth digits
    "http://\u2460\u2461\u2466.0.0.1/x",  # circled digits: NFKC makes them 127
    # private, CGNAT, unspecified
    "http://10.0.0.1/x",
    "http://012.0.0.1/x",
    "http://167772161/x",
    "http://172.16.0.1/x",
    "http://172.31.255.255/x",
    "http://192.168.1.1/x",
    "http://0xc0.0xa8.1.1/x",
    "http://3232235777/x",
    "http://100.64.0.1/x",
    "http://100.127.255.254/x",
    "http://0.0.0.0/x",
    "http://0/x",
    # link-local: the cloud metadata address
    "http://169.254.169.254/latest/meta-data/",
    "http://0xa9fea9fe/latest/meta-data/",
    "http://2852039166/latest/meta-data/",
    "http://169.254.1/x",
    # multicast, broadcast, reserved
    "http://224.0.0.1/x",
    "http://239.255.255.250/x",
    "http://255.255.255.255/x",
    "http://240.0.0.1/x",
    # IPv6
    "http://[::1]/x",
    "https://[::1]:8443/x",
    "http://[::]/x",
    "http://[0:0:0:0:0:0:0:1]/x",
    "http://[fe80::1]/x",
    "http://[fc00::1]/x",
    "http://[fd12:3456::1]/x",
    "http://[ff02::1]/x",
    "http://[::ffff:10.0.0.1]/x",
    "http://[::ffff:127.0.0.1]/x",
    "http://[::ffff:127.0.0.1]:8080/x",
    "http://[::ffff:0:0]/x",
    "http://[::ffff:a9fe:a9fe]/x",
    "http://[::127.0.0.1]/x",
    "http://[64:ff9b::a00:1]/x",
    "http://[2002:a00:1::]/x",
    # ports outside 80, 443 and 1024-65535
    "http://93.184.215.14:22/x",
    "http://93.184.215.14:25/x",
    "https://93.184.215.14:1023/x",
    "http://example.com:8/x",
    # host names that resolve to loopback
    "http://localhost:8080/x",
    "http://LOCALHOST./x",
]
REFUSED_URLS = [  # the job parser may refuse these first (400); never accepted
    "ftp://93.184.215.14/x",
    "file:///etc/passwd",
    "gopher://93.184.215.14:70/x",
    "javascript:alert(1)",
    "http://user:pass@93.184.215.14/x",
    "http://93.184.215.14@127.0.0.1/x",
    "http://user@example.com/x",
    "http://93.184.215.14:0/x",
    "http://[::1/x",
    "http://127.0.0.1\\@example.com/x",
]
CANARY_URL = "https://93.184.215.14/hook"  # a public address: allowed


def _post_job(node: NodeProcess, tenant: Tenant, url: str) -> tuple[int, Any]:
    body = {**http_job(url), "schedule": {"delay": "1h"}}
    status, answer, _ = http("POST", f"{node.url}/v1/jobs", body, token=tenant.token)
    return status, answer


def test_ssrf_guard_refuses_private_and_tricky_targets_at_create(guarded: NodeProcess) -> None:
    tenant = make_tenant(guarded)
    assert len(BLOCKED_URLS) >= 30
    for url in BLOCKED_URLS:
        status, answer = _post_job(guarded, tenant, url)
        error = assert_error(status, answer, 422, "blocked_target")
        assert "target.url" in error["message"], (url, error)
    for url in REFUSED_URLS:
        status, answer = _post_job(guarded, tenant, url)
        assert status in (400, 422), (url, status, answer)
        assert_error(status, answer, status)
    assert list_all_jobs(guarded, tenant.token) == []  # a failed request changes nothing
    status, canary = _post_job(guarded, tenant, CANARY_URL)
    assert status == 201 and canary["target"]["url"] == CANARY_URL, canary
    batch = {"jobs": [http_job(CANARY_URL), http_job("http://[::ffff:7f00:1]/x")]}
    status, answer, _ = http("POST", f"{guarded.url}/v1/jobs:batch", batch, token=tenant.token)
    assert status == 200, answer
    accepted, refused = answer["results"]
    assert "job_id" in accepted and refused["error"]["code"] == "blocked_target", answer


def test_ssrf_guard_refuses_a_blocked_target_on_update(guarded: NodeProcess) -> None:
    tenant = make_tenant(guarded)
    status, job = _post_job(guarded, tenant, CANARY_URL)
    assert status == 201, job
    url = f"{guarded.url}/v1/jobs/{job['job_id']}"
    for blocked in ("http://10.0.0.1/x", "http://localhost/x", "http://[::ffff:169.254.169.254]/"):
        target = {"type": "http", "url": blocked}
        status, answer, _ = http("PATCH", url, {"target": target}, token=tenant.token)
        assert_error(status, answer, 422, "blocked_target")
    after = get_job(guarded, tenant.token, job["job_id"])
    assert after["target"] == job["target"] and after["version"] == job["version"], after


def test_alert_url_is_held_to_the_same_ssrf_rules(guarded: NodeProcess) -> None:
    tenant = make_tenant(guarded)
    url = f"{guarded.url}/v1/tenants/{tenant.tenant_id}"
    answers: dict[str, tuple[int, str | None]] = {}
    for blocked in (
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/alerts",
        "http://0x7f.1:8080/alerts",
        "http://example.com:22/alerts",
        "http://localhost:8080/alerts",  # a name that resolves to loopback, as for targets
    ):
        status, answer, _ = http("PATCH", url, {"alert_url": blocked})
        answers[f"PATCH {blocked}"] = (status, answer.get("error", {}).get("code"))
        body = {"name": f"t-{time.monotonic_ns()}", "alert_url": blocked}
        status, answer, _ = http("POST", f"{guarded.url}/v1/tenants", body)
        answers[f"POST {blocked}"] = (status, answer.get("error", {}).get("code"))
    wrong = {case: got for case, got in answers.items() if got != (422, "blocked_target")}
    assert wrong == {}, wrong
    status, shown, _ = http("GET", url)
    assert status == 200 and shown["alert_url"] is None, shown
    status, changed, _ = http("PATCH", url, {"alert_url": CANARY_URL})
    assert status == 200 and changed["alert_url"] == CANARY_URL, changed


def test_target_timeout_is_bounded(guarded: NodeProcess) -> None:
    tenant = make_tenant(guarded)
    for timeout, expected in (("0.5s", 400), ("61s", 400), ("1s", 201), ("60s", 201)):
        body = {**http_job(CANARY_URL, timeout=timeout), "schedule": {"delay": "1h"}}
        status, answer, _ = http("POST", f"{guarded.url}/v1/jobs", body, token=tenant.token)
        assert status == expected, (timeout, answer)


def test_tenant_allowed_hosts_restrict_targets(guarded: NodeProcess) -> None:
    tenant = make_tenant(guarded, allowed_hosts=["*.example.com"])
    for url in (
        "https://example.org/x",
        "https://evilexample.com/x",
        "https://api.example.com.evil.org/x",
        CANARY_URL,
    ):
        status, answer = _post_job(guarded, tenant, url)
        assert_error(status, answer, 422, "blocked_target")
    status, job = _post_job(guarded, tenant, "https://api.example.com/x")
    assert status == 201, job
    patch = {"target": {"type": "http", "url": "https://hooks.example.net/x"}}
    status, answer, _ = http(
        "PATCH", f"{guarded.url}/v1/jobs/{job['job_id']}", patch, token=tenant.token
    )
    assert_error(status, answer, 422, "blocked_target")


# ------------------------------------------------------------------ one tenant cannot stop delivery


def test_a_retry_after_of_thousands_of_digits_is_a_retried_attempt_and_frees_its_slot(
    node: NodeProcess, receiver: Receiver
) -> None:
    bad, good = make_tenant(node), make_tenant(node)
    receiver.script("huge-retry-after", Answer(503, {"Retry-After": "9" * 5_000}), Answer(200))
    job = create_job(node, bad.token, http_job(receiver.url("huge-retry-after"), retry=FAST_RETRY))
    run = wait_run(node, bad, job["job_id"], "succeeded")
    failed, succeeded = run["attempts"]
    assert failed["outcome"] == "failed" and "invalid response" in failed["error"], failed
    assert succeeded["outcome"] == "succeeded" and succeeded["attempt"] == 2, run
    later = [create_job(node, good.token, http_job(receiver.url("after-huge"))) for _ in range(5)]
    for created in later:
        wait_run(node, good, created["job_id"], "succeeded")
    wait_for(lambda: metric(node, "schedd_callbacks_in_flight") == 0, 10, "every slot free")
    assert len(receiver.received("after-huge")) == 5


def test_a_redriven_run_of_100_attempts_is_called_again_and_frees_its_slot(
    node: NodeProcess, receiver: Receiver
) -> None:
    tenant = make_tenant(node)
    receiver.script("down-100", Answer(500, body="still down"))
    most = {"max_attempts": 100, "backoff": "fixed", "initial_delay": "0s", "max_delay": "0s"}
    job = create_job(node, tenant.token, http_job(receiver.url("down-100"), retry=most))
    wait_run(node, tenant, job["job_id"], "dead", timeout_s=60)
    [dead] = deadletters(node, tenant)
    assert dead["attempts"] == 100, dead
    url = f"{node.url}/v1/deadletters/{dead['id']}/redrive"
    status, answer, _ = http("POST", url, token=tenant.token)
    assert status == 202, answer
    run = wait_run(node, tenant, job["job_id"], "dead")  # "retrying" since the redrive applied
    last = run["attempts"][-1]
    assert run["attempt"] == last["attempt"] == 101 and "500" in last["error"], run
    assert [d["attempts"] for d in deadletters(node, tenant)] == [101]
    assert len(receiver.received("down-100")) == 101
    wait_for(lambda: metric(node, "schedd_callbacks_in_flight") == 0, 10, "every slot free")


def test_alert_url_must_be_one_of_the_tenants_allowed_hosts(
    node: NodeProcess, receiver: Receiver
) -> None:
    tenant = make_tenant(node, allowed_hosts=["localhost"])
    url = f"{node.url}/v1/tenants/{tenant.tenant_id}"
    outside = receiver.url("alerts")  # 127.0.0.1: allowed by the node, not by the tenant
    status, answer, _ = http("PATCH", url, {"alert_url": outside})
    error = assert_error(status, answer, 400)
    assert error["message"].startswith("alert_url:") and "allowed_hosts" in error["message"]
    body = {"name": f"t-{time.monotonic_ns()}", "allowed_hosts": ["localhost"]}
    status, answer, _ = http("POST", f"{node.url}/v1/tenants", body | {"alert_url": outside})
    assert_error(status, answer, 400)
    status, shown, _ = http("GET", url)
    assert status == 200 and shown["alert_url"] is None, shown
    inside = f"http://localhost:{receiver.port}/alerts"
    status, changed, _ = http("PATCH", url, {"alert_url": inside})
    assert status == 200 and changed["alert_url"] == inside, changed
    both = {"allowed_hosts": ["localhost", "127.0.0.1"], "alert_url": outside}
    status, changed, _ = http("PATCH", url, both)  # judged by the hosts it sets
    assert status == 200 and changed["alert_url"] == outside, changed


def test_alert_webhook_outside_allowed_hosts_is_not_called(
    node: NodeProcess, receiver: Receiver
) -> None:
    tenant = make_tenant(node)
    url = f"{node.url}/v1/tenants/{tenant.tenant_id}"
    status, changed, _ = http("PATCH", url, {"alert_url": receiver.url("held-alerts")})
    assert status == 200, changed
    status, changed, _ = http("PATCH", url, {"allowed_hosts": ["localhost"]})
    assert status == 200 and changed["allowed_hosts"] == ["localhost"], changed
    receiver.script("held-dead-end", Answer(404))
    target = f"http://localhost:{receiver.port}/held-dead-end"
    job = create_job(node, tenant.token, http_job(target, retry=FAST_RETRY))
    wait_run(node, tenant, job["job_id"], "dead")
    blocked = f"alert webhook blocked tenant={tenant.tenant_id}"
    wait_for(lambda: blocked in node.log_path.read_text(errors="replace"), 10, blocked)
    assert receiver.received("held-alerts") == []


# ------------------------------------------------------------------ crashes (restart the node)


def test_call_cut_short_by_kill_9_is_made_again_after_the_restart(
    node: NodeProcess, receiver: Receiver
) -> None:
    tenant = make_tenant(node)
    receiver.script("crash", Answer(delay_s=3.0), Answer(200))
    job = create_job(node, tenant.token, http_job(receiver.url("crash"), timeout="10s"))
    [cut] = receiver.wait_for(1, "crash")
    node.kill()  # mid-flight: the call was made, its outcome never recorded
    node.start()
    wait_ready([node])
    cut_, again = receiver.wait_for(2, "crash", timeout_s=30)
    assert cut_ == cut
    key = f"{job['job_id']}:{job['next_run_at']}"
    assert headers_of(cut)["idempotency-key"] == headers_of(again)["idempotency-key"] == key
    assert body_of(again) == body_of(cut)
    run = wait_run(node, tenant, job["job_id"], "succeeded")
    assert run["attempts"][-1]["outcome"] == "succeeded", run
    assert len(receiver.received("crash")) == 2


# ------------------------------------------------------------------ logs (runs last)


def test_payloads_and_secrets_never_reach_the_node_log(
    node: NodeProcess, receiver: Receiver
) -> None:
    tenant = make_tenant(node)
    receiver.script("fails", Answer(500, body="internal error"))
    headers = {"X-Api-Key": HEADER_SECRET}
    ok_job = create_job(node, tenant.token, http_job(receiver.url("fine"), headers=headers))
    bad_job = create_job(
        node, tenant.token, http_job(receiver.url("fails"), retry=NO_RETRY, headers=headers)
    )
    wait_run(node, tenant, ok_job["job_id"], "succeeded")
    wait_run(node, tenant, bad_job["job_id"], "dead")
    assert node.log_path.exists()
    log = node.log_path.read_text(errors="replace")
    keys = [s.removeprefix("whsec_") for s in SENSITIVE if s.startswith("whsec_")]
    leaked = [s for s in [*SENSITIVE, *keys] if s in log]
    assert leaked == [], f"found in {node.log_path}: {leaked}"
