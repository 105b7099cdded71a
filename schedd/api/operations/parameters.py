"""The parameters routes share, and who may call a route (api/operation.py's Access)."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from schedd.api.audit import MAX_JOB_ID_CHARS
from schedd.api.job_filters import MAX_HOST_CHARS, MAX_NAME_CHARS
from schedd.api.operation import Access, Parameter
from schedd.calendars import NAME_PATTERN as CALENDAR_NAME_PATTERN
from schedd.model import JobStatus
from schedd.targets import CONNECTION_NAME as CONNECTION_NAME_TEXT
from schedd.targets import TARGET_TYPES
from schedd.wire.deadletters import Fingerprint
from schedd.wire.fields import InstantInput
from schedd.wire.jobs import JobKey
from schedd.wire.queues import QueueName

NonEmpty = Annotated[str, Meta(min_length=1)]
PRINTABLE_KEY = r"^[\x21-\x7e]{1,255}$"

X_TENANT = Parameter(
    component="XTenant",
    name="X-Tenant",
    where="header",
    kind=str,
    description="With the admin token: the tenant_id to act for (1-64 ASCII characters, else "
    "400; required on tenant routes; an unknown tenant is 404). Ignored with a tenant token.",
)
IDEMPOTENCY_KEY = Parameter(
    component="IdempotencyKey",
    name="Idempotency-Key",
    where="header",
    kind=Annotated[str, Meta(pattern=PRINTABLE_KEY)],
    description="Scoped per tenant, kept at least 24 h. The same key and body answer the first "
    "job again (201, same job_id); the same key with another body is 422 idempotency_mismatch.",
)
LIMIT = Parameter(
    component="Limit",
    name="limit",
    where="query",
    kind=Annotated[int, Meta(ge=1, le=1000, extra_json_schema={"default": 100})],
)
CURSOR = Parameter(
    component="Cursor",
    name="cursor",
    where="query",
    kind=Annotated[str, Meta(pattern="^[A-Za-z0-9_-]{0,400}$")],
    description="Opaque: the next_cursor of the previous page, absent or empty for the first "
    "page. A malformed cursor is 400.",
)
NODE_NAME = Parameter(
    component="NodeName",
    name="node",
    where="path",
    kind=NonEmpty,
    description="A member's node id (n3) or Raft address (10.0.0.3:9701).",
)
CONSOLE_FILE = Parameter(
    component="ConsoleFile",
    name="path",
    where="path",
    kind=Annotated[str, Meta(pattern="^[A-Za-z0-9_./-]*$")],
    description="A file of the console (app.js, pages/jobs.js); empty for index.html.",
)
JOB_ID = Parameter(
    component="JobId", name="job_id", where="path", kind=NonEmpty, description="A job_id (job_...)."
)
TENANT_ID = Parameter(
    component="TenantId", name="tenant_id", where="path", kind=NonEmpty, description="A tenant_id."
)
QUEUE_NAME = Parameter(
    component="QueueName", name="name", where="path", kind=QueueName, description="A queue name."
)
DEADLETTER_ID = Parameter(
    component="DeadLetterId",
    name="id",
    where="path",
    kind=NonEmpty,
    description="A dead letter's id.",
)
DEADLETTER_GROUP_BY = Parameter(
    component="DeadLetterGroupBy",
    name="group_by",
    where="query",
    kind=Annotated[str, Meta(extra_json_schema={"enum": ["error"]})],
    description="error: answer the dead letters grouped by error fingerprint "
    "({groups: [{fingerprint, example, count, first_at, last_at}], partial}) instead of a page; "
    "not with cursor or fingerprint.",
)
DEADLETTER_FINGERPRINT = Parameter(
    component="DeadLetterFingerprint",
    name="fingerprint",
    where="query",
    kind=Fingerprint,
    description="Only the dead letters of this group (a fingerprint of group_by=error).",
)
CONNECTION_NAME = Parameter(
    component="ConnectionName",
    name="name",
    where="path",
    kind=Annotated[str, Meta(pattern=f"^{CONNECTION_NAME_TEXT.pattern}$")],
    description="A connection's name.",
)
JOB_STATUS = Parameter(component="JobStatus", name="status", where="query", kind=JobStatus)
JOB_LABEL = Parameter(
    component="JobLabel",
    name="label",
    where="query",
    kind=Annotated[
        list[Annotated[str, Meta(pattern=r"^[a-z0-9_./-]{1,63}=.{0,200}$")]],
        Meta(max_length=16),
    ],
    description="NAME=VALUE: only jobs with this label; repeat it for jobs with every one "
    "(read through the labels' index, not a scan).",
)
JOB_KEY = Parameter(
    component="JobKey",
    name="key",
    where="path",
    kind=JobKey,
    description="A job's stable key, percent-encoded (a / as %2F; a raw / is accepted too).",
)
DRY_RUN = Parameter(
    component="DryRun",
    name="dry_run",
    where="query",
    kind=bool,
    description="true: validate and answer what the request would do; change nothing.",
)
WITH_OUTPUTS = Parameter(
    component="WithOutputs",
    name="outputs",
    where="query",
    kind=bool,
    description="true: each attempt's `output` as its consumer reported it (null otherwise); "
    "a page holds at most 1,000,000 characters of outputs and ends early to stay within it.",
)
JOB_TARGET_TYPE = Parameter(
    component="JobTargetType",
    name="target_type",
    where="query",
    kind=Annotated[str, Meta(extra_json_schema={"enum": list(TARGET_TYPES)})],
    description="Only jobs with this target type.",
)
JOB_QUEUE = Parameter(
    component="JobQueue",
    name="queue",
    where="query",
    kind=QueueName,
    description="Only jobs delivering to this built-in queue (exact name).",
)
JOB_HOST = Parameter(
    component="JobHost",
    name="host",
    where="query",
    kind=Annotated[str, Meta(min_length=1, max_length=MAX_HOST_CHARS)],
    description="Only jobs with an http target whose URL's host is this one, compared without "
    "case; no port (an IPv6 address with or without brackets).",
)
JOB_NAME = Parameter(
    component="JobName",
    name="name",
    where="query",
    kind=Annotated[str, Meta(min_length=1, max_length=MAX_NAME_CHARS)],
    description="Only jobs whose name contains this text, compared without case.",
)
JOB_NEXT_RUN_AFTER = Parameter(
    component="JobNextRunAfter",
    name="next_run_after",
    where="query",
    kind=InstantInput,
    description="Only jobs whose next_run_at is at or after this instant (a job without a next "
    "run never matches).",
)
JOB_NEXT_RUN_BEFORE = Parameter(
    component="JobNextRunBefore",
    name="next_run_before",
    where="query",
    kind=InstantInput,
    description="Only jobs whose next_run_at is before this instant, which must be later than "
    "next_run_after (a job without a next run never matches).",
)
JOB_FAILING = Parameter(
    component="JobFailing",
    name="failing",
    where="query",
    kind=bool,
    description="true: only jobs whose consecutive_failures is above 0 (the newest of their "
    "newest 50 runs that succeeded or died, died); false: no filter.",
)
AUDIT_JOB_ID = Parameter(
    component="AuditJobId",
    name="job_id",
    where="query",
    kind=Annotated[str, Meta(pattern=rf"^[\x21-\x7e]{{1,{MAX_JOB_ID_CHARS}}}$")],
    description="Only this job's records (another tenant's job has none for a tenant token).",
)

TENANT = Access(
    schemes=("tenantToken", "adminToken"),
    errors=(400, 401, 403, 404, 503),  # X-Tenant alone can give 400 and 404
    parameters=(X_TENANT,),
)
ANY_TOKEN = Access(  # any valid token; the admin may name a tenant
    schemes=("tenantToken", "adminToken"), errors=(400, 401, 404, 503), parameters=(X_TENANT,)
)
ADMIN = Access(schemes=("adminToken",), errors=(401, 403, 503))
PUBLIC = Access(schemes=(), errors=())
CALENDAR_NAME = Parameter(
    component="CalendarName",
    name="name",
    where="path",
    kind=Annotated[str, Meta(pattern=CALENDAR_NAME_PATTERN)],
    description="A calendar's name.",
)
