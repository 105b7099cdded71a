"""One crontab's text read as Debian's cron reads it (with cronie's CRON_TZ): variable lines,
job lines in the user or the system format (a user field), `%` as stdin, anacron's guard and
the run-parts calls of /etc/crontab. Pure: no files, no requests (crontab_machine.py reads them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from schedd.cron import parse_cron
from schedd.errors import InvalidRequest

ZONE_VARIABLE = "CRON_TZ"  # cronie's: the zone of the lines after it (TZ= is only the commands')
FORCED_VARIABLES = ("LOGNAME", "USER")  # cron sets them to the line's user, whatever is written
RUN_PARTS_OPTIONS = frozenset({"--report", "--verbose", "-v", "--lsbsysinit"})  # per script too

# `name = value`: spaces around `=` optional, a name or value may be quoted (crontab(5)).
_VARIABLE = re.compile(
    r"""(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)'|(?P<name>[^\s=]+))\s*=\s*(?P<value>.*)"""
)
_FIELD = re.compile(r"(\S*)[ \t]*(.*)", re.S)
_ANACRON_GUARD = re.compile(
    r"(?:test|\[)[ \t]+-x[ \t]+/usr/sbin/anacron(?:[ \t]+\])?[ \t]*\|\|[ \t]*(?P<rest>.+)", re.S
)
_STARTS_ANACRON = re.compile(
    r"(?:invoke-rc\.d|service)[ \t]+anacron[ \t]+start|systemctl[ \t]+start[ \t]+anacron"
    r"|/usr/sbin/anacron[ \t]+-[A-Za-z]"
)
_RUN_PARTS = re.compile(
    r"(?P<open>[({])?[ \t]*(?:cd[ \t]+(?P<cd>\S+)[ \t]*&&[ \t]*)?run-parts"
    r"(?P<options>(?:[ \t]+-{1,2}[a-z][a-z-]*)*)"
    r"[ \t]+(?P<dir>/etc/cron\.(?:hourly|daily|weekly|monthly))"
    r"/?[ \t]*;?[ \t]*(?(open)[)}])[ \t]*"
)
_UNESCAPED_PERCENT = re.compile(r"(?<!\\)%")


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """One crontab line that becomes a job (or one script of its run-parts directory)."""

    file: str  # where it was read: a path, "-" (stdin) or "crontab -l -u NAME"
    line: int
    cron: str
    timezone: str
    user: str | None  # the system format's user field, or --user; None: not known
    command: str  # the text before the first unescaped %, each \% made a %
    stdin: str | None = None  # the text after it, each later unescaped % a newline
    env: dict[str, str] = field(default_factory=dict)  # the variable lines in force
    mailto: str | None = None  # the MAILTO in force ("" : no mail); None: no MAILTO line
    is_anacron: bool = False  # anacron's guard taken off: a missed run is caught up
    legacy_command: str | None = None  # what import-crontab made of the line before issue 34
    is_system: bool = False  # read in the system format (a user field)

    @property
    def source(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def crontab(self) -> str:
        """The crontab the line is in, however it was read: a user's is the spool's
        `crontab -l -u NAME` (FILE or - with --user NAME too); a system one its file."""
        if self.is_system or self.user is None:
            return self.file
        return f"crontab -l -u {self.user}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Skipped:
    """A line that makes no job: why, and whether that is an error (exit 2)."""

    file: str
    line: int
    text: str
    reason: str
    is_error: bool = True


@dataclass(frozen=True, slots=True)
class Note:
    """A warning about a line that was read."""

    file: str
    line: int
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RunParts:
    """A `[cd DIR &&] run-parts [OPTIONS] /etc/cron.X` command."""

    directory: str
    cd: str | None
    options: tuple[str, ...]

    @property
    def can_expand(self) -> bool:
        """Whether one job per script runs each script as run-parts would have."""
        return set(self.options) <= RUN_PARTS_OPTIONS


@dataclass(slots=True)
class Crontab:
    entries: list[Entry] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    warnings: list[Note] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # in the order they were read

    @property
    def has_errors(self) -> bool:
        """Lines that could not be read (not @reboot, which is expected to stay behind)."""
        return any(s.is_error for s in self.skipped)

    def extend(self, other: Crontab) -> None:
        self.entries += other.entries
        self.skipped += other.skipped
        self.warnings += other.warnings
        self.files += other.files


@dataclass(slots=True, kw_only=True)
class _Reader:
    """The state of one crontab as cron reads it: the zone and variables of the next line."""

    file: str
    zone: str | None
    user: str | None
    is_system: bool
    has_mailto_alerts: bool
    has_anacron: bool = True  # whether the machine's cron leaves guarded lines to anacron
    zone_error: str = ""
    env: dict[str, str] = field(default_factory=dict)
    result: Crontab = field(default_factory=Crontab)

    def read(self, number: int, raw: str, *, is_unterminated: bool) -> None:
        text = raw.rstrip("\r").lstrip(" \t")
        if not text or text.startswith("#"):
            return
        variable = _variable(text)
        if variable is not None:
            self._set(number, *variable)
        elif is_unterminated:
            reason = "the file ends without a newline: cron never runs its last line"
            self._skip(number, text, reason, is_error=False)
        elif self.zone is None:
            self._skip(number, text, self.zone_error)
        else:
            self._job(number, text, self.zone)

    def note(self, number: int, text: str) -> None:
        self.result.warnings.append(Note(self.file, number, text))

    def _skip(self, number: int, text: str, reason: str, *, is_error: bool = True) -> None:
        self.result.skipped.append(
            Skipped(
                file=self.file, line=number, text=text.strip(), reason=reason, is_error=is_error
            )
        )

    def _set(self, number: int, name: str, value: str) -> None:
        if name == ZONE_VARIABLE:
            self.zone, self.zone_error = (
                known_zone(value),
                f"{name}={value} is not a known time zone",
            )
        elif name == "TZ":
            self.note(
                number,
                f"TZ={value} sets the commands' TZ only: as in cron, the lines after it keep their "
                f"schedule's zone (CRON_TZ= sets that)",
            )
        if name in FORCED_VARIABLES:
            self.note(number, f"{name}= does not apply: cron sets {name} to the line's user")
            return
        self.env[name] = value
        if "$" in value:
            self.note(number, f"{name}={value}: cron does not expand variables: set as written")
        if name == "MAILTO" and value and not self.has_mailto_alerts:
            self.note(
                number,
                "MAILTO= is kept in the payload, but schedd sends no mail: failed runs become "
                "dead letters (schedctl deadletters ls); --mailto-alerts URL makes them alerts",
            )

    def _note_guard(self, number: int) -> None:
        without = "imported without its `test -x /usr/sbin/anacron ||`"
        if self.has_anacron:
            text = f"anacron runs this line on its machine: {without}, with misfire_policy run_once"
        else:
            text = (
                f"no /usr/sbin/anacron on this machine: cron runs this line itself; {without}, "
                "with cron's misfire_policy skip"
            )
        self.note(number, text)

    def _job(self, number: int, text: str, zone: str) -> None:
        if text.startswith("-"):  # cronie's: no syslog line for this job's runs
            self.note(number, "the leading - (cronie: do not log the runs) has no meaning here")
            text = text[1:]
        line = _line(text, is_system=self.is_system)
        if isinstance(line, str):
            is_reboot = line.startswith("@reboot")
            self._skip(number, text, line, is_error=not is_reboot)
            return
        cron, user, rest, legacy = line
        command, stdin = split_percent(rest)
        command = command.strip()
        if not command:
            self._skip(number, text, "no command")
            return
        if _STARTS_ANACRON.search(command):
            reason = (
                "starts anacron, whose part schedd takes: the lines anacron covers catch up "
                "(misfire_policy run_once); /etc/anacrontab's own jobs are not imported"
            )
            self._skip(number, text, reason, is_error=False)
            return
        guard = _ANACRON_GUARD.fullmatch(command)
        if guard is not None:
            command = guard["rest"].strip()
            self._note_guard(number)
        elif not self.is_system and re.match(r"root[ \t]", command):
            self.note(number, "the command starts with `root`: a system crontab? (--system)")
        self.result.entries.append(
            Entry(
                file=self.file,
                line=number,
                cron=cron,
                timezone=zone,
                user=user if self.is_system else self.user,
                command=command,
                stdin=stdin,
                env=dict(self.env),
                mailto=self.env.get("MAILTO"),
                is_anacron=guard is not None and self.has_anacron,
                legacy_command=legacy,
                is_system=self.is_system,
            )
        )


def parse_crontab(
    text: str,
    *,
    timezone: str,
    file: str = "-",
    user: str | None = None,
    is_system: bool = False,
    has_mailto_alerts: bool = False,
    has_anacron: bool = True,
) -> Crontab:
    """Read a crontab: five time fields (or an @macro), in the system format a user, and a
    command per line; variable lines apply to the lines after them."""
    reader = _Reader(
        file=file,
        zone=timezone,
        user=user,
        is_system=is_system,
        has_mailto_alerts=has_mailto_alerts,
        has_anacron=has_anacron,
    )
    reader.result.files.append(file)
    lines = text.split("\n")
    is_terminated = text.endswith("\n")
    if is_terminated:
        lines.pop()
    for number, raw in enumerate(lines, start=1):
        reader.read(number, raw, is_unterminated=not is_terminated and number == len(lines))
    return reader.result


def _line(text: str, *, is_system: bool) -> tuple[str, str | None, str, str | None] | str:
    """A job line's (cron, user, command with its stdin, legacy command), or why it is none."""
    if text.startswith("@"):
        macro, rest = _split(text)
        if macro.lower() == "@reboot":
            return "@reboot: schedd has no boot event to run it on"
        cron = macro
    else:
        fields, rest = [], text
        for _ in range(5):
            value, rest = _split(rest)
            fields.append(value)
        if not rest:
            return "expected five time fields and a command"
        cron = " ".join(fields)
    try:
        parse_cron(cron)
    except InvalidRequest as exc:
        return exc.reason
    legacy = None if _UNESCAPED_PERCENT.search(rest) else rest.strip().replace("\\%", "%")
    if not is_system:
        return cron, None, rest, legacy
    user, command = _split(rest)
    if not command:
        return "expected a user and a command after the time fields (the system format)"
    return cron, user, command, legacy


def _split(text: str) -> tuple[str, str]:
    """The first field of `text` and the rest after the blanks that follow it."""
    match = _FIELD.match(text)
    assert match is not None  # every string matches
    return match[1], match[2]


def _variable(text: str) -> tuple[str, str] | None:
    """(name, value) of a variable line, quotes taken off; None for any other line."""
    match = _VARIABLE.fullmatch(text)
    if match is None:
        return None
    name = next(n for n in (match["dq"], match["sq"], match["name"]) if n is not None)
    value = match["value"].rstrip()
    if len(value) >= 2 and value[0] in "'\"" and value[-1] == value[0]:
        value = value[1:-1]
    return (name, value) if name else None


def split_percent(text: str) -> tuple[str, str | None]:
    """cron's `%`: (the command, its stdin or None). The command ends at the first unescaped
    %, each \\% in it a %; in the stdin each unescaped % is a newline and \\% a %."""
    command: list[str] = []
    is_escaped = False
    for index, char in enumerate(text):
        if is_escaped and char == "%":
            command[-1] = "%"
        elif not is_escaped and char == "%":
            return "".join(command), _stdin(text[index + 1 :])
        else:
            command.append(char)
        is_escaped = not is_escaped and char == "\\"
    return "".join(command), None


def _stdin(text: str) -> str:
    out: list[str] = []
    is_escaped = False
    for char in text:
        shown = char
        if is_escaped and char != "%":
            out.append("\\")
        elif not is_escaped and char == "%":
            shown = "\n"
        is_escaped = shown == "\\"
        if not is_escaped:
            out.append(shown)
    if is_escaped:
        out.append("\\")
    return "".join(out)


def run_parts_call(command: str) -> RunParts | None:
    """The run-parts call of a command that is only that (Debian's /etc/crontab lines)."""
    match = _RUN_PARTS.fullmatch(command)
    if match is None:
        return None
    return RunParts(directory=match["dir"], cd=match["cd"], options=tuple(match["options"].split()))


def known_zone(name: str) -> str | None:
    """`name` if it is an IANA zone this machine knows, else None."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None
    return name
