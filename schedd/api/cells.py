"""Cells on the API (docs/scaling.md §4): the redirect of a request for another cell's
partition, and GET /v1/cells, the directory this node last read.

Without `[cells]` (ctx.cells None) nothing here changes a request."""

from __future__ import annotations

from aiohttp import web

from schedd.api.context import CONTEXT
from schedd.api.forward import is_forwardable
from schedd.api.http import PRINCIPAL, Handler, json_response
from schedd.cells.directory import Directory
from schedd.errors import WrongCell
from schedd.model import partition_of
from schedd.store import queries
from schedd.wire.cluster import CellEntry, Cells

DEFAULT_CELL = "default"  # the one cell of a cluster without [cells]
_BY_KEY = "/v1/jobs/by-key/"
_DEADLETTER = "/v1/deadletters/"


def request_partition(request: web.Request, partitions: int) -> int | None:
    """The partition a request names (a job by id or key, a dead letter), or None."""
    info = request.match_info
    job_id = info.get("job_id")
    if job_id is not None:
        return partition_of(job_id, partitions)
    if "id" in info and request.path.startswith(_DEADLETTER):
        return partition_of(info["id"].split(":", 1)[0], partitions)
    if "key" in info and request.path.startswith(_BY_KEY):
        found = request.get(PRINCIPAL)
        tenant_id = None if found is None else found.tenant_id
        ctx = request.app[CONTEXT]
        if tenant_id is not None and ctx.cells is not None:
            return ctx.cells.key_partition(tenant_id, info["key"])
    return None


@web.middleware
async def cells_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Serve a request for this cell's partitions; answer another cell's with wrong_cell (a
    307 the errors middleware writes), or send it on for the web console (api/forward.py);
    one no cell serves is a 503."""
    ctx = request.app[CONTEXT]
    cells = ctx.cells
    if cells is None:
        return await handler(request)
    partition = request_partition(request, cells.partitions)
    if partition is not None:
        try:
            cells.check(partition)
        except WrongCell as moved:
            if not is_forwardable(request):
                raise
            # Sent on before any handler read the body: the forward reads it whole. A
            # handler's own wrong_cell (a key of another cell's) is answered as the 307.
            return await ctx.forwarder.forward(request, moved, cells.cell)
    return await handler(request)


async def get_cells(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    if ctx.cells is not None:
        directory = ctx.cells.directory or Directory(ctx.cells.partitions, ())
        return json_response(_cells(directory, ctx.cells.cell))
    urls = sorted({api for _, api, _ in await ctx.reads.read(queries.list_nodes) if api})
    entry = CellEntry(cell=DEFAULT_CELL, ranges=[(0, ctx.partitions - 1)], urls=urls)
    return json_response(
        Cells(directory_revision=0, partitions=ctx.partitions, self_=DEFAULT_CELL, cells=[entry])
    )


def _cells(directory: Directory, own: str) -> Cells:
    names = directory.cells()
    names += [cell for cell in sorted(directory.urls) if cell not in names]
    entries = [
        CellEntry(
            cell=cell, ranges=directory.ranges_of(cell), urls=list(directory.urls.get(cell, ()))
        )
        for cell in names
    ]
    return Cells(
        directory_revision=directory.revision,
        partitions=directory.partitions,
        self_=own,
        cells=entries,
    )
