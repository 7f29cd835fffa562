// mcpapp host page: the "Add apps" view, like an extensions view. It searches the configured
// MCP Registries (GET /installer/search), shows what an install would be (POST
// /installer/plan: name, version, transport, requested permissions, inputs), asks for the
// inputs in a form (secret ones in password fields), runs the install as a job and shows its
// progress (POST /installer/jobs, GET /installer/jobs/{job}); the app then appears in the apps
// panel through hot reload. Installed apps get Update and Uninstall buttons in the apps panel.
// Input values are sent once, to the gateway, and never kept by the page.
"use strict";

import { ApiError, api } from "./api.js";
import { $, el } from "./dom.js";
import { toast } from "./notices.js";

/** Ids of the apps `install` put in place, with their versions. */
const installed = new Map();
let installedAt = 0;
let available = false;
/** The plan the form is for. */
let current = null;
/** The newest search: an older one's answer, arriving late, is dropped. */
let searches = 0;

const POLL_MS = 400;

/** Adds the "Add apps" button and dialog, if this gateway can install apps. */
export async function wireExtensions() {
  const dialog = buildDialog();
  document.body.appendChild(dialog);
  const button = el("button", { id: "add-apps", type: "button", class: "small", text: "Add apps", hidden: true });
  button.addEventListener("click", () => openDialog());
  $("#reload-apps").before(button);
  try {
    await api("GET", "/installer/registries");
    available = true;
    button.hidden = false;
    await refreshInstalled();
  } catch (err) {
    // No installer (404), or no token yet: tried again when the apps are read.
    available = !(err instanceof ApiError && err.status === 404);
    button.hidden = !available;
  }
}

function buildDialog() {
  const dialog = el("dialog", { id: "add-apps-dialog", class: "add-apps", "aria-labelledby": "add-apps-title" }, [
    el("div", { class: "add-apps-head" }, [
      el("h2", { id: "add-apps-title", text: "Add apps" }),
      el("button", { id: "add-apps-close", type: "button", class: "small", text: "Close" }),
    ]),
    el("form", { id: "add-apps-search-form", class: "add-apps-row" }, [
      el("label", { for: "add-apps-query", class: "visually-hidden", text: "Search the registries" }),
      el("input", { id: "add-apps-query", type: "search", placeholder: "Search the registries", autocomplete: "off" }),
      el("button", { id: "add-apps-search", type: "submit", class: "primary", text: "Search" }),
    ]),
    el("form", { id: "add-apps-source-form", class: "add-apps-row" }, [
      el("label", { for: "add-apps-source", class: "visually-hidden", text: "Install from a source" }),
      el("input", { id: "add-apps-source", type: "text", placeholder: "or a source: npm:pkg@1.0.0, pypi:pkg, https://…", autocomplete: "off" }),
      el("button", { id: "add-apps-source-plan", type: "submit", text: "Next" }),
    ]),
    el("p", { id: "add-apps-message", class: "muted", role: "status" }),
    el("ul", { id: "add-apps-results", class: "add-apps-results" }),
    el("section", { id: "add-apps-plan", class: "add-apps-plan", hidden: true }),
  ]);
  dialog.querySelector("#add-apps-close").addEventListener("click", () => dialog.close());
  dialog.querySelector("#add-apps-search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    search($("#add-apps-query").value.trim());
  });
  dialog.querySelector("#add-apps-source-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const source = $("#add-apps-source").value.trim();
    if (source) {
      plan(source);
    }
  });
  return dialog;
}

function openDialog() {
  const dialog = $("#add-apps-dialog");
  if (!dialog.open) {
    dialog.showModal();
  }
  if ($("#add-apps-results").children.length === 0) {
    search("");
  }
  $("#add-apps-query").focus();
}

function say(text, kind) {
  const message = $("#add-apps-message");
  message.textContent = text;
  message.className = kind === "error" ? "form-error" : "muted";
}

async function search(query) {
  const mine = ++searches;
  say("Searching…");
  $("#add-apps-plan").hidden = true;
  let data;
  try {
    data = await api("GET", "/installer/search?q=" + encodeURIComponent(query));
  } catch (err) {
    if (mine === searches) {
      say("Search failed: " + err.message, "error");
    }
    return;
  }
  if (mine !== searches) {
    return;
  }
  const list = $("#add-apps-results");
  list.textContent = "";
  list.dataset.query = query;
  for (const server of data.servers || []) {
    list.appendChild(resultItem(server));
  }
  const problems = (data.errors || []).map((e) => e.registry + ": " + e.error);
  say(
    (data.servers || []).length + " found" + (problems.length ? " (" + problems.join("; ") + ")" : ""),
    problems.length ? "error" : undefined,
  );
}

function resultItem(server) {
  const install = el("button", { type: "button", class: "small primary", text: installed.has(lastSegment(server.name)) ? "Reinstall" : "Install" });
  install.addEventListener("click", () => plan(server.name));
  return el("li", { class: "add-apps-result", "data-name": server.name }, [
    el("div", { class: "add-apps-result-head" }, [
      el("strong", { text: server.title || server.name }),
      el("span", { class: "muted", text: " " + server.version }),
      server.status && server.status !== "active" ? el("span", { class: "pill bad", text: server.status }) : null,
    ]),
    el("p", { class: "muted", text: server.name + " · " + (server.kinds || []).join(", ") + " · " + server.registry }),
    server.description ? el("p", { text: server.description }) : null,
    install,
  ]);
}

function lastSegment(name) {
  return String(name).split("/").pop();
}

async function plan(source) {
  say("Looking up " + source + "…");
  const box = $("#add-apps-plan");
  box.hidden = true;
  box.textContent = "";
  delete box.dataset.identifier;
  try {
    current = await api("POST", "/installer/plan", { source });
  } catch (err) {
    say(err.message, "error");
    return;
  }
  say("");
  box.textContent = "";
  box.append(...planView(current));
  box.dataset.identifier = current.identifier;
  box.hidden = false;
  const first = box.querySelector("input, select");
  (first || box.querySelector("#add-apps-install")).focus();
}

function planView(p) {
  const facts = el("dl", { class: "add-apps-facts" });
  const fact = (label, value) => {
    if (value) {
      facts.append(el("dt", { text: label }), el("dd", { text: String(value) }));
    }
  };
  fact("Id", p.id);
  fact("Version", p.update ? p.currentVersion + " → " + p.version : p.version);
  fact("Transport", p.transport);
  fact("Source", p.source + " " + p.identifier);
  fact("Integrity", p.integrity);
  const permissions = p.permissions || [];
  fact("Permissions", permissions.length ? permissions.join("; ") : "none beyond its own folder");
  if (permissions.length) {
    // Grants are the operator's, in the gateway's configuration file: the page only says so.
    facts.append(el("dt", { text: "Grants" }), el("dd", {
      class: "add-apps-grants",
      text: "kept in the gateway's configuration file (McpApps.Entries." + p.id + ".Isolation); until they are given the app is installed but does not run: mcpapp-gateway grant " + p.id + " --requested --config FILE",
    }));
  }
  const form = el("form", { id: "add-apps-form", class: "add-apps-form", autocomplete: "off" });
  for (const input of p.inputs || []) {
    form.appendChild(inputField(input));
  }
  const error = el("p", { id: "add-apps-error", class: "form-error", role: "alert" });
  const status = el("p", { id: "add-apps-status", class: "muted", role: "status" });
  const progress = el("pre", { id: "add-apps-progress", class: "add-apps-progress", hidden: true });
  const submit = el("button", { id: "add-apps-install", type: "submit", class: "primary", text: p.update ? "Update" : "Install" });
  form.append(error, el("div", { class: "dialog-actions" }, [submit]), status, progress);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    install(form, p);
  });
  return [
    el("h3", { text: p.name }),
    p.description ? el("p", { text: p.description }) : null,
    facts,
    ...(p.notes || []).map((note) => el("p", { class: "muted", text: "Note: " + note })),
    form,
  ].filter(Boolean);
}

function inputField(input) {
  const id = "add-apps-input-" + input.key.replace(/[^A-Za-z0-9_-]/g, "_");
  let field;
  if (input.choices && input.choices.length) {
    field = el("select", { id, name: input.key }, [
      input.required ? null : el("option", { value: "", text: "" }),
      ...input.choices.map((c) => el("option", { value: c, text: c, selected: c === input.default })),
    ]);
  } else if (input.kind === "boolean") {
    field = el("select", { id, name: input.key }, ["", "true", "false"].map((v) => el("option", { value: v, text: v, selected: v === input.default })));
  } else {
    field = el("input", {
      id,
      name: input.key,
      type: input.secret ? "password" : input.kind === "number" ? "number" : "text",
      placeholder: input.placeholder || (input.repeated ? "several: separate with commas" : ""),
      value: input.secret ? null : input.default,
      required: input.required && !input.default,
      autocomplete: input.secret ? "new-password" : "off",
      min: input.min,
      max: input.max,
    });
  }
  field.dataset.repeated = input.repeated ? "1" : "";
  return el("div", { class: "add-apps-field" }, [
    el("label", { for: id, text: (input.title || input.key) + (input.required ? " (required)" : "") + (input.secret ? " (secret)" : "") }),
    field,
    input.description ? el("p", { class: "muted", text: input.description }) : null,
  ]);
}

function formValues(form) {
  const values = {};
  for (const field of form.querySelectorAll("input[name], select[name]")) {
    const value = field.value.trim();
    if (!value) {
      continue;
    }
    values[field.name] = field.dataset.repeated ? value.split(",").map((v) => v.trim()).filter(Boolean) : value;
  }
  return values;
}

async function install(form, p) {
  const submit = form.querySelector("#add-apps-install");
  const error = form.querySelector("#add-apps-error");
  const status = form.querySelector("#add-apps-status");
  error.textContent = "";
  submit.disabled = true;
  let job;
  try {
    job = (await api("POST", "/installer/jobs", { planId: p.planId, values: formValues(form) })).job;
  } catch (err) {
    error.textContent = err.message;
    submit.disabled = false;
    return;
  }
  // The values were sent; the form forgets the secret ones.
  for (const field of form.querySelectorAll("input[type=password]")) {
    field.value = "";
  }
  status.dataset.state = "running";
  status.textContent = (p.update ? "Updating " : "Installing ") + p.name + " " + p.version + "…";
  const outcome = await follow(job, form.querySelector("#add-apps-progress"));
  status.dataset.state = outcome.state;
  if (outcome.state === "done") {
    const result = outcome.result;
    const ungranted = result.ungranted || [];
    status.textContent = (p.update ? "Updated " : "Installed ") + result.id + " " + result.version + (ungranted.length
      ? "; it does not run until the gateway's configuration grants what it requests (" + (result.requested || []).join(", ") + "): mcpapp-gateway grant " + result.id + " --requested --config FILE"
      : "; it appears in the apps panel.");
    status.dataset.ungranted = String(ungranted.length);
    await refreshInstalled();
  } else {
    status.textContent = "";
    error.textContent = outcome.error || "the install failed";
    submit.disabled = false;
  }
}

/** Polls a job until it ends, showing its lines in `pre` (when given). */
async function follow(job, pre) {
  for (;;) {
    let data;
    try {
      data = await api("GET", "/installer/jobs/" + encodeURIComponent(job));
    } catch (err) {
      return { state: "failed", error: err.message };
    }
    if (pre) {
      pre.hidden = (data.lines || []).length === 0;
      pre.textContent = (data.lines || []).join("\n");
      pre.scrollTop = pre.scrollHeight;
    }
    if (data.state !== "running") {
      return data;
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

async function refreshInstalled() {
  try {
    const list = await api("GET", "/installer/installed");
    installed.clear();
    for (const app of list) {
      installed.set(app.id, app);
    }
    available = true;
    $("#add-apps").hidden = false;
  } catch (_) {
    return;
  }
  installedAt = Date.now();
  for (const actions of document.querySelectorAll(".app-actions[data-app]")) {
    showButtons(actions, actions.dataset.app);
  }
}

function showButtons(actions, id) {
  for (const button of actions.querySelectorAll("button[data-installer]")) {
    button.hidden = !installed.has(id);
  }
}

/**
 * Gives an app's row in the apps panel Update and Uninstall buttons, shown when `install`
 * put the app in place. Called by the apps panel for every row it draws.
 */
export function decorateApp(actions, app) {
  if (!app.id) {
    return;
  }
  actions.dataset.app = app.id;
  if (!actions.querySelector("button[data-installer]")) {
    for (const action of ["update", "uninstall"]) {
      const button = el("button", {
        type: "button",
        class: "small",
        "data-installer": action,
        text: action === "update" ? "Update" : "Uninstall",
        hidden: true,
      });
      button.addEventListener("click", () => lifeAction(action, actions.dataset.app, button));
      actions.appendChild(button);
    }
  }
  if (available && !installed.has(app.id) && Date.now() - installedAt > 2000) {
    refreshInstalled();
  }
  showButtons(actions, app.id);
}

async function lifeAction(action, id, button) {
  if (action === "uninstall" && !window.confirm("Remove " + id + ", its folder and its secrets?")) {
    return;
  }
  button.disabled = true;
  try {
    const { job } = await api("POST", "/installer/jobs", { action, id });
    toast((action === "update" ? "Updating " : "Removing ") + id + "…");
    const outcome = await follow(job, null);
    if (outcome.state === "done") {
      toast(action === "update" ? id + " is at " + outcome.result.version : id + " was removed");
      await refreshInstalled();
    } else {
      toast(id + ": " + (outcome.error || action + " failed"), "error");
    }
  } catch (err) {
    toast(id + ": " + err.message, "error");
  } finally {
    button.disabled = false;
  }
}
