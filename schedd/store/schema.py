"""The SQLite schema as numbered migrations; `meta.schema_version` says which have run.

A migration is never edited once released: add a new one. Times are epoch ms (`*_ms`).
"""

from __future__ import annotations

# Tables whose content is replicated state: the digest covers exactly these, in this order,
# each read in primary-key order. Tables of LATER_TABLES count only once they hold a row, so a
# log that never used them digests as it did before they existed (tests/unit/test_log_compat).
REPLICATED_TABLES: tuple[tuple[str, str], ...] = (
    ("tenants", "tenant_id"),
    ("jobs", "job_id"),
    ("due", "partition, fire_at_ms, job_id, scheduled_at_ms"),
    ("runs", "job_id, scheduled_at_ms"),
    ("attempts", "job_id, scheduled_at_ms, attempt"),
    ("idempotency", "tenant_id, key"),
    ("audit", "seq"),
    ("applied_commands", "command_id"),
    ("leases", "partition"),
    ("nodes", "node_id"),
    ("messages", "msg_id"),
    ("outbox", "seq"),
    ("deadletters", "id"),
    ("connections", "tenant_id, name"),
    ("connection_uses", "job_id"),
    ("batches", "batch_id"),
    ("run_keys", "job_id, scheduled_at_ms"),
    ("completions", "batch_id, slot"),
    ("pauses", "scope, tenant_id, name"),
    ("run_payloads", "job_id, scheduled_at_ms"),
    ("run_counts", "job_id"),
    ("job_versions", "job_id, version"),
    ("backfills", "job_id, scheduled_at_ms"),
    ("backfill_lanes", "tenant_id"),
    ("failure_policies", "tenant_id"),
    ("alerts", "alert_id"),
    ("overdue_jobs", "job_id"),
    ("job_keys", "tenant_id, key"),
    ("job_labels", "tenant_id, name, value, job_id"),
    ("calendars", "tenant_id, name"),
    ("calendar_uses", "tenant_id, name, job_id"),
    ("dependencies", "tenant_id, upstream_job_id, job_id"),
    ("run_upstreams", "job_id, scheduled_at_ms"),
    ("run_outputs", "job_id, scheduled_at_ms, attempt"),
    ("segments", "name"),
    ("segment_tombstones", "segment, id"),
    ("moved_run_summaries", "job_id"),
)
# Added at log level 3 (issue 17: connections), 4 (issue 29: batches), 5 (completions) and
# 8 (issue 31: pauses, run_payloads, run_counts, job_versions, backfills, backfill_lanes,
# failure_policies, alerts, overdue_jobs), 9 (issue 32: job_keys, job_labels), 10 (issue 33:
# calendars, calendar_uses), 11 (issue 33: dependencies, run_upstreams) and 12 (issue 34:
# run_outputs), 13 (issue 35 §1: segments, segment_tombstones) and 14 (moved_run_summaries).
LATER_TABLES = frozenset(
    {
        "connections",
        "connection_uses",
        "batches",
        "run_keys",
        "completions",
        "pauses",
        "run_payloads",
        "run_counts",
        "job_versions",
        "backfills",
        "backfill_lanes",
        "failure_policies",
        "alerts",
        "overdue_jobs",
        "job_keys",
        "job_labels",
        "calendars",
        "calendar_uses",
        "dependencies",
        "run_upstreams",
        "run_outputs",
        "segments",
        "segment_tombstones",
        "moved_run_summaries",
    }
)

MIGRATIONS: tuple[str, ...] = (
    # 1: the replicated core (issue 3).
    """
    CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value INTEGER NOT NULL
    ) WITHOUT ROWID;

    CREATE TABLE tenants (
        tenant_id TEXT PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        token_hash TEXT NOT NULL UNIQUE,
        signing_secret TEXT NOT NULL,
        max_active_jobs INTEGER NOT NULL,
        dispatch_rate INTEGER NOT NULL,
        allowed_hosts TEXT NOT NULL,
        live_jobs INTEGER NOT NULL DEFAULT 0,
        created_at_ms INTEGER NOT NULL,
        updated_at_ms INTEGER NOT NULL
    ) WITHOUT ROWID;

    CREATE TABLE jobs (
        job_id TEXT PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        partition INTEGER NOT NULL,
        spec TEXT NOT NULL,
        status TEXT NOT NULL,
        next_run_at_ms INTEGER,
        next_fire_at_ms INTEGER,
        version INTEGER NOT NULL,
        created_at_ms INTEGER NOT NULL,
        updated_at_ms INTEGER NOT NULL
    );
    CREATE INDEX jobs_by_tenant ON jobs (tenant_id, job_id);

    -- One row per upcoming run: "runs due in this minute for my partitions" is a range read.
    CREATE TABLE due (
        bucket_minute INTEGER NOT NULL,
        partition INTEGER NOT NULL,
        fire_at_ms INTEGER NOT NULL,
        job_id TEXT NOT NULL,
        scheduled_at_ms INTEGER NOT NULL,
        is_trigger INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (bucket_minute, partition, fire_at_ms, job_id, scheduled_at_ms)
    ) WITHOUT ROWID;
    CREATE INDEX due_by_job ON due (job_id);

    CREATE TABLE runs (
        job_id TEXT NOT NULL,
        scheduled_at_ms INTEGER NOT NULL,
        tenant_id TEXT NOT NULL,
        fire_at_ms INTEGER NOT NULL,
        status TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        dispatched_at_ms INTEGER,
        finished_at_ms INTEGER,
        error TEXT,
        PRIMARY KEY (job_id, scheduled_at_ms)
    ) WITHOUT ROWID;

    CREATE TABLE attempts (
        job_id TEXT NOT NULL,
        scheduled_at_ms INTEGER NOT NULL,
        attempt INTEGER NOT NULL,
        started_at_ms INTEGER NOT NULL,
        finished_at_ms INTEGER,
        outcome TEXT,
        error TEXT,
        PRIMARY KEY (job_id, scheduled_at_ms, attempt)
    ) WITHOUT ROWID;

    CREATE TABLE idempotency (
        tenant_id TEXT NOT NULL,
        key TEXT NOT NULL,
        request_hash TEXT NOT NULL,
        job_id TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, key)
    ) WITHOUT ROWID;
    CREATE INDEX idempotency_by_age ON idempotency (created_at_ms);

    CREATE TABLE audit (
        seq INTEGER PRIMARY KEY,
        at_ms INTEGER NOT NULL,
        tenant_id TEXT,
        actor TEXT NOT NULL,
        action TEXT NOT NULL,
        job_id TEXT,
        detail TEXT
    );
    CREATE INDEX audit_by_tenant ON audit (tenant_id, seq);

    -- Commands already applied, by their proposer-made id: a retry after an unknown outcome
    -- gets the first result back instead of acting twice. Pruned after a while.
    CREATE TABLE applied_commands (
        command_id TEXT PRIMARY KEY,
        applied_index INTEGER NOT NULL,
        at_ms INTEGER NOT NULL,
        result TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX applied_commands_by_age ON applied_commands (at_ms);

    CREATE TABLE nodes (
        node_id TEXT PRIMARY KEY,
        api TEXT NOT NULL,
        raft TEXT NOT NULL,
        registered_at_ms INTEGER NOT NULL
    ) WITHOUT ROWID;

    CREATE TABLE leases (
        partition INTEGER PRIMARY KEY,
        node_id TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        expires_at_ms INTEGER NOT NULL
    );
    """,
    # 2: listing a tenant's jobs by status is an index range, not a walk over all its jobs.
    """
    CREATE INDEX jobs_by_tenant_status ON jobs (tenant_id, status, job_id);
    """,
    # 3: dispatch (issue 4): node liveness, the built-in queue, the HTTP outbox, dead letters.
    """
    ALTER TABLE nodes ADD COLUMN last_seen_ms INTEGER NOT NULL DEFAULT 0;

    -- Catch-up after an outage: a partition's due runs from any past minute, in order.
    CREATE INDEX due_by_partition ON due (partition, fire_at_ms);

    -- One message per run (msg_id = job_id:scheduled_at_ms), in its tenant's queue.
    CREATE TABLE messages (
        msg_id TEXT PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        queue TEXT NOT NULL,
        job_id TEXT NOT NULL,
        scheduled_at_ms INTEGER NOT NULL,
        attempt INTEGER NOT NULL,
        visible_at_ms INTEGER NOT NULL,
        receipt TEXT,
        payload TEXT NOT NULL,
        retry TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX messages_ready ON messages (tenant_id, queue, visible_at_ms);
    CREATE UNIQUE INDEX messages_by_receipt ON messages (receipt);

    CREATE TABLE outbox (
        seq INTEGER PRIMARY KEY,
        partition INTEGER NOT NULL,
        tenant_id TEXT NOT NULL,
        job_id TEXT NOT NULL,
        scheduled_at_ms INTEGER NOT NULL,
        attempt INTEGER NOT NULL,
        due_at_ms INTEGER NOT NULL
    );
    CREATE INDEX outbox_due ON outbox (partition, due_at_ms);

    CREATE TABLE deadletters (
        id TEXT PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        job_id TEXT NOT NULL,
        scheduled_at_ms INTEGER NOT NULL,
        attempts INTEGER NOT NULL,
        error TEXT,
        target TEXT NOT NULL,
        payload TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX deadletters_by_tenant ON deadletters (tenant_id, id);
    """,
    # 4: dispatch at spike rates: fewer b-trees written per run.
    """
    -- The due index keyed by partition first: the dispatcher's read and the claim's delete use
    -- the primary key, and the (partition, fire_at_ms) index is no longer needed.
    CREATE TABLE due_v4 (
        partition INTEGER NOT NULL,
        fire_at_ms INTEGER NOT NULL,
        job_id TEXT NOT NULL,
        scheduled_at_ms INTEGER NOT NULL,
        is_trigger INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (partition, fire_at_ms, job_id, scheduled_at_ms)
    ) WITHOUT ROWID;
    INSERT INTO due_v4 SELECT partition, fire_at_ms, job_id, scheduled_at_ms, is_trigger FROM due;
    DROP TABLE due;
    ALTER TABLE due_v4 RENAME TO due;
    CREATE INDEX due_by_job ON due (job_id);

    -- A receipt names its message ("<nonce>.<msg_id>"): ack, nack and extend find it by key.
    DROP INDEX messages_by_receipt;
    """,
    # 5: HTTP callbacks (issue 5).
    """
    -- An outbox row carries what its claim saw: the target, the payload and the retry policy.
    ALTER TABLE outbox ADD COLUMN target TEXT NOT NULL DEFAULT '{}';
    ALTER TABLE outbox ADD COLUMN payload TEXT NOT NULL DEFAULT 'null';
    ALTER TABLE outbox ADD COLUMN retry TEXT NOT NULL DEFAULT '{}';
    -- Callers take each tenant's due calls in turn: a stalled tenant cannot fill everyone's batch.
    CREATE INDEX outbox_by_tenant ON outbox (tenant_id, due_at_ms);

    -- After a rotation the previous signing secret signs too, until previous_secret_until_ms.
    ALTER TABLE tenants ADD COLUMN previous_secret TEXT;
    ALTER TABLE tenants ADD COLUMN previous_secret_until_ms INTEGER NOT NULL DEFAULT 0;
    -- Where to tell the tenant that a run became a dead letter (optional, signed like callbacks).
    ALTER TABLE tenants ADD COLUMN alert_url TEXT;
    """,
    # 6: outbox seqs are never reused (chaos seeds 101-103, 200): with a plain rowid, the claim
    # after a finished call took the highest deleted seq, and a late outcome of the old call
    # (from a node that lost its lease mid-call) was recorded against the new run.
    """
    CREATE TABLE outbox_v6 (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        partition INTEGER NOT NULL,
        tenant_id TEXT NOT NULL,
        job_id TEXT NOT NULL,
        scheduled_at_ms INTEGER NOT NULL,
        attempt INTEGER NOT NULL,
        due_at_ms INTEGER NOT NULL,
        target TEXT NOT NULL DEFAULT '{}',
        payload TEXT NOT NULL DEFAULT 'null',
        retry TEXT NOT NULL DEFAULT '{}'
    );
    INSERT INTO outbox_v6 (seq, partition, tenant_id, job_id, scheduled_at_ms, attempt,
        due_at_ms, target, payload, retry)
        SELECT seq, partition, tenant_id, job_id, scheduled_at_ms, attempt, due_at_ms, target,
            payload, retry FROM outbox;
    DROP TABLE outbox;
    ALTER TABLE outbox_v6 RENAME TO outbox;
    CREATE INDEX outbox_due ON outbox (partition, due_at_ms);
    CREATE INDEX outbox_by_tenant ON outbox (tenant_id, due_at_ms);
    """,
    # 7: retention (issue 14): a tenant's own retention, and the indexes pruning walks in
    # age order per tenant (messages use messages_ready, audit rows audit_by_tenant).
    """
    ALTER TABLE tenants ADD COLUMN retention TEXT NOT NULL DEFAULT '{}';
    CREATE INDEX runs_finished ON runs (tenant_id, finished_at_ms)
        WHERE finished_at_ms IS NOT NULL;
    CREATE INDEX jobs_finished ON jobs (tenant_id, updated_at_ms)
        WHERE status IN ('completed', 'cancelled');
    CREATE INDEX deadletters_by_age ON deadletters (tenant_id, created_at_ms);
    """,
    # 8: tenants' broker connections (issue 17).
    """
    -- `url` holds the credentials: sealed with the payload keys when they are configured, and
    -- read only by the deliverers (queries.broker_connection); `host` is what GET shows.
    CREATE TABLE connections (
        tenant_id TEXT NOT NULL,
        name TEXT NOT NULL,
        kind TEXT NOT NULL,
        url TEXT NOT NULL,
        host TEXT NOT NULL,
        addresses TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, name)
    ) WITHOUT ROWID;
    -- One row per live (active or paused) job with a broker target: deleting a connection
    -- asks its index whether any job uses it, whatever the number of jobs.
    CREATE TABLE connection_uses (
        job_id TEXT PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        name TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX connection_uses_by_name ON connection_uses (tenant_id, name);
    """,
    # 9: a job's audit trail (GET /v1/audit?job_id=) in seq order without reading the others'.
    # Rows without a job (tenant changes, connections) stay out of it.
    """
    CREATE INDEX audit_by_job ON audit (job_id, seq) WHERE job_id IS NOT NULL;
    """,
    # 10: queue runs in batches (issue 29, log level 4; store/batches.py): one row per claim's
    # runs of one (tenant, queue), their delivery state in two compact columns.
    """
    CREATE TABLE batches (
        batch_id INTEGER PRIMARY KEY AUTOINCREMENT,
        tenant_id TEXT NOT NULL,
        queue TEXT NOT NULL,
        claimed_at_ms INTEGER NOT NULL,
        runs BLOB NOT NULL,
        slots BLOB NOT NULL,
        times BLOB NOT NULL,
        open INTEGER NOT NULL,
        ready_at_ms INTEGER,
        finished_at_ms INTEGER
    );
    CREATE INDEX batches_ready ON batches (tenant_id, queue, ready_at_ms)
        WHERE ready_at_ms IS NOT NULL;
    CREATE INDEX batches_finished ON batches (tenant_id, finished_at_ms)
        WHERE finished_at_ms IS NOT NULL;
    -- A batch run by its key: a job's runs listing, overlap policies, the duplicate-run fence.
    CREATE TABLE run_keys (
        job_id TEXT NOT NULL,
        scheduled_at_ms INTEGER NOT NULL,
        batch_id INTEGER NOT NULL,
        slot INTEGER NOT NULL,
        fire_at_ms INTEGER NOT NULL,
        PRIMARY KEY (job_id, scheduled_at_ms)
    ) WITHOUT ROWID;
    """,
    # 11: one-time jobs whose completion a claim left to a later prune (issue 29, log level 5;
    # store/ledger/completions.py): one row per batch run, in key order.
    """
    CREATE TABLE completions (
        batch_id INTEGER NOT NULL,
        slot INTEGER NOT NULL,
        PRIMARY KEY (batch_id, slot)
    ) WITHOUT ROWID;
    """,
    # 12: operators' control of schedules (issue 31, log level 8).
    """
    -- Who paused what and why: a job (name: its id, only when paused with a reason), a queue
    -- (name: the queue; receives hand out nothing) or a tenant (name: ''; nothing claimed).
    CREATE TABLE pauses (
        scope TEXT NOT NULL,
        tenant_id TEXT NOT NULL,
        name TEXT NOT NULL,
        reason TEXT,
        actor TEXT,
        paused_at_ms INTEGER NOT NULL,
        PRIMARY KEY (scope, tenant_id, name)
    ) WITHOUT ROWID;
    -- A triggered run's own payload (POST /v1/jobs/{id}/trigger with a body), read when the
    -- run is claimed; kept while the run is, so its history says it was overridden.
    CREATE TABLE run_payloads (
        job_id TEXT NOT NULL,
        scheduled_at_ms INTEGER NOT NULL,
        payload TEXT NOT NULL,
        PRIMARY KEY (job_id, scheduled_at_ms)
    ) WITHOUT ROWID;
    -- Scheduled runs claimed so far, only for jobs whose spec has max_runs.
    CREATE TABLE run_counts (
        job_id TEXT PRIMARY KEY,
        runs_started INTEGER NOT NULL
    ) WITHOUT ROWID;
    -- A job's history of versions (store/versions.py): one row per change of its spec or
    -- status that a level-8 command recorded, with the spec after it. A job no such command
    -- changed has no row: its version 1 is read from the job and its audit.
    CREATE TABLE job_versions (
        job_id TEXT NOT NULL,
        version INTEGER NOT NULL,
        tenant_id TEXT NOT NULL,
        at_ms INTEGER NOT NULL,
        actor TEXT,
        change TEXT NOT NULL,
        fields TEXT,
        spec TEXT,
        superseded_at_ms INTEGER,
        PRIMARY KEY (job_id, version)
    ) WITHOUT ROWID;
    -- Retention (the audit kind): versions replaced before the cutoff, oldest first per tenant;
    -- a job's current version is kept while the job is.
    CREATE INDEX job_versions_superseded ON job_versions (tenant_id, superseded_at_ms)
        WHERE superseded_at_ms IS NOT NULL;
    -- Which runs a backfill added (apply/backfill.py: the runs listing shows "backfill": true;
    -- retention deletes a mark with its run), and each tenant's backfill lane: the fire time
    -- its next backfill run may take (pacing).
    CREATE TABLE backfills (
        job_id TEXT NOT NULL,
        scheduled_at_ms INTEGER NOT NULL,
        PRIMARY KEY (job_id, scheduled_at_ms)
    ) WITHOUT ROWID;
    CREATE TABLE backfill_lanes (
        tenant_id TEXT PRIMARY KEY,
        next_fire_at_ms INTEGER NOT NULL
    ) WITHOUT ROWID;
    -- A tenant's default failure policy (PATCH /v1/tenants/{id} "on_failure"), for its jobs
    -- that have none of their own (store/failures.py).
    CREATE TABLE failure_policies (
        tenant_id TEXT PRIMARY KEY,
        on_failure TEXT NOT NULL
    ) WITHOUT ROWID;
    -- Failure alerts to POST (store/alerts.py): written by apply when a job's runs ended dead
    -- `after` times in a row; the leader's alert sender posts them signed, retries, and
    -- records each outcome (`next_at_ms` NULL once sent or given up).
    CREATE TABLE alerts (
        alert_id INTEGER PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        job_id TEXT NOT NULL,
        url TEXT NOT NULL,
        body TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL,
        attempts INTEGER NOT NULL,
        next_at_ms INTEGER,
        sent_at_ms INTEGER,
        last_error TEXT
    );
    CREATE INDEX alerts_due ON alerts (next_at_ms) WHERE next_at_ms IS NOT NULL;
    CREATE INDEX alerts_by_tenant ON alerts (tenant_id, created_at_ms);
    -- Recurring jobs with no success within twice their longest gap (store/overdue.py), as the
    -- leader's overdue scanner last found them: `since_ms` the success (or creation) they
    -- count from.
    CREATE TABLE overdue_jobs (
        job_id TEXT PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        since_ms INTEGER NOT NULL,
        marked_at_ms INTEGER NOT NULL
    ) WITHOUT ROWID;
    """,  # 13: schedules as code (issue 32, log level 9; store/job_keys.py).
    """
    -- A job's stable key: one row per job that has one and is not cancelled, so a key names
    -- at most one such job of its tenant (PUT /v1/jobs/by-key/{key}).
    CREATE TABLE job_keys (
        tenant_id TEXT NOT NULL,
        key TEXT NOT NULL,
        job_id TEXT NOT NULL UNIQUE,
        PRIMARY KEY (tenant_id, key)
    ) WITHOUT ROWID;
    -- A job's labels, kept while the job is (GET /v1/jobs?label=NAME=VALUE reads a label's
    -- jobs in job_id order).
    CREATE TABLE job_labels (
        tenant_id TEXT NOT NULL,
        name TEXT NOT NULL,
        value TEXT NOT NULL,
        job_id TEXT NOT NULL,
        PRIMARY KEY (tenant_id, name, value, job_id)
    ) WITHOUT ROWID;
    CREATE INDEX job_labels_by_job ON job_labels (job_id);
    """,  # 14: calendars (issue 33, log level 10; store/calendars.py, store/job_keys.py).
    """
    -- A tenant's named set of local dates (JSON: a sorted array of YYYY-MM-DD texts) that cron
    -- and every schedules may exclude.
    CREATE TABLE calendars (
        tenant_id TEXT NOT NULL,
        name TEXT NOT NULL,
        dates TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL,
        updated_at_ms INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, name)
    ) WITHOUT ROWID;
    -- Which jobs not cancelled exclude a calendar: a delete waits for none; a change of the
    -- calendar raises their versions (fencing claims planned with its old dates).
    CREATE TABLE calendar_uses (
        tenant_id TEXT NOT NULL,
        name TEXT NOT NULL,
        job_id TEXT NOT NULL,
        PRIMARY KEY (tenant_id, name, job_id)
    ) WITHOUT ROWID;
    CREATE INDEX calendar_uses_by_job ON calendar_uses (job_id);
    """,  # 15: "run B after A" (issue 33, log level 11; store/dependencies.py).
    """
    -- A job B not cancelled whose schedule is {"after": {"job_id": A, "on": ...}}: the end of
    -- a run of A (`on`: success, failure or finished) gives B a run at A's scheduled time.
    CREATE TABLE dependencies (
        tenant_id TEXT NOT NULL,
        upstream_job_id TEXT NOT NULL,
        job_id TEXT NOT NULL,
        on_outcome TEXT NOT NULL,
        PRIMARY KEY (tenant_id, upstream_job_id, job_id)
    ) WITHOUT ROWID;
    CREATE INDEX dependencies_by_job ON dependencies (job_id);
    -- Which run of A gave B this run (B's run has A's run's scheduled time), kept while it is.
    CREATE TABLE run_upstreams (
        job_id TEXT NOT NULL,
        scheduled_at_ms INTEGER NOT NULL,
        upstream_job_id TEXT NOT NULL,
        upstream_status TEXT NOT NULL,
        PRIMARY KEY (job_id, scheduled_at_ms)
    ) WITHOUT ROWID;
    """,  # 16: an attempt's output (issue 34, log level 12; store/run_outputs.py).
    """
    -- What an attempt printed, as its consumer reported it with the ack or nack (at most 4,096
    -- characters from the start and 4,096 from the end), kept while the run is.
    CREATE TABLE run_outputs (
        job_id TEXT NOT NULL,
        scheduled_at_ms INTEGER NOT NULL,
        attempt INTEGER NOT NULL,
        output TEXT NOT NULL,
        PRIMARY KEY (job_id, scheduled_at_ms, attempt)
    ) WITHOUT ROWID;
    """,  # 17: history segments (issue 35 §1, log level 13; store/segments.py, apply/history.py).
    """
    -- One row per history segment file a move_history has written (data_dir/history/<name>.db):
    -- open while moves may still add to it, closed (immutable, its rows' content_digest) once
    -- close_segment applied, gone with drop_segment. Apply never reads a closed segment.
    CREATE TABLE segments (
        name TEXT PRIMARY KEY,
        family TEXT NOT NULL,
        period_start_ms INTEGER NOT NULL,
        state TEXT NOT NULL,
        rows INTEGER NOT NULL,
        content_digest TEXT,
        closed_index INTEGER
    ) WITHOUT ROWID;
    CREATE INDEX segments_by_family ON segments (family, period_start_ms);
    -- A row of a segment that is no longer history: a dead letter redriven or deleted after it
    -- moved. Reads skip it; dropped with its segment.
    CREATE TABLE segment_tombstones (
        segment TEXT NOT NULL,
        id TEXT NOT NULL,
        PRIMARY KEY (segment, id)
    ) WITHOUT ROWID;
    """,  # 18: what a job's runs moved into segments say (log level 14; store/moved_runs.py).
    """
    -- One row per job some of whose finished runs a move_history (with `summarize`) moved into
    -- history segments: the newest moved success and death (scheduled time and when it
    -- ended) and how many moved runs died scheduled after that success. Written only by that
    -- apply, once per job per command; deleted with the job.
    CREATE TABLE moved_run_summaries (
        job_id TEXT PRIMARY KEY,
        succeeded_at_ms INTEGER,
        succeeded_finished_ms INTEGER,
        died_at_ms INTEGER,
        died_finished_ms INTEGER,
        deaths INTEGER NOT NULL
    ) WITHOUT ROWID;
    """,
)
