"""How a handler's end becomes its message's ack or nack: Ack, a return value that keeps the
attempt's output, and Settlement, what the worker sends. No I/O."""

from __future__ import annotations

from dataclasses import dataclass

from schedd.worker.errors import Nack
from schedd.worker.output import bound_output
from schedd.worker.protocol import nack_text


@dataclass(frozen=True, slots=True)
class Ack:
    """Return `Ack(output)` from a handler to ack its message and keep `output` with the attempt
    (`schedctl runs --output` shows it; bounded as output.bound_output does). Any other return
    value acks without output."""

    output: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Settlement:
    """An ack (`error` None) or a nack, with the attempt's output; `is_dead` ends the run now."""

    error: str | None = None
    output: str | None = None
    is_dead: bool = False

    @classmethod
    def of_return(cls, value: object) -> Settlement:
        """A handler returned `value`: an ack."""
        if isinstance(value, Ack) and value.output:
            return cls(output=bound_output(value.output))
        return cls()

    @classmethod
    def of_exception(cls, exc: BaseException) -> Settlement:
        """A handler raised `exc`: a nack (dead at once for `Nack(..., is_dead=True)`)."""
        if not isinstance(exc, Nack):
            return cls(error=nack_text(exc))
        output = bound_output(exc.output) if exc.output else None
        return cls(error=nack_text(exc), output=output, is_dead=exc.is_dead)

    @property
    def action(self) -> str:
        return "ack" if self.error is None else "nack"
