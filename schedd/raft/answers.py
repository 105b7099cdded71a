"""What apply hands back through pysyncobj to the proposer that waits: the result, tagged with
the entry it is for.

pysyncobj calls a proposer's callback with the result of whatever entry it applied at the
index (and term) it noted for the proposal. Should that ever be another entry (chaos seed 2203:
a create answered 201 with the result of another create, its own never applied), a proposer
that took the result as its own would acknowledge a write that did not happen. So the result
carries the entry's length and CRC-32, and the proposer takes only a result for its own bytes.
"""

from __future__ import annotations

import zlib
from typing import Any


def tagged(blob: bytes, result: dict[str, Any]) -> dict[str, Any]:
    """The answer for the entry `blob` (what the replicated apply returns)."""
    return {"entry": _tag(blob), "result": result}


def result_for(blob: bytes, answer: Any) -> dict[str, Any] | None:
    """The result in `answer` if it is the answer for `blob`, else None."""
    if not isinstance(answer, dict) or answer.get("entry") != _tag(blob):
        return None
    result = answer.get("result")
    return result if isinstance(result, dict) else None


def _tag(blob: bytes) -> list[int]:
    return [len(blob), zlib.crc32(blob)]
