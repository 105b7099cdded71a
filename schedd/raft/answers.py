"""What apply hands back through pysyncobj to the proposer that waits: the result, with the
entry it is for.

pysyncobj calls a proposer's callback with the result of whatever entry it applied at the
index (and term) it noted for the proposal. Should that ever be another entry (suspected in
chaos seed 2203: a create answered 201 whose command was applied nowhere), a proposer that took
the result as its own would acknowledge a write that did not happen. So the answer keeps the
entry's bytes (a reference, nothing copied or hashed on the replicas where nobody waits), and
the proposer takes only a result whose entry equals the bytes it sent.
"""

from __future__ import annotations

from typing import NamedTuple

from schedd.jsonbody import JSONObject


class Answer(NamedTuple):
    """What the replicated apply returns: the entry applied and its result."""

    entry: bytes
    result: JSONObject


def result_for(blob: bytes, answer: object) -> JSONObject | None:
    """The result in `answer` if it is the answer for `blob`, else None."""
    if not isinstance(answer, Answer) or answer.entry != blob:
        return None
    return answer.result
