// Sign-in: a tenant token or the admin token, checked against the API, kept in sessionStorage.

import { ApiError, get, session } from "../api.js";
import { h, notice } from "../dom.js";

export function render({ onSignedIn }) {
  const input = h("input", {
    type: "password",
    id: "token",
    name: "token",
    autocomplete: "off",
    required: true,
    placeholder: "tenant or admin token",
  });
  const status = h("div", { class: "status" });
  const form = h(
    "form",
    { class: "signin", "aria-label": "Sign in" },
    h("h1", {}, "schedd console"),
    h("label", { for: "token" }, "Token"),
    input,
    h("button", { type: "submit" }, "Sign in"),
    status,
    h("p", { class: "hint" }, "The token stays in this tab (sessionStorage) and is sent only as the Authorization header."),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    status.replaceChildren();
    const token = input.value.trim();
    try {
      session.start(token, await isAdmin(token));
      input.value = "";
      onSignedIn();
    } catch (error) {
      session.end();
      const message = error instanceof ApiError && error.status === 401 ? "Unknown token." : `Cannot sign in: ${error.message}`;
      status.append(notice(message));
    }
  });
  setTimeout(() => input.focus());
  return form;
}

// The admin token reads /v1/cluster; a tenant's gets 403 there (and 401 when unknown).
async function isAdmin(token) {
  try {
    await get("/v1/cluster", { token, tenant: null });
    return true;
  } catch (error) {
    if (error instanceof ApiError && error.status === 403) return false;
    throw error;
  }
}
