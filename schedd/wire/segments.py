"""The answer of GET /v1/admin/segments: the closed history segments one node holds and
offers its peers (api/segments.py encodes it, history/fetcher.py reads a peer's). Unlike
most answers, its constraints are enforced when it is decoded: the reader is another node
deciding what to download."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

SEGMENT_NAME = r"^[a-z]{1,16}-[0-9]{10}$"  # <family>-<YYYYMMDDHH> (store/segments.py)
MAX_SEGMENT_BYTES = 2**50


class SegmentOffer(msgspec.Struct, frozen=True, kw_only=True):
    """One closed segment file, immutable since it closed."""

    name: Annotated[str, Meta(pattern=SEGMENT_NAME, examples=["runs-2026120514"])]
    bytes: Annotated[int, Meta(ge=0, le=MAX_SEGMENT_BYTES)]
    sha256: Annotated[
        str, Meta(pattern=r"^[0-9a-f]{64}$", description="The sha256 of the file's bytes.")
    ]


class SegmentManifest(msgspec.Struct, frozen=True, kw_only=True):
    node_id: str
    segments: Annotated[
        list[SegmentOffer],
        Meta(
            description="The closed segments this node holds whose sha256 it has taken, newest "
            "first; one it is still fetching or hashing is not listed yet."
        ),
    ]
    missing: Annotated[
        int, Meta(ge=0, description="Closed segments the log lists that this node lacks.")
    ]
