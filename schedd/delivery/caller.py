"""The outbox sender ("the caller"): one per node, on its event loop. It takes the due outbox rows
in the partitions the node leases, has the deliverer of each row's target kind make the attempt
(http.py; sender.py is the seam), and records each attempt's outcome through the log.

At least once: a row stays due until an outcome is committed, so a crash between the call and
the record (or a lease that moves meanwhile) means the call is made again, with the same
`Idempotency-Key`. Per-tenant concurrency keeps a tenant whose endpoint hangs from holding more
than its share of the node's connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol

import aiohttp
from prometheus_client import Counter as MetricCounter
from prometheus_client import Gauge, Histogram

from schedd import metrics, retry
from schedd.admission import TenantBuckets
from schedd.delivery.http import HttpDeliverer, request_url, signed
from schedd.delivery.outcome import Outcome, Verdict, excerpt
from schedd.delivery.sender import Deliverer, deliverer_for, target_kind
from schedd.errors import ClusterUnavailable, SchedError
from schedd.guard.dns import lookups_for
from schedd.guard.ssrf import BlockedTarget
from schedd.guard.targets import TargetGuard
from schedd.model import RetryPolicy, delivery_id, idempotency_key
from schedd.sealing import PayloadKeys
from schedd.store import outbox
from schedd.store.commands import (
    SCHEDULE_CONTROL_LEVEL,
    CallbackOutcome,
    LogCommand,
    R,
    RecordCallbacks,
)
from schedd.store.db import ReadPool
from schedd.store.queries import Tenant
from schedd.store.results import CallbacksRecorded, DeadRun
from schedd.stored_spec import load_retry
from schedd.timeformat import format_instant

log = logging.getLogger(__name__)
POLL_S = 0.1  # due retries are found this often; new claims wake the caller at once
OUTCOMES_PER_COMMAND = 500
RECORD_RETRY_S = 0.5
ALERT_TIMEOUT_S = 10.0

CALLBACKS = MetricCounter(
    "schedd_callbacks",
    "Outbox delivery attempts (HTTP calls, broker publishes) by target kind and outcome",
    ["kind", "outcome"],
)
CALLBACK_SECONDS = Histogram(
    "schedd_callback_seconds",
    "Outbox delivery attempt latency by target kind and response class",
    ["kind", "status_class"],
)
CALLBACK_DEAD = MetricCounter("schedd_callback_dead_letters", "Outbox runs that died (any kind)")
CALLS_IN_FLIGHT = Gauge(
    "schedd_callbacks_in_flight", "Outbox attempts started whose outcome is not recorded yet"
)


class Propose(Protocol):
    """Propose a command (raft.proposer.Proposer.propose): its result, or its rejection."""

    def __call__(self, cmd: LogCommand[R]) -> Awaitable[R]: ...


Clock = Callable[[], int]


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class Caller:
    """Delivers this node's outbox rows (a `sender.Sender`): HTTP, and the kinds of the extra
    `deliverers`. `start()` on the node's loop, `stop()` on shutdown."""

    def __init__(
        self,
        node_id: str,
        reads: ReadPool,
        propose: Propose,
        guard: TargetGuard,
        payload_keys: PayloadKeys,
        *,
        concurrency: int,
        tenant_concurrency: int,
        clock_ms: Clock = wall_clock_ms,
        deliverers: Sequence[Deliverer] = (),
        lagging: Callable[[int], list[str]] = lambda _: [],
    ) -> None:
        self.node_id = node_id
        self._lagging = lagging  # members that cannot apply a command level yet
        self._reads = reads
        self._propose = propose
        self._guard = guard
        self._http = HttpDeliverer(guard, payload_keys, concurrency=concurrency)
        self._deliverers: dict[str, Deliverer] = {d.kind: d for d in (self._http, *deliverers)}
        self.concurrency = concurrency
        self.tenant_concurrency = tenant_concurrency
        self._clock_ms = clock_ms
        self._pending: set[int] = set()  # outbox rows called or being called, not yet recorded
        self._busy: Counter[str] = Counter()  # tenant -> calls in progress
        self._outcomes: list[CallbackOutcome] = []
        self._wake = asyncio.Event()
        self._recorded = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._rates: dict[str, int] = {}
        self._buckets = TenantBuckets()  # each tenant's dispatch_rate, for calls and retries
        self._buckets.set_rates(self._rates)
        self._turn = 0
        self._loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        for deliverer in self._deliverers.values():
            deliverer.start()
        self._spawn(self._call_loop())
        self._spawn(self._record_loop())

    async def stop(self) -> None:
        """Stop calling. Outcomes not yet recorded are dropped: those calls are made again."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for deliverer in self._deliverers.values():
            await deliverer.stop()

    def wake_threadsafe(self) -> None:
        """New due calls were committed (called from the apply thread)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._wake.set)

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ calling

    async def _call_loop(self) -> None:
        while True:
            try:
                await self._start_due_calls()
            except SchedError as exc:
                log.warning("delivery: cannot read the outbox: %s", exc)
            except Exception:
                log.exception("delivery: reading the outbox failed")
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow stop()'s cancellation
            # when the event is set at the same instant, and this loop would never end.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(POLL_S):
                    await self._wake.wait()
            self._wake.clear()

    async def _start_due_calls(self) -> None:
        room = self.concurrency - len(self._pending)
        if room <= 0:
            return
        now = self._clock_ms()
        busy, skip = dict(self._busy), frozenset(self._pending)
        calls = await self._reads.read(
            lambda conn: outbox.due_calls(
                conn, self.node_id, now, lambda due: self.free_slots(due, busy), skip
            )
        )
        if not calls:
            return
        wanted = {call.tenant_id for call in calls}
        tenants = await self._reads.read(lambda conn: outbox.tenants(conn, wanted))
        self._rates.update({t: tenant.dispatch_rate for t, tenant in tenants.items()})
        self._turn += 1
        for call in take_turns(calls, self._turn)[:room]:
            if call.seq in self._pending or not self._buckets.admit(call.tenant_id, now):
                continue  # over its tenant's rate: still due, taken on a later round
            self._pending.add(call.seq)
            CALLS_IN_FLIGHT.set(len(self._pending))
            self._busy[call.tenant_id] += 1
            self._spawn(self._call(call, tenants.get(call.tenant_id)))

    def free_slots(self, due_tenants: list[str], busy: Mapping[str, int]) -> dict[str, int]:
        """How many more calls each tenant may start on this node.

        At most `tenant_concurrency`, and at most a fair share of `concurrency` counted with
        room for one more tenant: however many tenants stall until their timeouts, a tenant
        that comes along finds slots free at once."""
        active = len(set(due_tenants) | set(busy))
        limit = min(self.tenant_concurrency, max(1, self.concurrency // (active + 1)))
        return {tenant: limit - busy.get(tenant, 0) for tenant in due_tenants}

    @property
    def calls_in_flight(self) -> int:
        """Calls started whose outcome is not recorded yet: each holds one of the node's slots."""
        return len(self._pending)

    async def _call(self, call: outbox.DueCall, tenant: Tenant | None) -> None:
        """Make one call and queue its outcome; whatever happens, an outcome is queued (so the
        slot is freed once it is recorded) and the tenant's count goes down."""
        started = self._clock_ms()
        policy = load_retry(call.retry)
        try:
            with lookups_for(call.tenant_id):  # the tenant's DNS lookups count against its cap
                outcome = await self._attempt(call, tenant, started, policy)
        except Exception as exc:  # a bug met by this one call: a retried attempt, not a dead task
            log.exception("delivery: the call failed job=%s attempt=%d", call.job_id, call.attempt)
            detail = f"{type(exc).__name__}: {excerpt(str(exc).encode(), 200)}"
            outcome = Outcome(verdict=Verdict.RETRY, status=None, error=f"internal error: {detail}")
        finally:
            self._busy[call.tenant_id] -= 1
            if self._busy[call.tenant_id] <= 0:
                del self._busy[call.tenant_id]
        finished = self._clock_ms()
        self._outcomes.append(_record(call, outcome, policy, started, finished))
        self._recorded.set()
        kind = target_kind(call.target) or "unknown"
        CALLBACKS.labels(kind=kind, outcome=outcome.verdict.value).inc()
        CALLBACK_SECONDS.labels(kind=kind, status_class=_status_class(outcome)).observe(
            (finished - started) / 1000
        )
        metrics.record_delivery(kind, call.attempt, call.scheduled_at_ms, started)

    async def _attempt(
        self, call: outbox.DueCall, tenant: Tenant | None, started_ms: int, policy: RetryPolicy
    ) -> Outcome:
        """Have the deliverer of the row's kind make one attempt; never raises for a remote
        failure (every one is an outcome)."""
        deliverer = deliverer_for(self._deliverers, call)
        if deliverer is None:  # a kind this node's version has no sender for: another may
            error = f"no sender for target kind {target_kind(call.target)!r} on this node"
            return Outcome(verdict=Verdict.RETRY, status=None, error=error)
        return await deliverer.deliver(call, tenant, started_ms, policy)

    # ------------------------------------------------------------------ recording

    def _record_command(self, batch: list[CallbackOutcome]) -> RecordCallbacks:
        """The outcomes as one command; one that cancels a job (410 Gone) records the cancel
        in the job's versions once every member applies log level 8."""
        gone = any(o.verdict == Verdict.GONE for o in batch)
        versioned = gone and not self._lagging(SCHEDULE_CONTROL_LEVEL)
        return RecordCallbacks(node_id=self.node_id, outcomes=tuple(batch), versioned=versioned)

    async def _record_loop(self) -> None:
        while True:
            await self._recorded.wait()
            self._recorded.clear()
            while self._outcomes:
                batch = self._outcomes[:OUTCOMES_PER_COMMAND]
                try:
                    result = await self._propose(self._record_command(batch))
                except ClusterUnavailable as exc:
                    log.warning("delivery: outcomes not recorded yet count=%d: %s", len(batch), exc)
                    await asyncio.sleep(RECORD_RETRY_S)
                    continue  # a retry is safe: an outcome already recorded counts as stale
                except SchedError as exc:  # refused (apply never does yet): the calls go again
                    log.warning("delivery: outcomes refused count=%d: %s", len(batch), exc)
                    result = CallbacksRecorded()
                except Exception:  # this loop frees the slots: it must not die
                    log.exception("delivery: recording outcomes failed count=%d", len(batch))
                    await asyncio.sleep(RECORD_RETRY_S)
                    continue
                del self._outcomes[: len(batch)]
                self._pending.difference_update(o.seq for o in batch)
                CALLS_IN_FLIGHT.set(len(self._pending))
                self._wake.set()  # slots are free again
                for dead in result.dead_runs:
                    CALLBACK_DEAD.inc()
                    self._spawn(self._alert(dead))

    async def _alert(self, dead: DeadRun) -> None:
        """Tell the tenant's alert webhook (if any) that a run died; best effort, signed, and
        held to the same rules as the tenant's targets (its `allowed_hosts` included)."""
        tenant_id = dead.tenant_id
        try:
            found = await self._reads.read(lambda conn: outbox.tenants(conn, [tenant_id]))
            tenant = found.get(tenant_id)
            if tenant is None or not tenant.alert_url:
                return
            with lookups_for(tenant_id):
                await self._send_alert(tenant, tenant.alert_url, dead)
        except BlockedTarget as exc:
            log.warning("delivery: alert webhook blocked tenant=%s: %s", tenant_id, exc.reason)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            log.warning("delivery: alert webhook failed: %s", type(exc).__name__)
        except Exception:  # best effort: never more than a log line
            log.exception("delivery: alert webhook failed tenant=%s", tenant_id)

    async def _send_alert(self, tenant: Tenant, alert_url: str, dead: DeadRun) -> None:
        checked = self._guard.parse(alert_url, tuple(tenant.allowed_hosts))
        scheduled_at = format_instant(dead.scheduled_at_ms)
        key = idempotency_key(dead.job_id, dead.scheduled_at_ms)
        event = {"type": "run.dead", "job_id": dead.job_id, "scheduled_at": scheduled_at}
        body = json.dumps(event).encode()
        headers = signed(tenant, f"dead:{key}", self._clock_ms(), body)
        status, _, _ = await self._http.send(
            "POST", request_url(alert_url, checked), body, headers, ALERT_TIMEOUT_S
        )
        if not 200 <= status <= 299:
            log.warning("delivery: alert webhook answered %d", status)


def _record(
    call: outbox.DueCall, outcome: Outcome, policy: RetryPolicy, started_ms: int, finished_ms: int
) -> CallbackOutcome:
    """One outcome as `record_callbacks` takes it."""
    retry_at_ms = None
    if outcome.verdict is Verdict.RETRY:
        retry_at_ms = finished_ms + delay_after(policy, call, outcome)
    return CallbackOutcome(
        seq=call.seq,
        job_id=call.job_id,  # apply checks the run too, not just the row's seq
        scheduled_at_ms=call.scheduled_at_ms,
        attempt=call.attempt,
        started_at_ms=started_ms,
        finished_at_ms=finished_ms,
        verdict=outcome.verdict.value,
        error=outcome.error,
        retry_at_ms=retry_at_ms,
    )


def take_turns(calls: list[outbox.DueCall], turn: int) -> list[outbox.DueCall]:
    """Calls interleaved tenant by tenant, the first tenant changing every round, so that
    scarce slots do not always go to the same tenants."""
    by_tenant: dict[str, list[outbox.DueCall]] = {}
    for call in calls:
        by_tenant.setdefault(call.tenant_id, []).append(call)
    queues = list(by_tenant.values())
    if queues:
        start = turn % len(queues)
        queues = queues[start:] + queues[:start]
    return [call for group in itertools.zip_longest(*queues) for call in group if call]


def delay_after(policy: RetryPolicy, call: outbox.DueCall, outcome: Outcome) -> int:
    """The one retry policy (`retry.retry_delay_ms`, as the queue's), keyed by the run and
    attempt, at least what the outcome's Retry-After asked, at most max_delay."""
    key = delivery_id(call.job_id, call.scheduled_at_ms)
    return retry.retry_delay_ms(policy, call.attempt, key, floor_ms=outcome.retry_after_ms)


def _status_class(outcome: Outcome) -> str:
    """2xx ... 5xx for an HTTP answer; for an attempt without one (a broker's, or no answer):
    ok when it succeeded, else error."""
    if outcome.status is not None:
        return f"{outcome.status // 100}xx"
    return "ok" if outcome.verdict is Verdict.SUCCEEDED else "error"
