"""tests/fixtures/debian-machine, the copy of a Debian machine's cron import-crontab --machine
reads, copied where its system crontabs are root's and not group- or world-writable, as cron
requires: a checkout's owner and modes follow who checked it out and their umask."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

MACHINE = Path(__file__).resolve().parent / "fixtures" / "debian-machine"


def copy_machine(to: Path) -> Path:
    """The fixture machine under `to` (tests run as root: the files are chowned to root)."""
    shutil.copytree(MACHINE, to, symlinks=True)
    for path in [to / "etc/crontab", *(to / "etc/cron.d").iterdir()]:
        os.chown(path, 0, 0, follow_symlinks=False)
        if not path.is_symlink():
            path.chmod(0o644)
    return to
