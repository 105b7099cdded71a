"""pysyncobj's TCP framing, bounded: a peer cannot make a node buffer more than one frame.

Installs a TcpConnection subclass into pysyncobj before a SyncObj starts; decides nothing else.
"""

from __future__ import annotations

import logging
import struct
from typing import Any

import pysyncobj.tcp_server
import pysyncobj.transport
from pysyncobj.tcp_connection import CONNECTION_STATE, TcpConnection

log = logging.getLogger(__name__)

MiB = 1024 * 1024
# Until a frame on a connection has passed Fernet's check (the peer holds the Raft secret),
# only the key-exchange frame can legitimately arrive: about 200 bytes.
MAX_HELLO_FRAME = 64 * 1024
# After: the largest legitimate frame is an append_entries of up to 4 MiB of entries plus one
# more entry. New commands are at most 1 MiB (MAX_COMMAND_BYTES), but a journal written before
# that cap (2026-12-01) may still hold a create_jobs of a whole 32 MiB batch (about 43 MiB with
# sealed payloads) that a lagging follower must receive: zlib'd and Fernet'd (x4/3) about
# 64 MiB. Twice that. Snapshot chunks are 64 KiB. DESIGN.md ("The Raft port") has the
# arithmetic; tests/unit/test_raft_wire.py re-checks it.
MAX_FRAME = 128 * MiB
_HEADER = struct.Struct("i")  # pysyncobj's: native, signed


class BoundedConnection(TcpConnection):  # type: ignore[misc]  # pysyncobj ships no types
    """A pysyncobj connection that disconnects a peer announcing or sending an oversized frame."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._is_trusted = False  # set before super(): it subscribes to the poller
        super().__init__(*args, **kwargs)

    def frame_limit(self) -> int:
        """The largest frame this connection accepts now."""
        return MAX_FRAME if self._is_trusted else MAX_HELLO_FRAME

    def disconnect(self) -> None:
        self._is_trusted = False  # pysyncobj reconnects the same object: trust starts again
        super().disconnect()

    # pysyncobj's private hooks, overridden by their mangled names (pinned by the unit tests).
    def _TcpConnection__processRead(self) -> bool:
        if self._has_whole_frame():
            return False  # parse the frame before reading more: the buffer stays bounded
        is_more: bool = TcpConnection._TcpConnection__processRead(self)
        if self.state != CONNECTION_STATE.DISCONNECTED and self._is_over_limit():
            self.disconnect()
            return False
        return is_more

    def _TcpConnection__processParseMessage(self) -> Any:
        if self._is_over_limit():
            self.disconnect()
            return None
        is_whole = self._has_whole_frame()
        message = TcpConnection._TcpConnection__processParseMessage(self)
        if message is not None:
            self._is_trusted = True
        elif is_whole and self.state == CONNECTION_STATE.DISCONNECTED:
            log.warning("raft connection closed: a frame failed its check (wrong raft secret?)")
        return message

    def _buffer(self) -> bytes:
        buffer: bytes = self._TcpConnection__readBuffer
        return buffer

    def _declared_length(self) -> int | None:
        buffer = self._buffer()
        return None if len(buffer) < _HEADER.size else int(_HEADER.unpack_from(buffer)[0])

    def _has_whole_frame(self) -> bool:
        length = self._declared_length()
        return length is not None and len(self._buffer()) >= _HEADER.size + length

    def _is_over_limit(self) -> bool:
        length, limit = self._declared_length(), self.frame_limit()
        if length is not None and not 0 < length <= limit:
            log.warning("raft connection closed: frame of %d bytes, limit %d", length, limit)
            return True
        return False


def install() -> None:
    """Make pysyncobj build BoundedConnection for every connection, in and out (idempotent)."""
    pysyncobj.transport.TcpConnection = BoundedConnection
    pysyncobj.tcp_server.TcpConnection = BoundedConnection
