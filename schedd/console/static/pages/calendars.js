// The tenant's calendars (GET /v1/calendars): named sets of local dates that cron and every
// schedules exclude (`schedule.exclude`). A calendar's page lists its dates by year and how many
// jobs exclude it; dates are added as text (one YYYY-MM-DD a line), replaced whole (PUT), and a
// calendar no job uses is deleted, confirmed first. schedctl imports .ics files.

import { call, enc, get, post } from "../api.js";
import { clear, confirmAction, h, link, notice, table, when } from "../dom.js";

export async function render(main, params) {
  if (params.name) return detail(main, params.name);
  return list(main);
}

async function list(main) {
  main.append(h("h1", {}, "Calendars"));
  const answer = await get("/v1/calendars");
  if (!answer.calendars.length) main.append(notice("No calendars yet.", "info"));
  else {
    const rows = answer.calendars.map((c) =>
      h(
        "tr",
        { "data-calendar": c.name },
        h("td", {}, link(`#/calendars/${enc(c.name)}`, c.name, { class: "mono calendar-name" })),
        h("td", {}, c.dates_count),
        h("td", {}, c.first ?? "—"),
        h("td", {}, c.last ?? "—"),
        h("td", {}, when(c.updated_at)),
      ),
    );
    main.append(table(["Calendar", "Dates", "First", "Last", "Changed"], rows, { id: "calendars" }));
  }
  main.append(createForm());
}

// Dates as the API takes them, from text: one YYYY-MM-DD a line (commas and spaces too).
function datesOf(text) {
  return text.split(/[\s,]+/).filter(Boolean);
}

function createForm() {
  const name = h("input", { name: "name", id: "calendar-name", required: true, maxlength: 64, placeholder: "us-holidays" });
  const dates = h("textarea", { name: "dates", id: "calendar-dates", rows: 6, placeholder: "2026-12-25\n2027-01-01" });
  const status = h("div", { class: "action-status", role: "status" });
  const form = h(
    "form",
    { id: "calendar-create", class: "calendar-form" },
    h("h2", {}, "New calendar"),
    h("label", {}, "Name ", name),
    h("label", {}, "Dates (YYYY-MM-DD, one a line) ", dates),
    h("button", { type: "submit" }, "Create"),
    status,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      await post("/v1/calendars", { name: name.value.trim(), dates: datesOf(dates.value) });
      location.hash = `#/calendars/${enc(name.value.trim())}`;
    } catch (error) {
      clear(status).append(notice(error.message));
    }
  });
  return form;
}

async function detail(main, name) {
  const calendar = await get(`/v1/calendars/${enc(name)}`);
  main.append(
    h("h1", {}, "Calendar ", h("span", { class: "mono", id: "calendar-title" }, calendar.name)),
    h(
      "p",
      { id: "calendar-summary" },
      `${calendar.dates_count} date${calendar.dates_count === 1 ? "" : "s"}${calendar.first ? `, ${calendar.first} to ${calendar.last}` : ""}; `,
      h("span", { id: "calendar-used-by" }, `excluded by ${calendar.used_by} job(s)`),
      `; changed ${when(calendar.updated_at)}`,
    ),
    byYear(calendar.dates),
    editForm(calendar),
    h("p", {}, link("#/calendars", "All calendars")),
  );
}

function byYear(dates) {
  const years = new Map();
  for (const date of dates) {
    const year = date.slice(0, 4);
    if (!years.has(year)) years.set(year, []);
    years.get(year).push(date);
  }
  const rows = [...years].map(([year, days]) => h("tr", {}, h("td", {}, year), h("td", { class: "mono dates" }, days.join("  "))));
  return table(["Year", "Dates"], rows, { id: "calendar-dates-table" });
}

function editForm(calendar) {
  const dates = h("textarea", { id: "calendar-edit-dates", rows: 8 }, calendar.dates.join("\n"));
  const status = h("div", { class: "action-status", role: "status" });
  const save = h("button", { type: "button", "data-action": "save-dates" }, "Save dates");
  const remove = h("button", { type: "button", class: "danger", "data-action": "delete-calendar", disabled: calendar.used_by > 0, title: calendar.used_by > 0 ? "Jobs exclude it: cancel them or change their schedules first" : "" }, "Delete calendar");
  const path = `/v1/calendars/${enc(calendar.name)}`;
  save.addEventListener("click", async () => {
    const wanted = datesOf(dates.value);
    if (!(await confirmAction(`Replace the dates of ${calendar.name}?`, `${wanted.length} dates; occurrences not yet claimed follow the new dates.`))) return;
    try {
      await call("PUT", path, { body: { dates: wanted } });
      location.reload();
    } catch (error) {
      clear(status).append(notice(error.message));
    }
  });
  remove.addEventListener("click", async () => {
    if (!(await confirmAction(`Delete the calendar ${calendar.name}?`))) return;
    try {
      await call("DELETE", path);
      location.hash = "#/calendars";
    } catch (error) {
      clear(status).append(notice(error.message));
    }
  });
  return h("section", { class: "calendar-edit" }, h("h2", {}, "Dates"), dates, h("div", { class: "buttons" }, save, remove), status);
}
