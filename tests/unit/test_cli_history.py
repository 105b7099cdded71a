"""`schedctl history --diff`'s lines from versions alone: spec fields that differ, the status a
change set, specs not recorded, and a page that ends before the create."""

from __future__ import annotations

from typing import Any

from schedd.cli.ctl.history import diff_lines
from schedd.wire.jobs import JobVersionView

SPEC: dict[str, Any] = {"name": "a", "schedule": {"every": "1h"}, "payload": {"n": 1}}


def version(number: int, change: str, spec: dict[str, Any] | None, **extra: Any) -> JobVersionView:
    fields = extra.pop("fields", None)
    return JobVersionView(
        version=number,
        changed_at=f"2026-12-0{number}T00:00:00Z",
        changed_by=extra.pop("by", "tenant:t1"),
        change=change,
        fields=fields,
        spec=spec,
    )


def lines(*versions: JobVersionView) -> list[str]:
    return [line.plain for line in diff_lines(list(versions))]


def test_each_changed_field_and_the_status_are_shown_old_to_new() -> None:
    renamed = SPEC | {"name": "b", "window": "5m"}
    assert lines(
        version(4, "cancel", renamed, by=None),
        version(3, "pause", renamed),
        version(2, "update", renamed, fields=["name", "window"]),
        version(1, "create", SPEC),
    ) == [
        "version 4: cancel at 2026-12-04T00:00:00Z",
        "  status: paused -> cancelled",
        "version 3: pause at 2026-12-03T00:00:00Z, by tenant:t1",
        "  status: active -> paused",
        "version 2: update at 2026-12-02T00:00:00Z, by tenant:t1",
        '  name: "a" -> "b"',
        '  window: null -> "5m"',
        "version 1: create at 2026-12-01T00:00:00Z, by tenant:t1",
    ]


def test_a_spec_not_recorded_names_the_fields_and_a_cut_page_says_so() -> None:
    assert lines(
        version(3, "update", SPEC, fields=["payload"]),
        version(2, "update", None, fields=["name"]),
    ) == [
        "version 3: update at 2026-12-03T00:00:00Z, by tenant:t1",
        "  payload: (spec not recorded)",
        "version 2: update at 2026-12-02T00:00:00Z, by tenant:t1",
        "  (the version before is not listed)",
    ]
    assert lines(version(5, "resume", SPEC)) == [
        "version 5: resume at 2026-12-05T00:00:00Z, by tenant:t1",
        "  status: ? -> active",
        "  (the version before is not listed)",
    ]
