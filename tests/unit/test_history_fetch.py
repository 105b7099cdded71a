"""The fetch of closed history segments from peers (history/fetcher.py, history/transfer.py):
resumed where a copy stopped, verified by sha256 and by the log's content digest, never
believing a peer that sends other bytes, more bytes, or a redirect."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from schedd.history import transfer
from schedd.history.checksums import cached_sha256, file_sha256
from schedd.history.fetcher import Peer, SegmentFetcher
from schedd.store.segment_reads import ClosedSegment
from tests.servers import serving

TOKEN = "adm_test_token"


def rows_digest(path: Path) -> str:
    """The tests' stand-in for a segment's content digest: a hash of the bytes after the
    first 16 (a peer can change a header byte and keep the rows)."""
    return hashlib.blake2b(path.read_bytes()[16:], digest_size=16).hexdigest()


@dataclass
class Script:
    """What one scripted peer holds and how it misbehaves, per segment name."""

    files: dict[str, bytes] = field(default_factory=dict)
    offered_sha: dict[str, str] = field(default_factory=dict)  # overrides the true sha256
    offered_size: dict[str, int] = field(default_factory=dict)  # overrides the true size
    cut_after: dict[str, int] = field(default_factory=dict)  # close after this many bytes
    redirect: set[str] = field(default_factory=set)
    ranges: list[str | None] = field(default_factory=list)  # the Range header of each GET
    tokens: list[str | None] = field(default_factory=list)


def peer_handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            script.tokens.append(self.headers.get("Authorization"))
            if self.path == "/v1/admin/segments":
                self._manifest()
                return
            name = self.path.rsplit("/", 1)[-1]
            script.ranges.append(self.headers.get("Range"))
            if name in script.redirect:
                self.send_response(307)
                self.send_header("Location", "http://127.0.0.1:9/elsewhere")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self._file(name, script.files[name])

        def _manifest(self) -> None:
            body = json.dumps(
                {
                    "node_id": "peer",
                    "missing": 0,
                    "segments": [
                        {
                            "name": name,
                            "bytes": script.offered_size.get(name, len(data)),
                            "sha256": script.offered_sha.get(
                                name, hashlib.sha256(data).hexdigest()
                            ),
                        }
                        for name, data in script.files.items()
                    ],
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _file(self, name: str, data: bytes) -> None:
            asked = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
            start = int(asked.group(1)) if asked else 0
            self.send_response(206 if asked else 200)
            if asked:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.send_header("Content-Length", str(len(data) - start))
            self.end_headers()
            sent = data[start:]
            cut = script.cut_after.pop(name, None)
            self.wfile.write(sent if cut is None else sent[:cut])
            if cut is not None:
                self.close_connection = True

    return Handler


@pytest.fixture
def peers() -> Iterator[Callable[[Script], str]]:
    """Start scripted peers on free ports; each call gives its URL; all stopped at the end."""
    with serving_many() as start:
        yield start


class serving_many:
    def __init__(self) -> None:
        self._stack: list[object] = []

    def __enter__(self) -> Callable[[Script], str]:
        def start(script: Script) -> str:
            context = serving(peer_handler(script))
            self._stack.append(context)
            return context.__enter__()

        return start

    def __exit__(self, *exc: object) -> None:
        for context in reversed(self._stack):
            context.__exit__(None, None, None)  # type: ignore[attr-defined]


def segment_bytes(seed: int, size: int = 3 * 1024 * 1024 + 17) -> bytes:
    block = hashlib.sha256(str(seed).encode()).digest()
    return (block * (size // len(block) + 1))[:size]


def fetcher(
    home: Path, closed: list[ClosedSegment], urls: list[str], **kwargs: object
) -> SegmentFetcher:
    return SegmentFetcher(
        directory=home,
        path_of=lambda name: home / f"{name}.db",
        wanted=lambda: closed,
        peers=lambda: [Peer(node_id=f"n{i}", api_url=url) for i, url in enumerate(urls)],
        digest_of=rows_digest,
        token=TOKEN,
        timeout_s=5.0,
        **kwargs,  # type: ignore[arg-type]
    )


def listed(name: str, data: bytes, tmp_path: Path) -> ClosedSegment:
    scratch = tmp_path / f"scratch-{name}"
    scratch.write_bytes(data)
    return ClosedSegment(name=name, content_digest=rows_digest(scratch))


def test_fetches_missing_segments_newest_first_and_records_their_sha256(
    tmp_path: Path, peers: Callable[[Script], str]
) -> None:
    files = {"runs-2026120513": segment_bytes(1), "audit-2026120512": segment_bytes(2)}
    script = Script(files=dict(files))
    closed = [listed(name, data, tmp_path) for name, data in files.items()]
    home = tmp_path / "history"
    home.mkdir()
    (home / "runs-2026120511.db").write_bytes(b"held already")  # present: not asked for
    closed.append(ClosedSegment(name="runs-2026120511", content_digest="x"))
    result = fetcher(home, closed, [peers(script)]).run_round()
    assert sorted(result.fetched) == sorted(files)
    assert result.failed == {} and result.missing == 0 and result.missing_bytes == 0
    for name, data in files.items():
        assert (home / f"{name}.db").read_bytes() == data
        assert cached_sha256(home / f"{name}.db") == hashlib.sha256(data).hexdigest()
    assert script.tokens and set(script.tokens) == {f"Bearer {TOKEN}"}
    assert not list(home.glob("*.part"))


def test_a_copy_cut_short_resumes_where_it_stopped(
    tmp_path: Path, peers: Callable[[Script], str]
) -> None:
    data = segment_bytes(3)
    script = Script(files={"runs-2026120510": data}, cut_after={"runs-2026120510": 1_500_000})
    closed = [listed("runs-2026120510", data, tmp_path)]
    job = fetcher(tmp_path / "history", closed, [peers(script)])
    first = job.run_round()
    assert first.fetched == [] and "short" in first.failed["runs-2026120510"]
    part = tmp_path / "history" / "runs-2026120510.db.part"
    assert part.stat().st_size == 1_500_000
    assert first.missing == 1 and first.missing_bytes == len(data) - 1_500_000
    second = job.run_round()
    assert second.fetched == ["runs-2026120510"]
    assert script.ranges == [None, "bytes=1500000-"]
    assert (tmp_path / "history" / "runs-2026120510.db").read_bytes() == data


def test_a_peer_with_other_bytes_is_not_believed_and_another_peer_serves(
    tmp_path: Path, peers: Callable[[Script], str]
) -> None:
    data = segment_bytes(4)
    closed = [listed("runs-2026120509", data, tmp_path)]
    liar = Script(files={"runs-2026120509": data[:-1] + b"?"})
    liar.offered_sha["runs-2026120509"] = hashlib.sha256(data).hexdigest()  # claims the truth
    honest = Script(files={"runs-2026120509": data})
    result = fetcher(tmp_path / "history", closed, [peers(liar), peers(honest)]).run_round()
    assert result.fetched == ["runs-2026120509"]
    assert (tmp_path / "history" / "runs-2026120509.db").read_bytes() == data
    assert liar.ranges == [None] and honest.ranges == [None]  # the bad part was not resumed


def test_a_file_whose_rows_differ_from_the_log_is_refused(
    tmp_path: Path, peers: Callable[[Script], str]
) -> None:
    data = segment_bytes(5)
    diverged = data[:100] + b"other rows" + data[110:]  # its sha256 matches its own manifest
    closed = [listed("audit-2026120508", data, tmp_path)]
    result = fetcher(
        tmp_path / "history", closed, [peers(Script(files={"audit-2026120508": diverged}))]
    ).run_round()
    assert "not the log's" in result.failed["audit-2026120508"]
    assert not (tmp_path / "history" / "audit-2026120508.db").exists()
    assert not (tmp_path / "history" / "audit-2026120508.db.part").exists()


def test_more_bytes_than_offered_or_a_redirect_fail_the_try(
    tmp_path: Path, peers: Callable[[Script], str]
) -> None:
    data = segment_bytes(6)
    closed = [listed("runs-2026120507", data, tmp_path), listed("runs-2026120506", data, tmp_path)]
    script = Script(
        files={"runs-2026120507": data, "runs-2026120506": data},
        offered_size={"runs-2026120507": len(data) - 10},
        redirect={"runs-2026120506"},
    )
    result = fetcher(tmp_path / "history", closed, [peers(script)]).run_round()
    assert result.fetched == []
    assert "longer than the size offered" in result.failed["runs-2026120507"]
    assert "HTTP 307" in result.failed["runs-2026120506"]


def test_no_disk_room_no_fetch_and_a_segment_nobody_offers_waits(
    tmp_path: Path, peers: Callable[[Script], str]
) -> None:
    data = segment_bytes(7)
    closed = [listed("runs-2026120505", data, tmp_path), ClosedSegment("runs-2026120504", "d")]
    script = Script(files={"runs-2026120505": data})
    job = fetcher(tmp_path / "history", closed, [peers(script)], keep_free_bytes=2**62)
    result = job.run_round()
    assert "not enough free disk" in result.failed["runs-2026120505"]
    assert result.failed["runs-2026120504"] == "no peer offers it yet"
    assert script.ranges == [] and result.missing == 2 and result.missing_bytes == len(data)


def test_a_segment_dropped_while_in_flight_is_not_kept(
    tmp_path: Path, peers: Callable[[Script], str]
) -> None:
    data = segment_bytes(8)
    closed = [listed("runs-2026120503", data, tmp_path)]
    calls = []

    def wanted() -> list[ClosedSegment]:
        calls.append(1)
        return closed if len(calls) == 1 else []  # retention dropped it during the round

    home = tmp_path / "history"
    home.mkdir()
    job = SegmentFetcher(
        directory=home,
        path_of=lambda name: home / f"{name}.db",
        wanted=wanted,
        peers=lambda: [Peer("n1", peers(Script(files={"runs-2026120503": data})))],
        digest_of=rows_digest,
        token=TOKEN,
    )
    result = job.run_round()
    assert result.fetched == ["runs-2026120503"] and result.missing == 0
    assert list(home.iterdir()) == []


def test_local_closed_files_get_their_sha256_taken_and_stray_parts_go(tmp_path: Path) -> None:
    home = tmp_path / "history"
    home.mkdir()
    (home / "runs-2026120502.db").write_bytes(b"closed here by this node's apply")
    (home / "runs-2026010100.db.part").write_bytes(b"a segment dropped since")
    closed = [ClosedSegment("runs-2026120502", "d")]
    fetcher(home, closed, []).run_round()
    assert cached_sha256(home / "runs-2026120502.db") == file_sha256(home / "runs-2026120502.db")
    assert not (home / "runs-2026010100.db.part").exists()


def test_a_peer_file_that_is_no_segment_is_refused_and_the_next_peer_serves(
    tmp_path: Path, peers: Callable[[Script], str]
) -> None:
    data = segment_bytes(9)
    closed = [listed("runs-2026120501", data, tmp_path)]
    broken = Script(files={"runs-2026120501": b"not a database" + data[14:]})  # its own sha

    def digest(path: Path) -> str:
        if path.read_bytes().startswith(b"not a database"):
            raise sqlite3.DatabaseError("file is not a database")
        return rows_digest(path)

    home = tmp_path / "history"
    job = SegmentFetcher(
        directory=home,
        path_of=lambda name: home / f"{name}.db",
        wanted=lambda: closed,
        peers=lambda: [
            Peer("n1", peers(broken)),
            Peer("n2", peers(Script(files={"runs-2026120501": data}))),
        ],
        digest_of=digest,
        token=TOKEN,
    )
    result = job.run_round()
    assert result.fetched == ["runs-2026120501"]
    assert (home / "runs-2026120501.db").read_bytes() == data


def test_a_peer_that_trickles_is_given_up_within_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transfer, "MIN_BYTES_PER_S", 200_000)  # a deadline of 0.5 s + 0.5 s

    class Trickle(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            with contextlib.suppress(OSError):
                for _ in range(400):  # a byte every 10 ms: each read is within its timeout
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.01)

    offer = transfer.Offer(name="runs-2026120500", size=100_000, sha256="0" * 64)
    with serving(Trickle) as url:
        started = time.monotonic()
        with pytest.raises(transfer.TransferFailed, match="slower than"):
            transfer.download(
                transfer.opener(None),
                url,
                offer,
                tmp_path / "part",
                token=TOKEN,
                timeout_s=0.5,
            )
    assert time.monotonic() - started < 3  # the trickle lasts 4 s, each byte within 0.5 s
