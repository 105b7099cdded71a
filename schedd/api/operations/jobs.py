"""The job routes: jobs, their runs, schedule preview."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from schedd.api import backfill, job_keys, jobs, schedules, versions
from schedd.api.operation import Answer, Operation
from schedd.api.operations.parameters import (
    ANY_TOKEN,
    CURSOR,
    DRY_RUN,
    IDEMPOTENCY_KEY,
    JOB_FAILING,
    JOB_HOST,
    JOB_ID,
    JOB_KEY,
    JOB_LABEL,
    JOB_NAME,
    JOB_NEXT_RUN_AFTER,
    JOB_NEXT_RUN_BEFORE,
    JOB_QUEUE,
    JOB_STATUS,
    JOB_TARGET_TYPE,
    LIMIT,
    TENANT,
    WITH_OUTPUTS,
)
from schedd.jobspec import BatchCreate, JobCreate
from schedd.wire.jobs import (
    Backfilled,
    BackfillRequest,
    BatchResults,
    JobList,
    JobView,
    KeyedJob,
    KeyedJobPlan,
    PreviewResult,
    RunList,
    Triggered,
    VersionList,
)
from schedd.wire.pauses import PauseRequest, TriggerRequest


def _job_link(operation_id: str) -> dict[str, object]:
    return {"operationId": operation_id, "parameters": {"job_id": "$response.body#/job_id"}}


JOB_LINKS = {
    name: _job_link(name[0].lower() + name[1:])
    for name in (
        "GetJob",
        "UpdateJob",
        "PauseJob",
        "ResumeJob",
        "TriggerJob",
        "ListRuns",
        "ListJobVersions",
        "CancelJob",
    )
}

JOB_EXAMPLE = {
    "name": "weekly-digest",
    "schedule": {"cron": "0 8 * * MON", "timezone": "Asia/Kolkata"},
    "window": "5m",
    "target": {"type": "queue", "name": "digest-jobs"},
    "payload": {"user_id": 42, "week": "2026-W41"},
    "retry": {"max_attempts": 5, "backoff": "exponential", "initial_delay": "1s"},
}

OPERATIONS = (
    Operation(
        method="POST",
        path="/v1/jobs",
        handler=jobs.create_job,
        operation_id="createJob",
        tag="jobs",
        summary="Create a job",
        description="A run_at in the past runs at once; one more than 10 years ahead is 400.",
        access=TENANT,
        parameters=(IDEMPOTENCY_KEY,),
        body=Annotated[JobCreate, Meta(examples=[JOB_EXAMPLE])],
        answers={
            201: Answer(
                "The job (or, for a replayed Idempotency-Key, the first one as it is now).",
                body=JobView,
                links=JOB_LINKS,
            ),
        },
        errors=(413, 422, 429, 507),
    ),
    Operation(
        method="GET",
        path="/v1/jobs",
        handler=jobs.list_jobs,
        operation_id="listJobs",
        tag="jobs",
        summary="List the tenant's jobs (job_id order)",
        description="Every filter given must match. With any filter but status and label, a "
        "request examines "
        "at most 10,000 jobs after the cursor: a filtered page may hold fewer than "
        "limit jobs (even none); follow next_cursor until it is null. Each job shows what its "
        "newest 50 runs say: last_success_at, last_failure_at, consecutive_failures.",
        access=TENANT,
        parameters=(
            JOB_STATUS,
            JOB_TARGET_TYPE,
            JOB_QUEUE,
            JOB_HOST,
            JOB_NAME,
            JOB_NEXT_RUN_AFTER,
            JOB_NEXT_RUN_BEFORE,
            JOB_FAILING,
            JOB_LABEL,
            CURSOR,
            LIMIT,
        ),
        answers={
            200: Answer("A page of jobs.", body=JobList),
        },
    ),
    # Before /v1/jobs/{job_id}/...: a key such as "runs" must not be read as a job's runs.
    Operation(
        method="PUT",
        path="/v1/jobs/by-key/{key}",
        route="/v1/jobs/by-key/{key:.+}",
        handler=job_keys.put_job,
        operation_id="putJobByKey",
        tag="jobs",
        summary="Create or replace the job of a key",
        description="A full job body (a field left out takes its default; `key`, if given, must "
        "be the path's). No job of the key (among those not cancelled): it is created (201); "
        "concurrent PUTs of one key create one job. Its job differs: its spec is replaced and "
        "its version raised (200, changed: true); a completed job cannot change (409). It "
        "matches: nothing changes (200, changed: false). With dry_run=true: what it would do.",
        access=TENANT,
        parameters=(JOB_KEY, DRY_RUN),
        body=JobCreate,
        answers={
            200: Answer(
                "The job (changed or not); with dry_run=true, the plan.",
                body=(KeyedJob, KeyedJobPlan),
            ),
            201: Answer("The job, created.", body=KeyedJob),
        },
        errors=(409, 413, 422, 507),
    ),
    Operation(
        method="GET",
        path="/v1/jobs/by-key/{key}",
        route="/v1/jobs/by-key/{key:.+}",
        handler=job_keys.get_job,
        operation_id="getJobByKey",
        tag="jobs",
        summary="Get the job of a key",
        access=TENANT,
        parameters=(JOB_KEY,),
        answers={200: Answer("The job (not cancelled) that has the key.", body=JobView)},
    ),
    Operation(
        method="DELETE",
        path="/v1/jobs/by-key/{key}",
        route="/v1/jobs/by-key/{key:.+}",
        handler=job_keys.cancel_job,
        operation_id="cancelJobByKey",
        tag="jobs",
        summary="Cancel the job of a key (the key is then free)",
        access=TENANT,
        parameters=(JOB_KEY,),
        answers={204: Answer("Cancelled.")},
    ),
    Operation(
        method="POST",
        path="/v1/jobs:batch",
        handler=jobs.create_jobs,
        operation_id="createJobsBatch",
        tag="jobs",
        summary=f"Create up to {jobs.MAX_BATCH:,} jobs",
        access=TENANT,
        body=BatchCreate,
        answers={
            200: Answer(
                "One result per item, in order: the valid items are created even if others fail.",
                body=BatchResults,
            ),
        },
        errors=(413, 507),
    ),
    Operation(
        method="GET",
        path="/v1/jobs/{job_id}",
        handler=jobs.get_job,
        operation_id="getJob",
        tag="jobs",
        summary="Get a job",
        access=TENANT,
        parameters=(JOB_ID,),
        answers={
            200: Answer("The job.", body=JobView),
        },
    ),
    Operation(
        method="PATCH",
        path="/v1/jobs/{job_id}",
        handler=jobs.update_job,
        operation_id="updateJob",
        tag="jobs",
        summary="Change a job",
        access=TENANT,
        parameters=(JOB_ID,),
        body="JobPatch",
        answers={
            200: Answer("The job as changed.", body=JobView),
        },
        errors=(409, 413, 422, 507),
    ),
    Operation(
        method="DELETE",
        path="/v1/jobs/{job_id}",
        handler=jobs.cancel_job,
        operation_id="cancelJob",
        tag="jobs",
        summary="Cancel a job's future runs",
        access=TENANT,
        parameters=(JOB_ID,),
        answers={
            204: Answer("Cancelled (again: still 204)."),
        },
    ),
    Operation(
        method="POST",
        path="/v1/jobs/{job_id}/pause",
        handler=jobs.pause_job,
        operation_id="pauseJob",
        tag="jobs",
        summary="Pause a job",
        description="The body is optional: a reason is kept (the job's paused_reason) and "
        "audited with who paused it.",
        access=TENANT,
        parameters=(JOB_ID,),
        body=PauseRequest,
        body_required=False,
        answers={
            200: Answer("The job.", body=JobView),
        },
        errors=(409,),
    ),
    Operation(
        method="POST",
        path="/v1/jobs/{job_id}/resume",
        handler=jobs.resume_job,
        operation_id="resumeJob",
        tag="jobs",
        summary="Resume a paused job",
        access=TENANT,
        parameters=(JOB_ID,),
        answers={
            200: Answer("The job, with its next run from now.", body=JobView),
        },
        errors=(409, 507),
    ),
    Operation(
        method="POST",
        path="/v1/jobs/{job_id}/trigger",
        handler=jobs.trigger_job,
        operation_id="triggerJob",
        tag="jobs",
        summary="Add one extra run now",
        description="The body is optional: a payload given there is this run's own, in place "
        "of the job's (the same size limit as a create); the run's history says so.",
        access=TENANT,
        parameters=(JOB_ID,),
        body=TriggerRequest,
        body_required=False,
        answers={
            202: Answer("The extra run is due now.", body=Triggered),
        },
        errors=(409, 413, 507),
    ),
    Operation(
        method="POST",
        path="/v1/jobs/{job_id}/backfill",
        handler=backfill.backfill_job,
        operation_id="backfillJob",
        tag="jobs",
        summary="Run the past occurrences of a range that have no run",
        description="One run for every occurrence of the job's schedule in [from, to) (its "
        "zone and DST rule, start_at and end_at respected) that has no run yet, each with its "
        "own scheduled_at (so the idempotency key a normal run of that slot has). The runs "
        f"are paced at half the tenant's dispatch_rate, starting now. At most "
        f"{backfill.MAX_BACKFILL:,} occurrences a request; a range in the future or reversed, "
        "or a bad field, is a 422 naming the field. The runs show in the job's runs with "
        '"backfill": true.',
        access=TENANT,
        parameters=(JOB_ID,),
        body=BackfillRequest,
        answers={
            202: Answer(
                "The runs added (occurrences that had a run are not counted).", body=Backfilled
            ),
        },
        errors=(409, 422, 507),
    ),
    Operation(
        method="GET",
        path="/v1/jobs/{job_id}/runs",
        handler=jobs.list_runs,
        operation_id="listRuns",
        tag="jobs",
        summary="A job's runs, newest first",
        access=TENANT,
        parameters=(JOB_ID, CURSOR, LIMIT, WITH_OUTPUTS),
        answers={
            200: Answer("A page of runs.", body=RunList),
        },
    ),
    Operation(
        method="GET",
        path="/v1/jobs/{job_id}/versions",
        handler=versions.list_versions,
        operation_id="listJobVersions",
        tag="jobs",
        summary="A job's versions, newest first",
        description="Every create, update, reschedule, pause, resume and cancel of the job, "
        "with its spec as it was after the change; kept as long as [retention] audit after the "
        "next change replaced it (the current version while the job is kept). `version` counts "
        "these changes; the job object's `version` also rises with every claimed run.",
        access=TENANT,
        parameters=(JOB_ID, CURSOR, LIMIT),
        answers={
            200: Answer("A page of versions.", body=VersionList),
        },
    ),
    Operation(
        method="POST",
        path="/v1/schedules:preview",
        handler=schedules.preview,
        operation_id="previewSchedule",
        tag="jobs",
        summary="The next runs of a schedule",
        description="Any valid token (the admin needs no X-Tenant); the same engine as dispatch. "
        "Each run is also shown in the schedule's zone with a note when daylight saving time "
        "moved or collapsed it; with `current` (the schedule an edit replaces), that "
        "schedule's runs come beside the new ones.",
        access=ANY_TOKEN,
        body="PreviewRequest",
        answers={
            200: Answer(
                "Up to count instants after `after` (default now), and the same runs as "
                "occurrences; current_runs and current_occurrences when `current` was given.",
                body=PreviewResult,
            ),
        },
        errors=(413,),
    ),
)
