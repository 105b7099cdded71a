"""The query parameters of GET /v1/jobs: status, target type, queue, host, name, next-run bounds,
failing, labels.

Validates each into a store JobFilter; a bad value is a 400 naming its parameter. Reads nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from multidict import MultiMapping

from schedd.errors import InvalidRequest
from schedd.model import JobStatus
from schedd.store.job_search import JobFilter
from schedd.targets import TARGET_TYPES
from schedd.targetspec import QUEUE_NAME
from schedd.timeformat import parse_instant
from schedd.wire.jobs import LABEL_NAME_PATTERN, MAX_LABEL_VALUE_CHARS, MAX_LABELS

MAX_NAME_CHARS = 200  # a job's name is at most this long (jobspec.py)
MAX_HOST_CHARS = 253
_HOST = re.compile(r"[\w.:%-]+")  # a DNS name (IDN letters too), IPv4 or IPv6
_STATUSES = tuple(s.value for s in JobStatus)


def _one_of(query: Mapping[str, str], field: str, allowed: tuple[str, ...]) -> str | None:
    value = query.get(field)
    if value is not None and value not in allowed:
        raise InvalidRequest(field, f"must be one of {', '.join(allowed)}, got {value[:40]!r}")
    return value


def _queue(value: str | None) -> str | None:
    if value is not None and not QUEUE_NAME.fullmatch(value):
        raise InvalidRequest("queue", f"must match [A-Za-z0-9_.-]{{1,128}}, got {value[:40]!r}")
    return value


def _host(value: str | None) -> str | None:
    if value is None:
        return None
    text = value[1:-1] if value.startswith("[") and value.endswith("]") else value  # IPv6
    if len(text) > MAX_HOST_CHARS or not _HOST.fullmatch(text) or text.count(":") == 1:
        raise InvalidRequest(
            "host", f"must be a host name or IP address (no port), got {value[:40]!r}"
        )
    return text.lower()


def _name(value: str | None) -> str | None:
    if value is not None and not 1 <= len(value) <= MAX_NAME_CHARS:
        raise InvalidRequest("name", f"must be 1-{MAX_NAME_CHARS} characters")
    return None if value is None else value.casefold()


def _flag(query: Mapping[str, str], field: str) -> bool:
    value = query.get(field)
    if value is not None and value not in ("true", "false"):
        raise InvalidRequest(field, f"must be true or false, got {value[:40]!r}")
    return value == "true"


def _instant(query: Mapping[str, str], field: str) -> int | None:
    value = query.get(field)
    return None if value is None else parse_instant(value, field=field)


_LABEL_NAME = re.compile(LABEL_NAME_PATTERN[:-1] + r"\Z")


def _labels(query: MultiMapping[str]) -> tuple[tuple[str, str], ...]:
    """The `label=NAME=VALUE` parameters (repeatable, each one a job must have)."""
    found = query.getall("label", [])
    if len(found) > MAX_LABELS:
        raise InvalidRequest("label", f"may be given at most {MAX_LABELS} times")
    labels = []
    for text in found:
        name, is_pair, value = text.partition("=")
        if not is_pair or not _LABEL_NAME.match(name) or len(value) > MAX_LABEL_VALUE_CHARS:
            raise InvalidRequest(
                "label",
                f"must be NAME=VALUE, the name matching {LABEL_NAME_PATTERN} and the value at "
                f"most {MAX_LABEL_VALUE_CHARS} characters, got {text[:40]!r}",
            )
        labels.append((name, value))
    return tuple(dict.fromkeys(labels))


def job_filter(query: MultiMapping[str]) -> JobFilter:
    """The filter of a GET /v1/jobs query string (each parameter optional, all ANDed)."""
    after = _instant(query, "next_run_after")
    before = _instant(query, "next_run_before")
    if after is not None and before is not None and before <= after:
        raise InvalidRequest("next_run_before", "must be later than next_run_after")
    return JobFilter(
        status=_one_of(query, "status", _STATUSES),
        target_type=_one_of(query, "target_type", TARGET_TYPES),
        queue=_queue(query.get("queue")),
        host=_host(query.get("host")),
        name=_name(query.get("name")),
        next_run_after_ms=after,
        next_run_before_ms=before,
        is_failing=_flag(query, "failing"),
        labels=_labels(query),
    )
