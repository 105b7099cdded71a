"""A closed segment's sha256, kept beside it so that offering a file to peers costs nothing
after the first time: `<file>.sha256` holds the digest, the size and the mtime it was taken
at; a sidecar that does not match the file is taken again."""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

from schedd.store.files import durable_replace

READ_CHUNK = 1024 * 1024
SIDECAR_SUFFIX = ".sha256"


def sidecar_of(path: Path) -> Path:
    return path.with_name(path.name + SIDECAR_SUFFIX)


def file_sha256(path: Path) -> str:
    """The hex sha256 of the whole file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(READ_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def cached_sha256(path: Path) -> str | None:
    """The sidecar's digest if it was taken of the file as it is now; else None."""
    try:
        stat = path.stat()
        fields = sidecar_of(path).read_text(encoding="ascii").split()
    except (OSError, UnicodeDecodeError):
        return None
    if len(fields) != 3 or fields[1:] != [str(stat.st_size), str(stat.st_mtime_ns)]:
        return None
    return fields[0] if len(fields[0]) == 64 else None


def record_sha256(path: Path, sha256: str) -> None:
    """Keep `sha256` (taken of the file as it is now) in its sidecar, durably."""
    stat = path.stat()
    sidecar = sidecar_of(path)
    scratch = sidecar.with_name(sidecar.name + ".tmp")
    scratch.write_text(f"{sha256} {stat.st_size} {stat.st_mtime_ns}\n", encoding="ascii")
    durable_replace(scratch, sidecar)


def ensure_sha256(path: Path) -> str:
    """The file's sha256: the sidecar's, or taken now and kept (a full read of the file)."""
    known = cached_sha256(path)
    if known is not None:
        return known
    taken = file_sha256(path)
    record_sha256(path, taken)
    return taken


def drop_sidecar(path: Path) -> None:
    """Remove the file's sidecar, if any (the file was dropped by retention)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(sidecar_of(path))
