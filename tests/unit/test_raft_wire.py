"""schedd/raft/wire.py: Raft connections refuse oversized frames and unauthenticated pickles."""

from __future__ import annotations

import contextlib
import math
import os
import pickle
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pysyncobj
import pysyncobj.tcp_server
import pysyncobj.transport
import pytest
from cryptography.fernet import Fernet
from pysyncobj.encryptor import getEncryptor
from pysyncobj.monotonic import monotonic
from pysyncobj.poller import Poller, createPoller
from pysyncobj.tcp_connection import CONNECTION_STATE, TcpConnection

from schedd.api.jobs import BATCH_BODY_LIMIT, MAX_BATCH
from schedd.config import NodeConfig
from schedd.node import raft_conf
from schedd.raft import wire
from schedd.raft.snapshots import SnapshotHooks
from schedd.store.command import MAX_COMMAND_BYTES

SECRET = "raft_unit_secret_0123456789abcdef"
MiB = 1024 * 1024


class Touch:
    """Unpickling this creates a file: proof that a frame reached pickle.loads."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return (Path.touch, (self.path,))


def frame(message: Any, fernet: Fernet | None = None) -> bytes:
    """One frame as pysyncobj writes it: signed 4-byte length, zlib(pickle), maybe Fernet."""
    data = zlib.compress(pickle.dumps(message, protocol=4), 3)
    if fernet is not None:
        data = fernet.encrypt_at_time(data, int(monotonic()))
    return struct.pack("i", len(data)) + data


@dataclass
class Link:
    """A BoundedConnection reading from a socket pair; `peer` is the other end."""

    poller: Poller
    conn: wire.BoundedConnection
    peer: socket.socket
    received: list[Any]
    fernet: Fernet

    def pump(self, until: Callable[[], bool], timeout_s: float = 5.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not until():
            assert time.monotonic() < deadline, "condition not reached"
            self.poller.poll(0.02)

    def is_closed(self) -> bool:
        return bool(self.conn.state == CONNECTION_STATE.DISCONNECTED)

    def send_in_background(self, data: bytes) -> threading.Thread:
        def send() -> None:
            with contextlib.suppress(OSError):  # closed mid-stream: what some tests expect
                self.peer.sendall(data)

        thread = threading.Thread(target=send, daemon=True)
        thread.start()
        return thread


@pytest.fixture
def link() -> Iterator[Link]:
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    poller = createPoller("auto")
    received: list[Any] = []
    conn = wire.BoundedConnection(poller, onMessageReceived=received.append, socket=ours)
    fernet = getEncryptor(SECRET)
    conn.encryptor = fernet
    try:
        yield Link(poller, conn, theirs, received, fernet)
    finally:
        conn.disconnect()
        theirs.close()


def peer_sees_eof(peer: socket.socket, timeout_s: float = 5.0) -> bool:
    peer.settimeout(timeout_s)
    try:
        while peer.recv(65536):
            pass
    except ConnectionResetError:
        pass
    return True


def test_a_frame_without_the_secret_never_reaches_pickle(link: Link, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    link.peer.sendall(frame(Touch(marker)))
    link.pump(link.is_closed)
    assert not marker.exists()
    assert link.received == []
    assert peer_sees_eof(link.peer)


def test_a_huge_declared_length_closes_the_connection_at_once(link: Link) -> None:
    link.peer.sendall(struct.pack("i", 1024 * MiB) + b"x" * 1000)
    link.pump(link.is_closed)
    assert peer_sees_eof(link.peer)


def test_a_negative_declared_length_closes_the_connection(link: Link) -> None:
    link.peer.sendall(struct.pack("i", -5) + b"x" * 100)
    link.pump(link.is_closed)


def test_before_the_secret_is_shown_a_frame_may_not_exceed_the_hello_limit(link: Link) -> None:
    big = frame(os.urandom(wire.MAX_HELLO_FRAME), link.fernet)
    link.send_in_background(big)
    link.pump(link.is_closed)
    assert link.received == []


def test_after_the_secret_is_shown_large_frames_pass(link: Link) -> None:
    blob = os.urandom(5 * MiB)
    link.send_in_background(frame("hello", link.fernet) + frame(blob, link.fernet))
    link.pump(lambda: len(link.received) == 2, timeout_s=20)
    assert link.received == ["hello", blob]
    assert not link.is_closed()


def test_back_to_back_frames_all_arrive(link: Link) -> None:
    messages = [{"type": "append_entries", "n": i} for i in range(200)]
    link.send_in_background(b"".join(frame(m, link.fernet) for m in messages))
    link.pump(lambda: len(link.received) == len(messages))
    assert link.received == messages


def test_a_trusted_peer_may_not_exceed_max_frame(
    link: Link, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wire, "MAX_FRAME", 1 * MiB)
    link.peer.sendall(frame("hello", link.fernet))
    link.pump(lambda: link.received == ["hello"])
    link.send_in_background(struct.pack("i", 2 * MiB) + b"x" * (2 * MiB))
    link.pump(link.is_closed)


def test_trust_ends_with_the_connection(link: Link) -> None:
    link.peer.sendall(frame("hello", link.fernet))
    link.pump(lambda: link.received == ["hello"])
    assert link.conn.frame_limit() == wire.MAX_FRAME
    link.conn.disconnect()
    assert link.conn.frame_limit() == wire.MAX_HELLO_FRAME


def test_install_makes_pysyncobj_build_bounded_connections() -> None:
    # The overrides use pysyncobj 0.3.17's private (mangled) names: a new version must be
    # re-checked before the pin moves.
    assert pysyncobj.__name__ == "pysyncobj"
    from pysyncobj.version import VERSION

    assert VERSION == "0.3.17"
    for name in ("__processRead", "__processParseMessage"):
        assert callable(getattr(TcpConnection, f"_TcpConnection{name}"))
    wire.install()
    assert pysyncobj.transport.TcpConnection is wire.BoundedConnection
    assert pysyncobj.tcp_server.TcpConnection is wire.BoundedConnection


def fernet_frame_bytes(plain: int) -> int:
    """Upper bound of a frame carrying `plain` pickled bytes: zlib's bound, then Fernet."""
    compressed = plain + (plain >> 12) + (plain >> 14) + (plain >> 25) + 13  # compressBound
    token = 1 + 8 + 16 + (compressed // 16 + 1) * 16 + 32  # version, time, IV, AES-CBC, HMAC
    return 4 + 4 * math.ceil(token / 3)  # header + base64


def test_max_frame_covers_the_largest_legitimate_message(tmp_path: Path) -> None:
    conf = raft_conf(
        NodeConfig(path=tmp_path / "n.toml", node_id="n1", data_dir=tmp_path, raft_secret=SECRET),
        SnapshotHooks.__new__(SnapshotHooks),
    )
    # pysyncobj packs entries until their total reaches appendEntriesBatchSizeBytes, so one
    # message holds almost that much plus one more entry of any size. New entries are at most
    # one command (MAX_COMMAND_BYTES), but a journal written before that cap may hold a
    # create_jobs of a whole batch body whose payloads were sealed (base64: x4/3), plus what
    # the proposer added per job (well under 1 KiB): a lagging follower must still receive it.
    largest_command = max(MAX_COMMAND_BYTES, BATCH_BODY_LIMIT * 4 // 3 + MAX_BATCH * 1024)
    largest_entries = conf.appendEntriesBatchSizeBytes + largest_command
    assert fernet_frame_bytes(largest_entries + 64 * 1024) <= wire.MAX_FRAME
    snapshot_chunk = conf.logCompactionBatchSize  # how pysyncobj ships snapshots
    assert fernet_frame_bytes(snapshot_chunk + 1024) <= wire.MAX_FRAME
    assert wire.MAX_FRAME < 2**31  # pysyncobj's header is a signed 4-byte length


def test_the_key_exchange_frame_fits_the_hello_limit() -> None:
    fernet = getEncryptor(SECRET)
    assert len(frame(os.urandom(32), fernet)) < wire.MAX_HELLO_FRAME
