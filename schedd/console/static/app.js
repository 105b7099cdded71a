// The console's shell: sign-in, the layout and the hash router (#/jobs, #/jobs/<id>, ...).
// Pages are modules exporting render(main, params) that may return a cleanup function.

import { ApiError, get, query, session } from "./api.js";
import { clear, h, notice } from "./dom.js";
import * as calendars from "./pages/calendars.js";
import * as deadletters from "./pages/deadletters.js";
import * as job from "./pages/job.js";
import * as jobs from "./pages/jobs.js";
import * as overview from "./pages/overview.js";
import * as queues from "./pages/queues.js";
import * as signin from "./pages/signin.js";
import * as tenants from "./pages/tenants.js";

const ROUTES = [
  { path: /^\/overview$/, page: overview, nav: "overview", admin: true },
  { path: /^\/tenants$/, page: tenants, nav: "tenants", admin: true },
  { path: /^\/tenants\/([^/]+)$/, page: tenants, nav: "tenants", admin: true, names: ["tenant_id"] },
  { path: /^\/jobs$/, page: jobs, nav: "jobs", tenant: true },
  { path: /^\/jobs\/([^/]+)$/, page: job, nav: "jobs", tenant: true, names: ["job_id"] },
  { path: /^\/queues$/, page: queues, nav: "queues", tenant: true },
  { path: /^\/calendars$/, page: calendars, nav: "calendars", tenant: true },
  { path: /^\/calendars\/([^/]+)$/, page: calendars, nav: "calendars", tenant: true, names: ["name"] },
  { path: /^\/deadletters$/, page: deadletters, nav: "deadletters", tenant: true },
  {
    path: /^\/deadletters\/([^/]+)$/,
    page: deadletters,
    nav: "deadletters",
    tenant: true,
    names: ["id"],
  },
];
const NAV = [
  ["overview", "Overview", true],
  ["jobs", "Jobs", false],
  ["queues", "Queues", false],
  ["deadletters", "Dead letters", false],
  ["calendars", "Calendars", false],
  ["tenants", "Tenants", true],
];

let cleanup = null;

export function go(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

function parse() {
  const raw = location.hash.replace(/^#/, "") || "/";
  const [path, search = ""] = raw.split("?", 2);
  return { path, params: Object.fromEntries(new URLSearchParams(search)) };
}

async function route() {
  if (cleanup) cleanup();
  cleanup = null;
  const root = document.getElementById("root");
  const { path, params } = parse();
  if (!session.token) {
    clear(root).append(signin.render({ onSignedIn: () => go(session.isAdmin ? "#/overview" : "#/jobs") }));
    return;
  }
  const found = ROUTES.find((r) => r.path.test(path));
  if (!found) {
    go(session.isAdmin ? "#/overview" : "#/jobs");
    return;
  }
  const match = found.path.exec(path);
  (found.names ?? []).forEach((name, i) => {
    params[name] = decodeURIComponent(match[i + 1]);
  });
  const main = h("main", { id: "main" });
  clear(root).append(await layout(found.nav), main);
  if (found.admin && !session.isAdmin) {
    main.append(notice("This page needs the admin token."));
  } else if (found.tenant && session.isAdmin && !session.tenant) {
    main.append(h("h1", {}, "Choose a tenant"), notice("The admin sees a tenant's jobs, queues and dead letters by choosing it above.", "info"));
  } else {
    cleanup = (await found.page.render(main, params)) ?? null;
  }
}

async function layout(current) {
  const links = NAV.filter(([, , adminOnly]) => !adminOnly || session.isAdmin).map(([key, label]) =>
    h("a", { href: `#/${key}`, class: key === current ? "current" : null, "data-nav": key }, label),
  );
  const signOut = h("button", { type: "button", class: "link", "data-action": "sign-out" }, "Sign out");
  signOut.addEventListener("click", () => {
    session.end();
    go("#/");
  });
  return h(
    "header",
    { class: "bar" },
    h("span", { class: "brand" }, "schedd"),
    h("nav", {}, links),
    session.isAdmin ? await tenantPicker() : h("span", { class: "who" }, "tenant token"),
    signOut,
  );
}

async function tenantPicker() {
  const select = h("select", { "aria-label": "Tenant", id: "tenant-picker" }, h("option", { value: "" }, "(no tenant)"));
  try {
    const page = await get(`/v1/tenants${query({ limit: 1000 })}`, { tenant: null });
    for (const tenant of page.tenants) {
      const label = tenant.name ? `${tenant.name} (${tenant.tenant_id})` : tenant.tenant_id;
      select.append(h("option", { value: tenant.tenant_id, selected: tenant.tenant_id === session.tenant }, label));
    }
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return signedOut();
  }
  select.addEventListener("change", () => {
    session.tenant = select.value;
    route();
  });
  return h("label", { class: "who" }, "admin, acting for ", select);
}

function signedOut() {
  session.end();
  setTimeout(route);
  return h("span");
}

window.addEventListener("hashchange", route);
window.addEventListener("unhandledrejection", (event) => {
  if (event.reason instanceof ApiError && event.reason.status === 401) {
    session.end();
    route();
  }
});
route();
