"""Probes of a running node's Raft port from outside: who listens, and what a stranger can do.

Loopback only. A probe never holds the Raft secret: it is the attacker the port must withstand.
"""

from __future__ import annotations

import contextlib
import ipaddress
import pickle
import socket
import struct
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

MiB = 1024 * 1024
LISTEN_STATE = "0A"


class Touch:
    """Unpickling this creates `path`: proof that a frame reached pickle.loads."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return (Path.touch, (self.path,))


def _proc_address(hex_address: str) -> str:
    """/proc/net/tcp{,6}'s little-endian hex address as text ('0100007F' -> '127.0.0.1')."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


def listening_hosts(port: int) -> set[str]:
    """The local address of every socket listening on TCP `port`, IPv4 and IPv6."""
    hosts = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table) as rows:
            for row in list(rows)[1:]:
                local, state = row.split()[1], row.split()[3]
                hex_host, hex_port = local.split(":")
                if state == LISTEN_STATE and int(hex_port, 16) == port:
                    hosts.add(_proc_address(hex_host))
    return hosts


def pickle_frame(obj: Any) -> bytes:
    """A frame as pysyncobj reads it without a password: length, zlib(pickle)."""
    data = zlib.compress(pickle.dumps(obj, protocol=4), 3)
    return struct.pack("i", len(data)) + data


def closes_on_us(sock: socket.socket, timeout_s: float) -> bool:
    """Whether the node closes (EOF or reset) within `timeout_s`; data it sends is skipped."""
    sock.settimeout(timeout_s)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False
    return False


def send_pickle(port: int, obj: Any, wait_s: float = 3.0) -> bool:
    """Send one unauthenticated pickle frame; whether the node hung up within `wait_s`."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(pickle_frame(obj))
        return closes_on_us(sock, wait_s)


def stream_huge_frame(port: int, stream_bytes: int, wait_s: float = 5.0) -> bool:
    """Announce a 1 GiB frame, stream `stream_bytes` of it; whether the node hung up in time."""
    deadline = time.monotonic() + wait_s
    with socket.create_connection(("127.0.0.1", port), timeout=wait_s) as sock:
        chunk = b"\0" * (64 * 1024)
        try:
            sock.sendall(struct.pack("i", 1024 * MiB))
            for _ in range(stream_bytes // len(chunk)):
                sock.sendall(chunk)
                if time.monotonic() > deadline:
                    return False
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
        return closes_on_us(sock, max(0.1, deadline - time.monotonic()))


def rss_kib(pid: int) -> int:
    """The process's resident set size, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


class FakePeer:
    """A Raft member played by the test over pysyncobj's wire (no password: the replica under
    test must run without one): it connects, names itself, sends messages, reads answers.

    pysyncobj connects out only to peers whose address sorts below its own, so give the fake
    an address above the replica's (127.0.0.2:... against 127.0.0.1:...) and it is the one
    that connects."""

    def __init__(self, port: int, address: str) -> None:
        self.address = address
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self._buffer = b""
        self.send(address)  # pysyncobj's first frame on an incoming connection: who we are

    def send(self, message: Any) -> None:
        self.sock.sendall(pickle_frame(message))

    def vote_request(self, term: int, last_index: int = 1, last_term: int = 0) -> None:
        self.send(
            {
                "type": "request_vote",
                "term": term,
                "last_log_index": last_index,
                "last_log_term": last_term,
            }
        )

    def received(self, wait_s: float) -> list[Any]:
        """Every message the replica sends us within `wait_s`."""
        messages: list[Any] = []
        deadline = time.monotonic() + wait_s
        while (left := deadline - time.monotonic()) > 0:
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            self._buffer += chunk
            while len(self._buffer) >= 4:
                (size,) = struct.unpack("i", self._buffer[:4])
                if len(self._buffer) < 4 + size:
                    break
                frame, self._buffer = self._buffer[4 : 4 + size], self._buffer[4 + size :]
                messages.append(pickle.loads(zlib.decompress(frame)))  # the node under test
        return messages

    def votes(self, wait_s: float) -> list[int]:
        """The terms of the votes granted to us within `wait_s`."""
        return [
            m["term"]
            for m in self.received(wait_s)
            if isinstance(m, dict) and m.get("type") == "response_vote"
        ]

    def close(self) -> None:
        self.sock.close()
