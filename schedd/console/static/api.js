// The public HTTP API with the signed-in token as the Bearer header. The token lives in
// sessionStorage only: never in a URL, a cookie or localStorage.

const TOKEN = "schedd.token";
const ROLE = "schedd.role";
const TENANT = "schedd.tenant";

const WRONG_CELL =
  "This is kept by another cell of the cluster, which this console cannot reach: " +
  "use schedctl, or the console of a node of that cell.";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export const session = {
  get token() {
    return sessionStorage.getItem(TOKEN);
  },
  get isAdmin() {
    return sessionStorage.getItem(ROLE) === "admin";
  },
  // The tenant the admin acts for (X-Tenant); null for a tenant's own token.
  get tenant() {
    return this.isAdmin ? sessionStorage.getItem(TENANT) : null;
  },
  set tenant(value) {
    if (value) sessionStorage.setItem(TENANT, value);
    else sessionStorage.removeItem(TENANT);
  },
  start(token, isAdmin) {
    sessionStorage.setItem(TOKEN, token);
    sessionStorage.setItem(ROLE, isAdmin ? "admin" : "tenant");
  },
  end() {
    for (const key of [TOKEN, ROLE, TENANT]) sessionStorage.removeItem(key);
  },
};

export async function call(method, path, { body, token, tenant } = {}) {
  // The node sends a request for another cell's job on to that cell (api/forward.py).
  const headers = { Accept: "application/json", "X-Schedd-Console": "1" };
  const bearer = token ?? session.token;
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  const actingFor = tenant === undefined ? session.tenant : tenant;
  if (actingFor) headers["X-Tenant"] = actingFor;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "omit",
    cache: "no-store",
    // A node too old to send a console request on answers 307 wrong_cell (issue 35). The
    // browser must not follow it: the owner is another origin, which connect-src 'self'
    // refuses and where the token would not go. Kept opaque, it becomes a clear error.
    redirect: "manual",
  });
  if (response.type === "opaqueredirect") {
    throw new ApiError(307, "wrong_cell", WRONG_CELL);
  }
  if (response.status === 204) return null;
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    const error = data?.error ?? {};
    throw new ApiError(response.status, error.code ?? "http_error", error.message ?? response.statusText);
  }
  return data;
}

export const get = (path, options) => call("GET", path, options);
export const post = (path, body, options) => call("POST", path, { ...options, body });

export function query(params) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") search.set(key, value);
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

export const enc = encodeURIComponent;
