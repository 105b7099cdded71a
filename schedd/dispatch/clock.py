"""Clock trust: a node fires runs by its own wall clock, so it stops dispatching while that clock
cannot be trusted (docs/reliability.md, "Clocks").

Two checks feed one `ClockGuard`:
- a jump check on every call: wall-clock progress that differs from monotonic progress by more
  than the allowed offset (an NTP step, a VM resumed, an operator's `date -s`) distrusts the clock
  at once, before the dispatcher fires anything by it;
- `ClockProbe`, every few seconds, reads each peer's clock from its `/healthz` and compares
  (Cristian's method: the round trip bounds the error). The node trusts its clock when more of
  the answering nodes agree with it than disagree, counting itself; on a tie the leader's clock
  decides. A jump is forgiven only by a probe round begun after it.

While distrusted, the node proposes nothing (every command carries its proposer's clock as its
time): no claims, no heartbeats (its leases expire and move to nodes whose clocks agree), no
lease moves, and API writes answer 503 `cluster_unavailable`; a leader hands its leadership to a
follower, and `/readyz` answers 503.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import ssl
import statistics
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from schedd.addresses import reachable_api_url
from schedd.loop import Loop
from schedd.peers import PeerReport, PeerReports
from schedd.store.queries import list_nodes

log = logging.getLogger(__name__)
PROBE_EVERY_S = 2.0
# Until the store lists this node the members are unknown and newer commands wait (peers.py),
# and so does readiness (node.is_ready): look again soon.
UNLISTED_PROBE_EVERY_S = 0.1
PROBE_TIMEOUT_S = 1.0
MAX_HEALTHZ_BYTES = 4096  # a peer's /healthz is one small object; read no more of it


@dataclass(frozen=True, slots=True)
class PeerReading:
    """A peer's clock minus ours (ms), within +- `error_ms` (half the round trip)."""

    offset_ms: float
    error_ms: float
    report: PeerReport = field(default_factory=PeerReport)  # disk, log level it states


def is_trusted_by(
    self_id: str,
    readings: Mapping[str, PeerReading],
    leader_id: str | None,
    max_offset_ms: int,
) -> bool:
    """The verdict of one probe round. A peer disagrees only when its offset exceeds the
    allowed one by more than the reading's error; peers that did not answer abstain."""
    disagree = {n for n, r in readings.items() if abs(r.offset_ms) - r.error_ms > max_offset_ms}
    agree = 1 + len(readings) - len(disagree)  # this node agrees with itself
    if agree != len(disagree):
        return agree > len(disagree)
    if leader_id is None or leader_id == self_id:
        return leader_id == self_id
    return leader_id in readings and leader_id not in disagree


class ClockGuard:
    """Whether this node's wall clock may fire runs; shared by the dispatch loops."""

    def __init__(
        self,
        max_offset_ms: int,
        *,
        wall_ms: Callable[[], float] = lambda: time.time() * 1000,
        monotonic_ms: Callable[[], float] = lambda: time.monotonic() * 1000,
    ) -> None:
        self.max_offset_ms = max_offset_ms
        self._wall_ms, self._monotonic_ms = wall_ms, monotonic_ms
        self._lock = threading.Lock()
        self._last = (wall_ms(), monotonic_ms())
        self._jumped_at_ms: float | None = None  # monotonic time of the last unforgiven jump
        self._probe_says_trusted = True
        self.offset_ms: float | None = None  # median peer offset from the last round
        self.reason = ""
        self.on_jump: Callable[[], None] = lambda: None  # the probe wakes up to re-check

    def is_trusted(self) -> bool:
        """Checks for a jump since the last call (any thread), then gives the verdict."""
        before, wall, mono = self._monotonic_ms(), self._wall_ms(), self._monotonic_ms()
        jumped = False
        with self._lock:
            last_wall, last_mono = self._last
            self._last = (wall, mono)
            drift = (wall - last_wall) - (mono - last_mono)
            # A thread descheduled between the two reads is not a jump: only a tight pair counts.
            if abs(drift) > self.max_offset_ms and mono - before < self.max_offset_ms / 4:
                self._jumped_at_ms, jumped = mono, True
                self.reason = f"wall clock jumped {drift / 1000:+.3f}s"
            trusted = self._jumped_at_ms is None and self._probe_says_trusted
        if jumped:
            log.error("clock distrusted: %s; dispatch paused until peers agree", self.reason)
            self.on_jump()
        return trusted

    def probe_started(self) -> float:
        """Mark the start of a probe round (its verdict may forgive jumps before this)."""
        self.is_trusted()  # a jump before the round started is one the round can judge
        return self._monotonic_ms()

    def record_round(
        self, started_ms: float, readings: Mapping[str, PeerReading], trusted: bool
    ) -> None:
        with self._lock:
            was = self._jumped_at_ms is None and self._probe_says_trusted
            self._probe_says_trusted = trusted
            if readings:
                self.offset_ms = statistics.median(r.offset_ms for r in readings.values())
            if trusted and self._jumped_at_ms is not None and self._jumped_at_ms <= started_ms:
                self._jumped_at_ms = None
            if not trusted:
                offsets = ", ".join(f"{n} {r.offset_ms / 1000:+.3f}s" for n, r in readings.items())
                self.reason = f"clock disagrees with the cluster (peer offsets: {offsets})"
            now = self._jumped_at_ms is None and self._probe_says_trusted
        if was != now:
            if now:
                log.warning("clock trusted again: peers agree; dispatch resumes")
            else:
                log.error("clock distrusted: %s; dispatch paused", self.reason)


class ClockProbe(Loop):
    """Reads every registered peer's clock each PROBE_EVERY_S (at once after a jump), and
    records what else each said (`peers`: disk, log level)."""

    def __init__(
        self,
        node_id: str,
        guard: ClockGuard,
        connect: Callable[[], sqlite3.Connection],
        leader_address: Callable[[], str | None],
        step_down: Callable[[], None],
        *,
        tls: ssl.SSLContext | None = None,
        peers: PeerReports | None = None,
    ) -> None:
        super().__init__("clock-probe")
        self._peers = peers  # what else the peers' /healthz say rides on the same reads
        self._tls = tls  # verifies https peers (schedd/tls.py peer_context)
        self._refused: set[str] = set()  # peers whose certificate failed: warned once
        self._step_down = step_down
        self._node_id, self._guard = node_id, guard
        self._connect = connect
        self._conn: sqlite3.Connection | None = None
        self._leader_address = leader_address
        self._pool = ThreadPoolExecutor(4, thread_name_prefix="clock-probe")
        guard.on_jump = self.wake

    def tick(self, now_ms: int) -> float:
        if self._conn is None:
            self._conn = self._connect()
        rows = list_nodes(self._conn)
        peers = {n: reachable_api_url(api, raft) for n, api, raft in rows if n != self._node_id}
        leader_raft = self._leader_address()
        leader_id = next((n for n, _, raft in rows if raft == leader_raft), None)
        started = self._guard.probe_started()
        answers = dict(zip(peers, self._pool.map(self._read, peers.values()), strict=True))
        readings = {n: r for n, r in answers.items() if r is not None}
        trusted = is_trusted_by(self._node_id, readings, leader_id, self._guard.max_offset_ms)
        self._guard.record_round(started, readings, trusted)
        # A store that does not list this node yet (a node just started, or wiped and not yet
        # restored: an upgrade chaos round, seed 2370) does not tell who the members are.
        is_listed = any(n == self._node_id for n, _, _ in rows)
        if self._peers is not None:
            registered = [n for n, _, _ in rows] if is_listed else None
            self._peers.record({n: r.report for n, r in readings.items()}, registered)
        if not trusted and leader_id == self._node_id:
            log.warning("leading with a distrusted clock: asking a caught-up follower to lead")
            self._step_down()  # lease moves need a leader whose clock the cluster shares
        return PROBE_EVERY_S if is_listed else UNLISTED_PROBE_EVERY_S

    def _read(self, api_url: str) -> PeerReading | None:
        """A peer's reading; a certificate it cannot trust is logged once, and it abstains."""
        try:
            reading = read_peer_clock(api_url, context=self._tls)
        except ssl.SSLCertVerificationError as exc:
            if api_url not in self._refused:
                self._refused.add(api_url)
                log.warning(
                    "clock probe cannot verify peer api=%s: %s; set [api] tls_ca to the CA "
                    "that signed the peers' certificates",
                    api_url,
                    exc.verify_message or exc.reason,
                )
            return None
        self._refused.discard(api_url)
        return reading

    def stop(self, timeout_s: float = 10.0) -> None:
        super().stop(timeout_s)
        self._pool.shutdown(wait=False, cancel_futures=True)


def read_peer_clock(api_url: str, *, context: ssl.SSLContext | None = None) -> PeerReading | None:
    """One reading of a peer's clock from its `/healthz`, or None when it does not answer;
    raises ssl.SSLCertVerificationError for a certificate it cannot trust (an operator's fix)."""
    url = f"{api_url}/healthz"
    sent_wall, sent_mono = time.time() * 1000, time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT_S, context=context) as response:
            health = json.loads(response.read(MAX_HEALTHZ_BYTES))
            peer_ms = health["now_ms"]
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ssl.SSLCertVerificationError):
            raise exc.reason from None
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    round_trip_ms = (time.monotonic() - sent_mono) * 1000
    if not isinstance(peer_ms, int | float):
        return None
    return PeerReading(
        peer_ms - (sent_wall + round_trip_ms / 2), round_trip_ms / 2, peer_report(health)
    )


def peer_report(health: object) -> PeerReport:
    """The disk and log level a peer's /healthz object states (defaults for what it omits)."""
    if not isinstance(health, dict):
        return PeerReport()
    level = health.get("log_level")
    return PeerReport(
        disk_low=health.get("disk_low") is True,
        log_level=level if isinstance(level, int) and not isinstance(level, bool) else 1,
    )
