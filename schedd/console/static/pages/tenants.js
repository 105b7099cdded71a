// Tenants (admin): a page at a time through the API's cursor, create one, change its quotas and
// allowed hosts, pause or resume all its runs, rotate its token and signing secret. New credentials are shown once, on this
// page only: they are kept in no storage, URL or log, and leaving the page forgets them.

import { ApiError, call, enc, get, post, query, session } from "../api.js";
import { clear, confirmAction, h, link, notice, table, when } from "../dom.js";

const PAGE = 50;

export async function render(main, params) {
  if (params.tenant_id) return detail(main, params.tenant_id);
  return list(main, params);
}

async function list(main, params) {
  const shown = h("div", { id: "shown-once" });
  const listing = h("section", { id: "tenant-list" });
  const refresh = () => showPage(listing, params.cursor);
  main.append(h("h1", {}, "Tenants"), createForm(shown, refresh), shown, listing);
  await refresh();
}

async function showPage(section, cursor) {
  let page;
  try {
    page = await get(`/v1/tenants${query({ cursor, limit: PAGE })}`, { tenant: null });
  } catch (error) {
    clear(section).append(notice(error.message));
    return;
  }
  const rows = page.tenants.map((t) =>
    h(
      "tr",
      { "data-tenant": t.tenant_id },
      h("td", {}, link(`#/tenants/${enc(t.tenant_id)}`, t.name, { class: "tenant-name" })),
      h("td", { class: "mono" }, t.tenant_id),
      h("td", {}, `${t.active_jobs} / ${t.max_active_jobs}`),
      h("td", {}, t.dispatch_rate),
      h("td", {}, t.allowed_hosts.length ? t.allowed_hosts.join(", ") : "any (guarded)"),
      h("td", {}, when(t.created_at)),
    ),
  );
  clear(section).append(
    rows.length
      ? table(["Name", "Tenant id", "Active jobs / max", "Dispatch rate / s", "Allowed hosts", "Created"], rows, { id: "tenants" })
      : notice(cursor ? "No more tenants." : "No tenants yet.", "info"),
    h(
      "nav",
      { class: "pager" },
      cursor ? link("#/tenants", "First page") : null,
      page.next_cursor ? link(`#/tenants${query({ cursor: page.next_cursor })}`, "Next page", { "data-page": "next" }) : null,
    ),
  );
}

// The fields a create or an edit sends; `tenant` fills them for an edit.
function fields(tenant) {
  const input = (name, label, attrs) => {
    const box = h("input", { name, id: `tenant-${name}`, ...attrs });
    return [box, h("label", { for: `tenant-${name}` }, label)];
  };
  const [name, nameLabel] = input("name", "Name", { required: true, maxlength: 200, value: tenant?.name ?? "" });
  const [maxJobs, maxJobsLabel] = input("max_active_jobs", "Max active jobs", { type: "number", min: 0, step: 1, value: tenant?.max_active_jobs ?? 1000000 });
  const [rate, rateLabel] = input("dispatch_rate", "Dispatch rate (runs/s)", { type: "number", min: 0, step: 1, value: tenant?.dispatch_rate ?? 5000 });
  const hosts = h("textarea", { name: "allowed_hosts", id: "tenant-allowed_hosts", rows: 3, placeholder: "*.acme.example (one per line; empty: any public host)" }, (tenant?.allowed_hosts ?? []).join("\n"));
  const [alert, alertLabel] = input("alert_url", "Dead-letter alert URL (optional)", { type: "url", maxlength: 2048, value: tenant?.alert_url ?? "" });
  const grid = h(
    "div",
    { class: "form-grid" },
    nameLabel, name,
    maxJobsLabel, maxJobs,
    rateLabel, rate,
    h("label", { for: "tenant-allowed_hosts" }, "Allowed hosts"), hosts,
    alertLabel, alert,
  );
  // An empty number box goes as null, so the API names the field instead of storing 0.
  const number = (box) => (box.value.trim() === "" ? null : Number(box.value));
  const body = () => ({
    name: name.value.trim(),
    max_active_jobs: number(maxJobs),
    dispatch_rate: number(rate),
    allowed_hosts: hosts.value.split(/[\s,]+/).filter(Boolean),
    alert_url: alert.value.trim() || null,
  });
  return { grid, body };
}

function createForm(shown, created) {
  const { grid, body } = fields(null);
  const status = h("div", { class: "action-status", role: "status" });
  const form = h("form", { class: "tenant-form", id: "create-tenant" }, grid, h("button", { type: "submit" }, "Create tenant"), status);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const wanted = body();
    if (wanted.alert_url === null) delete wanted.alert_url;
    try {
      const made = await post("/v1/tenants", wanted, { tenant: null });
      status.replaceChildren();
      clear(shown).append(credentials(made, `Tenant ${wanted.name} created.`));
      form.reset();
      await created();
    } catch (error) {
      status.replaceChildren(notice(error.message));
    }
  });
  return h("details", { class: "create" }, h("summary", {}, "New tenant"), form);
}

// The token and signing secret, once: copy them now.
function credentials(made, headline) {
  const row = (label, key, value) => {
    const box = h("input", { type: "text", readonly: true, value, class: "mono secret", "data-secret": key, "aria-label": label, size: 60 });
    const copy = h("button", { type: "button", "data-copy": key }, "Copy");
    copy.addEventListener("click", async () => {
      box.select();
      try {
        await navigator.clipboard.writeText(value);
        copy.textContent = "Copied";
      } catch {
        copy.textContent = "Selected: press Ctrl+C";
      }
    });
    return [h("dt", {}, label), h("dd", {}, box, " ", copy)];
  };
  return h(
    "section",
    { class: "credentials", "data-tenant": made.tenant_id },
    notice(`${headline} Copy the token and the signing secret now: they are shown this once, and schedd keeps only the token's hash.`, "ok"),
    h("dl", { class: "summary" }, row("Tenant id", "tenant_id", made.tenant_id), row("Token", "token", made.token), row("Signing secret", "signing_secret", made.signing_secret)),
  );
}

async function detail(main, tenantId, flash = null) {
  const path = `/v1/tenants/${enc(tenantId)}`;
  main.append(h("p", {}, link("#/tenants", "← Tenants")));
  let tenant;
  try {
    tenant = await get(path, { tenant: null });
  } catch (error) {
    const gone = error instanceof ApiError && error.status === 404;
    main.append(h("h1", {}, "Tenant"), notice(gone ? "No such tenant." : error.message));
    return;
  }
  const shown = h("div", { id: "shown-once" });
  const status = h("div", { class: "action-status", role: "status" }, flash);
  const { grid, body } = fields(tenant);
  const form = h("form", { class: "tenant-form", id: "edit-tenant" }, grid, h("button", { type: "submit" }, "Save"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const changes = changed(tenant, body());
    if (!Object.keys(changes).length) return status.replaceChildren(notice("Nothing changed.", "info"));
    if (!(await confirmAction(`Change ${Object.keys(changes).join(", ")} of this tenant?`, tenant.name))) return;
    try {
      await call("PATCH", path, { body: changes, tenant: null });
      await detail(clear(main), tenantId, notice("Saved.", "ok"));
    } catch (error) {
      status.replaceChildren(notice(error.message));
    }
  });
  const rotate = h("button", { type: "button", class: "danger", "data-action": "rotate" }, "Rotate token and signing secret");
  rotate.addEventListener("click", async () => {
    const question = "Rotate this tenant's token and signing secret?";
    const what = "The old token stops working at once; callbacks are signed with the old secret beside the new one for the overlap set in the node's config.";
    if (!(await confirmAction(question, what))) return;
    try {
      clear(shown).append(credentials(await post(`${path}/rotate`, undefined, { tenant: null }), "Rotated."));
    } catch (error) {
      status.replaceChildren(notice(error.message));
    }
  });
  // Pause (a reason asked in the dialog) or resume every run of the tenant.
  const reason = h("input", { type: "text", id: "pause-reason", maxlength: 500, placeholder: "reason (optional)", "aria-label": "Why" });
  const pausing = !tenant.paused;
  const pauseOrResume = h("button", { type: "button", class: pausing ? "danger" : "", "data-action": pausing ? "pause" : "resume" }, pausing ? "Pause all its runs" : "Resume its runs");
  pauseOrResume.addEventListener("click", async () => {
    const question = pausing
      ? "Pause this tenant? None of its runs is claimed until it is resumed; its API keeps working."
      : "Resume this tenant? Each job's misfire policy decides on the runs it missed, under its dispatch rate.";
    if (!(await confirmAction(question, tenant.name, pausing ? reason : null))) return;
    try {
      const body = pausing && reason.value.trim() ? { reason: reason.value.trim() } : undefined;
      await post(`${path}/${pausing ? "pause" : "resume"}`, body, { tenant: null });
      await detail(clear(main), tenantId, notice(pausing ? "Paused." : "Resumed.", "ok"));
    } catch (error) {
      status.replaceChildren(notice(error.message));
    }
  });
  const state = tenant.paused
    ? h("span", { class: "status paused", id: "tenant-state" }, tenant.paused_reason ? `paused: ${tenant.paused_reason}` : "paused")
    : h("span", { class: "status active", id: "tenant-state" }, "active");
  const actFor = h("button", { type: "button", "data-action": "act-for" }, "See its jobs");
  actFor.addEventListener("click", () => {
    session.tenant = tenant.tenant_id;
    location.hash = "#/jobs";
  });
  main.append(
    h("h1", { id: "tenant-title" }, tenant.name),
    h(
      "dl",
      { class: "summary" },
      [
        ["Tenant id", h("span", { class: "mono" }, tenant.tenant_id)],
        ["Dispatch", state],
        ["Active jobs", `${tenant.active_jobs} of ${tenant.max_active_jobs}`],
        ["Retention", Object.keys(tenant.retention ?? {}).length ? JSON.stringify(tenant.retention) : "the cluster's defaults"],
        ["Created", when(tenant.created_at)],
        ["Updated", when(tenant.updated_at)],
      ].map(([key, value]) => [h("dt", {}, key), h("dd", {}, value)]),
    ),
    h("div", { class: "actions" }, actFor, pauseOrResume, rotate),
    shown,
    h("h2", {}, "Quotas and hosts"),
    form,
    status,
  );
}

// The PATCH body: only what differs from the stored tenant.
function changed(tenant, wanted) {
  const out = {};
  for (const [key, value] of Object.entries(wanted)) {
    if (JSON.stringify(value) !== JSON.stringify(tenant[key] ?? null)) out[key] = value;
  }
  return out;
}
