"""Group commit of single creates (api/creates.py): concurrent creates of a tenant become one
command, each caller gets its own outcome, and the command's form follows the log level."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from typing import Any, cast

import pytest

from schedd.api.context import ApiContext
from schedd.api.creates import CreateGroups, NewItem, create_command, encoded_bytes
from schedd.errors import NoLeader
from schedd.jobspec import parse_job, spec_to_json
from schedd.peers import PeerReport, PeerReports
from schedd.store.command import MAX_COMMAND_BYTES, compact_json, encode_command
from schedd.store.commands import AddJobs, CreateJobs, LogCommand, R, answer_of
from schedd.store.results import JobOutcome

SPEC = parse_job(
    {"schedule": {"run_at": "2030-01-01T00:00:00Z"}, "target": {"type": "queue", "name": "q"}},
    now_ms=1_893_369_600_000,  # 2029-12-31T00:00:00Z
)


def item(job_id: str, key: str | None = None) -> NewItem:
    stored = spec_to_json(SPEC)
    return NewItem(
        job_id=job_id,
        partition=1,
        spec=SPEC,
        stored=stored,
        spec_text=compact_json(stored),
        next_run_at_ms=1,
        next_fire_at_ms=1,
        idempotency_key=key,
        request_hash=None if key is None else "h",
        created_at_ms=900,
    )


@dataclass
class FakeProposer:
    """Answers add_jobs as apply would when every job is created, after a Raft round."""

    commands: list[LogCommand[Any]] = field(default_factory=list)
    error: Exception | None = None

    async def propose(self, cmd: LogCommand[R], *, now_ms: int | None = None) -> R:
        self.commands.append(cmd)
        await asyncio.sleep(0.01)
        if self.error is not None:
            raise self.error
        assert isinstance(cmd, AddJobs)
        existing = [[i, "job_first"] for i, j in enumerate(cmd.jobs) if j.idempotency_key]
        created = len(cmd.jobs) - len(existing)
        return answer_of(cmd, {"status": "ok", "created": created, "existing": existing})


@dataclass
class FakeStorage:
    peers: PeerReports

    def problem(self) -> str | None:
        return None  # disk space is fine


@dataclass
class FakeContext:
    proposer: FakeProposer
    storage: FakeStorage | None = None
    clock_ms: Any = lambda: 1_000


def context(proposer: FakeProposer, storage: FakeStorage | None = None) -> ApiContext:
    return cast(ApiContext, FakeContext(proposer, storage))


def test_concurrent_creates_of_a_tenant_share_one_command() -> None:
    proposer = FakeProposer()
    ctx, groups = context(proposer), CreateGroups()

    async def run() -> list[dict[str, Any]]:
        calls = [groups.create(ctx, "t1", "tenant:t1", item(f"job_{i}")) for i in range(20)]
        calls.append(groups.create(ctx, "t1", "tenant:t1", item("job_k", key="k")))
        return await asyncio.gather(*calls)

    answers = asyncio.run(run())
    assert len(proposer.commands) == 1
    [cmd] = proposer.commands
    assert isinstance(cmd, AddJobs) and len(cmd.jobs) == 21
    assert [job.created_at_ms for job in cmd.jobs] == [900] * 21  # each job's own, not 1,000
    assert answers[:20] == [JobOutcome(job_id=f"job_{i}", created=True) for i in range(20)]
    assert answers[20] == JobOutcome(job_id="job_first", created=False)


def test_creates_that_arrive_while_a_command_is_in_flight_go_in_the_next_one() -> None:
    proposer = FakeProposer()
    ctx, groups = context(proposer), CreateGroups()

    async def run() -> None:
        first = asyncio.ensure_future(groups.create(ctx, "t1", "a", item("job_1")))
        await asyncio.sleep(0.002)  # the first command is in flight now
        later = [groups.create(ctx, "t1", "a", item(f"job_{i}")) for i in range(2, 6)]
        other = groups.create(ctx, "t2", "b", item("job_x"))  # another tenant: its own
        await asyncio.gather(first, *later, other)

    asyncio.run(run())
    sizes = sorted((c.tenant_id, len(c.jobs)) for c in proposer.commands)  # type: ignore[attr-defined]
    assert sizes == [("t1", 1), ("t1", 4), ("t2", 1)]


def test_a_failed_command_fails_every_caller_of_its_group() -> None:
    proposer = FakeProposer(error=NoLeader("no leader"))
    ctx, groups = context(proposer), CreateGroups()

    async def run() -> list[Any]:
        calls = [groups.create(ctx, "t1", "a", item(f"job_{i}")) for i in range(3)]
        return await asyncio.gather(*calls, return_exceptions=True)

    assert [type(a) for a in asyncio.run(run())] == [NoLeader] * 3


def test_until_every_member_applies_level_5_each_create_goes_alone_at_its_own_time() -> None:
    """create_jobs writes its command's time as created_at: a group would give a job a time
    later than the one its next run was computed from."""
    peers = PeerReports("n1")
    peers.record({"n2": PeerReport(log_level=4)}, ["n1", "n2"])
    proposer = OldProposer()
    ctx, groups = context(proposer, FakeStorage(peers)), CreateGroups()

    async def run() -> list[dict[str, Any]]:
        calls = [groups.create(ctx, "t1", "a", item(f"job_{i}")) for i in range(3)]
        return await asyncio.gather(*calls)

    answers = asyncio.run(run())
    assert [type(c) for c in proposer.commands] == [CreateJobs] * 3
    assert proposer.times == [900] * 3
    assert answers == [JobOutcome(job_id=f"job_{i}", created=True) for i in range(3)]


@dataclass
class OldProposer:
    """Answers create_jobs, recording each command's time."""

    commands: list[LogCommand[Any]] = field(default_factory=list)
    times: list[int | None] = field(default_factory=list)

    async def propose(self, cmd: LogCommand[R], *, now_ms: int | None = None) -> R:
        self.commands.append(cmd)
        self.times.append(now_ms)
        await asyncio.sleep(0)
        assert isinstance(cmd, CreateJobs)
        results = [{"job_id": j.job_id, "created": True} for j in cmd.jobs]
        return answer_of(cmd, {"status": "ok", "results": results})


@pytest.mark.parametrize(("peer_level", "form"), [(4, CreateJobs), (5, AddJobs)])
def test_the_form_follows_the_members_log_level(peer_level: int, form: type) -> None:
    peers = PeerReports("n1")
    peers.record({"n2": PeerReport(log_level=peer_level)}, ["n1", "n2"])
    ctx = context(FakeProposer(), FakeStorage(peers))
    cmd = create_command(ctx, "t1", "a", [item("job_1")])
    assert isinstance(cmd, form)
    if isinstance(cmd, CreateJobs):
        assert cmd.jobs[0].spec == item("job_1").stored


def test_a_group_stays_under_the_command_cap_even_when_its_specs_escape_long() -> None:
    proposer = FakeProposer()
    ctx, groups = context(proposer), CreateGroups()
    quotes = replace(item("job_0"), spec_text='{"payload":"' + '\\"' * 250 + '"}')
    assert encoded_bytes(quotes) > 2 * len(quotes.spec_text)  # escaped: twice its bytes

    async def run() -> None:
        calls = [
            groups.create(ctx, "t1", "a", replace(quotes, job_id=f"job_{i:04}"))
            for i in range(1000)
        ]
        await asyncio.gather(*calls)

    asyncio.run(run())
    assert sum(len(c.jobs) for c in proposer.commands) == 1000  # type: ignore[attr-defined]
    assert len(proposer.commands) == 2  # 1,000 such jobs are over the cap in one command
    for cmd in proposer.commands:
        assert len(encode_command(cmd, id="x", ts_ms=1)) <= MAX_COMMAND_BYTES
