"""The client workload: per tenant, a worker that creates one-time, recurring and cron jobs
(single and batched) and jobs that run after another (issue 33 §2), cancels, reschedules,
pauses and resumes, triggers some and backfills some, and pauses its queues for a few seconds,
each call recorded in the history. Every schedule ends before the workload does, so the
cluster goes quiet on its own afterwards (a job that runs after another stays active, idle
once its upstream's runs are over). A few jobs are doomed: every run of theirs ends dead."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, replace
from typing import Any

from schedd.timeformat import format_instant, parse_instant
from tests.chaos.client import Reply, call, now_ms
from tests.chaos.history import History
from tests.receiver import Answer, Receiver
from tests.servers import ADMIN_TOKEN

QUEUES = ("q0", "q1")
RETRY = {"max_attempts": 20, "backoff": "fixed", "initial_delay": "1s", "max_delay": "1s"}
TAIL_MS = 3_000  # no run is scheduled later than this before the workload's end
MIN_LEFT_MS = 6_000  # with less time left, a worker only cancels
CRONS_PER_TENANT = 2
ZONES = ("UTC", "Asia/Kolkata", "America/New_York")
BACKFILL_SPAN_MS = 150_000  # a backfill asks for the last 2.5 minutes
QUEUE_RESUME_WAIT_MS = 60_000  # after the workload: how long a queue's resume is retried


CALENDAR = "hols"  # each tenant's calendar (issue 33), holding the round's UTC date
EXCLUDING = 0.3  # of the recurring and cron jobs, when the cluster has calendars

# Run B after A (issue 33 §2): of the new recurring jobs (single or in a batch), this share runs
# after one of the tenant's known jobs not cancelled (chains of at most MAX_AFTER_DEPTH after
# jobs below a job with a schedule of its own), `on` drawn at random; this share of those asks
# for an upstream whose cancel was sent (refused 422 if the cancel committed first). Half the
# reschedules pick an after job when there is one.
AFTER = 0.3
MAX_AFTER_DEPTH = 3
UPSTREAM_WITH_RUNS = 0.75  # how often the upstream is picked among jobs with runs ahead
AFTER_ON_CANCELLED = 0.1
ON = ("success", "failure", "finished")
# Doomed jobs: every run ends dead (an HTTP target answering 500, or a queue message the
# consumers always nack, two attempts), so `on: failure` has ends to follow. An after job's
# upstream is a doomed job this often when the tenant knows one.
DOOMED = 0.08
DOOMED_UPSTREAM = 0.3
DOOMED_RETRY = {"max_attempts": 2, "backoff": "fixed", "initial_delay": "1s", "max_delay": "1s"}


@dataclass(frozen=True, slots=True)
class Tenant:
    name: str
    tenant_id: str
    token: str
    signing_secret: str
    calendar: tuple[str, ...] = ()  # the dates of its calendar; () when it has none


@dataclass(slots=True)
class KnownJob:
    """A job a create acknowledged: what later cancels and reschedules may pick."""

    job_id: str
    name: str
    form: str  # once | every | cron | after
    is_rescheduled: bool = False  # rescheduled or paused: one change of course per job
    is_cancel_tried: bool = False
    resume_at_ms: int | None = None  # paused: when to resume it
    upstream: str | None = None  # the job it runs after (form after)
    is_doomed: bool = False  # every run of it ends dead
    runs_until_ms: int | None = None  # its schedule's last instant (None: after another)
    is_excluding: bool = False  # its runs on the calendar's dates (today) are skipped

    def has_runs_ahead(self, now: int) -> bool:
        """Runs to come that are not skipped: an upstream worth following."""
        if self.form == "after":
            return True
        return not self.is_excluding and (self.runs_until_ms or 0) > now + 5_000


def _runs_until(schedule: dict[str, Any]) -> int | None:
    """A schedule's last instant as the workload writes them (None for an after schedule)."""
    if "delay" in schedule:
        return now_ms() + int(schedule["delay"].removesuffix("s")) * 1000
    last = schedule.get("run_at") or schedule.get("end_at")
    return None if last is None else parse_instant(last, field="schedule")


def create_tenants(url: str, seed: int, count: int) -> list[Tenant]:
    tenants = []
    for i in range(count):
        body = {"name": f"chaos-{seed}-t{i}", "max_active_jobs": 1_000_000, "dispatch_rate": 0}
        for _ in range(20):  # the cluster is healthy here; retry only a transient 503
            reply = call(url, "POST", "/v1/tenants", body, token=ADMIN_TOKEN)
            if reply.status == 201:
                break
            time.sleep(0.5)
        else:
            raise RuntimeError(f"could not create a tenant: {reply}")
        tenant = Tenant(f"t{i}", **reply.body)
        tenants.append(replace(tenant, calendar=_make_calendar(url, tenant.token)))
    return tenants


def _make_calendar(url: str, token: str) -> tuple[str, ...]:
    """The tenant's calendar holding today's UTC date (and the next day's, for a round across
    midnight); () when the cluster has none (older nodes, in an upgrade round: 404, or 503
    for 10 s while a member lags level 10)."""
    day = now_ms() // 86_400_000 * 86_400_000
    dates = [format_instant(day)[:10], format_instant(day + 86_400_000)[:10]]
    for _ in range(40):  # a node just started may not have heard every member's level yet
        body = {"name": CALENDAR, "dates": dates}
        reply = call(url, "POST", "/v1/calendars", body, token=token)
        if reply.status == 201:
            return tuple(dates)
        if reply.status == 404:  # an older node: no calendar route
            return ()
        time.sleep(0.25)
    return ()


def _depth(job: KnownJob, by_id: dict[str, KnownJob]) -> int:
    """How many after links lead up from this job to one with a schedule of its own."""
    depth, up = 0, job.upstream
    while up is not None and depth <= MAX_AFTER_DEPTH:
        depth += 1
        above = by_id.get(up)
        up = None if above is None else above.upstream
    return depth


class TenantWorker(threading.Thread):
    """One tenant's client: random operations until the workload's end."""

    def __init__(
        self,
        tenant: Tenant,
        urls: dict[str, str],
        history: History,
        receiver: Receiver,
        seed: int,
        end_ms: int,
    ) -> None:
        super().__init__(name=f"worker-{tenant.name}", daemon=True)
        self.tenant, self.urls, self.history, self.receiver = tenant, urls, history, receiver
        self.rng = random.Random(f"workload-{seed}-{tenant.name}")
        self.end_ms = end_ms
        self.last_run_ms = end_ms - TAIL_MS
        self.jobs: list[KnownJob] = []
        self._names = 0
        self._crons = 0
        # Queues this tenant paused, each with when to resume it (until a resume is answered).
        self.paused_queues: dict[str, int] = {}
        self.stop = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        try:
            while not self.stop.is_set() and now_ms() < self.end_ms:
                self.step()
                self.stop.wait(self.rng.uniform(0.1, 0.4))
            # A queue left paused would keep its runs from the consumers: resume it, however
            # long a fault takes to heal (bounded).
            deadline = now_ms() + QUEUE_RESUME_WAIT_MS
            while self.paused_queues and now_ms() < deadline:
                self.resume_queue(next(iter(self.paused_queues)))
                self.stop.wait(0.5)
        except Exception as exc:  # a harness bug: the runner reports it as a violation
            self.errors.append(repr(exc))

    def step(self) -> None:
        due_queues = [q for q, at in self.paused_queues.items() if at <= now_ms()]
        if due_queues:
            self.resume_queue(due_queues[0])
            return
        left = self.last_run_ms - now_ms()
        due = [j for j in self.jobs if j.resume_at_ms is not None and j.resume_at_ms <= now_ms()]
        if due:
            self.resume(due[0])
            return
        if left < MIN_LEFT_MS:  # jobs that run after another stay: their upstreams' ends owe runs
            self.cancel(spare_after=True)
            return
        action = self.rng.choices(
            (
                "once",
                "recurring",
                "cron",
                "batch",
                "cancel",
                "reschedule",
                "pause",
                "trigger",
                "backfill",
                "pause_queue",
            ),
            weights=(30, 15, 3, 10, 12, 10, 5, 4, 4, 2),
        )[0]
        if action == "cron" and (self._crons >= CRONS_PER_TENANT or left < 65_000):
            action = "once"
        if action == "cancel":
            self.cancel()
        elif action == "reschedule":
            self.reschedule()
        elif action == "pause":
            self.pause()
        elif action == "trigger":
            self.trigger()
        elif action == "backfill":
            self.backfill()
        elif action == "pause_queue":
            self.pause_queue()
        elif action == "batch":
            self.batch()
        else:
            self.create(action)

    # ------------------------------------------------------------------ bodies

    def _new_name(self) -> str:
        self._names += 1
        return f"{self.tenant.name}-{self._names}"

    def _node(self) -> tuple[str, str]:
        node_id = self.rng.choice(sorted(self.urls))
        return node_id, self.urls[node_id]

    def _once_schedule(self) -> dict[str, Any]:
        now = now_ms()
        at = now + self.rng.randint(2_000, max(2_000, self.last_run_ms - now - 2_000))
        if self.rng.random() < 0.5:
            return {"run_at": format_instant(at)}
        return {"delay": f"{(at - now) // 1000}s"}

    def _every_schedule(self) -> dict[str, Any]:
        now = now_ms()
        every_ms = self.rng.choice((2, 3, 5)) * 1000
        start = now + self.rng.randint(500, 4_000)
        if start + every_ms + 2_000 > self.last_run_ms:
            return self._once_schedule()
        end = self.rng.randint(start + every_ms + 2_000, self.last_run_ms)
        schedule = {"every": f"{every_ms // 1000}s", "end_at": format_instant(end)}
        if self.rng.random() < 0.5:
            schedule["start_at"] = format_instant(start)
        return schedule

    def _cron_schedule(self) -> dict[str, Any]:
        self._crons += 1
        zone = self.rng.choice(ZONES)
        return {"cron": "* * * * *", "timezone": zone, "end_at": format_instant(self.last_run_ms)}

    def _body(self, form: str, name: str) -> dict[str, Any]:
        schedules = {
            "once": self._once_schedule,
            "every": self._every_schedule,
            "cron": self._cron_schedule,
            "after": self._after_schedule,
        }
        schedule = schedules[form]()
        doomed = self.rng.random() < DOOMED
        body: dict[str, Any] = {
            "name": name,
            "schedule": schedule,
            "target": self._target_for(name, doomed=doomed),
            "payload": {"name": name, "doomed": True} if doomed else {"name": name},
            "retry": DOOMED_RETRY if doomed else RETRY,
            "misfire_policy": self.rng.choice(("run_once", "run_once", "skip", "run_all")),
        }
        if form in ("every", "cron"):
            body["overlap_policy"] = self.rng.choice(("allow", "allow", "allow", "skip", "delay"))
            if self.tenant.calendar and self.rng.random() < EXCLUDING:
                body["schedule"] = {**body["schedule"], "exclude": [CALENDAR]}
        if self.rng.random() < 0.3 and form in ("once", "every"):
            body["window"] = "2s"
        return body

    def _target_for(self, name: str, *, doomed: bool = False) -> dict[str, Any]:
        if self.rng.random() < 0.7:
            return {"type": "queue", "name": self.rng.choice(QUEUES)}
        path = f"cb/{name}"
        draw = self.rng.random()
        if doomed:  # every call fails
            self.receiver.script(path, Answer(status=500))
        elif draw < 0.2:  # the first call fails, its retry succeeds
            self.receiver.script(path, Answer(status=500), Answer())
        elif draw < 0.3:  # the first call outlasts the target's timeout
            self.receiver.script(path, Answer(delay_s=3.0), Answer())
        return {"type": "http", "url": self.receiver.url(path), "timeout": "2s"}

    # ------------------------------------------------------------------ after

    def _after_schedule(self) -> dict[str, Any]:
        """After one of the tenant's jobs not cancelled (the caller saw one), or now and then
        after one whose cancel was sent: a race the API refuses once the cancel committed."""
        cancelled = self._upstreams(None, cancelled=True)
        if cancelled and self.rng.random() < AFTER_ON_CANCELLED:
            upstream = self.rng.choice(cancelled)
        else:
            upstream = self._pick_upstream(self._upstreams(None))
        return {"after": {"job_id": upstream.job_id, "on": self.rng.choice(ON)}}

    def _after_or(self, form: str) -> str:
        """A new recurring job may run after another instead (when one can be its upstream)."""
        if form == "every" and self.rng.random() < AFTER and self._upstreams(None):
            return "after"
        return form

    def _pick_upstream(self, candidates: list[KnownJob]) -> KnownJob:
        """Mostly a job with runs ahead (not all skipped, or after one), sometimes a doomed
        one."""
        draw = self.rng.random()
        doomed = [j for j in candidates if j.is_doomed]
        if doomed and draw < DOOMED_UPSTREAM:
            return self.rng.choice([j for j in doomed if j.has_runs_ahead(now_ms())] or doomed)
        ahead = [j for j in candidates if j.has_runs_ahead(now_ms())]
        if ahead and self.rng.random() < UPSTREAM_WITH_RUNS:
            return self.rng.choice(ahead)
        return self.rng.choice(candidates)

    def _upstreams(self, job: KnownJob | None, *, cancelled: bool = False) -> list[KnownJob]:
        """Known jobs `job` (None: a new job) may run after within MAX_AFTER_DEPTH: not itself
        nor one running after it (a cycle: 422), and not cancelled (or only those)."""
        below = 0 if job is None else self._height(job.job_id)
        mine = set() if job is None else self._below(job.job_id)
        by_id = {j.job_id: j for j in self.jobs}
        return [
            j
            for j in self.jobs
            if j.is_cancel_tried == cancelled
            and j.job_id not in mine
            and _depth(j, by_id) + 1 + below <= MAX_AFTER_DEPTH
        ]

    def _below(self, job_id: str) -> set[str]:
        """The job and every known job running after it, directly or not."""
        found, frontier = {job_id}, [job_id]
        while frontier:
            up = frontier.pop()
            for j in self.jobs:
                if j.upstream == up and j.job_id not in found:
                    found.add(j.job_id)
                    frontier.append(j.job_id)
        return found

    def _height(self, job_id: str, limit: int = MAX_AFTER_DEPTH) -> int:
        """The longest chain of known jobs running after this one (0: none)."""
        if limit <= 0:
            return 0
        return max(
            (1 + self._height(j.job_id, limit - 1) for j in self.jobs if j.upstream == job_id),
            default=0,
        )

    def _reschedule_after(self, job: KnownJob) -> tuple[dict[str, Any], str]:
        """A job that runs after another moves to another upstream (or the same on another
        outcome), or to a schedule of its own: cron (a minute at least left), every or run_at.
        Returns the schedule and its form."""
        draw = self.rng.random()
        candidates = self._upstreams(job)
        if draw < 0.5 and candidates:
            upstream = self._pick_upstream(candidates)
            return {"after": {"job_id": upstream.job_id, "on": self.rng.choice(ON)}}, "after"
        if draw < 0.7 and self.last_run_ms - now_ms() >= 65_000:
            zone = self.rng.choice(ZONES)
            end = format_instant(self.last_run_ms)
            return {"cron": "* * * * *", "timezone": zone, "end_at": end}, "cron"
        schedule = self._new_schedule()
        return schedule, "every" if "every" in schedule else "once"

    # ------------------------------------------------------------------ operations

    def create(self, action: str) -> None:
        form = self._after_or("every" if action == "recurring" else action)
        name = self._new_name()
        body = self._body(form, name)
        draw = self.rng.random()
        key = f"key-{name}" if draw < 0.4 else None
        by_key = draw < 0.15  # PUT /v1/jobs/by-key (issue 32): the key is the job's own
        if by_key:
            body = self._keyed(body)
        reply = self._create_once(body, key, form, retry_of=None, by_key=by_key)
        if reply.outcome == "unknown" and key is not None:
            # The same key: at most one job (a PUT's retry finds it and leaves it as it is).
            self._create_once(body, key, form, retry_of=name, by_key=by_key)

    def _keyed(self, body: dict[str, Any]) -> dict[str, Any]:
        """A body for PUT by key: a delay made a run_at (a PUT again of a delay would be a new
        run_at, a change), and a label."""
        schedule = body["schedule"]
        if "delay" in schedule:
            seconds = int(schedule["delay"].removesuffix("s"))
            schedule = {"run_at": format_instant(now_ms() + seconds * 1000)}
        return {**body, "schedule": schedule, "labels": {"chaos": self.tenant.name}}

    def _create_once(
        self,
        body: dict[str, Any],
        key: str | None,
        form: str,
        retry_of: str | None,
        *,
        by_key: bool = False,
    ) -> Reply:
        node_id, url = self._node()
        if by_key and key is not None:
            path, method, headers = f"/v1/jobs/by-key/{key}", "PUT", None
        else:
            path, method = "/v1/jobs", "POST"
            headers = {"Idempotency-Key": key} if key else None
        reply = call(url, method, path, body, token=self.tenant.token, headers=headers)
        request = {"name": body["name"], "body": body, "idempotency_key": key, "form": form}
        if by_key:
            request["by_key"] = True
        if retry_of is not None:
            request["retry_of"] = retry_of
        response = {}
        if reply.status in (200, 201):
            job = reply.body
            response = {k: job.get(k) for k in ("job_id", "next_run_at", "schedule", "created_at")}
            self._know(job["job_id"], body, form)
        self.history.record(
            self.name, "create", self.tenant.name, node_id, reply, request, response
        )
        return reply

    def _know(self, job_id: str, body: dict[str, Any], form: str) -> None:
        if all(j.job_id != job_id for j in self.jobs):
            after = body["schedule"].get("after")
            upstream = None if after is None else after["job_id"]
            known = KnownJob(
                job_id,
                body["name"],
                form,
                upstream=upstream,
                is_doomed=bool(body["payload"].get("doomed")),
                runs_until_ms=_runs_until(body["schedule"]),
                is_excluding="exclude" in body["schedule"],
            )
            self.jobs.append(known)

    def batch(self) -> None:
        forms = [
            self._after_or(self.rng.choice(("once", "once", "every")))
            for _ in range(self.rng.randint(2, 8))
        ]
        names = [self._new_name() for _ in forms]
        bodies = [self._body(form, name) for form, name in zip(forms, names, strict=True)]
        node_id, url = self._node()
        reply = call(url, "POST", "/v1/jobs:batch", {"jobs": bodies}, token=self.tenant.token)
        response: dict[str, Any] = {}
        if reply.status == 200:
            results = reply.body["results"]
            response = {"results": results}
            for body, form, result in zip(bodies, forms, results, strict=True):
                if "job_id" in result:
                    self._know(result["job_id"], body, form)
        request = {"names": names, "bodies": bodies, "forms": forms}
        self.history.record(self.name, "batch", self.tenant.name, node_id, reply, request, response)

    def _choose(self, candidates: list[KnownJob]) -> KnownJob | None:
        return self.rng.choice(candidates) if candidates else None

    def _take_unchanged(self, *, but_not: str, prefer: str | None = None) -> KnownJob | None:
        """A job not yet rescheduled, paused or cancelled (and not of form `but_not`; of form
        `prefer` half the time when there is one), now marked as changed: one change of course
        per job."""
        unchanged = [
            j
            for j in self.jobs
            if not j.is_rescheduled and not j.is_cancel_tried and j.form != but_not
        ]
        preferred = [j for j in unchanged if j.form == prefer]
        job = self._choose(preferred if preferred and self.rng.random() < 0.5 else unchanged)
        if job is not None:
            job.is_rescheduled = True
        return job

    def cancel(self, *, spare_after: bool = False) -> None:
        job = self._choose(
            [
                j
                for j in self.jobs
                if (not j.is_cancel_tried or j.form != "once")
                and not (spare_after and j.form == "after")
            ]
        )
        if job is None:
            return
        job.is_cancel_tried = True
        node_id, url = self._node()
        reply = call(url, "DELETE", f"/v1/jobs/{job.job_id}", token=self.tenant.token)
        request = {"job_id": job.job_id, "name": job.name}
        self.history.record(self.name, "cancel", self.tenant.name, node_id, reply, request)

    def reschedule(self) -> None:
        job = self._take_unchanged(but_not="cron", prefer="after")
        if job is None:
            return
        from_after = job.form == "after"
        schedule, form = self._reschedule_after(job) if from_after else (self._new_schedule(), "")
        node_id, url = self._node()
        reply = call(
            url, "PATCH", f"/v1/jobs/{job.job_id}", {"schedule": schedule}, token=self.tenant.token
        )
        request = {"job_id": job.job_id, "name": job.name, "schedule": schedule}
        if from_after:
            request["from_after"] = True
        response = {}
        if reply.status == 200:
            response = {k: reply.body.get(k) for k in ("schedule", "next_run_at", "version")}
            job.runs_until_ms = _runs_until(schedule)
            if from_after:  # an unknown outcome leaves it as it was, for the workload's choices
                job.form = form
                job.upstream = schedule["after"]["job_id"] if "after" in schedule else None
        self.history.record(
            self.name, "reschedule", self.tenant.name, node_id, reply, request, response
        )

    def pause(self) -> None:
        """Pause a recurring job (never rescheduled); it is resumed 2-8 s later, or stays
        paused if the workload ends first."""
        job = self._take_unchanged(but_not="once")
        if job is None:
            return
        node_id, url = self._node()
        reply = call(url, "POST", f"/v1/jobs/{job.job_id}/pause", token=self.tenant.token)
        request = {"job_id": job.job_id, "name": job.name}
        self.history.record(self.name, "pause", self.tenant.name, node_id, reply, request)
        if reply.outcome != "failed":
            job.resume_at_ms = now_ms() + self.rng.randint(2_000, 8_000)

    def resume(self, job: KnownJob) -> None:
        job.resume_at_ms = None  # one attempt: a failed resume leaves the job paused
        node_id, url = self._node()
        reply = call(url, "POST", f"/v1/jobs/{job.job_id}/resume", token=self.tenant.token)
        request = {"job_id": job.job_id, "name": job.name}
        self.history.record(self.name, "resume", self.tenant.name, node_id, reply, request)

    def pause_queue(self) -> None:
        """Pause one of the tenant's queues for 2-5 s: the consumers' receives get nothing
        meanwhile (checked), the runs wait in it and are delivered after the resume."""
        free = [q for q in QUEUES if q not in self.paused_queues]
        if not free:
            return
        queue = self.rng.choice(free)
        node_id, url = self._node()
        body = {"reason": f"chaos {self.name}"}
        reply = call(url, "POST", f"/v1/queues/{queue}/pause", body, token=self.tenant.token)
        self.history.record(
            self.name, "pause_queue", self.tenant.name, node_id, reply, {"queue": queue}
        )
        # Whatever the answer (it may have been applied): resume it later, until answered.
        self.paused_queues[queue] = now_ms() + self.rng.randint(2_000, 5_000)

    def resume_queue(self, queue: str) -> None:
        node_id, url = self._node()
        reply = call(url, "POST", f"/v1/queues/{queue}/resume", token=self.tenant.token)
        self.history.record(
            self.name, "resume_queue", self.tenant.name, node_id, reply, {"queue": queue}
        )
        if reply.outcome == "ok":
            del self.paused_queues[queue]

    def trigger(self) -> None:
        """One extra run now, outside the schedule, of a job not yet cancelled."""
        job = self._choose([j for j in self.jobs if not j.is_cancel_tried])
        if job is None:
            return
        node_id, url = self._node()
        reply = call(url, "POST", f"/v1/jobs/{job.job_id}/trigger", token=self.tenant.token)
        request = {"job_id": job.job_id, "name": job.name}
        response = {"scheduled_at": reply.body.get("scheduled_at")} if reply.status == 202 else {}
        self.history.record(
            self.name, "trigger", self.tenant.name, node_id, reply, request, response
        )

    def backfill(self) -> None:
        """Backfill the last BACKFILL_SPAN_MS of a recurring or cron job not yet cancelled:
        a cron job's minutes before its creation, the occurrences a pause or a misfire left
        out; the rest of the range has runs already and gets none."""
        job = self._choose(
            [j for j in self.jobs if not j.is_cancel_tried and j.form in ("every", "cron")]
        )
        if job is None:
            return
        now = now_ms()
        body = {
            "from": format_instant(now - BACKFILL_SPAN_MS),
            "to": format_instant(now - 1_000),
        }
        node_id, url = self._node()
        reply = call(url, "POST", f"/v1/jobs/{job.job_id}/backfill", body, token=self.tenant.token)
        request = {"job_id": job.job_id, "name": job.name} | body
        response = {"runs": reply.body.get("runs")} if reply.status == 202 else {}
        self.history.record(
            self.name, "backfill", self.tenant.name, node_id, reply, request, response
        )

    def _new_schedule(self) -> dict[str, Any]:
        """Explicit instants only (no `delay`, no default start), so the new schedule is the
        same whenever the change is applied."""
        now = now_ms()
        if self.rng.random() < 0.5:
            at = now + self.rng.randint(3_000, max(3_000, self.last_run_ms - now - 1_000))
            return {"run_at": format_instant(min(at, self.last_run_ms))}
        every_s = self.rng.choice((2, 4))
        start = now + 3_000
        if start + every_s * 1000 > self.last_run_ms:
            return {"run_at": format_instant(self.last_run_ms)}
        return {
            "every": f"{every_s}s",
            "start_at": format_instant(start),
            "end_at": format_instant(self.last_run_ms),
        }


class Prober:
    """Writes aimed at one node on demand (the nemesis probes a partitioned node with them):
    each `fire` is one create on its own thread, recorded like any other create."""

    def __init__(self, tenant: Tenant, urls: dict[str, str], history: History) -> None:
        self.tenant, self.urls, self.history = tenant, urls, history
        self._count = 0
        self._threads: list[threading.Thread] = []

    def fire(self, node_id: str) -> None:
        self._count += 1
        name = f"probe-{self._count}"
        thread = threading.Thread(target=self._create, args=(node_id, name), daemon=True)
        self._threads.append(thread)
        thread.start()

    def _create(self, node_id: str, name: str) -> None:
        body = {
            "name": name,
            "schedule": {"delay": "3s"},
            "target": {"type": "queue", "name": QUEUES[0]},
            "payload": {"name": name},
            "retry": RETRY,
        }
        reply = call(self.urls[node_id], "POST", "/v1/jobs", body, token=self.tenant.token)
        response = {}
        if reply.status == 201:
            response = {k: reply.body.get(k) for k in ("job_id", "next_run_at", "created_at")}
        request = {"name": name, "body": body, "idempotency_key": None, "form": "once"}
        self.history.record("prober", "create", self.tenant.name, node_id, reply, request, response)

    def join(self, timeout_s: float) -> None:
        for thread in self._threads:
            thread.join(timeout=timeout_s)
