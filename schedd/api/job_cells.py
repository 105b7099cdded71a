"""Where a new or changed job lives when this cluster is one cell of several (docs/scaling.md
§4): the partition its id is drawn in, and the changes that would move it out of its cell,
refused. Without cells (ctx.cells None) every id is `new_id`'s and nothing is refused."""

from __future__ import annotations

from collections.abc import Callable

from schedd.api.context import ApiContext
from schedd.cells.view import CellView
from schedd.errors import InvalidDependency, InvalidRequest
from schedd.jobspec import JobSpec
from schedd.model import partition_of


def cell_job_id(
    ctx: ApiContext,
    tenant_id: str,
    spec: JobSpec,
    new_id: Callable[[], str],
    idempotency_key: str | None = None,
) -> str:
    """A new job's id: `new_id`'s, and with cells drawn into the partition that decides where
    the job lives (cell_partition), or into this cell's range when nothing does; WrongCell when
    another cell serves that partition, 503 when this cell serves nothing yet."""
    cells = ctx.cells
    if cells is None:
        return new_id()
    partition = cell_partition(cells, tenant_id, spec, idempotency_key)
    if partition is None:
        cells.check(cells.owned_partitions()[0])
        return cells.draw_job_id(new_id)
    cells.check(partition)
    return cells.draw_job_id(new_id, partition=partition)


def cell_partition(
    cells: CellView, tenant_id: str, spec: JobSpec, idempotency_key: str | None
) -> int | None:
    """With cells, the partition a new job's id is drawn in (docs/scaling.md §4): a keyed
    job's key's (its uniqueness is one cell's apply decision); an `after` job's upstream's
    (the hook is one apply: §2 "Run B after A across cells", option a); a create with an
    Idempotency-Key, that key's (a retry through any cell reaches the cell that keeps it);
    None: anywhere in the receiving cell. A key and an upstream of different cells is a 422:
    the job could not run after its upstream."""
    upstream = None if spec.upstream is None else spec.upstream.job_id
    if spec.key is not None:
        partition = cells.key_partition(tenant_id, spec.key)
        if upstream is not None:
            check_same_cell(cells, partition, upstream, f"its key {spec.key!r}")
        return partition
    if upstream is not None:
        return partition_of(upstream, cells.partitions)
    if idempotency_key is not None:
        return cells.key_partition(tenant_id, IDEMPOTENCY_PREFIX + idempotency_key)
    return None


IDEMPOTENCY_PREFIX = "idempotency:"  # an Idempotency-Key's partition: apart from job keys'


def check_same_cell(cells: CellView, partition: int, upstream: str, what: str) -> None:
    """InvalidDependency unless the upstream's partition and `partition` have one owner."""
    directory = cells.directory
    if directory is None:
        return  # serves nothing yet: the create's check answers 503

    def cell_of(p: int) -> str:
        owner = directory.owner(p)
        return "(none)" if owner is None else owner.cell

    mine, theirs = cell_of(partition), cell_of(partition_of(upstream, cells.partitions))
    if mine != theirs:
        raise InvalidDependency(
            "schedule.after.job_id",
            f"{upstream!r} lives in cell {theirs}, {what} in cell {mine}: with cells a job runs "
            "after a job of its own cell only",
        )


def check_key_partition(ctx: ApiContext, tenant_id: str, job_id: str, spec: JobSpec) -> None:
    """With cells, a key's job lives in the key's partition (its uniqueness is one cell's
    apply decision): a change giving a job a key of another partition is refused."""
    if ctx.cells is None or spec.key is None:
        return
    partition = ctx.cells.key_partition(tenant_id, spec.key)
    if partition != partition_of(job_id, ctx.partitions):
        raise InvalidRequest(
            "key",
            f"{spec.key!r} belongs to partition {partition}, not this job's: with cells a key "
            "is given to a job when it is created (PUT /v1/jobs/by-key/{key})",
        )


def check_upstream_cell(ctx: ApiContext, job_id: str, spec: JobSpec) -> None:
    """With cells, a job runs after a job of its own cell only (its id cannot move): a change
    giving it an upstream in another cell is refused."""
    if ctx.cells is not None and spec.upstream is not None:
        partition = partition_of(job_id, ctx.partitions)
        check_same_cell(ctx.cells, partition, spec.upstream.job_id, "this job")
