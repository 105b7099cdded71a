"""Shared fixtures: a fresh store in tmp_path, a command factory, free loopback ports."""

from __future__ import annotations

import gc
import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from schedd.store.apply import StateMachine
from schedd.store.command import Command, encode
from schedd.store.commands import LogCommand, R, answer_of
from schedd.store.db import Database
from tests import ports

# Property tests check results, not time: hypothesis's default 200 ms deadline per example
# failed a round-trip test whose first example took 456 ms while four workers and their
# cluster nodes shared the two cores.
settings.register_profile("schedd", deadline=None)
settings.load_profile("schedd")

NOW_MS = 1_790_000_000_000  # 2026-09-21T14:13:20Z


# The files that take longest, longest first (docs/testing.md, "Order"; wall times of a full
# `-n 4` run on 2026-12-03): run first, so that none of them starts in the suite's last minute;
# the others follow, most tests first. xdist keeps this order with --no-loadscope-reorder
# (Makefile).
LONGEST_FILES = (
    "tests/chaos/test_chaos_seed.py",  # 100-118 s
    "tests/integration/test_openapi.py",  # 100-125 s
    "tests/browser/test_console.py",  # 80-100 s
    # Beside the chaos round at the start, the offline install (mostly waits on pip) rather than
    # the replication tests' restarts: the round's claim-lag bound is the suite's most sensitive
    # to a starved CPU. The replication tests start about a minute later, still early.
    "tests/integration/test_operations_commands.py",  # 45-82 s
    "tests/cluster/test_replication.py",  # 110-128 s
    "tests/integration/test_dispatch.py",  # 65-70 s
    "tests/cluster/test_dispatch_cluster.py",  # 60-66 s
    "tests/integration/test_dist_zipapps.py",  # 55-60 s alone: builds both zipapps (pip)
    "tests/cluster/test_dependencies_cluster.py",  # 28-41 s: three leader kills
    "tests/cluster/test_broker_cluster.py",  # 48-55 s
    "tests/cluster/test_clock_jump.py",  # 48-52 s
    "tests/integration/test_schedd_dev.py",  # 48-53 s
    "tests/cluster/test_membership.py",  # 38-51 s
    "tests/unit/test_store_commands.py",  # 40-48 s
    "tests/unit/test_schedule_properties.py",  # 30-45 s
    "tests/integration/test_delivery.py",  # 37-52 s
    "tests/integration/test_schedctl_work.py",  # 35-43 s
    "tests/cluster/test_delivery_cluster.py",  # 36-40 s
    "tests/integration/test_docs_commands.py",  # 25-37 s
    "tests/cluster/test_retention_cluster.py",  # 34-36 s
    "tests/cluster/test_worker_once.py",  # 20-24 s
    "tests/cluster/test_cells_cluster.py",  # 14-17 s: one etcd and six nodes
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    by_file: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_file.setdefault(item.nodeid.split("::")[0], []).append(item)

    def rank(path: str) -> tuple[int, int]:
        first = LONGEST_FILES.index(path) if path in LONGEST_FILES else len(LONGEST_FILES)
        return first, -len(by_file[path])

    items[:] = [item for path in sorted(by_file, key=rank) for item in by_file[path]]


@pytest.fixture(scope="module", autouse=True)
def collect_what_the_module_left() -> Iterator[None]:
    """A socket or stream a module forgot to close is collected, and its ResourceWarning raised,
    here in that module's last test, not at random in whichever test of the xdist worker runs
    when the collector next passes."""
    yield
    gc.collect()


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "state.db")
    try:
        yield database
    finally:
        database.close()


class Applier:
    """Applies commands to a state machine at increasing indexes, as Raft would."""

    def __init__(self, machine: StateMachine) -> None:
        self.machine = machine
        self.index = machine.db.applied_index
        self._ids = itertools.count(1)

    def __call__(self, type_: str, body: dict[str, Any], *, ts_ms: int = NOW_MS) -> dict[str, Any]:
        cmd = Command(type=type_, id=f"cmd-{next(self._ids)}", ts_ms=ts_ms, body=body)
        return self.blob(encode(cmd))

    def typed(self, cmd: LogCommand[Any], *, ts_ms: int = NOW_MS) -> dict[str, Any]:
        """Apply a typed command (what producers hand the proposer) through the wire format."""
        return self(cmd.TYPE, cmd.to_body(), ts_ms=ts_ms)

    def propose(self, cmd: LogCommand[R], *, ts_ms: int = NOW_MS) -> R:
        """Apply a typed command and answer as the proposer does: its result type, or its
        rejection raised."""
        return answer_of(cmd, self.typed(cmd, ts_ms=ts_ms))

    def blob(self, blob: bytes) -> dict[str, Any]:
        self.index += 1
        return self.machine.apply(blob, index=self.index)


@pytest.fixture
def apply(db: Database) -> Applier:
    return Applier(StateMachine(db))


@pytest.fixture
def free_port() -> Callable[[], int]:
    """Picks a free loopback port of this xdist worker's own range (tests/ports.py)."""
    return ports.free_port
