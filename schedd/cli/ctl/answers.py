"""The API's answers as schedctl holds them: the JSON object the node sent (what `--json`
prints, every field kept, a newer server's too) beside the same decoded into its wire struct
(what tables and commands read). Also paging: following next_cursor across pages.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import msgspec

from schedd.errors import SchedError
from schedd.jsonbody import JSONValue

T = TypeVar("T")
Shown = TypeVar("Shown", covariant=True)  # an Answer of a struct is one of its base's too
P = TypeVar("P", bound=msgspec.Struct)
JSONObject = dict[str, JSONValue]


@dataclass(frozen=True, slots=True)
class Answer(Generic[Shown]):
    """One answer: `raw` as sent, `view` decoded (unknown fields ignored)."""

    raw: JSONObject
    view: Shown


class UnreadableAnswer(SchedError):
    """A node answered with a body that is not the contract's (a proxy's page, a cut body)."""

    code = "unreadable_answer"


def read_answer(raw: JSONValue, kind: type[T], *, request: str) -> Answer[T]:
    """The JSON answer to `request` ("GET /v1/jobs") as an Answer of `kind`."""
    if not isinstance(raw, dict):
        raise UnreadableAnswer(f"the answer to {request} is not a JSON object")
    try:
        view = msgspec.convert(raw, kind)
    except msgspec.ValidationError as exc:
        raise UnreadableAnswer(f"the answer to {request} is not the API's: {exc}") from None
    return Answer(raw, view)


def parse_json(body: bytes, *, source: str) -> JSONValue:
    """The JSON of an answer's body (stdlib json: --json prints what it reads unchanged)."""
    try:
        value: JSONValue = json.loads(body)
    except ValueError:
        raise UnreadableAnswer(f"{source} with a body that is not JSON") from None
    return value


def raw_items(page: Answer[P], key: str) -> list[JSONValue]:
    """The raw items of a page's `key` list."""
    found = page.raw.get(key)
    return found if isinstance(found, list) else []


def next_cursor(page: Answer[P]) -> str | None:
    """The page's next_cursor (None on the last page)."""
    cursor: str | None = getattr(page.view, "next_cursor", None)
    return cursor or None


def joined(pages: list[Answer[P]], key: str, cursor: str | None) -> Answer[P]:
    """Pages as one: every item of `key` in order, with `cursor` as its next_cursor."""
    every: list[JSONValue] = [item for page in pages for item in raw_items(page, key)]
    views = [view for page in pages for view in getattr(page.view, key)]
    raw: JSONObject = {key: every, "next_cursor": cursor}
    changes = {key: views, "next_cursor": cursor}
    return Answer(raw, msgspec.structs.replace(pages[-1].view, **changes))


def all_pages(
    fetch: Callable[[str | None], Answer[P]], key: str, cursor: str | None = None
) -> Answer[P]:
    """Follow `next_cursor` to the last page: {key: [every item], "next_cursor": None}."""
    pages = [fetch(cursor)]
    while next_cursor(pages[-1]):
        pages.append(fetch(next_cursor(pages[-1])))
    return joined(pages, key, None)


def filled_page(
    fetch: Callable[[str | None, int], Answer[P]], key: str, cursor: str | None, limit: int
) -> Answer[P]:
    """Follow `next_cursor` until `limit` items or the last page: a filtered page of the API
    may hold fewer than its limit (even none) and still have a next_cursor."""
    pages = [fetch(cursor, limit)]
    while next_cursor(pages[-1]) and (count := _count(pages, key)) < limit:
        pages.append(fetch(next_cursor(pages[-1]), limit - count))
    return joined(pages, key, next_cursor(pages[-1]))


def _count(pages: list[Answer[P]], key: str) -> int:
    return sum(len(getattr(page.view, key)) for page in pages)
