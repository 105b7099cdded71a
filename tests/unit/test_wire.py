"""The contract's structs (schedd/wire) agree with the registries they describe."""

from __future__ import annotations

from schedd.jobspec import JOB_FIELDS, JobCreate
from schedd.retention import KINDS, TENANT_KINDS
from schedd.targets import KINDS as BROKER_KINDS
from schedd.wire.jobs import BROKER_TARGET_VIEWS
from schedd.wire.tenants import OwnRetention, Retention


def test_retention_answers_name_every_kind_in_order() -> None:
    assert Retention.__struct_fields__ == KINDS
    assert OwnRetention.__struct_fields__ == TENANT_KINDS


def test_every_broker_kind_has_its_target_view() -> None:
    tags = [view.__struct_config__.tag for view in BROKER_TARGET_VIEWS]
    assert tags == [kind.name for kind in BROKER_KINDS]


def test_the_job_body_struct_names_every_job_field() -> None:
    assert set(JobCreate.__struct_fields__) == JOB_FIELDS
