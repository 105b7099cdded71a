"""The failure-alert sender: on the Raft leader only, POSTs the due rows of `alerts` (queued by
apply: store/alerts.py) signed as callbacks are, behind the SSRF guard and the tenant's
`allowed_hosts`, and records each attempt's outcome through the log (`record_alerts`).

Its own tasks on the node's loop and its own HTTP session: a slow or failing endpoint holds
only its own slots (a few per tenant) and never delays dispatch or the outbox caller. At least
once: an alert stays due until an outcome is committed, so a new leader may POST it again, with
the same `webhook-id`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections import Counter
from collections.abc import Awaitable, Callable

import aiohttp

from schedd import metrics
from schedd.delivery.caller import Clock, Propose, wall_clock_ms
from schedd.delivery.http import HttpDeliverer, request_url, signed
from schedd.delivery.outcome import excerpt
from schedd.errors import ClusterUnavailable, SchedError
from schedd.guard.dns import lookups_for
from schedd.guard.ssrf import BlockedTarget
from schedd.guard.targets import TargetGuard
from schedd.sealing import PayloadKeys
from schedd.store import alerts, outbox
from schedd.store.alerts import Alert
from schedd.store.commands import SCHEDULE_CONTROL_LEVEL, AlertOutcome, RecordAlerts
from schedd.store.db import ReadPool
from schedd.store.queries import Tenant

log = logging.getLogger(__name__)
POLL_S = 1.0  # due alerts and retries are found this often; AlertsDue wakes the sender at once
CONCURRENCY = 16  # POSTs in flight on the leader
TENANT_CONCURRENCY = 4  # of which one tenant's: its hanging endpoint holds no more
TIMEOUT_S = 10.0
FIRST_RETRY_MS = 5_000  # then doubling, at most MAX_RETRY_MS
MAX_RETRY_MS = 300_000
MAX_ATTEMPTS = 10  # then the alert is given up (about 22 minutes after the first)
READ_MORE = 256  # due rows read per round beyond those in flight
OUTCOMES_PER_COMMAND = 200
RECORD_RETRY_S = 0.5
ERROR_CHARS = 200


def retry_delay_ms(attempt: int) -> int:
    """How long after failed attempt `attempt` (1-based) the next one is made."""
    return min(FIRST_RETRY_MS << min(max(attempt - 1, 0), 20), MAX_RETRY_MS)


def msg_id(alert: Alert) -> str:
    """The alert's `webhook-id`, the same on every attempt (receivers dedupe on it). The
    creation time makes it unique even if a pruned alert's row id is used again."""
    return f"alert:{alert.alert_id}:{alert.created_at_ms}"


def outcome(
    alert: Alert, now_ms: int, *, error: str | None = None, give_up: bool = False
) -> AlertOutcome:
    """The outcome of the attempt just made: sent when `error` is None, else a retry after
    `retry_delay_ms` unless it was the last attempt or `give_up` says it is pointless."""
    attempt = alert.attempts + 1
    if error is None:
        return AlertOutcome(alert_id=alert.alert_id, attempt=attempt, sent=True)
    retry_at_ms = None
    if not give_up and attempt < MAX_ATTEMPTS:
        retry_at_ms = now_ms + retry_delay_ms(attempt)
    error = error[:ERROR_CHARS]
    return AlertOutcome(
        alert_id=alert.alert_id, attempt=attempt, sent=False, error=error, retry_at_ms=retry_at_ms
    )


class AlertSender:
    """Sends due failure alerts while this node leads. `start()` on the node's loop, `stop()`
    at shutdown; tests drive `open()`, `tick(now_ms)` and `settle()` instead of `start()`."""

    def __init__(
        self,
        reads: ReadPool,
        propose: Propose,
        guard: TargetGuard,
        *,
        is_leader: Callable[[], bool],
        lagging: Callable[[int], list[str]] = lambda _: [],
        clock_ms: Clock = wall_clock_ms,
        concurrency: int = CONCURRENCY,
        tenant_concurrency: int = TENANT_CONCURRENCY,
        timeout_s: float = TIMEOUT_S,
    ) -> None:
        self._reads = reads
        self._propose = propose
        self._guard = guard
        self._is_leader = is_leader
        self._lagging = lagging  # members that cannot apply record_alerts yet
        self._clock_ms = clock_ms
        self.concurrency = concurrency
        self.tenant_concurrency = tenant_concurrency
        self.timeout_s = timeout_s
        # Only `send` is used: the body is the alert's, no payload to open.
        self._http = HttpDeliverer(guard, PayloadKeys(), concurrency=concurrency)
        self._pending: set[int] = set()  # alerts being sent, or sent and not yet recorded
        self._busy: Counter[str] = Counter()  # tenant -> POSTs in progress
        self._outcomes: list[AlertOutcome] = []
        self._flushing = asyncio.Lock()
        self._wake = asyncio.Event()
        self._recorded = asyncio.Event()
        self._sending: set[asyncio.Task[None]] = set()
        self._loops: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        """Start the HTTP session (on the node's loop)."""
        self._loop = asyncio.get_running_loop()
        self._http.start()

    def start(self) -> None:
        self.open()
        for coro in (self._send_loop(), self._record_loop()):
            task: asyncio.Task[None] = asyncio.ensure_future(coro)
            self._loops.add(task)

    async def stop(self) -> None:
        """Stop sending. Outcomes not yet recorded are dropped: those alerts are sent again."""
        tasks = [*self._loops, *self._sending]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._http.stop()

    def wake_threadsafe(self) -> None:
        """Alerts were queued (called from the apply thread)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._wake.set)

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    # ------------------------------------------------------------------ sending

    async def _send_loop(self) -> None:
        while True:
            try:
                await self.tick(self._clock_ms())
            except SchedError as exc:
                log.warning("alerts: cannot read the alerts: %s", exc)
            except Exception:
                log.exception("alerts: reading the alerts failed")
            with contextlib.suppress(TimeoutError):  # asyncio.timeout: see caller._call_loop
                async with asyncio.timeout(POLL_S):
                    await self._wake.wait()
            self._wake.clear()

    async def tick(self, now_ms: int) -> int:
        """Start POSTs of the alerts due at `now_ms` (on the leader only, within the slots
        free); how many were started."""
        room = self.concurrency - len(self._pending)
        if room <= 0 or not self._is_leader() or self._lagging(SCHEDULE_CONTROL_LEVEL):
            return 0
        limit = len(self._pending) + READ_MORE

        def read(conn: sqlite3.Connection) -> tuple[list[Alert], dict[str, Tenant]]:
            due = alerts.due(conn, now_ms, limit)
            wanted = {a.tenant_id for a in due if a.alert_id not in self._pending}
            return due, outbox.tenants(conn, wanted)

        due, tenants = await self._reads.read(read)
        started = 0
        for alert in due:
            if started >= room:
                break
            if alert.alert_id in self._pending:
                continue
            if self._busy[alert.tenant_id] >= self.tenant_concurrency:
                continue  # still due: taken on a later round
            self._pending.add(alert.alert_id)
            self._busy[alert.tenant_id] += 1
            self._spawn(self._send(alert, tenants.get(alert.tenant_id)))
            started += 1
        return started

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(self, alert: Alert, tenant: Tenant | None) -> None:
        """POST one alert and queue its outcome; whatever happens, an outcome is queued."""
        try:
            with lookups_for(alert.tenant_id):  # its DNS lookups count against its cap
                result = await self._attempt(alert, tenant)
        except Exception as exc:  # a bug met by this one alert: retried, not a dead task
            log.exception("alerts: the POST failed alert=%d", alert.alert_id)
            result = outcome(alert, self._clock_ms(), error=f"internal error: {exc!r}")
        finally:
            self._busy[alert.tenant_id] -= 1
            if self._busy[alert.tenant_id] <= 0:
                del self._busy[alert.tenant_id]
        _count(alert, result)
        self._outcomes.append(result)
        self._recorded.set()

    async def _attempt(self, alert: Alert, tenant: Tenant | None) -> AlertOutcome:
        """One POST; every remote failure is an outcome, never an exception."""
        now_ms = self._clock_ms()
        if tenant is None:
            return outcome(alert, now_ms, error="the tenant is gone", give_up=True)
        try:
            checked = self._guard.parse(alert.url, tuple(tenant.allowed_hosts))
        except BlockedTarget as exc:
            return outcome(alert, now_ms, error=f"blocked: {exc.reason}", give_up=True)
        body = alert.body.encode()
        headers = signed(tenant, msg_id(alert), now_ms, body)
        url = request_url(alert.url, checked)
        try:
            status, head, _ = await self._http.send("POST", url, body, headers, self.timeout_s)
        except BlockedTarget as exc:  # from the resolver: the name points somewhere blocked
            return outcome(alert, self._clock_ms(), error=f"blocked: {exc.reason}", give_up=True)
        except TimeoutError:
            return outcome(alert, self._clock_ms(), error=f"timed out after {self.timeout_s:g}s")
        except (aiohttp.ClientError, OSError) as exc:
            error = f"connection failed: {type(exc).__name__}: {excerpt(str(exc).encode(), 150)}"
            return outcome(alert, self._clock_ms(), error=error)
        if 200 <= status <= 299:
            return outcome(alert, self._clock_ms())
        answer = excerpt(head, 150)
        error = f"http {status}: {answer}" if answer else f"http {status}"
        return outcome(alert, self._clock_ms(), error=error)

    # ------------------------------------------------------------------ recording

    async def _record_loop(self) -> None:
        while True:
            await self._recorded.wait()
            self._recorded.clear()
            if not await self.flush():  # no leader now, or a bug: try again in a moment
                await asyncio.sleep(RECORD_RETRY_S)
                self._recorded.set()
            self._wake.set()  # slots are free again

    async def flush(self) -> bool:
        """Propose the outcomes queued; False when some are not recorded yet (try again)."""
        async with self._flushing:
            while self._outcomes:
                batch = self._outcomes[:OUTCOMES_PER_COMMAND]
                try:
                    await self._propose(RecordAlerts(outcomes=tuple(batch)))
                except ClusterUnavailable as exc:  # a retry is safe: recorded ones are stale
                    log.warning("alerts: outcomes not recorded yet count=%d: %s", len(batch), exc)
                    return False
                except SchedError as exc:  # refused (apply never does): the alerts go again
                    log.warning("alerts: outcomes refused count=%d: %s", len(batch), exc)
                except Exception:  # this loop frees the slots: it must not die
                    log.exception("alerts: recording outcomes failed count=%d", len(batch))
                    return False
                del self._outcomes[: len(batch)]
                self._pending.difference_update(o.alert_id for o in batch)
            return True

    async def settle(self) -> None:
        """Wait for the POSTs in progress and record their outcomes (tests)."""
        while self._sending:
            await asyncio.gather(*self._sending, return_exceptions=True)
        await self.flush()


def _count(alert: Alert, result: AlertOutcome) -> None:
    """The metric, and a log line for an alert given up."""
    if result.sent:
        metrics.ALERTS_SENT.inc()
    elif result.retry_at_ms is not None:
        metrics.ALERTS_RETRIED.inc()
    else:
        metrics.ALERTS_FAILED.inc()
        log.warning(
            "alert given up alert=%d tenant=%s job=%s attempts=%d error=%s",
            alert.alert_id,
            alert.tenant_id,
            alert.job_id,
            result.attempt,
            result.error,
        )
