"""Wall-clock jumps for one child process, with libfaketime (the PyPI wheel carries the
library): the child is started with `env()`, and `shift(seconds)` moves its wall clock (within
about two seconds: libfaketime re-reads the offset file each second). Monotonic clocks are left
alone, as an NTP step leaves them."""

from __future__ import annotations

from pathlib import Path

import libfaketime


def library_path() -> Path:
    return Path(libfaketime.__file__).parent / "vendor" / "libfaketime" / "src" / "libfaketime.so.1"


class ClockShift:
    """One process's wall-clock offset, kept in `path`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset_s = 0
        self.shift(0)

    def env(self) -> dict[str, str]:
        return {
            "LD_PRELOAD": str(library_path()),
            "FAKETIME_TIMESTAMP_FILE": str(self.path),
            "FAKETIME_CACHE_DURATION": "1",
            "DONT_FAKE_MONOTONIC": "1",  # the variable's name before libfaketime 0.9.10
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        }

    def shift(self, offset_s: int) -> None:
        """Set the offset from the real wall clock (whole seconds, either sign)."""
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(f"{offset_s:+d}\n")
        tmp.replace(self.path)  # never a half-written file for the reader
        self.offset_s = offset_s
