"""Bounds on what a node reads from tenants' brokers, whose every byte is hostile: no frame, reply
or message over MAX_FRAME_BYTES, no line over MAX_LINE_BYTES, and at most TENANT_READ_BYTES held
at once for all of one tenant's broker clients on this node. Speaks no broker's protocol: the
deliverers' readers (redis_stream.py, rabbitmq.py, nats.py) say what each frame announces.
"""

from __future__ import annotations

import weakref

MAX_FRAME_BYTES = 1 << 20  # a frame, reply or message a broker sends (announced or streamed)
MAX_LINE_BYTES = 64 << 10  # a protocol line (NATS control lines, RESP lines)
TENANT_READ_BYTES = 4 << 20  # frames held at once for one tenant's clients, all kinds together


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n % (1 << 20) == 0 else f"{n >> 10} KiB"


class ReadLimitExceeded(ConnectionError):
    """A broker sent or announced more than a bound allows: its connection is closed and the
    attempt fails with this message, which names the bound."""


class TenantReads:
    """What one tenant's broker clients on this node hold of announced frames, and its cap."""

    def __init__(self, tenant_id: str, limit_bytes: int = TENANT_READ_BYTES) -> None:
        self.tenant_id = tenant_id
        self.limit_bytes = limit_bytes
        self.held = 0

    def take(self, n: int) -> None:
        if self.held + n > self.limit_bytes:
            raise ReadLimitExceeded(
                f"the tenant's brokers hold {self.held + n} bytes of replies at once, over the "
                f"{_size(self.limit_bytes)} a node allows a tenant"
            )
        self.held += n

    def give(self, n: int) -> None:
        self.held -= n


class ReadBudgets:
    """This node's TenantReads, one per tenant with a client (kept while any reader uses it)."""

    def __init__(self, tenant_limit_bytes: int = TENANT_READ_BYTES) -> None:
        self._tenant_limit_bytes = tenant_limit_bytes
        self._tenants: weakref.WeakValueDictionary[str, TenantReads] = weakref.WeakValueDictionary()

    def tenant(self, tenant_id: str) -> TenantReads:
        reads = self._tenants.get(tenant_id)
        if reads is None:
            reads = self._tenants[tenant_id] = TenantReads(tenant_id, self._tenant_limit_bytes)
        return reads

    def held(self, tenant_id: str) -> int:
        reads = self._tenants.get(tenant_id)
        return 0 if reads is None else reads.held


class FrameGauge:
    """One reader's frame in progress (a socket reads one frame at a time): what it announced,
    checked against MAX_FRAME_BYTES and held from its tenant's budget until `hold(0)`."""

    def __init__(self, reads: TenantReads, what: str, max_bytes: int = MAX_FRAME_BYTES) -> None:
        self._reads = reads
        self._what = what  # "a redis reply", "an AMQP frame", "a NATS message"
        self.max_bytes = max_bytes
        self.held = 0

    def hold(self, n: int) -> None:
        """The frame in progress now needs `n` bytes (0: none in progress); raises
        ReadLimitExceeded past a bound, holding nothing then."""
        if n > self.max_bytes:
            self.release()
            raise ReadLimitExceeded(
                f"{self._what} of {n} bytes is over the {_size(self.max_bytes)} limit"
            )
        if n > self.held:
            try:
                self._reads.take(n - self.held)
            except ReadLimitExceeded:
                self.release()
                raise
        else:
            self._reads.give(self.held - n)
        self.held = n

    def release(self) -> None:
        self._reads.give(self.held)
        self.held = 0


def check_line(size: int, what: str) -> None:
    """A protocol line (or the part buffered so far) of `size` bytes must be under the bound."""
    if size > MAX_LINE_BYTES:
        raise ReadLimitExceeded(f"{what} of over {_size(MAX_LINE_BYTES)} without an end")
