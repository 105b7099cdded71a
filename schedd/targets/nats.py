"""The nats target kind: a message published to a JetStream subject on the tenant's NATS (its
deliverer: schedd/delivery/nats.py)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from msgspec import Meta

from schedd.bodies import excerpt
from schedd.errors import InvalidRequest
from schedd.model import BrokerTarget
from schedd.targets.kind import BrokerInput, CliFlag, TargetKind, stored_text

_TOKEN = re.compile(r"[\x21-\x7e\x80-\U0010ffff]+")  # printable, no whitespace
_SCHEMA_TOKEN = r"[^\s.*>\u0000-\u001f\u007f]+"


@dataclass(frozen=True, slots=True, kw_only=True)
class NatsTarget(BrokerTarget):
    """Publish runs to a JetStream `subject` (Nats-Msg-Id = the idempotency key)."""

    subject: str


Subject = Annotated[
    str,
    Meta(
        max_length=255,
        pattern=f"^{_SCHEMA_TOKEN}(\\.{_SCHEMA_TOKEN})*$",
        description="A JetStream subject: dot-separated tokens, no wildcards (* >) or "
        "whitespace, at most 255 bytes.",
    ),
]
_SUBJECT = (
    "must be dot-separated non-empty tokens of printable characters without spaces "
    "or the wildcards * and >, at most 255 bytes, got {value!r}"
)


class NatsInput(BrokerInput, tag="nats", kw_only=True):
    """A nats target: runs published to a JetStream subject through a connection."""

    subject: Subject

    field_messages: ClassVar[Mapping[str, str]] = {
        **BrokerInput.field_messages,
        "subject": _SUBJECT,
    }

    def target(self) -> NatsTarget:
        subject = self.subject
        if len(subject.encode()) > 255 or not all(map(_is_subject_token, subject.split("."))):
            raise InvalidRequest("target.subject", _SUBJECT.replace("{value!r}", excerpt(subject)))
        return NatsTarget(connection=self.connection, subject=subject)


def _is_subject_token(token: str) -> bool:
    return (
        _TOKEN.fullmatch(token) is not None
        and token.isprintable()
        and "*" not in token
        and ">" not in token
    )


def load(value: Mapping[str, object]) -> NatsTarget:
    return NatsTarget(
        connection=stored_text(value, "connection"),
        subject=stored_text(value, "subject"),
    )


def describe(target: Mapping[str, Any]) -> str:
    return f"nats {target['connection']} {target['subject']}"


KIND = TargetKind(
    name="nats",
    struct=NatsTarget,
    log_level=3,
    connection="nats",
    schemes={"nats": 4222, "tls": 4222},
    input=NatsInput,
    load=load,
    describe=describe,
    flag=CliFlag(
        flag="--nats",
        metavar="CONN/SUBJECT",
        help="Publish runs to the JetStream SUBJECT through connection CONN.",
        fields=("subject",),
    ),
    delivery="schedd.delivery.nats",
)
