"""The command catalogue: bodies round-trip, a body that does not fit is a CorruptLog, and each
rejection code is one error class."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from schedd.errors import (
    BY_CODE,
    Conflict,
    CorruptLog,
    DeadletterNotFound,
    JobNotFound,
    SchedError,
    StaleState,
    TenantExists,
    rejection_error,
)
from schedd.store.command import (
    Applied,
    Command,
    canonical_json,
    compact_json,
    decode,
    encode,
    encode_command,
    fast_canonical_json,
    stored_json,
    stored_json_as_canonical,
    typed,
)
from schedd.store.commands import (
    BY_REFERENCE_LEVEL,
    CALENDARS_LEVEL,
    CATALOGUE,
    DEFERRED_COMPLETION_LEVEL,
    DEPENDENCIES_LEVEL,
    JOB_KEYS_LEVEL,
    LEVEL_OF_TYPE,
    LOG_LEVEL,
    OUTPUTS_LEVEL,
    RUN_SUMMARIES_LEVEL,
    RUNS_BY_REFERENCE_LEVEL,
    SEGMENTS_LEVEL,
    AckMessages,
    BackfillJob,
    Barrier,
    Body,
    Claim,
    ClaimBatch,
    ClaimRow,
    ClaimRuns,
    LogCommand,
    MoveHistory,
    NackMessages,
    NodeHeartbeat,
    PauseJob,
    ReceiveMessages,
    TriggerJob,
    UpdateJob,
    answer_of,
    spec_level,
)
from schedd.store.results import Acked, Claimed, Done

FIXTURE = Path(__file__).parent.parent / "fixtures" / "journal-level2.jsonl"
APPLY = Path(__file__).parents[2] / "schedd" / "store" / "apply"
JSON_LEAF = st.none() | st.booleans() | st.integers() | st.text(max_size=5)
JSON = st.recursive(
    JSON_LEAF,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)


def _strategy(tp: Any) -> st.SearchStrategy[Any]:
    origin, args = get_origin(tp), get_args(tp)
    if origin is Union or type(tp).__name__ == "UnionType":
        inner = st.one_of([_strategy(a) for a in args if a is not type(None)])
        return st.none() | inner if type(None) in args else inner
    if tp is str:
        return st.text(max_size=8)
    if tp is bool:
        return st.booleans()
    if tp is int:
        return st.integers(min_value=-(2**53), max_value=2**53)
    if origin is tuple:
        return st.lists(_strategy(args[0]), max_size=3).map(tuple)
    if origin in (Mapping, dict):
        values = JSON if args[1] is Any else _strategy(args[1])
        return st.dictionaries(st.text(max_size=6), values, max_size=3)
    return _instances(tp)


@functools.cache
def _instances(cls: type[Body]) -> st.SearchStrategy[Any]:
    """One strategy per class, made once: a new one per draw made hypothesis resolve the type
    hints of every nested struct again at every example (about half the file's CPU)."""
    hints = get_type_hints(cls)
    names = [f.name for f in msgspec.structs.fields(cls)]
    return st.builds(cls, **{name: _strategy(hints[name]) for name in names})


def _fixture_commands() -> list[tuple[str, dict[str, Any]]]:
    commands = []
    for line in FIXTURE.read_text().splitlines():
        entry = json.loads(json.loads(line)["entry"])
        subs = entry["body"]["commands"] if entry["type"] == "batch" else [entry]
        commands += [(sub["type"], sub["body"]) for sub in subs]
    return commands


@pytest.mark.parametrize("cls", list(CATALOGUE.values()), ids=list(CATALOGUE))
@given(data=st.data())
def test_every_type_round_trips_through_its_json_body(cls: type[LogCommand], data: Any) -> None:
    cmd = data.draw(_instances(cls))
    body = json.loads(json.dumps(cmd.to_body()))  # through JSON, as the log carries it
    assert cls.from_body(body) == cmd


@pytest.mark.parametrize(("type_", "body"), _fixture_commands())
def test_todays_log_bodies_read_back_byte_for_byte(type_: str, body: dict[str, Any]) -> None:
    assert CATALOGUE[type_].from_body(body).to_body() == body


def test_the_catalogue_names_each_type_once_with_its_level() -> None:
    assert all(name == cls.TYPE and cls.VERSION == 1 for name, cls in CATALOGUE.items())
    assert LEVEL_OF_TYPE == {
        "prune": 2,
        "set_retention": 2,
        "create_connection": 3,
        "delete_connection": 3,
        "claim_batch": 4,
        "add_jobs": 5,
        "pause_queue": 8,
        "resume_queue": 8,
        "pause_tenant": 8,
        "resume_tenant": 8,
        "backfill_job": 8,
        "record_alerts": 8,
        "mark_overdue": 8,
        "put_calendar": 10,
        "delete_calendar": 10,
        "move_history": 13,
        "close_segment": 13,
        "drop_segment": 13,
    }
    # Level 9 (issue 32) added no type: job specs with a key or labels need it (spec_level).
    assert JOB_KEYS_LEVEL == 9
    assert CALENDARS_LEVEL == 10
    # Level 13 (issue 35 §1): history segments' three types.
    assert max(cls.LEVEL for cls in CATALOGUE.values()) == SEGMENTS_LEVEL == 13
    # Level 14 added no type: a move_history with `summarize` (store/moved_runs.py).
    assert LOG_LEVEL == RUN_SUMMARIES_LEVEL == 14
    assert MoveHistory(retention_ms={}).needed_level() == 13
    assert MoveHistory(retention_ms={}, summarize=True).needed_level() == 14
    assert "summarize" not in MoveHistory(retention_ms={}).to_body()
    # Level 11 (issue 33) added no type: job specs with an `after` schedule need it.
    assert DEPENDENCIES_LEVEL == 11
    # Level 12 (issue 34) added no type: an ack's or nack's outputs and a nack's `dead`.
    assert OUTPUTS_LEVEL == 12
    assert DEFERRED_COMPLETION_LEVEL == 5  # a body's level: claim_batch's defer_completion
    assert BY_REFERENCE_LEVEL == 6  # a body's level: receive_messages' by_reference
    assert RUNS_BY_REFERENCE_LEVEL == 7  # and its runs_by_reference
    assert BackfillJob.LEVEL == 8  # level 8: schedule control (issue 31)


def test_level_8_fields_of_older_types_need_level_8_only_when_used() -> None:
    assert PauseJob(tenant_id="t", job_id="j").needed_level() == 1
    assert PauseJob(tenant_id="t", job_id="j", reason="deploy").needed_level() == 8
    plain = TriggerJob(tenant_id="t", job_id="j", scheduled_at_ms=1)
    assert plain.needed_level() == 1 and "payload" not in plain.to_body()
    assert (
        TriggerJob(tenant_id="t", job_id="j", scheduled_at_ms=1, payload="{}").needed_level() == 8
    )
    assert spec_level({"target": {"type": "queue", "queue": "q"}}) == 1
    assert spec_level({"target": {"type": "queue", "queue": "q"}, "max_runs": 3}) == 8


def test_a_spec_with_a_key_or_labels_needs_level_9_and_one_excluding_calendars_10() -> None:
    queue = {"target": {"type": "queue", "queue": "q"}}
    cron = {"cron": "0 3 * * *", "timezone": "UTC"}
    assert spec_level({**queue, "key": "k", "schedule": {**cron, "exclude": ["hols"]}}) == 10
    assert spec_level({**queue, "schedule": cron}) == 1
    assert spec_level({**queue, "key": "nightly"}) == 9
    assert spec_level({**queue, "labels": {"team": "a"}, "max_runs": 3}) == 9
    assert spec_level({**queue, "labels": {}}) == 1
    after = {"after": {"job_id": "job_a", "on": "success"}}
    assert spec_level({**queue, "key": "k", "schedule": after}) == 11
    update = UpdateJob(
        tenant_id="t",
        job_id="j",
        expected_version=1,
        spec={**queue, "key": "k"},
        next_run_at_ms=None,
        next_fire_at_ms=None,
    )
    assert update.needed_level() == 9


def test_a_claim_batch_deferring_completions_needs_level_5_and_omits_the_flag_otherwise() -> None:
    row = ClaimRow(
        job_id="j1",
        scheduled_at_ms=1,
        fire_at_ms=1,
        partition=0,
        epoch=1,
        version=1,
        is_trigger=False,
        next_run_at_ms=None,
        next_fire_at_ms=None,
    )
    plain = ClaimBatch(node_id="n1", claims=(row,))
    deferring = ClaimBatch(node_id="n1", claims=(row,), defer_completion=True)
    assert plain.needed_level() == 4
    assert "defer_completion" not in plain.to_body()  # level 4's bytes, as before
    assert deferring.needed_level() == 5
    assert deferring.to_body()["defer_completion"] is True


def test_a_receive_by_reference_needs_level_6_and_omits_the_flag_otherwise() -> None:
    fields: dict[str, Any] = {"tenant_id": "t1", "queue": "q", "max": 1, "visibility_ms": 1}
    plain = ReceiveMessages(**fields, receipts=("n1",))
    by_reference = ReceiveMessages(**fields, receipts=("n1",), by_reference=True)
    assert plain.needed_level() == 1
    assert "by_reference" not in plain.to_body()  # level 1's bytes, as before
    assert by_reference.needed_level() == 6
    assert by_reference.to_body()["by_reference"] is True
    assert "runs_by_reference" not in by_reference.to_body()  # level 6's bytes, as before


def test_a_receive_naming_its_runs_needs_level_7() -> None:
    fields: dict[str, Any] = {"tenant_id": "t1", "queue": "q", "max": 1, "visibility_ms": 1}
    both = ReceiveMessages(**fields, receipts=("n1",), by_reference=True, runs_by_reference=True)
    assert both.needed_level() == 7
    assert both.to_body()["runs_by_reference"] is True


def _wire(type_: str, body: Any) -> Command[Any]:
    return Command(type=type_, id="c1", ts_ms=1, body=body)


@pytest.mark.parametrize(
    ("type_", "body", "complaint"),
    [
        ("no_such_type", {}, "unknown command type 'no_such_type'"),
        ("cancel_job", {"tenant_id": "t1"}, "Object missing required field `job_id`"),
        (
            "cancel_job",
            {"tenant_id": "t1", "job_id": 7},
            "Expected `str`, got `int` - at `$.job_id`",
        ),
        (
            "node_heartbeat",
            {"node_id": "n", "ttl_ms": True},
            "Expected `int`, got `bool` - at `$.ttl_ms`",
        ),
        (
            "node_heartbeat",
            {"node_id": "n", "ttl_ms": "5"},
            "Expected `int`, got `str` - at `$.ttl_ms`",
        ),
        (
            "ack_messages",
            {"tenant_id": "t", "queue": "q", "receipts": "r"},
            "Expected `array`, got `str` - at `$.receipts`",
        ),
        (
            "assign_leases",
            {"ttl_ms": 1, "moves": [{"partition": 1}]},
            "Object missing required field `node_id` - at `$.moves[0]`",
        ),
        (
            "claim_runs",
            {"node_id": "n", "claims": [3]},
            "Expected `object`, got `int` - at `$.claims[0]`",
        ),
        (
            "set_retention",
            {"tenant_id": "t", "retention_ms": {"runs": 1.5}},
            "Expected `int`, got `float` - at `$.retention_ms[...]`",
        ),
    ],
)
def test_a_body_that_does_not_fit_is_a_corrupt_log(type_: str, body: Any, complaint: str) -> None:
    with pytest.raises(CorruptLog, match=re.escape(complaint)):
        typed(_wire(type_, body), index=42)  # a body given as an object
    with pytest.raises(CorruptLog, match=re.escape(complaint)):
        typed(decode(encode(_wire(type_, body)), index=42), index=42)  # read from log bytes


def test_a_typed_command_encodes_to_the_bytes_of_its_json_body() -> None:
    """The proposer's encoding (msgspec, from the struct) and the body's JSON agree, and the
    log bytes read back to the same command."""
    for type_, body in _fixture_commands():
        cmd = CATALOGUE[type_].from_body(body)
        blob = encode_command(cmd, id="c1", ts_ms=5)
        assert json.loads(blob) == {"v": 1, "type": type_, "id": "c1", "ts": 5, "body": body}
        assert typed(decode(blob, index=1), index=1).body == cmd


def test_an_absent_optional_key_stays_absent_and_reads_as_none() -> None:
    cmd = typed(_wire("nack_messages", {"tenant_id": "t", "queue": "q", "receipts": []}), index=1)
    assert cmd.body.error is None  # type: ignore[attr-defined]
    assert "error" not in cmd.body.to_body()


def test_every_rejection_code_apply_uses_is_one_error_class() -> None:
    used = set()
    for path in APPLY.glob("*.py"):
        used |= set(re.findall(r'[rR]ejected\("([a-z_]+)"', path.read_text()))
    assert used and used <= set(BY_CODE)
    assert all(cls.code == code for code, cls in BY_CODE.items())


@pytest.mark.parametrize(
    ("code", "cls", "status"),
    [
        ("job_not_found", JobNotFound, 404),
        ("deadletter_not_found", DeadletterNotFound, 404),
        ("tenant_exists", TenantExists, 409),
        ("stale_state", StaleState, 409),
        ("internal", SchedError, 500),
    ],
)
def test_a_rejection_becomes_its_error_with_the_message_whole(
    code: str, cls: type[SchedError], status: int
) -> None:
    exc = rejection_error(code, "what apply said")
    assert type(exc) is cls and exc.code == code and exc.http_status == status
    assert str(exc) == "what apply said"


def test_an_unknown_rejection_code_keeps_its_code() -> None:
    exc = rejection_error("from_a_newer_node", "m")
    assert type(exc) is SchedError and exc.code == "from_a_newer_node"


def test_an_answer_reads_back_as_its_commands_result_type() -> None:
    ack = AckMessages(tenant_id="t1", queue="q", receipts=("r",))
    assert answer_of(ack, {"status": "ok", "acked": 2}) == Acked(acked=2)
    assert Applied({"acked": 2}).to_json() == {"status": "ok", "acked": 2}
    with pytest.raises(Conflict, match=r"^m$"):
        answer_of(ack, {"status": "rejected", "code": "conflict", "message": "m"})
    claims = ClaimRuns(node_id="n1", claims=())
    assert answer_of(claims, {"status": "ok"}) == Claimed(claimed=0, rejected={})
    refused = {"status": "ok", "claimed": 1, "rejected": {"not_due": 2}}
    assert answer_of(claims, refused).rejected == {"not_due": 2}
    with pytest.raises(msgspec.ValidationError):  # a result that does not fit: loud
        answer_of(ack, {"status": "ok", "acked": "two"})


def test_every_command_type_names_its_result_type() -> None:
    for cls in CATALOGUE.values():
        assert issubclass(cls.RESULT, Done), cls
    assert ClaimBatch.RESULT is ClaimRuns.RESULT is Claimed and Barrier.RESULT is Done


@pytest.mark.parametrize(
    "cmd",
    [
        NodeHeartbeat(node_id="n1", ttl_ms=5000.0),  # type: ignore[arg-type]
        AckMessages(tenant_id="t", queue="q", receipts=("r", 7)),  # type: ignore[arg-type]
    ],
)
def test_a_command_that_does_not_fit_its_type_never_reaches_the_log(cmd: LogCommand) -> None:
    """msgspec checks types when it decodes, not when a struct is built: the proposer's
    encoding reads its bytes back, so a producer's slip fails there, not on every replica."""
    with pytest.raises(TypeError, match=f"{cmd.TYPE} does not fit its type"):
        encode_command(cmd, id="c1", ts_ms=1)


def test_a_claim_has_the_same_fields_as_an_object_and_as_an_array() -> None:
    """The dispatcher converts one into the other by field name (claim_runs while a member
    lags level 4)."""
    assert ClaimRow.__struct_fields__ == Claim.__struct_fields__


# Any JSON value a store may hold: no NaN or infinity, no lone surrogate.
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**80), 2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=("Cs",))),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(st.characters(exclude_categories=("Cs",))), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(JSON_VALUES)
def test_fast_canonical_json_writes_canonical_json_s_very_text(value: Any) -> None:
    """A kept result's text is in the digest: a receive written by msgspec on one replica and
    by the stdlib on a replica of the version before must be the same bytes."""
    for stored in (compact_json(value), msgspec.json.encode(value)):  # any writer's text
        expected = canonical_json(stored_json(stored))
        assert fast_canonical_json({"v": [stored_json_as_canonical(stored)]}) == (
            f'{{"v":[{expected}]}}'
        )


def test_an_ack_or_nack_with_outputs_or_dead_needs_level_12_and_omits_them_otherwise() -> None:
    plain = AckMessages(tenant_id="t", queue="q", receipts=("r.1",))
    assert plain.needed_level() == 1 and "outputs" not in plain.to_body()
    assert (
        AckMessages(
            tenant_id="t", queue="q", receipts=("r.1",), outputs={"r.1": "hi"}
        ).needed_level()
        == 12
    )
    nack = NackMessages(tenant_id="t", queue="q", receipts=("r.1",), error="e")
    assert nack.needed_level() == 1 and set(nack.to_body()) == {
        "tenant_id",
        "queue",
        "receipts",
        "error",
    }
    assert msgspec.structs.replace(nack, dead=True).needed_level() == 12
