"""Benchmark: a follower installs a big snapshot; how long does its Raft tick thread stall?

Three Raft replicas in this process with the production Raft settings (`node.raft_conf`, the
node's own snapshot hooks). The first two start on copies of one database padded to `--mb`
megabytes, take a snapshot and compact their journals; the third starts empty, so the leader
ships it the whole snapshot, which it restores. Meanwhile a writer proposes one command every
20 ms. Reports the snapshot's size, how long shipping and restoring took, the third replica's
worst gap between two ticks (issue 14: it must stay under the election timeout, 1-2.5 s by
default; restoring on the tick thread held it 3.5 s at 1 GB), the writes' latency and the
number of elections.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from schedd.raft.proposer import Proposer
from schedd.store.commands import RegisterNode
from tests.replicas import Member, leader_of, pad, two_of_three, write_configs
from tests.servers import wait_for

WRITE_EVERY_S = 0.02


class Writer(threading.Thread):
    """Proposes one small command every WRITE_EVERY_S through `member`; keeps latencies."""

    def __init__(self, member: Member) -> None:
        super().__init__(name="bench-writer", daemon=True)
        self.proposer = Proposer(member.replica, timeout_s=30)
        self.latencies_ms: list[float] = []
        self.failures = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        asyncio.run(self._loop())

    async def _loop(self) -> None:
        n = 0
        while not self.stopping.is_set():
            n += 1
            body = RegisterNode(node_id=f"w{n % 50}", api="http://x", raft="y")
            started = time.perf_counter()
            try:
                await self.proposer.propose(body)  # a rejection raises
                self.latencies_ms.append((time.perf_counter() - started) * 1000)
            except Exception:
                self.failures += 1
            await asyncio.sleep(WRITE_EVERY_S)


class RestoreLog(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.seconds: list[float] = []

    def emit(self, record: logging.LogRecord) -> None:
        found = re.search(r"snapshot restored index=\d+ seconds=([\d.]+)", record.getMessage())
        if found:
            self.seconds.append(float(found.group(1)))


def run(megabytes: int, base: Path) -> dict[str, float]:
    paths = write_configs(base)
    for name in ("n1", "n2"):
        (base / name).mkdir()
    print(f"padding a store to {megabytes} MB ...", flush=True)
    pad(base / "n1" / "state.db", megabytes)
    shutil.copy(base / "n1" / "state.db", base / "n2" / "state.db")
    restores = RestoreLog()
    logging.getLogger("schedd.raft.snapshots").addHandler(restores)
    logging.getLogger("schedd.raft.snapshots").setLevel(logging.INFO)
    first = two_of_three(paths)
    members = list(first)
    writer: Writer | None = None
    try:
        leader = wait_for(lambda: leader_of(first), 30, "a leader")
        writer = Writer(leader)
        writer.start()
        wait_for(lambda: len(writer.latencies_ms) > 20, 30, "the first writes")
        started = time.monotonic()
        for m in first:
            m.replica.compact_soon()
        snapshot = Path(leader.db.path.parent / "raft.snapshot")
        wait_for(lambda: snapshot.exists() and snapshot.stat().st_size > 2**20, 600, "a snapshot")
        print(
            f"snapshot written: {snapshot.stat().st_size / 2**20:.0f} MB in "
            f"{time.monotonic() - started:.1f} s",
            flush=True,
        )
        terms_before = leader.replica.raftCurrentTerm
        writes_before = len(writer.latencies_ms)
        started = time.monotonic()
        third = Member(paths[2])
        members.append(third)
        wait_for(lambda: restores.seconds, 900, "the restore")
        wait_for(lambda: third.db.applied_index >= leader.db.applied_index - 5, 120, "the catch-up")
        installed_s = time.monotonic() - started
        writer.stopping.set()
        writer.join(60)
        gaps = [b - a for a, b in zip(third.ticks, third.ticks[1:], strict=False)]
        writes = writer.latencies_ms[writes_before:]
        return {
            "snapshot_mb": snapshot.stat().st_size / 2**20,
            "install_s": installed_s,
            "restore_s": restores.seconds[0],
            "worst_tick_gap_s": max(gaps),
            "ticks": len(third.ticks),
            "writes": len(writes),
            "write_p50_ms": statistics.median(writes),
            "write_max_ms": max(writes),
            "write_failures": writer.failures,
            "elections": max(m.replica.raftCurrentTerm for m in members) - terms_before,
        }
    finally:
        if writer is not None:
            writer.stopping.set()
        for m in members:
            m.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1024, help="size of the store (MB)")
    parser.add_argument("--keep", action="store_true", help="keep the replicas' data (printed)")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-snapshot-install-"))
    try:
        r = run(args.mb, base)
    finally:
        if args.keep:
            print(f"data kept in {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    print(
        f"snapshot {r['snapshot_mb']:.0f} MB: shipped and installed in {r['install_s']:.1f} s, "
        f"restore copy {r['restore_s']:.2f} s on its own thread\n"
        f"installing follower: worst tick gap {r['worst_tick_gap_s'] * 1000:.0f} ms "
        f"({r['ticks']} ticks); election timeout 1,000-2,500 ms\n"
        f"writes meanwhile: {r['writes']}, p50 {r['write_p50_ms']:.1f} ms, "
        f"max {r['write_max_ms']:.0f} ms, failed {r['write_failures']}; "
        f"elections: {r['elections']}"
    )


if __name__ == "__main__":
    main()
