"""Schedules: the JSON forms, the next run in UTC, the DST rule, misfire enumeration and jitter.

Pure: no I/O and no clock (callers pass "now"). The DST rule is DESIGN.md's, Vixie cron's.
"""

from __future__ import annotations

import difflib
import hashlib
import heapq
import itertools
import re
import threading
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from croniter import CroniterBadDateError, croniter

from schedd.cron import CronExpr, parse_cron
from schedd.errors import InvalidRequest, InvalidSchedule
from schedd.model import AFTER_OUTCOMES
from schedd.model import (  # re-exported: callers name schedules through this module too
    AfterSchedule as AfterSchedule,
)
from schedd.model import (
    AtSchedule as AtSchedule,
)
from schedd.model import (
    CronSchedule as CronSchedule,
)
from schedd.model import (
    EverySchedule as EverySchedule,
)
from schedd.model import (
    Schedule as Schedule,
)
from schedd.timeformat import (
    EPOCH,
    MAX_INSTANT_MS,
    format_duration,
    format_instant,
    parse_duration,
    parse_instant,
)

MAX_AHEAD_MS = 10 * 366 * 86_400_000  # a run_at further ahead than ~10 years is a mistake
MIN_EVERY_MS = 1_000
_EPOCH_NAIVE = EPOCH.replace(tzinfo=None)
_ZONE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+){0,2}")
_NOT_ZONES = {"localtime", "posixrules", "Factory"}
_SCAN_LIMIT = 10_000  # naive matches examined for one answer; only folds need more than two
_AFTER_JOB_ID = re.compile(r"[\x21-\x7e]{1,128}")  # a job id as the API reads one


_FORMS = ("run_at", "delay", "cron", "every", "after")
_KEYS = {
    "after": {"after"},
    "run_at": {"run_at"},
    "delay": {"delay"},
    "cron": {"cron", "timezone", "start_at", "end_at"},
    "every": {"every", "start_at", "end_at"},
}


# ---------------------------------------------------------------- parsing and JSON


def parse_schedule(spec: object, *, now_ms: int, needs_a_run_left: bool = True) -> Schedule:
    """Turn the API's schedule object into a Schedule; `delay` is resolved against now_ms.
    A new schedule must have a run left after now; a stored one (`needs_a_run_left=False`,
    re-read when other fields of its job change) may have ended."""
    if not isinstance(spec, Mapping):
        raise InvalidSchedule("schedule", f"must be an object, got {type(spec).__name__}")
    forms = [form for form in _FORMS if form in spec]
    if len(forms) != 1:
        raise InvalidSchedule(
            "schedule", "needs exactly one of 'run_at', 'delay', 'cron', 'every' or 'after'"
        )
    form = forms[0]
    unknown = sorted(set(spec) - _KEYS[form])
    if unknown:
        raise InvalidSchedule(f"schedule.{unknown[0]}", f"is not allowed with '{form}' schedules")
    if form == "after":
        return parse_after(spec["after"])
    if form in ("run_at", "delay"):
        return _parse_one_time(spec, form, now_ms)
    start_ms = _optional_instant(spec, "start_at")
    end_ms = _optional_instant(spec, "end_at")
    if start_ms is not None and end_ms is not None and end_ms <= start_ms:
        raise InvalidSchedule("schedule.end_at", "must be after start_at")
    schedule: Schedule
    if form == "cron":
        expr = parse_cron(spec["cron"]).text
        timezone = check_timezone(spec.get("timezone", "UTC"))
        schedule = CronSchedule(
            expr=expr, timezone=timezone, start_at_ms=start_ms, end_at_ms=end_ms
        )
    else:
        schedule = EverySchedule(
            interval_ms=_duration(spec["every"], "schedule.every", minimum_ms=MIN_EVERY_MS),
            start_at_ms=now_ms if start_ms is None else start_ms,
            end_at_ms=end_ms,
        )
    if needs_a_run_left and next_after(schedule, now_ms) is None:
        raise InvalidSchedule("schedule", "has no run left after now (see start_at and end_at)")
    return schedule


def _parse_one_time(spec: Mapping[str, object], form: str, now_ms: int) -> AtSchedule:
    if form == "run_at":
        at_ms = _instant(spec["run_at"], "schedule.run_at")
    else:
        at_ms = now_ms + _duration(spec["delay"], "schedule.delay")
    if at_ms > now_ms + MAX_AHEAD_MS:
        raise InvalidSchedule(f"schedule.{form}", "is more than 10 years ahead")
    return AtSchedule(at_ms=at_ms)


def parse_after(value: object) -> AfterSchedule:
    """`{"job_id": "<A>", "on": "success"|"failure"|"finished"}` (`on` defaults to success):
    whether A exists, is the tenant's and closes no cycle is the store's to say
    (store/dependencies.py)."""
    if not isinstance(value, Mapping):
        raise InvalidSchedule(
            "schedule.after", f"must be an object with job_id and on, got {type(value).__name__}"
        )
    unknown = sorted(set(value) - {"job_id", "on"})
    if unknown:
        raise InvalidSchedule(f"schedule.after.{str(unknown[0])[:40]}", "is not a field of after")
    job_id = value.get("job_id")
    if not isinstance(job_id, str) or not _AFTER_JOB_ID.fullmatch(job_id):
        raise InvalidSchedule("schedule.after.job_id", f"must be a job id, got {job_id!r:.80}")
    on = value.get("on", "success")
    if on not in AFTER_OUTCOMES:
        raise InvalidSchedule(
            "schedule.after.on",
            f"must be one of {', '.join(map(repr, AFTER_OUTCOMES))}, got {on!r:.80}",
        )
    return AfterSchedule(job_id=job_id, on=str(on))


def _optional_instant(spec: Mapping[str, object], key: str) -> int | None:
    value = spec.get(key)
    return None if value is None else _instant(value, f"schedule.{key}")


def _instant(value: object, field: str) -> int:
    try:
        return parse_instant(value, field=field)
    except InvalidRequest as exc:
        raise InvalidSchedule(exc.field, exc.reason) from None


def _duration(value: object, field: str, *, minimum_ms: int = 0) -> int:
    try:
        return parse_duration(value, field=field, minimum_ms=minimum_ms)
    except InvalidRequest as exc:
        raise InvalidSchedule(exc.field, exc.reason) from None


def check_timezone(name: object) -> str:
    """Return `name` if it is an IANA zone, else raise naming the value."""
    if not isinstance(name, str):
        raise InvalidSchedule("timezone", f"must be an IANA zone name, got {name!r}")
    if len(name) > 64 or not _ZONE_NAME.fullmatch(name) or name in _NOT_ZONES:
        raise InvalidSchedule("timezone", f"unknown zone {name[:80]!r}")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidSchedule("timezone", f"unknown zone {name!r}{zone_hint(name)}") from None
    return name


def zone_hint(name: str) -> str:
    """ "; did you mean ...?" naming the IANA zones nearest to a name that is none (a letter
    off, another case), or "" when none is near."""
    by_lower = _zones_by_lower()
    near = difflib.get_close_matches(name.lower(), by_lower, n=3, cutoff=0.8)
    if not near:
        return ""
    return "; did you mean " + " or ".join(repr(by_lower[zone]) for zone in near) + "?"


@lru_cache(maxsize=1)
def _zones_by_lower() -> dict[str, str]:
    return {zone.lower(): zone for zone in available_timezones()}


def load_schedule(stored: Mapping[str, Any]) -> Schedule:
    """A Schedule from its stored JSON (schedule_to_json's output; an `exclude` beside it is
    the calendars', calendars.py): no validation against "now", so a schedule that was valid
    when accepted stays loadable to its last run."""
    start = stored.get("start_at")
    end = stored.get("end_at")
    start_ms = None if start is None else parse_instant(start, field="schedule.start_at")
    end_ms = None if end is None else parse_instant(end, field="schedule.end_at")
    if "run_at" in stored:
        return AtSchedule(at_ms=parse_instant(stored["run_at"], field="schedule.run_at"))
    after = stored.get("after")
    if isinstance(after, Mapping):
        return AfterSchedule(job_id=str(after.get("job_id")), on=str(after.get("on", "success")))
    if "cron" in stored:
        expr = _ascii_digits(stored["cron"])
        return CronSchedule(
            expr=expr, timezone=stored["timezone"], start_at_ms=start_ms, end_at_ms=end_ms
        )
    interval = parse_duration(stored["every"], field="schedule.every")
    return EverySchedule(interval_ms=interval, start_at_ms=start_ms or 0, end_at_ms=end_ms)


def _ascii_digits(expr: str) -> str:
    """A stored cron expression with its decimal digits in ASCII. Versions before 2026-12-01
    accepted any Unicode decimal digit in a step (`*/٣` meant `*/3`): such jobs keep running."""
    if expr.isascii():
        return expr
    return "".join(str(unicodedata.decimal(c)) if c.isdecimal() else c for c in expr)


def schedule_to_json(schedule: Schedule) -> dict[str, Any]:
    """The API's normalised form of a schedule (instants in UTC, `delay` as `run_at`, an
    `after`'s `on` always written)."""
    if isinstance(schedule, AtSchedule):
        return {"run_at": format_instant(schedule.at_ms)}
    if isinstance(schedule, AfterSchedule):
        return {"after": {"job_id": schedule.job_id, "on": schedule.on}}
    out: dict[str, str]
    if isinstance(schedule, CronSchedule):
        out = {"cron": schedule.expr, "timezone": schedule.timezone}
    else:
        out = {"every": format_duration(schedule.interval_ms)}
    if schedule.start_at_ms is not None:
        out["start_at"] = format_instant(schedule.start_at_ms)
    if schedule.end_at_ms is not None:
        out["end_at"] = format_instant(schedule.end_at_ms)
    return out


# ---------------------------------------------------------------- next runs


def first_run_at(schedule: Schedule, now_ms: int) -> int | None:
    """The first run of a new job: a past run_at runs at once, the rest strictly after now (an
    `after` schedule has none: its runs come from its upstream's)."""
    if isinstance(schedule, AtSchedule):
        return schedule.at_ms
    return next_after(schedule, now_ms)


def next_after(schedule: Schedule, after_ms: int) -> int | None:
    """The first run strictly after `after_ms` (epoch ms, UTC), or None when none is left."""
    if isinstance(schedule, AtSchedule):
        return schedule.at_ms if schedule.at_ms > after_ms else None
    if isinstance(schedule, AfterSchedule):
        return None
    result: int | None
    if isinstance(schedule, EverySchedule):
        result = _every_next(schedule, after_ms)
    else:
        if schedule.start_at_ms is not None:
            after_ms = max(after_ms, schedule.start_at_ms - 1)
        result = cron_next_after(schedule.expr, schedule.timezone, after_ms)
    if result is None or result >= MAX_INSTANT_MS:
        return None  # every schedule ends at the year 3000
    if schedule.end_at_ms is not None and result > schedule.end_at_ms:
        return None
    return result


def trigger_time(schedule: Schedule, now_ms: int) -> int:
    """The run time of a trigger asked at `now_ms`: now, or the next millisecond when now is
    one of the schedule's own runs (both runs would have one key, the job and the time, and
    the scheduled one could never be claimed: its job would stop there)."""
    at = now_ms
    while next_after(schedule, at - 1) == at:  # runs are a second apart or more: twice at most
        at += 1
    return at


def occurrences(schedule: Schedule, start_ms: int, end_ms: int, limit: int) -> list[int]:
    """Runs in (start_ms, end_ms], at most `limit` of them, in order (misfire catch-up)."""
    runs: list[int] = []
    cursor = start_ms
    while len(runs) < limit:
        nxt = next_after(schedule, cursor)
        if nxt is None or nxt > end_ms:
            break
        runs.append(nxt)
        cursor = nxt
    return runs


def occurrences_between(schedule: Schedule, from_ms: int, to_ms: int, limit: int) -> list[int]:
    """Runs in [from_ms, to_ms), at most `limit` of them, in order: what `occurrences` gives,
    a cron schedule's in one pass over its wall times (a backfill asks for 100,000: one
    `next_after` a run costs about 80 us, the pass a few)."""
    if not isinstance(schedule, CronSchedule):
        return occurrences(schedule, from_ms - 1, to_ms - 1, limit)
    after = from_ms - 1
    if schedule.start_at_ms is not None:
        after = max(after, schedule.start_at_ms - 1)
    until = min(to_ms - 1, MAX_INSTANT_MS - 1)
    if schedule.end_at_ms is not None:
        until = min(until, schedule.end_at_ms)
    return cron_between(schedule.expr, schedule.timezone, after, until, limit)


def cron_between(
    expr_text: str, timezone: str, after_ms: int, until_ms: int, limit: int
) -> list[int]:
    """`cron_next_after` repeated from `after_ms` while the run is at or before `until_ms`, at
    most `limit` runs, in one pass over the matching wall times from where the first call
    looks. A wall time's first instant never goes back as the wall times go on; a repeated
    hour's second instants (wildcard jobs) come after later first ones, so they wait in a heap
    until a first instant passes them."""
    if until_ms <= after_ms or limit <= 0:
        return []
    expr = parse_cron(expr_text)
    zone = ZoneInfo(timezone)
    runs: list[int] = []
    for at in _in_order(_instants(expr, zone, _wall_start(after_ms, zone), scan_limit=None)):
        if at > until_ms:
            break
        if at > after_ms and (not runs or at > runs[-1]):
            runs.append(at)
            if len(runs) >= limit:
                break
    return runs


def _in_order(pairs: Iterable[tuple[int | None, int | None]]) -> Iterator[int]:
    """The instants of `_instants`' pairs in time order (equal ones repeated)."""
    later: list[int] = []
    for first, second in pairs:
        if first is not None:
            while later and later[0] <= first:
                yield heapq.heappop(later)
            yield first
        if second is not None:
            heapq.heappush(later, second)
    while later:
        yield heapq.heappop(later)


def fire_time(job_id: str, scheduled_at_ms: int, window_ms: int) -> int:
    """scheduled_at plus a deterministic offset in [0, window): equal in every process."""
    if window_ms <= 0:
        return scheduled_at_ms
    digest = hashlib.blake2b(f"{job_id}:{scheduled_at_ms}".encode(), digest_size=8).digest()
    return scheduled_at_ms + int.from_bytes(digest, "big") % window_ms


def _every_next(schedule: EverySchedule, after_ms: int) -> int:
    if after_ms < schedule.start_at_ms:
        return schedule.start_at_ms
    steps = (after_ms - schedule.start_at_ms) // schedule.interval_ms + 1
    return schedule.start_at_ms + steps * schedule.interval_ms


# ---------------------------------------------------------------- cron and the DST rule


@lru_cache(maxsize=65_536)
def cron_next_after(expr_text: str, timezone: str, after_ms: int) -> int | None:
    """Next instant (epoch ms) > after_ms at which `expr_text` fires in `timezone`.

    Memoised: at a peak many jobs share an expression, a zone and the instant asked about.
    """
    expr = parse_cron(expr_text)
    zone = ZoneInfo(timezone)
    best: int | None = None
    for first, second in _instants(expr, zone, _wall_start(after_ms, zone)):
        if best is not None and first is not None and first >= best:
            break  # the earliest instant of later matches only grows
        later = [c for c in (first, second) if c is not None and c > after_ms]
        if later and (best is None or min(later) < best):
            best = min(later)
        if best is not None and best == first:
            break
    return best


def _wall_start(after_ms: int, zone: ZoneInfo) -> datetime:
    """The naive wall time from which the runs after `after_ms` are looked for."""
    local = (EPOCH + timedelta(milliseconds=after_ms)).astimezone(zone)
    start = local.replace(tzinfo=None, fold=0)
    if local.fold == 0:
        # In the first pass of a repeated hour, wall times just before `start` come back
        # again later: look from the start of the repetition.
        start -= _fold_size(start, zone)
    return start


def _instants(
    expr: CronExpr, zone: ZoneInfo, start: datetime, *, scan_limit: int | None = _SCAN_LIMIT
) -> Iterator[tuple[int | None, int | None]]:
    """For each matching wall time from `start` on: (first instant, second instant) in ms.

    A wall time in a gap has no instant: fixed-time jobs fire at the transition instead,
    wildcard jobs not at all. A repeated wall time has two: wildcard jobs fire at both,
    fixed-time jobs at the first only.
    """
    matcher = _matcher(expr)
    wall = start - timedelta(seconds=1)
    scans = itertools.count() if scan_limit is None else range(scan_limit)
    for _ in scans:
        try:
            wall = matcher.get_next(datetime, start_time=wall)
        except CroniterBadDateError:
            return
        offset0 = wall.replace(tzinfo=zone, fold=0).utcoffset()
        offset1 = wall.replace(tzinfo=zone, fold=1).utcoffset()
        assert offset0 is not None and offset1 is not None
        first = _naive_ms(wall - offset0)
        if offset0 == offset1:
            yield first, None
        elif offset0 > offset1:  # repeated: fold=0 is the earlier pass
            yield first, (_naive_ms(wall - offset1) if expr.is_wildcard else None)
        elif expr.is_wildcard:  # in a gap
            yield None, None
        else:
            yield _transition_ms(zone, _naive_ms(wall - offset1), first), None


def _fold_size(wall: datetime, zone: ZoneInfo) -> timedelta:
    offset0 = wall.replace(tzinfo=zone, fold=0).utcoffset()
    offset1 = wall.replace(tzinfo=zone, fold=1).utcoffset()
    assert offset0 is not None and offset1 is not None
    return max(offset0 - offset1, timedelta(0))


@lru_cache(maxsize=4096)
def _transition_ms(zone: ZoneInfo, before_ms: int, after_ms: int) -> int:
    """The instant in (before_ms, after_ms] where the zone's offset changes (a gap's end)."""
    offset_before = _utcoffset(zone, before_ms)
    low, high = before_ms, after_ms  # offset(low) is the old one, offset(high) the new one
    while high - low > 1_000:
        mid = (low + high) // 2 // 1_000 * 1_000
        if mid <= low:
            break
        if _utcoffset(zone, mid) == offset_before:
            low = mid
        else:
            high = mid
    return high


def _utcoffset(zone: ZoneInfo, ms: int) -> timedelta | None:
    return (EPOCH + timedelta(milliseconds=ms)).astimezone(zone).utcoffset()


def _naive_ms(naive_utc: datetime) -> int:
    delta = naive_utc - _EPOCH_NAIVE
    return (delta.days * 86_400 + delta.seconds) * 1_000 + delta.microseconds // 1_000


_thread_state = threading.local()


def _matcher(expr: CronExpr) -> croniter:
    """A croniter for naive wall times, one per thread and expression (croniter is stateful)."""
    cache: dict[str, croniter] | None = getattr(_thread_state, "matchers", None)
    if cache is None or len(cache) > 4096:
        cache = _thread_state.matchers = {}
    matcher = cache.get(expr.text)
    if matcher is None:
        matcher = croniter(expr.matcher_text, _EPOCH_NAIVE, day_or=expr.days_or)
        cache[expr.text] = matcher
    return matcher
