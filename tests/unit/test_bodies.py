"""Tests for schedd.bodies: msgspec's refusals as the contract's InvalidRequest (the field as the
user typed it, the field's own sentence), and the checks msgspec cannot make."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import msgspec
import pytest
from msgspec import UNSET, Meta, UnsetType

from schedd.api.connections import ConnectionInput
from schedd.bodies import Body, convert_body
from schedd.errors import InvalidRequest
from schedd.retention import RetentionUpdate, parse_tenant_retention
from schedd.wire.cluster import NodeToAdd
from schedd.wire.tenants import TenantCreate, TenantPatch


class Inner(Body):
    size: Annotated[int, Meta(ge=1)]


class Sample(Body):
    count: Annotated[int, Meta(ge=0, le=10)] = 0
    inner: Inner | UnsetType = UNSET
    tags: list[Annotated[str, Meta(min_length=1)]] = msgspec.field(default_factory=list)

    field_messages: ClassVar[dict[str, str]] = {"tags": "must be a list of non-empty strings"}


def refusal(body: Any, kind: type[Any], *, field: str = "") -> tuple[str, str]:
    with pytest.raises(InvalidRequest) as caught:
        convert_body(body, kind, field=field)
    return caught.value.field, caught.value.reason


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        ({"count": 11}, "count", "must be an integer <= 10"),
        ({"count": "5"}, "count", "must be an integer, got a string"),
        ({"count": True}, "count", "must be an integer, got a boolean"),
        ({"count": 1.5}, "count", "must be an integer, got a number"),
        ({"inner": {"size": 0}}, "inner.size", "must be an integer >= 1"),
        ({"inner": {}}, "inner.size", "is required"),
        ({"inner": {"size": 1, "colour": "red"}}, "inner.colour", "is not a known field"),
        ({"nope": 1}, "nope", "is not a known field"),
        ({"tags": ["a", ""]}, "tags", "must be a list of non-empty strings"),
        ([], "body", "must be an object, got an array"),
    ],
)
def test_a_refusal_names_the_field_as_sent(body: Any, field: str, reason: str) -> None:
    assert refusal(body, Sample) == (field, reason)


def test_a_prefix_goes_before_the_field() -> None:
    assert refusal({"count": -1}, Sample, field="body")[0] == "body.count"
    assert refusal({"x": 1}, RetentionUpdate, field="body") == (
        "body.x",
        "is not a kind a tenant sets; kinds: runs, deadletters, messages",
    )


def test_an_integral_float_counts_as_an_integer() -> None:
    """As JSON Schema's "integer": some encoders write every number as a float."""
    assert convert_body({"count": 5.0}, Sample).count == 5
    assert type(convert_body({"count": 5.0}, Sample).count) is int


def test_a_duration_is_checked_by_its_own_validator_naming_the_field() -> None:
    assert parse_tenant_retention({"runs": "1d", "messages": 90, "deadletters": None}) == {
        "runs": 86_400_000,
        "messages": 90_000,
    }
    field, reason = refusal({"runs": "0s"}, RetentionUpdate, field="body")
    assert (field, reason) == ("body.runs", "must be at least 1s, got '0s'")
    assert refusal({"runs": "soon"}, RetentionUpdate)[0] == "runs"


def test_tenant_bodies_keep_their_sentences_and_tell_absent_from_null() -> None:
    assert refusal({"name": "   "}, TenantCreate) == (
        "name",
        "must be a non-empty string of at most 200 characters",
    )
    assert refusal({}, TenantCreate) == ("name", "is required")
    assert refusal({"name": "a", "allowed_hosts": ["ok", ""]}, TenantCreate)[0] == "allowed_hosts"
    created = convert_body({"name": "a"}, TenantCreate)
    assert (created.max_active_jobs, created.allowed_hosts, created.alert_url) == (
        1_000_000,
        [],
        UNSET,
    )
    patch = convert_body({"alert_url": None}, TenantPatch)
    assert patch.alert_url is None and patch.name is UNSET


def test_a_connection_error_never_repeats_the_url() -> None:
    secret = "hunter2-secret"
    field, reason = refusal({"name": "x", "url": f"redis://u:{secret}@h x"}, ConnectionInput)
    assert field == "url" and secret not in reason
    assert refusal({"name": "a b", "url": "redis://h"}, ConnectionInput)[0] == "name"


class Named(Body):
    code: Annotated[str, Meta(pattern="^[a-z]{1,8}$")]
    label: Annotated[str, Meta(pattern="^[a-z]+$", description="documented")] | None = None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"code": "abc\n"}, "code"),
        ({"code": "abc", "label": "x\n"}, "label"),
    ],
)
def test_a_pattern_ending_in_dollar_matches_the_whole_value(
    body: dict[str, Any], field: str
) -> None:
    """msgspec searches a pattern and Python's `$` matches before a final newline: convert_body
    holds a top-level field to the whole value."""
    with pytest.raises(InvalidRequest) as caught:
        convert_body(body, Named)
    assert caught.value.field == field
    assert "must be a string matching regex" in caught.value.reason


def test_a_connection_name_ending_in_a_newline_is_refused_by_its_struct() -> None:
    with pytest.raises(InvalidRequest) as caught:
        convert_body({"name": "a\n", "url": "redis://h:6379"}, ConnectionInput)
    assert (caught.value.field, caught.value.reason) == ("name", "must match [A-Za-z0-9_.-]{1,64}")


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        ({"raft": 9701}, "raft", "must be a Raft address like '10.0.0.4:9701', got 9701"),
        ({"raft": "10.0.0.9:9701", "extra": 1}, "extra", "is not a known field"),
        ({}, "raft", "is required"),
    ],
)
def test_a_node_to_add_names_its_field(body: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        convert_body(body, NodeToAdd)
    assert (caught.value.field, caught.value.reason) == (field, reason)
    assert convert_body({"raft": "10.0.0.9:9701"}, NodeToAdd).raft == "10.0.0.9:9701"
