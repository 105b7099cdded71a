"""Hands the events apply reports (store/events.py) to whoever subscribed to their type.

node.py wires the subscribers (dispatcher, queue long polls, HTTP caller, token cache); apply
knows none of them. Runs on the thread that publishes (pysyncobj's tick thread): a subscriber
only notes the event or hands it to its own thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from schedd.store.events import Event

log = logging.getLogger(__name__)
E = TypeVar("E", bound=Event)


class Subscribers:
    """Event type -> the callbacks that want its events, each called once per publish with
    every event of that type, in the order apply reported them."""

    def __init__(self) -> None:
        self._by_type: dict[type[Any], list[Callable[[list[Any]], None]]] = {}

    def subscribe(self, kind: type[E], callback: Callable[[list[E]], None]) -> None:
        self._by_type.setdefault(kind, []).append(callback)

    def publish(self, events: Iterable[Event]) -> None:
        grouped: dict[type[Any], list[Event]] = {}
        for event in events:
            grouped.setdefault(type(event), []).append(event)
        for kind, batch in grouped.items():
            for callback in self._by_type.get(kind, ()):
                try:
                    callback(batch)
                except Exception:  # one subscriber's bug must not stop the others or apply
                    log.exception("event subscriber failed kind=%s", kind.__name__)
