// Building the page from data: every string goes in through textContent or an attribute,
// never through HTML parsing, so a tenant's text always renders as text.

export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (value === true) node.setAttribute(key, "");
    else node.setAttribute(key, String(value));
  }
  append(node, children);
  return node;
}

export function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function clear(node) {
  node.replaceChildren();
  return node;
}

export function link(href, label, attrs = {}) {
  return h("a", { href, ...attrs }, label);
}

export function table(headers, rows, attrs = {}) {
  return h(
    "table",
    attrs,
    h("thead", {}, h("tr", {}, headers.map((name) => h("th", {}, name)))),
    h("tbody", {}, rows),
  );
}

export function when(instant) {
  if (!instant) return "—";
  const date = new Date(instant);
  return Number.isNaN(date.getTime()) ? String(instant) : date.toISOString().replace(".000Z", "Z");
}

export function pretty(value) {
  return h("pre", { class: "json" }, JSON.stringify(value, null, 2));
}

export function notice(message, kind = "error") {
  return h("p", { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status" }, message);
}

// Ask before a state change: a modal <dialog> (no window.confirm, so tests can drive it and
// the text is ours), holding `extra` (an input the action reads, e.g. a reason) when given.
// Resolves true when the user confirms.
export function confirmAction(question, detail = "", extra = null) {
  return new Promise((resolve) => {
    const yes = h("button", { type: "button", class: "danger", "data-confirm": "yes" }, "Confirm");
    const no = h("button", { type: "button", "data-confirm": "no" }, "Cancel");
    const dialog = h(
      "dialog",
      { class: "confirm", "aria-label": question },
      h("p", { class: "question" }, question),
      detail ? h("p", { class: "detail" }, detail) : null,
      extra,
      h("div", { class: "buttons" }, no, yes),
    );
    const finish = (answer) => {
      dialog.close();
      dialog.remove();
      resolve(answer);
    };
    yes.addEventListener("click", () => finish(true));
    no.addEventListener("click", () => finish(false));
    dialog.addEventListener("cancel", (event) => {
      event.preventDefault();
      finish(false);
    });
    document.body.append(dialog);
    dialog.showModal();
    no.focus();
  });
}

// Run `step` now and again `ms` after each run ends (an error in one run does not stop the
// next); resolves after the first run with the function that stops it (a page's cleanup).
export async function every(ms, step) {
  let timer = null;
  let stopped = false;
  const tick = async () => {
    try {
      await step();
    } finally {
      if (!stopped) timer = setTimeout(tick, ms);
    }
  };
  await tick();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
