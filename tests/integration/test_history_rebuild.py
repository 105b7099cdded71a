"""A node that lacks closed history segments fetches them from a peer through the API
(GET /v1/admin/segments, /v1/admin/segments/{name}: api/segments.py) and serves the history
they hold (issue 35 §1): two stores applying the same log, one of them without the closed
files, as a node that installed a snapshot (which carries no closed segment) would be."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, cast

from aiohttp.test_utils import TestClient, TestServer

from schedd.api.app import build_app
from schedd.api.context import ApiContext, RaftStatus
from schedd.history.checksums import cached_sha256, file_sha256
from schedd.history.fetcher import Peer, SegmentFetcher
from schedd.history.verify import checked_digest
from schedd.raft.proposer import Proposer
from schedd.store import segments
from schedd.store.apply import StateMachine
from schedd.store.db import Database, ReadPool
from schedd.store.segment_reads import closed_segments
from tests.integration.test_api_history_segments import ADMIN, HOUR, Replica, _history, _move, ok

TOKEN = ADMIN["Authorization"].removeprefix("Bearer ")


class Recording(Replica):
    """A one-node log that keeps every entry, to apply the same log to a second store."""

    def __init__(self, machine: StateMachine) -> None:
        super().__init__(machine)
        self.entries: list[bytes] = []

    def apply(self, blob: bytes) -> dict[str, Any]:
        self.entries.append(blob)
        return super().apply(blob)


def context(node_id: str, db: Database, reads: ReadPool, replica: Replica) -> ApiContext:
    return ApiContext(
        node_id=node_id,
        proposer=Proposer(replica, timeout_s=5.0),
        reads=reads,
        raft=cast(RaftStatus, None),
        admin_token=TOKEN,
        partitions=16,
        payload_limit=65_536,
    )


def test_a_node_without_the_closed_segments_fetches_them_and_serves_their_history(
    tmp_path: Path,
) -> None:
    peer_db, new_db = (
        Database(tmp_path / "peer" / "state.db"),
        Database(tmp_path / "new" / "state.db"),
    )
    peer_reads, new_reads = ReadPool(peer_db.path), ReadPool(new_db.path)
    log = Recording(StateMachine(peer_db))
    new = Replica(StateMachine(new_db))

    async def main() -> None:
        peer_app = build_app(context("n1", peer_db, peer_reads, log))
        new_app = build_app(context("n2", new_db, new_reads, new))
        async with (
            TestClient(TestServer(peer_app)) as peer,
            TestClient(TestServer(new_app)) as node,
        ):
            made = await ok(
                await peer.post("/v1/tenants", json={"name": "acme"}, headers=ADMIN), 201
            )
            tenant = {"Authorization": f"Bearer {made['token']}"}
            job = {"schedule": {"delay": "0s"}, "target": {"type": "queue", "name": "q"}}
            await ok(await peer.post("/v1/jobs", json=job, headers=tenant), 201)
            now_ms = int(time.time() * 1000)
            job_id, dl_id = _history(log, peer_db, made["tenant_id"], now_ms)
            runs_path = f"/v1/jobs/{job_id}/runs?outputs=true"
            before = await ok(await peer.get(runs_path, headers=tenant))
            _move(log, now_ms + 2 * HOUR)
            for family in segments.FAMILIES:
                name = segments.segment_name(family, now_ms)
                log.command("close_segment", {"name": name}, now_ms + 3 * HOUR)
            # The second node applies the same log, then loses its closed files.
            for blob in log.entries:
                new.apply(blob)
            closed = new_reads.run(closed_segments)
            assert sorted(s.name for s in closed) == sorted(
                segments.segment_name(f, now_ms) for f in segments.FAMILIES
            )
            for segment in closed:
                segments.segment_path(new_db.path.parent, segment.name).unlink()
            lacking = await ok(await node.get(runs_path, headers=tenant))
            assert (lacking["runs"], lacking["history_complete"]) == ([], False)
            gone = await node.get(f"/v1/deadletters/{dl_id}", headers=tenant)
            assert gone.status == 503, await gone.text()
            # What the peer offers: every closed file with its sha256, once it has taken it.
            offered = await ok(await peer.get("/v1/admin/segments", headers=ADMIN))
            assert offered["segments"] == []  # no sha256 taken yet: nothing offered
            fetcher = SegmentFetcher(
                directory=segments.history_dir(new_db.path.parent),
                path_of=lambda name: segments.segment_path(new_db.path.parent, name),
                wanted=lambda: new_reads.run(closed_segments),
                peers=lambda: [Peer("n1", str(peer.make_url("")).rstrip("/"))],
                digest_of=checked_digest,
                token=TOKEN,
            )
            peer_side = SegmentFetcher(
                directory=segments.history_dir(peer_db.path.parent),
                path_of=lambda name: segments.segment_path(peer_db.path.parent, name),
                wanted=lambda: peer_reads.run(closed_segments),
                peers=lambda: [],
                digest_of=checked_digest,
                token=TOKEN,
            )
            await asyncio.to_thread(peer_side.run_round)  # the peer takes its files' sha256
            offered = await ok(await peer.get("/v1/admin/segments", headers=ADMIN))
            assert sorted(o["name"] for o in offered["segments"]) == sorted(s.name for s in closed)
            assert offered["missing"] == 0
            missing = await ok(await node.get("/v1/admin/segments", headers=ADMIN))
            assert (missing["segments"], missing["missing"]) == ([], 3)
            result = await asyncio.to_thread(fetcher.run_round)
            assert sorted(result.fetched) == sorted(s.name for s in closed), result.failed
            assert (result.missing, result.missing_bytes) == (0, 0)
            for segment in closed:
                path = segments.segment_path(new_db.path.parent, segment.name)
                assert segments.content_digest(path) == segment.content_digest
                assert cached_sha256(path) == file_sha256(path)
            after = await ok(await node.get(runs_path, headers=tenant))
            assert after == before
            letter = await ok(await node.get(f"/v1/deadletters/{dl_id}", headers=tenant))
            assert letter["error"] == "boom"
            # A tenant's token is refused; a name that is no closed segment is a 404.
            refused = await peer.get("/v1/admin/segments", headers=tenant)
            assert refused.status == 403
            for name in (
                "runs-1999010100",
                "..%2Fstate",
                segments.segment_name("runs", now_ms + 9 * HOUR),
            ):
                answer = await peer.get(f"/v1/admin/segments/{name}", headers=ADMIN)
                assert answer.status == 404, (name, await answer.text())
            ranged = await peer.get(
                f"/v1/admin/segments/{closed[0].name}", headers=ADMIN | {"Range": "bytes=10-19"}
            )
            assert ranged.status == 206 and len(await ranged.read()) == 10

    try:
        asyncio.run(main())
    finally:
        for reads, db in ((peer_reads, peer_db), (new_reads, new_db)):
            reads.close()
            db.close()
