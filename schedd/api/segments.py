"""Closed history segments, node to node (admin): the manifest of what this node offers, and
one file, with HTTP Range so an interrupted copy resumes (history/fetcher.py is the reader).

Only a segment the log lists as closed, whose file is here, is ever served: a closed file is
immutable, so a byte range asked today is the same bytes asked tomorrow."""

from __future__ import annotations

import re
from pathlib import Path

from aiohttp import web

from schedd.api.context import CONTEXT, ApiContext
from schedd.api.http import json_response, principal
from schedd.errors import NotFound
from schedd.history.checksums import cached_sha256
from schedd.store import segments
from schedd.store.segment_reads import closed_segments, is_closed_segment
from schedd.wire.segments import SEGMENT_NAME, SegmentManifest, SegmentOffer

_NAME = re.compile(SEGMENT_NAME)


def _offers(ctx: ApiContext, data_dir: Path) -> SegmentManifest:
    """Runs on a reader thread: a stat and a small sidecar read per closed segment."""
    offers, missing = [], 0
    for segment in ctx.reads.run(closed_segments):
        path = segments.segment_path(data_dir, segment.name)
        sha256 = cached_sha256(path)
        if sha256 is not None:
            offers.append(SegmentOffer(name=segment.name, bytes=path.stat().st_size, sha256=sha256))
        elif not path.exists():
            missing += 1
    return SegmentManifest(node_id=ctx.node_id, segments=offers, missing=missing)


async def list_segments(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT]
    principal(request).require_admin()
    data_dir = ctx.reads.history.data_dir
    return json_response(await ctx.reads.read(lambda conn: _offers(ctx, data_dir)))


async def get_segment(request: web.Request) -> web.StreamResponse:
    ctx = request.app[CONTEXT]
    principal(request).require_admin()
    name = request.match_info["name"]
    try:
        if not _NAME.fullmatch(name):
            raise segments.SegmentName(name)
        path = segments.segment_path(ctx.reads.history.data_dir, name)
    except segments.SegmentName:  # not a family's name: no such segment
        raise NotFound(f"no closed segment named {name!r}") from None
    if not await ctx.reads.read(lambda conn: is_closed_segment(conn, name)) or not path.exists():
        raise NotFound(f"no closed segment named {name!r} on this node")
    return web.FileResponse(path, headers={"Content-Type": "application/vnd.sqlite3"})
