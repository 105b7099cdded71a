// Short texts for a job's schedule and target in tables (the job page shows the full spec).

export function scheduleText(schedule) {
  if (!schedule || typeof schedule !== "object") return String(schedule ?? "—");
  return Object.entries(schedule)
    .map(([key, value]) => {
      if (key === "exclude" && Array.isArray(value)) return `except on ${value.join(", ")}`; // calendars
      if (key === "after" && value && typeof value === "object") return `after ${value.job_id} on ${value.on ?? "success"}`;
      return `${key} ${typeof value === "object" ? JSON.stringify(value) : value}`;
    })
    .join(", ");
}

// The upstream of a "run after" schedule ({"after": {"job_id", "on"}}), or null for a schedule
// with times of its own.
export function upstream(schedule) {
  const after = schedule && typeof schedule === "object" ? schedule.after : null;
  return after && typeof after === "object" ? { job_id: after.job_id, on: after.on ?? "success" } : null;
}

// How a run of the upstream ends for `on`: "Runs when job_X succeeds".
export const ENDS = { success: "succeeds", failure: "fails", finished: "finishes" };

export function targetText(target) {
  if (!target || typeof target !== "object") return "—";
  const where = target.name ?? target.url ?? target.stream ?? target.subject ?? target.routing_key ?? "";
  const via = target.connection ? ` via ${target.connection}` : "";
  return `${target.type} ${where}${via}`.trim();
}

export function seconds(value) {
  if (value === null || value === undefined) return "—";
  if (value < 1) return `${Math.round(value * 1000)} ms`;
  return `${value.toFixed(value < 10 ? 2 : 0)} s`;
}

// An age in seconds as a person reads it: "42 s", "5 min 3 s", "2 h 5 min", "3 d 4 h".
export function age(value) {
  if (value === null || value === undefined) return "—";
  if (value < 1) return "under 1 s";
  const s = Math.floor(value);
  const units = [[86400, "d"], [3600, "h"], [60, "min"], [1, "s"]];
  const first = units.findIndex(([size]) => s >= size);
  const [big, bigName] = units[first];
  const [small, smallName] = units[Math.min(first + 1, units.length - 1)];
  const rest = Math.floor((s % big) / small);
  return rest && big !== small ? `${Math.floor(s / big)} ${bigName} ${rest} ${smallName}` : `${Math.floor(s / big)} ${bigName}`;
}
