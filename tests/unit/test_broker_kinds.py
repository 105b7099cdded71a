"""A node imports a broker kind's client library at the kind's first run, not at its start
(schedd/delivery/kinds.py, probe.py)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

from prometheus_client import REGISTRY

from schedd.delivery.kinds import LazyDeliverer
from schedd.delivery.outcome import Outcome, Verdict
from schedd.delivery.probe import probe_kind
from schedd.model import RetryPolicy

LIBRARIES = ("redis", "aio_pika", "aiormq", "pamqp", "nats")


def test_a_node_starts_without_any_broker_library() -> None:
    code = (
        "import sys, schedd.node, schedd.api.app\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {LIBRARIES!r}))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert loaded.strip() == "[]"


class Made:
    """A stand-in for a kind's BrokerDeliverer, recording what it was asked."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def start(self) -> None:
        self.calls.append("start")

    async def stop(self) -> None:
        self.calls.append("stop")

    async def deliver(self, call: Any, tenant: Any, started_ms: int, policy: Any) -> Outcome:
        self.calls.append(f"deliver {call}")
        return Outcome(verdict=Verdict.SUCCEEDED, status=None)


def _gauge(kind: str, state: str) -> float | None:
    return REGISTRY.get_sample_value("schedd_broker_connections", {"kind": kind, "state": state})


def test_the_deliverer_is_made_and_started_at_its_first_run_and_stopped_with_the_node() -> None:
    made: list[Made] = []

    def make() -> Any:
        made.append(Made())
        return made[-1]

    lazy = LazyDeliverer("test_kind", make)
    lazy.start()
    assert made == []
    assert _gauge("test_kind", "up") == 0 and _gauge("test_kind", "down") == 0
    policy = RetryPolicy()

    async def runs() -> list[Outcome]:
        outcomes = [await lazy.deliver(name, None, 0, policy) for name in ("a", "b")]  # type: ignore[arg-type]
        await lazy.stop()
        return outcomes

    outcomes = asyncio.run(runs())
    assert [o.verdict for o in outcomes] == [Verdict.SUCCEEDED] * 2
    assert len(made) == 1
    assert made[0].calls == ["start", "deliver a", "deliver b", "stop"]


def test_a_lazy_deliverer_never_run_stops_without_making_one() -> None:
    made: list[Any] = []
    lazy = LazyDeliverer("test_kind_2", lambda: made.append(1))  # type: ignore[arg-type,func-returns-value]
    lazy.start()
    asyncio.run(lazy.stop())
    assert made == []


def test_the_probe_knows_the_three_kinds_and_no_other() -> None:
    for kind in ("redis", "rabbitmq", "nats"):
        found = probe_kind(kind)
        assert found is not None, kind
        connector, server_version = found
        assert callable(connector) and callable(server_version)
    assert probe_kind("kafka") is None
