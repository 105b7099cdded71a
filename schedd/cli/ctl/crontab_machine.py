"""The crontabs import-crontab reads: FILE, or a machine's as Debian's cron finds them
(/etc/crontab, /etc/cron.d: root's files its group and others cannot write; with --users the spool
through `crontab -l -u`) in the machine's zone, whether it has anacron, and the scripts run-parts
would run for --expand-run-parts. Reads files, runs `crontab`; makes no
requests (crontab.py does).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from schedd.cli.ctl.crontab_file import (
    Crontab,
    Entry,
    Note,
    RunParts,
    Skipped,
    known_zone,
    parse_crontab,
    run_parts_call,
)
from schedd.errors import InvalidRequest

SYSTEM_CRONTAB = "/etc/crontab"
CRON_D = "/etc/cron.d"
ANACRON = "/usr/sbin/anacron"  # Debian's /etc/crontab leaves lines to it when it is there
SPOOL = "/var/spool/cron/crontabs"  # Debian's; crontab(1) -l -u reads it for us
CRONTAB_TIMEOUT_S = 30.0
# Debian cron(8): cron.d names as run-parts(8) takes them without --lsbsysinit.
_RUN_PARTS_NAME = re.compile(r"[A-Za-z0-9_-]+")
# run-parts(8) --lsbsysinit: LANANA, LSB hierarchical and reserved, Debian cron script names.
_LSB_NAMES = (re.compile(r"[a-z0-9]+"), re.compile(r"_?([a-z0-9_.]+-)+[a-z0-9]+"), _RUN_PARTS_NAME)
_DPKG_SUFFIXES = (".dpkg-old", ".dpkg-dist", ".dpkg-new", ".dpkg-tmp")


@dataclass(frozen=True, slots=True, kw_only=True)
class Source:
    """One crontab of the machine, read."""

    name: str  # /etc/crontab, /etc/cron.d/NAME or "crontab -l -u NAME"
    text: str
    is_system: bool
    user: str | None = None


@dataclass(slots=True)
class Found:
    sources: list[Source] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    warnings: list[Note] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class Reading:
    """What to read and how (the options, checked)."""

    source: Any  # an open FILE, or None with is_machine
    is_machine: bool
    has_users: bool
    is_system: bool | None
    user: str | None
    timezone: str | None
    root: Path
    mailto_alerts: str | None
    is_expanding: bool


def read_crontabs(reading: Reading) -> Crontab:
    """The entries, skipped lines and warnings of FILE or of the machine."""
    crontab = _read_machine(reading) if reading.is_machine else _read_file(reading)
    if reading.is_expanding:
        _expand(crontab, reading.root)
    return crontab


def _read_machine(reading: Reading) -> Crontab:
    crontab = Crontab()
    zone = reading.timezone or machine_zone(reading.root)
    if zone is None:
        zone = "UTC"
        text = "the machine's zone is neither in /etc/timezone nor /etc/localtime's link: UTC"
        crontab.warnings.append(Note("/etc/timezone", 0, text))
    found = machine_crontabs(reading.root, has_users=reading.has_users)
    crontab.skipped += found.skipped
    crontab.warnings += found.warnings
    has_anacron = os.access(_under(reading.root, ANACRON), os.X_OK)
    for source in found.sources:
        crontab.extend(
            parse_crontab(
                source.text,
                timezone=zone,
                file=source.name,
                user=source.user,
                is_system=source.is_system,
                has_mailto_alerts=reading.mailto_alerts is not None,
                has_anacron=has_anacron,
            )
        )
    return crontab


def _read_file(reading: Reading) -> Crontab:
    name = getattr(reading.source, "name", "-")  # stdin's stream may have none
    file = os.path.abspath(name) if isinstance(name, str) and name[:1] not in "-<" else "-"
    is_system = reading.is_system
    if is_system is None:
        is_system = file == SYSTEM_CRONTAB or file.startswith(f"{CRON_D}/")
        if is_system and reading.user is not None:
            why = f"{file} is a system crontab: each line names its user (or --no-system)"
            raise InvalidRequest("--user", why)
    text = reading.source.read()
    return _parse(reading, text, file, reading.timezone or "UTC", is_system, reading.user)


def _parse(
    reading: Reading, text: str, file: str, zone: str, is_system: bool, user: str | None
) -> Crontab:
    return parse_crontab(
        text,
        timezone=zone,
        file=file,
        user=user,
        is_system=is_system,
        has_mailto_alerts=reading.mailto_alerts is not None,
    )


def _expand(crontab: Crontab, root: Path) -> None:
    """--expand-run-parts: a run-parts line's entry becomes one entry per script."""
    entries: list[Entry] = []
    for entry in crontab.entries:
        call = run_parts_call(entry.command)
        if call is None:
            entries.append(entry)
        elif not call.can_expand:
            entries.append(entry)
            text = f"run-parts {' '.join(call.options)}: not expanded (options a script lacks)"
            crontab.warnings.append(Note(entry.file, entry.line, text))
        else:
            scripts, notes = expand_run_parts(entry, call, root)
            entries += scripts
            crontab.warnings += notes
    crontab.entries = entries


def machine_crontabs(root: Path, *, has_users: bool) -> Found:
    """/etc/crontab, each file of /etc/cron.d cron reads (sorted), and with `has_users` each
    crontab of the spool, as `crontab -l -u NAME` prints it."""
    found = Found()
    _read(found, root, SYSTEM_CRONTAB, missing_ok=True)
    cron_d = _under(root, CRON_D)
    names = sorted(os.listdir(cron_d)) if cron_d.is_dir() else []
    for name in names:
        path = f"{CRON_D}/{name}"
        if name.startswith(".") or not _under(root, path).is_file():
            continue
        if _RUN_PARTS_NAME.fullmatch(name):
            _read(found, root, path, missing_ok=False)
        else:
            why = "cron reads only names made of A-Z a-z 0-9 _ - (no dot, no ~)"
            found.warnings.append(Note(path, 0, f"not read: {why}"))
    if has_users:
        _users(found, root)
    return found


def _read(found: Found, root: Path, path: str, *, missing_ok: bool) -> None:
    try:
        with open(_under(root, path), encoding="utf-8", errors="replace") as stream:
            refused = refusal(os.fstat(stream.fileno()))  # a symlink's: its target's
            text = "" if refused else stream.read()
    except FileNotFoundError:
        if not missing_ok:
            found.skipped.append(Skipped(file=path, line=0, text="", reason="no such file"))
        return
    except OSError as exc:
        found.skipped.append(Skipped(file=path, line=0, text="", reason=_os_reason(exc)))
        return
    if refused:
        found.warnings.append(Note(path, 0, f"not read: {refused}"))
        return
    found.sources.append(Source(name=path, text=text, is_system=True))


def refusal(stat: os.stat_result) -> str:
    """Why Debian's cron would not read a system crontab of this owner and mode ("" : it
    would): it must be root's, and not writable by its group or others."""
    mode = stat.st_mode & 0o7777
    if stat.st_uid != 0:
        return f"owned by uid {stat.st_uid}: cron reads only root's (chown root)"
    if mode & 0o022:
        return f"mode {mode:04o}: cron reads none its group or others may write (chmod go-w)"
    return ""


def _users(found: Found, root: Path) -> None:
    spool = _under(root, SPOOL)
    try:
        names = sorted(n for n in os.listdir(spool) if not n.startswith("."))
    except FileNotFoundError:
        found.warnings.append(Note(SPOOL, 0, "no such directory: no user crontabs"))
        return
    except OSError as exc:
        found.skipped.append(Skipped(file=SPOOL, line=0, text="", reason=_os_reason(exc)))
        return
    for name in names:
        source = f"crontab -l -u {name}"
        try:
            listed = subprocess.run(
                ["crontab", "-l", "-u", name],
                capture_output=True,
                text=True,
                errors="replace",
                timeout=CRONTAB_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            reason = f"cannot run crontab: {exc.strerror if isinstance(exc, OSError) else exc}"
            found.skipped.append(Skipped(file=source, line=0, text="", reason=reason))
            return
        said = listed.stderr.strip().splitlines()
        if listed.returncode == 0:
            found.sources.append(
                Source(name=source, text=listed.stdout, is_system=False, user=name)
            )
        elif not (said and said[-1].startswith("no crontab for")):
            reason = f"exit {listed.returncode}: {said[-1] if said else 'no message'}"
            found.skipped.append(Skipped(file=source, line=0, text="", reason=reason))


def machine_zone(root: Path) -> str | None:
    """The machine's zone, where cron's lines run: /etc/timezone, or /etc/localtime's link."""
    try:
        written = _under(root, "/etc/timezone").read_text().strip()
    except OSError:
        written = ""
    if written and known_zone(written):
        return written
    try:
        target = os.readlink(_under(root, "/etc/localtime"))
    except OSError:
        return None
    _, marker, name = target.partition("zoneinfo/")
    return name if marker and known_zone(name) else None


def expand_run_parts(entry: Entry, call: RunParts, root: Path) -> tuple[list[Entry], list[Note]]:
    """One entry per script run-parts would run (in its order), each run as run-parts runs it:
    from the same directory, with no arguments; and notes on the files it would pass over."""
    directory = _under(root, call.directory)
    try:
        names = sorted(os.listdir(directory), key=os.fsencode)  # the C locale's order
    except OSError as exc:
        note = Note(entry.file, entry.line, f"{call.directory}: {_os_reason(exc)}: no job")
        return [], [note]
    scripts: list[Entry] = []
    passed_over: list[str] = []
    for name in names:
        path = directory / name
        if name.startswith(".") or not path.is_file():
            continue
        if not _runs(name, is_lsb="--lsbsysinit" in call.options):
            passed_over.append(f"{name} (its name)")
        elif not os.access(path, os.X_OK):
            passed_over.append(f"{name} (not executable)")
        else:
            script = shlex.quote(f"{call.directory}/{name}")
            command = script if call.cd is None else f"cd {call.cd} && {script}"
            scripts.append(replace(entry, command=command))
    notes = []
    if passed_over:
        text = f"run-parts passes over {call.directory}/: " + ", ".join(passed_over)
        notes.append(Note(entry.file, entry.line, text))
    if not scripts:
        notes.append(Note(entry.file, entry.line, f"{call.directory} has no script to run"))
    return scripts, notes


def _runs(name: str, *, is_lsb: bool) -> bool:
    """Whether run-parts(8) runs a file of this name."""
    if not is_lsb:
        return _RUN_PARTS_NAME.fullmatch(name) is not None
    if name.endswith(_DPKG_SUFFIXES):
        return False
    return any(pattern.fullmatch(name) for pattern in _LSB_NAMES)


def _under(root: Path, path: str) -> Path:
    return root / path.lstrip("/")


def _os_reason(exc: OSError) -> str:
    reason = (exc.strerror or str(exc)).lower()
    if isinstance(exc, PermissionError):
        return f"{reason} (as root: sudo schedctl import-crontab ...)"
    return reason
