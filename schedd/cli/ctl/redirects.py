"""How schedctl follows a request to the cell that owns it (issue 35): a node's `wrong_cell`
307 answer read and its URLs checked, and the cells a request went through counted.

urllib never follows a redirect for schedctl: its handler resends no POST body on a 307 and
keeps the Authorization header toward any host. Only a wrong_cell body is followed, by its URL
list; any other 3xx is an error. Nothing here sends a request.
"""

from __future__ import annotations

import json
import urllib.parse

from schedd.errors import ClusterUnavailable, SchedError

MAX_HOPS = 3  # cells a request may be sent on to (a move is one hop; two is a move in flight)


class WrongCell(Exception):
    """A node answered 307 wrong_cell: the request was NOT executed; `urls` serve `cell`."""

    def __init__(self, cell: str, urls: list[str], revision: int | None, source: str) -> None:
        super().__init__(f"{source} sent the request on to cell {cell}")
        self.cell = cell
        self.urls = urls
        self.revision = revision
        self.source = source


def wrong_cell_of(raw: bytes, base: str) -> WrongCell | None:
    """The wrong_cell answer in a 3xx body from `base`, or None for any other body. Its URLs are
    kept only when http(s)://host[:port] with no path, and only https:// ones from an https://
    node (the token never goes from TLS to plain text)."""
    try:
        error = json.loads(raw)["error"]
        code, cell, urls = error["code"], error["cell"], error["urls"]
    except (ValueError, KeyError, TypeError):
        return None
    if code != "wrong_cell" or not isinstance(cell, str) or not isinstance(urls, list):
        return None
    revision = error.get("directory_revision")
    revision = revision if isinstance(revision, int) and not isinstance(revision, bool) else None
    is_tls = base.startswith("https://")
    usable = [url.rstrip("/") for url in urls if _is_node_url(url, is_tls=is_tls)]
    return WrongCell(cell, usable, revision, base)


def not_followed(status: int, location: str | None, base: str) -> SchedError:
    """A 3xx that is not a cell's wrong_cell answer: an error, never followed."""
    to = f" to {location}" if location else ""
    return SchedError(
        f"{base} answered HTTP {status} (a redirect{to}); schedctl follows only a schedd "
        "node's wrong_cell answer: check the node URL"
    )


class Hops:
    """The cells one request was sent on to: a loop, or more than MAX_HOPS, is an error."""

    def __init__(self) -> None:
        self.cells: list[str] = []

    def follow(self, moved: WrongCell) -> list[str]:
        """The URLs to send the request to next (the request was not executed)."""
        if moved.cell in self.cells or len(self.cells) >= MAX_HOPS:
            path = " -> ".join([*self.cells, moved.cell])
            how = (
                "round in a loop" if moved.cell in self.cells else f"on more than {MAX_HOPS} times"
            )
            raise ClusterUnavailable(
                f"the cells sent the request {how} ({path}): their directories disagree, as "
                "during a range move; nothing was done, try again in a moment"
            )
        self.cells.append(moved.cell)
        if not moved.urls:
            raise ClusterUnavailable(
                f"{moved.source} sent the request on to cell {moved.cell} without a usable "
                "http(s) URL for it; nothing was done"
            )
        return moved.urls


def _is_node_url(url: object, *, is_tls: bool) -> bool:
    if not isinstance(url, str):
        return False
    parts = urllib.parse.urlsplit(url.rstrip("/"))
    schemes = ("https",) if is_tls else ("http", "https")
    try:
        return (
            parts.scheme in schemes
            and bool(parts.hostname)
            and parts.path == ""
            and not parts.query
            and not parts.fragment
            and parts.username is None
            and (parts.port is None or parts.port > 0)
        )
    except ValueError:  # a port that is not a number
        return False
