// Short texts for a job's schedule and target in tables (the job page shows the full spec).

export function scheduleText(schedule) {
  if (!schedule || typeof schedule !== "object") return String(schedule ?? "—");
  return Object.entries(schedule)
    .map(([key, value]) => `${key} ${typeof value === "object" ? JSON.stringify(value) : value}`)
    .join(", ");
}

export function targetText(target) {
  if (!target || typeof target !== "object") return "—";
  const where = target.name ?? target.url ?? target.stream ?? target.subject ?? target.routing_key ?? "";
  const via = target.connection ? ` via ${target.connection}` : "";
  return `${target.type} ${where}${via}`.trim();
}

export function hostOf(target) {
  try {
    return target?.url ? new URL(target.url).host : "";
  } catch {
    return "";
  }
}

export function seconds(value) {
  if (value === null || value === undefined) return "—";
  if (value < 1) return `${Math.round(value * 1000)} ms`;
  return `${value.toFixed(value < 10 ? 2 : 0)} s`;
}
