"""The registry of broker target kinds (schedd/targets): each entry agrees with its struct, its
deliverer's module and the log, and the console's jobs filter lists every kind (from the
module the node writes from the registry)."""

from __future__ import annotations

import dataclasses
import importlib
import json
import re
from pathlib import Path

import pytest

from schedd.console.serve import shipped
from schedd.delivery.brokers import BrokerDeliverer
from schedd.jobspec import parse_target, target_to_json
from schedd.store.commands import BROKER_TARGET_LEVEL, LOG_LEVEL, spec_level
from schedd.stored_spec import load_target
from schedd.targets import (
    BY_NAME,
    CONNECTION_SCHEMES,
    DEFAULT_PORTS,
    KINDS,
    TARGET_TYPES,
    TargetKind,
)

JOBS_JS = Path(__file__).resolve().parents[2] / "schedd/console/static/pages/jobs.js"
# One target of each kind, as the API takes it and writes it back.
EXAMPLES = {
    "redis_stream": {"type": "redis_stream", "connection": "r", "stream": "s", "maxlen": 5},
    "rabbitmq": {"type": "rabbitmq", "connection": "mq", "exchange": "", "routing_key": "q"},
    "nats": {"type": "nats", "connection": "n", "subject": "a.b"},
}


def test_names_connections_and_schemes_are_each_one_kinds() -> None:
    assert len(BY_NAME) == len(KINDS)
    assert len({kind.connection for kind in KINDS}) == len(KINDS)
    assert sum(len(kind.schemes) for kind in KINDS) == len(CONNECTION_SCHEMES) == len(DEFAULT_PORTS)
    assert ("queue", "http", *(kind.name for kind in KINDS)) == TARGET_TYPES
    assert set(EXAMPLES) == set(BY_NAME), "give the new kind an example here"


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.name)
def test_an_entry_agrees_with_its_struct(kind: TargetKind) -> None:
    fields = [field.name for field in dataclasses.fields(kind.struct)]
    assert fields[0] == "connection"
    assert list(kind.input.__struct_fields__) == fields, "the body's fields, in the same order"
    assert kind.input.__struct_config__.tag == kind.name, "a body is tagged by its type"
    assert set(kind.flag.fields) | {option.field for option in kind.flag.options} <= set(fields)


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.name)
def test_a_target_reads_back_as_written_by_the_api_and_from_the_store(kind: TargetKind) -> None:
    example = EXAMPLES[kind.name]
    target = parse_target(example)
    assert isinstance(target, kind.struct)
    assert target_to_json(target) == example
    assert list(target_to_json(target)) == list(example), "the stored JSON's key order"
    assert load_target(json.dumps(example)) == target
    assert kind.describe(example).startswith(f"{kind.name} {example['connection']} ")


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.name)
def test_its_deliverer_module_names_the_parts_a_node_imports_lazily(kind: TargetKind) -> None:
    module = importlib.import_module(kind.delivery)
    assert issubclass(module.DELIVERER, BrokerDeliverer)
    assert module.DELIVERER.kind == kind.name
    assert module.DELIVERER.target_type is kind.struct
    assert callable(module.CONNECTOR) and callable(module.server_version)


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.name)
def test_a_job_of_the_kind_needs_the_log_level_its_deliverers_came_in(
    kind: TargetKind,
) -> None:
    assert BROKER_TARGET_LEVEL <= kind.log_level <= LOG_LEVEL
    assert spec_level({"target": EXAMPLES[kind.name]}) == kind.log_level
    assert spec_level({"target": {"type": "http", "url": "https://x.example"}}) == 1


def test_the_consoles_target_filter_lists_every_kind_from_the_registry() -> None:
    """jobs.js takes its kinds from kinds.js, which the node writes from the registry."""
    assert 'import { TARGET_TYPES } from "../kinds.js";' in JOBS_JS.read_text()
    assert 'const TARGETS = ["", ...TARGET_TYPES];' in JOBS_JS.read_text()
    served = shipped()["kinds.js"]
    assert served.content_type == "text/javascript"
    found = re.search(r"export const TARGET_TYPES = (\[.*?\]);", served.body.decode())
    assert found is not None and json.loads(found.group(1)) == list(TARGET_TYPES)
