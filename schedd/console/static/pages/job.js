// One job: its spec, the next 10 occurrences (the preview API; for a job that runs after
// another, which job and which end start it), the jobs that run after it, its runs with their
// attempts (and the upstream run that started one), its versions (each change of its spec or
// status), its audit trail, and the actions (pause, resume, trigger now, reschedule, cancel),
// each confirmed first.

import { ApiError, call, enc, get, post, query } from "../api.js";
import { clear, confirmAction, h, link, notice, pretty, table, when } from "../dom.js";
import { ENDS, scheduleText, seconds, targetText, upstream } from "../format.js";

const RUNS = 20;
const VERSIONS = 20;
const AUDIT = 50;

export async function render(main, params) {
  const path = `/v1/jobs/${enc(params.job_id)}`;
  let job;
  try {
    job = await get(path);
  } catch (error) {
    const gone = error instanceof ApiError && error.status === 404;
    main.append(h("h1", {}, "Job"), notice(gone ? "No such job." : error.message));
    return;
  }
  const status = h("div", { class: "action-status", role: "status" });
  const runs = h("section", { id: "runs" });
  const history = h("section", { id: "versions" });
  const trail = h("section", { id: "audit" });
  const refresh = () => render(clear(main), params);
  const [last, versions] = await Promise.all([lastRun(path), readVersions(path)]);
  main.append(
    h("p", {}, link("#/jobs", "← Jobs")),
    h("h1", { id: "job-title" }, job.name || job.job_id),
    summary(job, last, versions),
    actions(job, path, status, refresh),
    status,
    h("div", { class: "columns" }, h("section", {}, h("h2", {}, "Spec"), pretty(job)), await upcoming(job)),
    runs,
    history,
    trail,
  );
  showVersions(history, path, versions);
  await Promise.all([showRuns(runs, path, params.runs_cursor), showAudit(trail, job.job_id)]);
}

// The newest page of the job's versions, or the error that kept it from being read.
async function readVersions(path, cursor = undefined) {
  try {
    return await get(`${path}/versions${query({ cursor, limit: VERSIONS })}`);
  } catch (error) {
    return { error };
  }
}

// The newest run (runs come newest first), or null when there is none or it cannot be read:
// a job "completed" says its schedule is done, not that its runs went well.
async function lastRun(path) {
  try {
    return (await get(`${path}/runs${query({ limit: 1 })}`)).runs[0] ?? null;
  } catch {
    return null;
  }
}

function lastRunText(last) {
  if (!last) return null;
  const title = `The newest run, scheduled ${when(last.scheduled_at)}`;
  return [" · ", h("span", { class: `status ${last.status}`, id: "job-last-run", title }, `last run ${last.status}`)];
}

// Whether it is overdue, and why it is paused when whoever paused it said so (a person, or its
// failure policy).
function pausedText(job) {
  const overdue = job.overdue
    ? [" · ", h("span", { class: "status dead", id: "job-overdue", title: "Two occurrences came since its last success" }, "overdue")]
    : [];
  if (!job.paused_reason) return overdue;
  return [...overdue, " · ", h("span", { id: "job-paused-reason" }, `paused: ${job.paused_reason}`)];
}

// A failure policy in words: after how many dead runs in a row, what happens.
function failureText(policy) {
  const acts = [policy.alert_url ? `alert ${policy.alert_url}` : null, policy.pause ? "pause" : null].filter(Boolean);
  return `after ${policy.after} dead runs in a row: ${acts.join(" and ")}`;
}

// The newest run that died, and how many died since the last success (read from the newest
// 50 runs: 50 means 50 or more).
function lastFailure(job) {
  if (!job.last_failure_at) return "—";
  const failed = job.consecutive_failures ?? 0;
  if (!failed) return when(job.last_failure_at);
  const count = failed >= 50 ? "50+" : String(failed);
  return [when(job.last_failure_at), " · ", h("span", { class: "status dead" }, `${count} in a row`)];
}

// The job's version (its changes: created, updated, paused...) apart from the claim fence (the job
// object's `version`, which every claimed run raises too).
function summary(job, last, versions) {
  const newest = versions.versions?.[0];
  const version = newest
    ? h("span", { id: "job-spec-version" }, `${newest.version} · ${newest.change} ${when(newest.changed_at)}`)
    : "—";
  const fence = h(
    "dt",
    { id: "job-version-label", title: "The job object's version: it fences claims, so every claimed run raises it as well as every change. A rise does not mean the spec changed: see Versions below." },
    "Claim fence",
  );
  const rows = [
    ["Status", [h("span", { class: `status ${job.status}`, id: "job-status" }, job.status), lastRunText(last), pausedText(job)]],
    ...(job.key ? [["Key", h("span", { class: "mono", id: "job-key" }, job.key)]] : []),
    ...(Object.keys(job.labels ?? {}).length ? [["Labels", labelsText(job.labels)]] : []),
    ...(job.max_runs ? [["Runs", h("span", { id: "job-runs-limit" }, `${job.runs_started ?? 0} of max ${job.max_runs}`)]] : []),
    ...(job.on_failure ? [["On failure", h("span", { id: "job-on-failure" }, failureText(job.on_failure))]] : []),
    ["Schedule", scheduleText(job.schedule)],
    ...(job.downstream?.length ? [[downstreamLabel(), downstreamText(job.downstream)]] : []),
    ["Target", targetText(job.target)],
    ["Next run", upstream(job.schedule) ? runsWhen(upstream(job.schedule), "when") : when(job.next_run_at)],
    ["Last success", h("span", { id: "job-last-success" }, when(job.last_success_at))],
    ["Last failure", h("span", { id: "job-last-failure" }, lastFailure(job))],
    ["Version", version],
    [fence, h("span", { id: "job-fence" }, job.version)],
    ["Job id", h("span", { class: "mono" }, job.job_id)],
  ];
  return h("dl", { class: "summary" }, rows.map(([key, value]) => [typeof key === "string" ? h("dt", {}, key) : key, h("dd", {}, value)]));
}

// "Runs when job_X succeeds": the job whose runs start this one, as a link, and how they end.
function runsWhen(up, opening = "Runs when") {
  return [`${opening} `, link(`#/jobs/${enc(up.job_id)}`, up.job_id, { class: "mono upstream" }), ` ${ENDS[up.on] ?? `ends (${up.on})`}`];
}

function downstreamLabel() {
  const title = "The jobs that run after this one: each gets a run when a run of this job ends as it says";
  return h("dt", { title }, "Downstream");
}

// The jobs that run after this one (GET /v1/jobs/{id} gives at most 1,000), each as a link.
function downstreamText(downstream) {
  return h(
    "span",
    { id: "job-downstream" },
    downstream.map((d, i) => [i ? ", " : "", link(`#/jobs/${enc(d.job_id)}`, d.job_id, { class: "mono", "data-downstream": d.job_id }), ` on ${d.on}`]),
  );
}

// Each label as a link to the jobs that have it.
function labelsText(labels) {
  return h(
    "span",
    { id: "job-labels" },
    Object.entries(labels).map(([name, value]) =>
      h("a", { class: "label", href: `#/jobs?label=${encodeURIComponent(`${name}=${value}`)}` }, `${name}=${value}`),
    ),
  );
}

function actions(job, path, status, refresh) {
  const live = job.status === "active" || job.status === "paused";
  const act = (label, name, question, run, enabled = live, extra = null) =>
    h(
      "button",
      {
        type: "button",
        "data-action": name,
        disabled: !enabled,
        onclick: async () => {
          if (!(await confirmAction(question, job.name || job.job_id, extra))) return;
          try {
            await run();
            status.replaceChildren(notice(`${label}: done.`, "ok"));
            setTimeout(refresh, 300);
          } catch (error) {
            status.replaceChildren(notice(`${label}: ${error.message}`));
          }
        },
      },
      label,
    );
  const schedule = h("textarea", { id: "new-schedule", rows: 2, "aria-label": "New schedule (JSON)" }, JSON.stringify(job.schedule));
  const reason = h("input", { id: "pause-reason", type: "text", maxlength: 500, placeholder: "reason (optional)", "aria-label": "Why" });
  // The job's payload to start from (empty for none: an empty box sends null).
  const payload = h("textarea", { id: "trigger-payload", rows: 2, "aria-label": "This run's payload (JSON)" }, job.payload == null ? "" : JSON.stringify(job.payload));
  const pauseBody = () => (reason.value.trim() ? { reason: reason.value.trim() } : undefined);
  return h(
    "div",
    { class: "actions" },
    act("Pause", "pause", "Pause this job? No new runs fire until it is resumed.", () => post(`${path}/pause`, pauseBody()), job.status === "active", reason),
    act("Resume", "resume", "Resume this job from now?", () => post(`${path}/resume`), job.status === "paused"),
    act("Trigger now", "trigger", "Run this job once now, outside its schedule?", () => post(`${path}/trigger`)),
    h(
      "details",
      { class: "trigger-payload" },
      h("summary", {}, "Trigger with a payload"),
      payload,
      act("Trigger with this payload", "trigger-payload", "Run this job once now with this payload (for this run only)?", () =>
        post(`${path}/trigger`, { payload: payload.value.trim() ? JSON.parse(payload.value) : null }),
      ),
    ),
    act("Cancel", "cancel", "Cancel this job? Its future runs will not fire; this cannot be undone.", () => call("DELETE", path)),
    changeSchedule(job, schedule, (enabled) =>
      act("Save schedule", "reschedule", "Replace this job's schedule with the one previewed?", () =>
        call("PATCH", path, { body: { schedule: JSON.parse(schedule.value) } }),
      enabled),
    ),
  );
}

// "Change schedule": the proposed schedule's next 10 runs beside the current one's (both from
// the preview API, in their zones with their DST notes) before it is saved; Save stays disabled
// until the text in the box has been previewed.
function changeSchedule(job, schedule, saveButton) {
  const save = saveButton(false);
  const compare = h("div", { id: "schedule-compare", class: "compare" });
  const preview = async () => {
    save.disabled = true;
    let proposed;
    try {
      proposed = JSON.parse(schedule.value);
    } catch (error) {
      compare.replaceChildren(notice(`Not JSON: ${error.message}`));
      return;
    }
    try {
      compare.replaceChildren(...(await comparison(job.schedule, proposed)));
      save.disabled = !(job.status === "active" || job.status === "paused");
    } catch (error) {
      compare.replaceChildren(notice(error.message));
    }
  };
  schedule.addEventListener("input", () => {
    save.disabled = true;
    compare.replaceChildren();
  });
  return h(
    "details",
    { class: "reschedule" },
    h("summary", {}, "Change schedule"),
    schedule,
    h("button", { type: "button", "data-action": "preview-schedule", onclick: preview }, "Preview change"),
    save,
    compare,
  );
}

// The current and the proposed schedule's next 10 runs side by side, from one preview call. An
// after schedule has no times of its own (the preview API refuses it): its side says when it
// runs instead, and the other side is previewed alone when it is the proposed one.
async function comparison(current, proposed) {
  const body = { after: new Date().toISOString(), count: 10 };
  const [was, next] = [upstream(current), upstream(proposed)];
  const side = (title, content) => h("section", {}, h("h3", {}, title), content);
  if (!was && !next) {
    const answer = await post("/v1/schedules:preview", { ...body, schedule: proposed, current });
    return [
      side("Current", occurrenceTable(answer.current_occurrences, "compare-current")),
      side("Proposed", occurrenceTable(answer.occurrences, "compare-proposed")),
    ];
  }
  if (next && typeof next.job_id !== "string") throw new Error("schedule.after.job_id: the job to run after is missing");
  const proposedSide = next
    ? afterNote(next, "compare-proposed-after")
    : occurrenceTable((await post("/v1/schedules:preview", { ...body, schedule: proposed })).occurrences, "compare-proposed");
  const currentSide = was
    ? afterNote(was, "compare-current-after")
    : h("p", { class: "hint", id: "compare-current-text" }, `${scheduleText(current)}: not previewed, as the proposed schedule has no times to set beside it.`);
  return [side("Current", currentSide), side("Proposed", proposedSide)];
}

// Why an after schedule shows no runs in the comparison.
function afterNote(up, id) {
  return h(
    "div",
    { id, class: "after-note" },
    h("p", {}, runsWhen(up), "."),
    h("p", { class: "hint" }, "No side-by-side preview: an after schedule has no times of its own. Each such run of that job gives this one a run at the same scheduled time."),
  );
}

// Runs as the server described them: the wall time in the schedule's zone (its offset and the
// zone's name for it, as given: the browser converts nothing), UTC and the DST note.
function occurrenceTable(occurrences, id) {
  if (!occurrences.length) return notice("No runs left: the schedule has ended.", "info");
  const zone = occurrences[0].zone;
  const rows = occurrences.map((o) =>
    h(
      "tr",
      { "data-at": o.at },
      h("td", { class: "mono local" }, localText(o)),
      h("td", { class: "mono utc" }, when(o.at)),
      h("td", { class: o.note ? "note dst" : "note" }, o.note ?? ""),
    ),
  );
  return table([`Local (${zone})`, "UTC", "Note"], rows, { id, class: "occurrences" });
}

function localText(occurrence) {
  const text = occurrence.local; // "2027-03-28T03:00:00+02:00": seconds shown when not 00
  const time = text.slice(17, 19) === "00" ? text.slice(11, 16) : text.slice(11, 19);
  return `${text.slice(0, 10)} ${time} ${occurrence.abbreviation} (${text.slice(19)})`;
}

// The next 10 occurrences from the preview API; for an after schedule, which has no times of its
// own, the job whose runs start it instead.
async function upcoming(job) {
  const up = upstream(job.schedule);
  const section = h("section", { id: "upcoming" }, h("h2", {}, up ? "Next runs" : "Next 10 occurrences"));
  if (job.status !== "active") {
    section.append(notice(`None while the job is ${job.status}.`, "info"));
    return section;
  }
  if (up) {
    section.append(
      h("p", { id: "upcoming-after" }, runsWhen(up), "."),
      h("p", { class: "hint" }, "Each such run of that job gives this one a run at the same scheduled time (shown below as triggered by it)."),
    );
    return section;
  }
  try {
    const preview = await post("/v1/schedules:preview", { schedule: job.schedule, after: new Date().toISOString(), count: 10 });
    section.append(occurrenceTable(preview.occurrences, "upcoming-table"));
  } catch (error) {
    section.append(notice(error.message));
  }
  return section;
}

async function showRuns(section, path, cursor) {
  clear(section).append(h("h2", {}, "Runs"));
  let page;
  try {
    page = await get(`${path}/runs${query({ cursor, limit: RUNS, outputs: "true" })}`);
  } catch (error) {
    section.append(notice(error.message));
    return;
  }
  // The "Triggered by" column only on a page where a run was started by another job's run.
  const triggered = page.runs.some((run) => run.triggered_by);
  const headers = ["Scheduled", "Status", ...(triggered ? ["Triggered by"] : []), "Attempt", "Dispatched", "Finished", "Attempts"];
  if (!page.runs.length) section.append(notice("No runs yet.", "info"));
  else section.append(table(headers, page.runs.map((run) => runRow(run, triggered)), { id: "runs-table" }));
  if (page.next_cursor) {
    section.append(h("button", { type: "button", class: "link", onclick: () => showRuns(section, path, page.next_cursor) }, "Older runs"));
  }
}

// How long an attempt took (its HTTP call or publish), when it has finished.
function took(attempt) {
  if (!attempt.finished_at) return "";
  const ms = Date.parse(attempt.finished_at) - Date.parse(attempt.started_at);
  return Number.isFinite(ms) && ms >= 0 ? ` in ${seconds(ms / 1000)}` : "";
}

// What set a run apart: a backfill added it, or a trigger gave it its own payload.
function runMarks(run) {
  const marks = [run.backfill ? "backfill" : null, run.payload_overridden ? "own payload" : null].filter(Boolean);
  return marks.map((mark) => [" ", h("span", { class: "mark" }, mark)]);
}

// The run of another job whose end started this one: that job (a link), its scheduled time and
// how it ended; "—" for a run of this job not started so (a trigger by hand).
function triggeredText(by) {
  if (!by) return "—";
  return [
    link(`#/jobs/${enc(by.job_id)}`, by.job_id, { class: "mono" }),
    " · run ",
    h("span", { class: "mono" }, when(by.scheduled_at)),
    " ",
    h("span", { class: `status ${by.status}` }, by.status),
  ];
}

// What an attempt printed (its consumer's report: a command's stdout and stderr, cut to its
// first and last 4,096 characters by the server), folded away until asked for; shown as text.
function outputOf(text) {
  return h("details", { class: "output" }, h("summary", {}, "output"), h("pre", {}, text));
}

function runRow(run, triggered) {
  const attempts = (run.attempts ?? []).map((a) =>
    h(
      "li",
      {},
      `#${a.attempt} ${a.outcome ?? "…"} at ${when(a.started_at)}${took(a)}`,
      a.error ? h("span", { class: "error" }, ` — ${a.error}`) : null,
      a.output != null ? outputOf(a.output) : null,
    ),
  );
  return h(
    "tr",
    { "data-run": run.scheduled_at },
    h("td", { class: "mono" }, when(run.scheduled_at)),
    h("td", { class: `status ${run.status}` }, run.status, runMarks(run)),
    triggered ? h("td", { class: "triggered-by" }, triggeredText(run.triggered_by)) : null,
    h("td", {}, run.attempt),
    h("td", {}, when(run.dispatched_at)),
    h("td", {}, when(run.finished_at)),
    h("td", {}, attempts.length ? h("ul", { class: "attempts" }, attempts) : "—"),
  );
}

// The job's versions, newest first (GET /v1/jobs/{id}/versions): each change of its spec or
// status, who made it, what it changed from the version below it, and the spec after it.
function showVersions(section, path, page, body = undefined) {
  if (!body) {
    body = h("tbody");
    const headers = ["Version", "When", "Change", "By", "What changed", "Spec after"];
    clear(section).append(h("h2", {}, "Versions"), h("table", { id: "versions-table" }, h("thead", {}, h("tr", {}, headers.map((t) => h("th", {}, t)))), body));
  }
  section.querySelector("button.more")?.remove();
  if (page.error) {
    section.append(notice(page.error.message));
    return;
  }
  page.versions.forEach((version, i) => body.append(versionRow(version, page.versions[i + 1])));
  if (page.next_cursor) {
    const more = async () => showVersions(section, path, await readVersions(path, page.next_cursor), body);
    section.append(h("button", { type: "button", class: "link more", onclick: more }, "Older versions"));
  }
}

const STATUS_AFTER = { pause: "paused", resume: "active", cancel: "cancelled" };

function versionRow(version, older) {
  const spec = version.spec === null ? "not recorded" : h("details", {}, h("summary", {}, "spec"), pretty(version.spec));
  return h(
    "tr",
    { "data-version": version.version },
    h("td", {}, version.version),
    h("td", { class: "mono" }, when(version.changed_at)),
    h("td", { class: "change" }, version.change),
    h("td", {}, version.changed_by ?? "—"),
    h("td", { class: "what" }, changedText(version, older)),
    h("td", {}, spec),
  );
}

// What a version changed: the status it set, or the spec fields that differ from the version
// before it (the fields its PATCH named when that version is not on the page or not recorded).
function changedText(version, older) {
  if (version.change === "create") return "created";
  if (STATUS_AFTER[version.change]) return `status → ${STATUS_AFTER[version.change]}`;
  if (version.spec && older?.spec) {
    const names = Object.keys(version.spec).filter((key) => JSON.stringify(version.spec[key]) !== JSON.stringify(older.spec[key]));
    return names.length ? names.join(", ") : "nothing";
  }
  return (version.fields ?? []).join(", ") || "—";
}

// The job's audit trail, oldest first (GET /v1/audit?job_id=): who created, paused, triggered...
async function showAudit(section, jobId, cursor = undefined, body = undefined) {
  if (!body) {
    body = h("tbody");
    clear(section).append(h("h2", {}, "Audit trail"), h("table", { id: "audit-table" }, h("thead", {}, h("tr", {}, ["When", "Actor", "Action", "Detail"].map((t) => h("th", {}, t)))), body));
  }
  section.querySelector("button.more")?.remove();
  let page;
  try {
    page = await get(`/v1/audit${query({ job_id: jobId, cursor, limit: AUDIT })}`);
  } catch (error) {
    section.append(notice(error.message));
    return;
  }
  for (const record of page.audit) {
    body.append(
      h(
        "tr",
        { "data-seq": record.seq },
        h("td", { class: "mono" }, when(record.at)),
        h("td", {}, record.actor),
        h("td", { class: "action" }, record.action),
        h("td", { class: "mono" }, record.detail === null ? "" : JSON.stringify(record.detail)),
      ),
    );
  }
  if (!cursor && !page.audit.length) body.append(h("tr", {}, h("td", { colspan: 4 }, "No records kept (retention prunes old ones).")));
  if (page.next_cursor) {
    section.append(h("button", { type: "button", class: "link more", onclick: () => showAudit(section, jobId, page.next_cursor, body) }, "Later records"));
  }
}
