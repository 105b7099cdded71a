"""Node addresses as other machines reach them."""

from __future__ import annotations

import urllib.parse


def reachable_api_url(api_url: str, raft_address: str) -> str:
    """A node's registered API URL as reachable from elsewhere: a wildcard listen address
    (0.0.0.0, ::) is replaced by the host of its Raft address, which peers reach by definition."""
    parts = urllib.parse.urlsplit(api_url)
    if parts.hostname not in ("0.0.0.0", "::"):
        return api_url
    host = raft_address.rsplit(":", 1)[0]
    return f"{parts.scheme}://{host}:{parts.port}"
