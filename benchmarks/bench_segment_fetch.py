"""Benchmark: how fast a new or wiped node fetches closed history segments from a peer.

Makes one runs segment (store/segments.py's schema: finished one-time runs, each with its
attempt), offers N copies of it from a peer process that serves them as
the node's route does (aiohttp's FileResponse, with Range), and runs the node's own fetcher
(history/fetcher.py: the download, the sha256 check, the content digest check, the fsync and
rename) against it on loopback. Prints the rate and where the time goes, and what it means
for 100 GB and for the seed's 860 GB of history.

    .venv/bin/python benchmarks/bench_segment_fetch.py --gigabytes 10

Needs about twice --gigabytes free (the copies are hard links of one file: the peer reads
it from the page cache, the fetcher writes every byte to disk and fsyncs it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from schedd.history.checksums import file_sha256
from schedd.history.fetcher import Peer, SegmentFetcher
from schedd.history.verify import checked_digest
from schedd.store import segments
from schedd.store.segment_reads import ClosedSegment
from tests.ports import free_ports

SEED_HISTORY_GB = 860


def make_segment(path: Path, megabytes: int) -> int:
    """A runs segment (store/segments.py's schema) of finished one-time runs, each with its one
    attempt, in the per-run form; returns the runs written."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    segments.create_schema(conn, segments.RUNS)
    runs, at = 0, 1_764_900_000_000
    while path.stat().st_size < megabytes * 1024 * 1024:
        block = [(f"job_{at + runs + i:012x}{i:012x}", at + runs + i) for i in range(100_000)]
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO runs VALUES (?, ?, 'ten_bench0000', ?, 'succeeded', 1, ?, ?, NULL)",
            ((job, t, t, t + 5, t + 40) for job, t in block),
        )
        conn.executemany(
            "INSERT INTO attempts VALUES (?, ?, 1, ?, ?, 'acked', NULL)",
            ((job, t, t + 5, t + 40) for job, t in block),
        )
        conn.execute("COMMIT")
        runs += len(block)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    return runs


def serve(directory: Path, port: int) -> None:
    """The peer: GET /v1/admin/segments and /v1/admin/segments/{name}, as api/segments.py."""
    from aiohttp import web

    shas: dict[int, str] = {}
    offers = []
    for path in sorted(directory.glob("*.db")):
        inode = path.stat().st_ino
        shas.setdefault(inode, file_sha256(path))
        offers.append({"name": path.stem, "bytes": path.stat().st_size, "sha256": shas[inode]})

    async def manifest(request: web.Request) -> web.Response:
        return web.json_response({"node_id": "peer", "segments": offers, "missing": 0})

    async def one(request: web.Request) -> web.FileResponse:
        return web.FileResponse(directory / f"{request.match_info['name']}.db")

    app = web.Application()
    app.router.add_get("/v1/admin/segments", manifest)
    app.router.add_get("/v1/admin/segments/{name}", one)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def wait_up(url: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"the peer did not answer at {url}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gigabytes", type=int, default=10, help="history fetched in all")
    parser.add_argument("--file-mb", type=int, default=1024, help="size of one segment file")
    parser.add_argument("--parallel", type=int, default=2, help="files in flight at once")
    parser.add_argument("--dir", type=Path, default=None, help="where to work (a temp dir)")
    parser.add_argument("--serve", nargs=2, metavar=("DIR", "PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(Path(args.serve[0]), int(args.serve[1]))
        return
    work = Path(tempfile.mkdtemp(prefix="schedd-bench-segments-", dir=args.dir))
    try:
        run(work, args.gigabytes, args.file_mb, args.parallel)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(work: Path, gigabytes: int, file_mb: int, parallel: int) -> None:
    source, target = work / "peer", work / "node"
    source.mkdir()
    target.mkdir()
    started = time.perf_counter()
    rows = make_segment(source / "template", file_mb)
    template = source / "template"
    count = max(1, gigabytes * 1024 // file_mb)
    names = [f"runs-{2026120100 + i:010d}" for i in range(count)]
    for name in names:
        os.link(template, source / f"{name}.db")
    template.unlink()
    size = (source / f"{names[0]}.db").stat().st_size
    print(
        f"made {count} segments of {size / 2**20:,.0f} MiB ({rows:,} runs each) in "
        f"{time.perf_counter() - started:.1f} s"
    )
    one = source / f"{names[0]}.db"
    t0 = time.perf_counter()
    digest = checked_digest(one)
    digest_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    file_sha256(one)
    sha_s = time.perf_counter() - t0
    port = free_ports(1)[0]
    peer = subprocess.Popen([sys.executable, __file__, "--serve", str(source), str(port)])
    try:
        wait_up(f"http://127.0.0.1:{port}/v1/admin/segments")
        fetcher = SegmentFetcher(
            directory=target,
            path_of=lambda name: target / f"{name}.db",
            wanted=lambda: [ClosedSegment(name=n, content_digest=digest) for n in reversed(names)],
            peers=lambda: [Peer(node_id="peer", api_url=f"http://127.0.0.1:{port}")],
            digest_of=checked_digest,
            token="bench",
            parallel=parallel,
            digest_in_processes=True,
        )
        t0 = time.perf_counter()
        result = fetcher.run_round()
        fetch_s = time.perf_counter() - t0
    finally:
        peer.terminate()
        peer.wait(10)
    assert not result.failed and len(result.fetched) == count, result.failed
    total = size * count
    rate = total / fetch_s
    print(
        f"fetched {total / 1e9:.2f} GB in {fetch_s:.1f} s: {rate / 1e6:.0f} MB/s "
        f"({parallel} files in flight; download, sha256, content digest, fsync, rename)"
    )
    print(
        f"  one {size / 2**20:,.0f} MiB file, page cache warm: sha256 {sha_s:.2f} s "
        f"({size / sha_s / 1e6:.0f} MB/s), checks and content digest {digest_s:.2f} s "
        f"({size / digest_s / 1e6:.0f} MB/s)"
    )
    for gb in (10, 100, SEED_HISTORY_GB):
        print(f"  at this rate, {gb} GB of history: {gb * 1e9 / rate / 60:.1f} min")


if __name__ == "__main__":
    main()
