"""The loop that brings a node's closed history up to what the log says it should hold.

Each round: the closed segments the replicated `segments` table lists (newest first) whose
file this node lacks are fetched from the peers that offer them (`GET /v1/admin/segments`,
their manifests), `parallel` at a time, each from the peers in turn. A file is renamed into
place only once its sha256 equals the peer's manifest (the transfer) and its content digest
equals the replicated row's (the rows): a peer with a diverged file is never believed. A
round also takes the sha256 of local closed files that have none yet, so this node can offer
them in turn. Nothing here writes the store; files only."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import shutil
import sqlite3
import ssl
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from schedd.history.checksums import (
    SIDECAR_SUFFIX,
    drop_sidecar,
    ensure_sha256,
    file_sha256,
    record_sha256,
)
from schedd.history.transfer import Offer, OpenUrl, TransferFailed, download, opener
from schedd.loop import Loop
from schedd.store.files import durable_replace
from schedd.store.segment_reads import ClosedSegment
from schedd.wire.segments import SegmentManifest

log = logging.getLogger(__name__)
EVERY_S = 5.0
PARALLEL = 2  # files in flight at once; each from one peer
TIMEOUT_S = 30.0  # a read that waits longer fails the try (the part is kept)
MANIFEST_LIMIT_BYTES = 8 * 1024 * 1024  # ~60,000 segments; a week of hourly files is ~500
PART_SUFFIX = ".part"


@dataclass(frozen=True, slots=True)
class Peer:
    node_id: str
    api_url: str


@dataclass(slots=True)
class Round:
    """What one round did: files fetched, why others were not, what is still missing."""

    fetched: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    missing: int = 0  # closed segments this node still lacks after the round
    missing_bytes: int = 0  # their offered sizes, less what the parts already hold


class SegmentFetcher(Loop):
    """Fetches missing closed segments into `path_of(name)`; `tick` runs one round."""

    def __init__(
        self,
        *,
        directory: Path,
        path_of: Callable[[str], Path],
        wanted: Callable[[], Sequence[ClosedSegment]],
        peers: Callable[[], Sequence[Peer]],
        digest_of: Callable[[Path], str],
        token: str,
        tls: ssl.SSLContext | None = None,
        parallel: int = PARALLEL,
        every_s: float = EVERY_S,
        timeout_s: float = TIMEOUT_S,
        keep_free_bytes: int = 0,
        open_url: OpenUrl | None = None,
        digest_in_processes: bool = False,
    ) -> None:
        super().__init__("history-fetch", first_wait_s=1.0)
        self._directory = directory  # where path_of puts files: swept of leftovers
        self._path_of, self._wanted, self._peers = path_of, wanted, peers
        self._digest_of, self._token = digest_of, token
        self._parallel, self._every_s, self._timeout_s = parallel, every_s, timeout_s
        self._keep_free_bytes = keep_free_bytes
        self._open_url: OpenUrl = open_url or opener(tls)
        # Checking a segment's rows is CPU in Python (about 50 MB/s a core, measured in
        # benchmarks/bench_segment_fetch.py): in processes, files in flight check in parallel.
        # `digest_of` must then be a module-level function (it is sent to the process).
        self._digest_in_processes = digest_in_processes
        self._digester: Executor | None = None
        self.missing = 0  # read by the metrics (a torn read of two ints is harmless)
        self.missing_bytes = 0

    def tick(self, now_ms: int) -> float:
        self.run_round()
        return self._every_s

    def run_round(self) -> Round:
        result = Round()
        closed = list(self._wanted())
        lacking = [s for s in closed if not self._path_of(s.name).exists()]
        if lacking:
            self._directory.mkdir(parents=True, exist_ok=True)
            offers = self._offers()
            with (
                self._digesting(),
                ThreadPoolExecutor(self._parallel, thread_name_prefix="history-fetch") as pool,
            ):
                outcomes = list(pool.map(lambda s: self._fetch(s, offers.get(s.name, [])), lacking))
            for segment, why in zip(lacking, outcomes, strict=True):
                if why is None:
                    result.fetched.append(segment.name)
                else:
                    result.failed[segment.name] = why
            closed = list(self._wanted())  # retention may have dropped some meanwhile
            self._drop_unlisted(result.fetched, closed)
            self._count_missing(closed, offers, result)
        self._offer_local(closed)
        self.missing, self.missing_bytes = result.missing, result.missing_bytes
        return result

    def _offers(self) -> dict[str, list[tuple[Peer, Offer]]]:
        """Every peer's manifest, by segment name; a peer that fails offers nothing."""
        offers: dict[str, list[tuple[Peer, Offer]]] = {}
        for peer in self._peers():
            try:
                manifest = self._manifest(peer)
            except (TransferFailed, OSError, ValueError, msgspec.MsgspecError) as exc:
                log.info("history: no manifest from node=%s: %s", peer.node_id, exc)
                continue
            for item in manifest.segments:
                offers.setdefault(item.name, []).append(
                    (peer, Offer(name=item.name, size=item.bytes, sha256=item.sha256))
                )
        return offers

    def _manifest(self, peer: Peer) -> SegmentManifest:
        request = urllib.request.Request(
            f"{peer.api_url.rstrip('/')}/v1/admin/segments",
            headers={"Authorization": f"Bearer {self._token}", "Accept-Encoding": "identity"},
        )
        with self._open_url(request, self._timeout_s) as answer:
            data = answer.read(MANIFEST_LIMIT_BYTES + 1)
        if len(data) > MANIFEST_LIMIT_BYTES:
            raise TransferFailed("its manifest is over the size limit")
        return msgspec.json.decode(data, type=SegmentManifest)

    def _fetch(self, segment: ClosedSegment, offers: list[tuple[Peer, Offer]]) -> str | None:
        """Fetch one segment from the first peer that delivers a verified file; None on
        success, else why every peer failed."""
        if not offers:
            return "no peer offers it yet"
        final = self._path_of(segment.name)
        part = final.with_name(final.name + PART_SUFFIX)
        reasons = []
        for peer, offer in offers:
            if self._is_stopping:
                return "the node is stopping"
            try:
                why = self._fetch_from(peer, offer, segment, part, final)
            except Exception as exc:  # one file's failure costs only that file, this round
                log.exception("history: segment=%s from node=%s", segment.name, peer.node_id)
                part.unlink(missing_ok=True)
                why = f"{type(exc).__name__}: {exc}"
            if why is None:
                log.info("history: fetched segment=%s from node=%s", segment.name, peer.node_id)
                return None
            log.warning(
                "history: segment=%s from node=%s failed: %s", segment.name, peer.node_id, why
            )
            reasons.append(f"{peer.node_id}: {why}")
        return "; ".join(reasons)

    def _fetch_from(
        self, peer: Peer, offer: Offer, segment: ClosedSegment, part: Path, final: Path
    ) -> str | None:
        held = part.stat().st_size if part.exists() else 0
        if not self._has_room(final.parent, offer.size - held):
            return f"not enough free disk for {offer.size - held:,} more bytes"
        try:
            download(
                self._open_url,
                peer.api_url,
                offer,
                part,
                token=self._token,
                timeout_s=self._timeout_s,
                should_stop=lambda: self._is_stopping,
            )
        except TransferFailed as exc:
            return str(exc)
        sha256 = file_sha256(part)
        if sha256 != offer.sha256:
            part.unlink()
            return f"its bytes have sha256 {sha256}, not the {offer.sha256} it offered"
        try:
            if self._digester is None:
                digest = self._digest_of(part)
            else:
                digest = self._digester.submit(self._digest_of, part).result()
        except (sqlite3.Error, ValueError) as exc:  # not a sound segment file
            part.unlink()
            return f"its file is not a sound segment: {exc}"
        if digest != segment.content_digest:
            part.unlink()
            return (
                f"its rows have digest {digest}, not the log's {segment.content_digest}: "
                "that node's copy differs from what the cluster agreed"
            )
        durable_replace(part, final, is_source_synced=True)
        record_sha256(final, sha256)
        return None

    @contextlib.contextmanager
    def _digesting(self) -> Iterator[None]:
        """For one round's fetches: the processes that check rows, if asked for (spawned, not
        forked: this process has threads)."""
        if not self._digest_in_processes:
            yield
            return
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(self._parallel, mp_context=context) as digester:
            self._digester = digester
            try:
                yield
            finally:
                self._digester = None

    def _drop_unlisted(self, fetched: list[str], closed: list[ClosedSegment]) -> None:
        """Remove a fetched file whose segment the log dropped while it was in flight (the
        store's own unlink ran before the file was here)."""
        listed = {segment.name for segment in closed}
        for name in fetched:
            if name not in listed:
                final = self._path_of(name)
                drop_sidecar(final)
                final.unlink(missing_ok=True)

    def _has_room(self, directory: Path, more_bytes: int) -> bool:
        free = shutil.disk_usage(directory).free
        return free - more_bytes >= self._keep_free_bytes

    def _count_missing(
        self,
        closed: list[ClosedSegment],
        offers: dict[str, list[tuple[Peer, Offer]]],
        result: Round,
    ) -> None:
        for segment in closed:
            final = self._path_of(segment.name)
            if final.exists():
                continue
            result.missing += 1
            part = final.with_name(final.name + PART_SUFFIX)
            held = part.stat().st_size if part.exists() else 0
            sizes = [offer.size for _, offer in offers.get(segment.name, [])]
            result.missing_bytes += max(0, (sizes[0] if sizes else 0) - held)

    def _offer_local(self, closed: list[ClosedSegment]) -> None:
        """Take the sha256 of local closed files that have none yet (one full read each), and
        remove what no listed segment owns: parts of segments dropped meanwhile, and sidecars
        whose file retention removed."""
        kept = set()
        for segment in closed:
            final = self._path_of(segment.name)
            kept.add(final.name + PART_SUFFIX)
            if self._is_stopping:
                return
            try:
                ensure_sha256(final)
            except FileNotFoundError:  # not here yet, or dropped since the list was read
                continue
        for leftover in self._directory.glob(f"*{PART_SUFFIX}"):
            if leftover.name not in kept:
                leftover.unlink(missing_ok=True)
        for sidecar in self._directory.glob(f"*{SIDECAR_SUFFIX}"):
            if not sidecar.with_name(sidecar.name.removesuffix(SIDECAR_SUFFIX)).exists():
                sidecar.unlink(missing_ok=True)
