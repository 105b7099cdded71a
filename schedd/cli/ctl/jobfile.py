"""Job files (`schedctl apply -f`, `schedctl export`): TOML with one `[[job]]` table per job in
the API's field shapes, read and checked whole before any request, and written back.

Reading never sends anything: every message names the file, the job (by key, or its place
when it has none) and the field. TOML has no null: a payload holding one is `payload_json`.
An `after` schedule may name its upstream by key (`after = { key = "..." }`): a job of the same
file, put before it, or a job on the node; apply gives it the job's id.
"""

from __future__ import annotations

import datetime
import json
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from schedd.errors import InvalidRequest, SchedError
from schedd.jobspec import parse_job
from schedd.jsonbody import JSONObject, JSONValue, check_value, loads_strict
from schedd.wire.jobs import (
    JOB_KEY_PATTERN,
    LABEL_NAME_PATTERN,
    MAX_LABEL_VALUE_CHARS,
    MAX_LABELS,
    SET_LABEL,
)

# The contract's key and label rules, matched whole (a pattern's `$` allows a final newline).
JOB_KEY = re.compile(JOB_KEY_PATTERN.removeprefix("^").removesuffix("$"))
LABEL_NAME = re.compile(LABEL_NAME_PATTERN.removeprefix("^").removesuffix("$"))
STDIN = "-"
NO_PAYLOAD_LIMIT = 2**62  # the server knows its own limit
# A job table's fields, in the order export writes them: the API's, and payload_json.
FIELD_ORDER = (
    "key",
    "name",
    "schedule",
    "window",
    "target",
    "payload",
    "payload_json",
    "retry",
    "misfire_policy",
    "overlap_policy",
    "max_runs",
    "on_failure",
    "labels",
)
FILE_FIELDS = frozenset(FIELD_ORDER)
TOP_LEVEL = ("set", "job")
# The schedule's members as the schedule parser names them, as a file names them.
_SCHEDULE_MEMBERS = {"cron": "schedule.cron", "timezone": "schedule.timezone"}


class InvalidJobFile(SchedError):
    """A job file that cannot be applied: not TOML, or a job the API would refuse. Exit 1,
    not 2: `apply --dry-run --exit-code` exits 2 for a plan that is not empty."""

    code = "invalid_job_file"
    exit_code = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class FileJob:
    """One `[[job]]` of a file: its key and the full body `PUT /v1/jobs/by-key/{key}` takes;
    with `upstream_key`, the body's `after` holds a stand-in id until apply knows the job's."""

    key: str
    body: JSONObject
    upstream_key: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class JobFile:
    """A file read and checked: its name in messages, its set (or None) and its jobs."""

    name: str
    set: str | None
    jobs: tuple[FileJob, ...]

    def fail(self, message: str) -> InvalidJobFile:
        return InvalidJobFile(f"{self.name}: {message}")


def read_job_file(source: str, *, now_ms: int | None = None) -> JobFile:
    """Read and check the job file at path `source` (or stdin for `-`)."""
    name = "<stdin>" if source == STDIN else source
    try:
        raw = sys.stdin.buffer.read() if source == STDIN else Path(source).read_bytes()
        text = raw.decode("utf-8")
    except OSError as exc:
        raise InvalidJobFile(f"{name}: cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise InvalidJobFile(f"{name}: is not UTF-8 text: {exc.reason}") from None
    return parse_job_file(text, name=name, now_ms=now_ms)


def parse_job_file(text: str, *, name: str, now_ms: int | None = None) -> JobFile:
    """Check a job file's text: TOML, the top-level fields, each job as the API would."""
    import tomllib  # here: 2 ms of every schedctl start otherwise

    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidJobFile(f"{name}: is not valid TOML: {exc}") from None
    for field in document:
        if field not in TOP_LEVEL:
            raise InvalidJobFile(
                f'{name}: {field}: unknown top-level field (a job file has `set = "..."` '
                "and [[job]] tables)"
            )
    set_name = _set_of(document.get("set"), name)
    tables = document.get("job", [])
    if not isinstance(tables, list):
        raise InvalidJobFile(f"{name}: job: write each job as a [[job]] table, not [job]")
    now = int(time.time() * 1000) if now_ms is None else now_ms
    jobs: list[FileJob] = []
    seen: dict[str, int] = {}
    for number, table in enumerate(tables, start=1):
        job = _job(table, number, set_name=set_name, file=name, now_ms=now)
        if job.key in seen:
            raise InvalidJobFile(
                f'{name}: job "{job.key}": key: named twice (jobs #{seen[job.key]} and #{number})'
            )
        seen[job.key] = number
        jobs.append(job)
    return JobFile(name=name, set=set_name, jobs=_upstreams_first(jobs, name))


def _upstreams_first(jobs: list[FileJob], name: str) -> tuple[FileJob, ...]:
    """The jobs in file order, but each after the job of the file it names by key (apply
    creates that one first); a job named by itself or a cycle of such names is refused."""
    by_key = {job.key: job for job in jobs}
    ordered: dict[str, FileJob] = {}
    for job in jobs:
        chain, up = [job], job.upstream_key
        while up is not None and up in by_key and up not in ordered:
            keys = [j.key for j in chain]
            if up in keys:
                cycle = [*keys[keys.index(up) :], up]
                reason = (
                    f"would close a cycle {' -> '.join(cycle)}"
                    if len(cycle) > 2
                    else "a job cannot run after itself"
                )
                raise InvalidJobFile(f'{name}: job "{up}": schedule.after.key: {reason}')
            chain.append(by_key[up])
            up = by_key[up].upstream_key
        for upstream_first in reversed(chain):
            ordered.setdefault(upstream_first.key, upstream_first)
    return tuple(ordered.values())


def _set_of(value: object, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_LABEL_VALUE_CHARS:
        raise InvalidJobFile(
            f"{name}: set: must be a string of 1-{MAX_LABEL_VALUE_CHARS} characters, "
            f"got {_shown(value)}"
        )
    return value


def _job(table: object, number: int, *, set_name: str | None, file: str, now_ms: int) -> FileJob:
    """One [[job]] table checked: its key first, so later messages can name the job by it."""
    where = f"{file}: job #{number}"
    if not isinstance(table, dict):
        raise InvalidJobFile(f"{where}: must be a [[job]] table")
    key = table.get("key")
    if key is None:
        raise InvalidJobFile(f"{where}: key: is required (the job's stable name)")
    if not isinstance(key, str) or not JOB_KEY.fullmatch(key):
        raise InvalidJobFile(f"{where}: key: must match {JOB_KEY.pattern}, got {_shown(key)}")
    where = f'{file}: job "{key}"'
    try:
        body, upstream_key = _body(table, set_name=set_name, now_ms=now_ms)
    except InvalidRequest as exc:
        field = _SCHEDULE_MEMBERS.get(exc.field, exc.field)
        raise InvalidJobFile(
            f"{where}: {field}: {exc.reason}" if field else f"{where}: {exc}"
        ) from None
    return FileJob(key=key, body=body, upstream_key=upstream_key)


def _body(
    table: dict[str, object], *, set_name: str | None, now_ms: int
) -> tuple[JSONObject, str | None]:
    """The API body of a job table: fields checked, labels with the file's set, the job as a
    whole judged by the server's own validation (jobspec.parse_job); and the key its `after`
    names, if it names one."""
    for field in table:
        if field not in FILE_FIELDS:
            raise InvalidRequest(field, f"unknown field (a job's fields: {', '.join(FIELD_ORDER)})")
    fields = {field: _json(value, field) for field, value in table.items()}
    if "payload_json" in fields:
        if "payload" in fields:
            raise InvalidRequest("payload_json", "give payload or payload_json, not both")
        fields["payload"] = _payload_json(fields.pop("payload_json"))
    _check_fixed(fields.get("schedule"))
    upstream_key = _after_key(fields)
    fields["labels"] = _labels(fields.get("labels", {}), set_name)
    parse_job(fields, now_ms=now_ms, payload_limit=NO_PAYLOAD_LIMIT)
    return fields, upstream_key


def _after_key(fields: dict[str, JSONValue]) -> str | None:
    """The key an `after` schedule names its upstream by (None: it names none), its `after`
    given a stand-in job id meanwhile (so the rest is checked as the API checks it)."""
    schedule = fields.get("schedule")
    after = schedule.get("after") if isinstance(schedule, dict) else None
    if not isinstance(schedule, dict) or not isinstance(after, dict) or "key" not in after:
        return None
    key = after["key"]
    if "job_id" in after:
        raise InvalidRequest("schedule.after", "give job_id or key, not both")
    if not isinstance(key, str) or not JOB_KEY.fullmatch(key):
        raise InvalidRequest(
            "schedule.after.key", f"must match {JOB_KEY.pattern}, got {_shown(key)}"
        )
    rest = {name: value for name, value in after.items() if name != "key"}
    fields["schedule"] = {**schedule, "after": {"job_id": stand_in(key), **rest}}
    return key


def stand_in(key: str) -> str:
    """The id an `after` shows for a job apply has yet to create: `<KEY>` (a job id's length
    and characters, so the rest of the body can be checked and planned meanwhile)."""
    return f"<{key[:126]}>"


def with_upstream(body: JSONObject, job_id: str) -> JSONObject:
    """The body with its `after` naming the upstream `job_id`."""
    schedule = body.get("schedule")
    after = schedule.get("after") if isinstance(schedule, dict) else None
    if not isinstance(schedule, dict) or not isinstance(after, dict):
        return body
    return {**body, "schedule": {**schedule, "after": {**after, "job_id": job_id}}}


def _check_fixed(schedule: JSONValue) -> None:
    """Refuse a delay: it counts from the moment of each apply, so the job made by one apply
    would never match the file again (each rerun would move it). An `every` without start_at
    is fine: a PUT keeps the job's own start."""
    if not isinstance(schedule, dict):
        return  # parse_job names what is wrong
    if "delay" in schedule:
        raise InvalidRequest(
            "schedule.delay",
            "counts from the moment of each apply, so the job would never match the file: "
            "give run_at (an instant) instead",
        )


def _json(value: object, field: str) -> JSONValue:
    """A TOML value as JSON: dates and times become their RFC 3339 text; NaN, infinities and
    NUL characters are refused as the API refuses them."""
    return check_value(_dates_as_text(value), field=field)


def _dates_as_text(value: object) -> object:
    if isinstance(value, datetime.date | datetime.time):  # datetime is a date
        return value.isoformat()
    if isinstance(value, dict):
        return {key: _dates_as_text(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_dates_as_text(item) for item in value]
    return value


def _payload_json(value: JSONValue) -> JSONValue:
    if not isinstance(value, str):
        raise InvalidRequest("payload_json", f"must be a string of JSON text, got {_shown(value)}")
    return loads_strict(value.encode(), field="payload_json")


def _labels(value: JSONValue, set_name: str | None) -> dict[str, JSONValue]:
    """A job's labels checked, with the file's set label added."""
    if not isinstance(value, dict):
        raise InvalidRequest("labels", f"must be a table of strings, got {_shown(value)}")
    for label, text in value.items():
        if not LABEL_NAME.fullmatch(label):
            raise InvalidRequest("labels", f"name must match {LABEL_NAME.pattern}, got {label!r}")
        if not isinstance(text, str) or len(text) > MAX_LABEL_VALUE_CHARS:
            raise InvalidRequest(
                f"labels.{label}",
                f"must be a string of at most {MAX_LABEL_VALUE_CHARS} characters, "
                f"got {_shown(text)}",
            )
    own = value.get(SET_LABEL)
    if set_name is not None and own is not None and own != set_name:
        raise InvalidRequest(
            f"labels.{SET_LABEL}",
            f"is {own!r}, but the file's set is {set_name!r}: leave the label out (apply "
            "gives every job of the file its set)",
        )
    labels = dict(value) if set_name is None else {**value, SET_LABEL: set_name}
    if len(labels) > MAX_LABELS:
        extra = f" (with {SET_LABEL})" if set_name is not None else ""
        raise InvalidRequest("labels", f"has {len(labels)}{extra}, more than {MAX_LABELS}")
    return labels


def _shown(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


# ---------------------------------------------------------------- writing (export)


def job_table(
    job: Mapping[str, JSONValue],
    *,
    set_name: str | None,
    keys: Mapping[str, str] | None = None,
) -> dict[str, object]:
    """A job object (GET /v1/jobs) as a [[job]] table: its spec fields in the file's order,
    nulls left out, the file's set label too; a payload TOML cannot hold as payload_json. An
    `after` whose upstream is in `keys` (job id -> key: the file's jobs) names it by key."""
    table: dict[str, object] = {}
    for field in FIELD_ORDER:
        value = job.get(field)
        if field == "schedule" and keys:
            value = _after_by_key(value, keys)
        if field == "labels" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if set_name is None or k != SET_LABEL}
            value = value or None  # no labels: no table
        if value is None or field == "payload_json":
            continue
        if field == "payload":
            if _holds_null(value):
                table["payload_json"] = json.dumps(value, ensure_ascii=False)
            else:
                table["payload"] = value
        else:
            table[field] = _without_nulls(value)
    return table


def _after_by_key(schedule: JSONValue, keys: Mapping[str, str]) -> JSONValue:
    after = schedule.get("after") if isinstance(schedule, dict) else None
    if not isinstance(schedule, dict) or not isinstance(after, dict):
        return schedule
    key = keys.get(str(after.get("job_id")))
    if key is None:
        return schedule
    rest = {name: value for name, value in after.items() if name != "job_id"}
    return {**schedule, "after": {"key": key, **rest}}


def write_job_file(
    tables: Sequence[Mapping[str, object]], *, set_name: str | None, header: str
) -> str:
    """The TOML text of a job file: a comment header, the set (if any), then the jobs."""
    import tomli_w  # here, as tomllib above

    document: dict[str, object] = {} if set_name is None else {"set": set_name}
    document["job"] = list(tables)
    comment = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    return comment + "\n" + tomli_w.dumps(document)


def _holds_null(value: JSONValue) -> bool:
    if value is None:
        return True
    if isinstance(value, dict):
        return any(_holds_null(item) for item in value.values())
    if isinstance(value, list):
        return any(_holds_null(item) for item in value)
    return False


def _without_nulls(value: JSONValue) -> JSONValue:
    """A spec field with its null and empty members left out: in the API's bodies an optional
    member left out means null (on_failure's alert_url, a broker target's options) or empty
    (an http target's headers)."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None and v != {}}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


def label_pair(text: str) -> tuple[str, str]:
    """A `--label NAME=VALUE` option's pair; InvalidRequest naming the option otherwise."""
    name, sep, value = text.partition("=")
    if not sep or not LABEL_NAME.fullmatch(name):
        raise InvalidRequest(
            "--label", f"must be NAME=VALUE, NAME like team or schedd.set, got {text!r}"
        )
    return name, value
