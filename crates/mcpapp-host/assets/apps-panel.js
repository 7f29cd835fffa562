// mcpapp host page: the apps panel. GET /apps, polled while the page is visible, with each
// app's lifecycle, counts, errors and start/stop/restart; reload; each app's tools with a
// "run" action, which calls a tool through the app's session as a view would and shows the
// result (and the tool's view) in the transcript.
"use strict";

import { ApiError, api } from "./api.js";
import { appDetail, rebuildToolIndex } from "./catalog.js";
import { $, el, pretty } from "./dom.js";
import { showTokenForm, toast } from "./notices.js";
import { state } from "./state.js";
import { toolEntry } from "./transcript.js";
import { reportToolCall } from "./ui-events.js";
import { textOf } from "./view-bridge.js";
import { clientFor, openView } from "./views.js";

const appItems = new Map();
const openToolLists = new Set();

const LIFECYCLE_CLASS = {
  Running: "ok",
  Loaded: "busy",
  Validated: "busy",
  Discovered: "busy",
  Failed: "bad",
  Stopped: "off",
  Disabled: "off",
};

export async function refreshApps() {
  let data;
  try {
    data = await api("GET", "/apps");
    const health = await api("GET", "/apps/health");
    renderHealth(health);
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      renderHealth({ ok: false, error: "needs a token" });
    } else {
      renderHealth({ ok: false, error: err.message });
    }
    return;
  }
  if (state.unauthorized) {
    showTokenForm(false);
  }
  const signature = JSON.stringify(data);
  if (signature === state.appsSignature) {
    return;
  }
  const before = new Map(state.apps.map((a) => [a.id, a]));
  state.appsSignature = signature;
  state.apps = Array.isArray(data.apps) ? data.apps : [];
  renderApps(state.apps, Array.isArray(data.diagnostics) ? data.diagnostics : []);
  // Tool lists change when an app starts, restarts or reloads its tools.
  for (const app of state.apps) {
    const old = before.get(app.id);
    if (!old || old.lifecycle !== app.lifecycle || old.toolCount !== app.toolCount) {
      state.details.delete(app.id);
      if (openToolLists.has(app.id)) {
        loadTools(app.id);
      }
    }
  }
  rebuildToolIndex();
}

function renderHealth(health) {
  const pill = $("#health");
  if (health.ok) {
    pill.className = "pill ok";
    pill.textContent = "Gateway ready";
  } else if (health.error) {
    pill.className = "pill bad";
    pill.textContent = "Gateway: " + health.error;
  } else {
    pill.className = "pill busy";
    pill.textContent = "No app running yet";
  }
  if (health.sandbox) {
    $("#sandbox-origin").textContent = "Views sandboxed on " + new URL(health.sandbox).origin;
  }
}

function renderApps(apps, diagnostics) {
  const list = $("#apps-list");
  const seen = new Set();
  $("#apps-empty").hidden = apps.length > 0;
  for (const app of apps) {
    const key = app.id || app.manifestPath;
    seen.add(key);
    let item = appItems.get(key);
    if (!item) {
      item = createAppItem(key);
      appItems.set(key, item);
    }
    updateAppItem(item, app);
    list.appendChild(item.root);
  }
  for (const [key, item] of appItems) {
    if (!seen.has(key)) {
      item.root.remove();
      appItems.delete(key);
    }
  }
  const diag = $("#diagnostics");
  diag.textContent = "";
  for (const d of diagnostics) {
    diag.appendChild(el("li", { text: typeof d === "string" ? d : d.message || JSON.stringify(d) }));
  }
  $("#diagnostics-box").hidden = diagnostics.length === 0;
}

function createAppItem(key) {
  const item = {
    root: el("li", { class: "app", "data-app-id": key }),
    name: el("h3", { class: "app-name" }),
    lifecycle: el("span", { class: "lifecycle" }),
    meta: el("p", { class: "app-meta" }),
    description: el("p", { class: "app-description" }),
    counts: el("dl", { class: "app-counts" }),
    error: el("p", { class: "app-error", role: "alert" }),
    problems: el("ul", { class: "app-problems" }),
    actions: el("div", { class: "app-actions" }),
    tools: el("details", { class: "app-tools" }),
    toolList: el("ul", { class: "tool-list" }),
    summary: el("summary", { text: "Tools" }),
  };
  item.root.append(
    el("div", { class: "app-head" }, [item.name, item.lifecycle]),
    item.meta,
    item.description,
    item.counts,
    item.error,
    item.problems,
    item.actions,
    item.tools,
  );
  item.tools.append(item.summary, item.toolList);
  for (const action of ["start", "stop", "restart"]) {
    const button = el("button", { type: "button", class: "small", "data-action": action, text: action[0].toUpperCase() + action.slice(1) });
    button.addEventListener("click", () => control(key, action, button));
    item.actions.appendChild(button);
  }
  item.tools.addEventListener("toggle", () => {
    if (item.tools.open) {
      openToolLists.add(key);
      loadTools(key);
    } else {
      openToolLists.delete(key);
    }
  });
  return item;
}

function updateAppItem(item, app) {
  const lifecycle = app.lifecycle || "Unknown";
  item.root.dataset.lifecycle = lifecycle;
  item.name.textContent = app.name || app.id;
  item.lifecycle.textContent = lifecycle + (app.crashLoop ? " (crash loop)" : "");
  item.lifecycle.className = "lifecycle " + (LIFECYCLE_CLASS[lifecycle] || "busy");
  item.meta.textContent = [app.id, app.version ? "v" + app.version : null, app.transport, app.hasUi ? "has UI" : null]
    .filter(Boolean)
    .join(" · ");
  item.description.textContent = app.description || "";
  item.description.hidden = !app.description;
  item.counts.textContent = "";
  for (const [label, value] of [
    ["Tools", app.toolCount],
    ["Resources", app.resourceCount],
    ["Templates", app.resourceTemplateCount],
    ["Prompts", app.promptCount],
    ["Restarts", app.restartCount],
  ]) {
    item.counts.appendChild(el("div", {}, [el("dt", { text: label }), el("dd", { text: String(value ?? 0) })]));
  }
  item.error.textContent = app.lastError ? "Last error: " + app.lastError : "";
  item.error.hidden = !app.lastError;
  item.problems.textContent = "";
  for (const text of app.validationErrors || []) {
    item.problems.appendChild(el("li", { class: "problem-error", text }));
  }
  for (const text of app.warnings || []) {
    item.problems.appendChild(el("li", { class: "problem-warning", text }));
  }
  item.problems.hidden = item.problems.children.length === 0;
  const running = lifecycle === "Running";
  const controllable = Boolean(app.id) && lifecycle !== "Disabled";
  for (const button of item.actions.querySelectorAll("button")) {
    const action = button.dataset.action;
    if (button.dataset.busy) {
      continue;
    }
    button.disabled =
      !controllable || (action === "start" && running) || (action === "stop" && !running && lifecycle !== "Loaded");
  }
  item.summary.textContent = "Tools (" + (app.toolCount ?? 0) + ")";
  item.tools.hidden = !app.id;
}

async function control(appId, action, button) {
  button.dataset.busy = "1";
  button.disabled = true;
  try {
    await api("POST", "/apps/" + encodeURIComponent(appId) + "/" + action);
    toast(action[0].toUpperCase() + action.slice(1) + " requested for " + appId + ".");
  } catch (err) {
    toast("Could not " + action + " " + appId + ": " + err.message, "error");
  } finally {
    delete button.dataset.busy;
    button.disabled = false;
    refreshApps();
  }
}

export async function reloadApps(button) {
  button.disabled = true;
  try {
    const summary = await api("POST", "/apps/reload");
    const parts = ["added", "removed", "changed"]
      .map((k) => (summary[k] && summary[k].length ? k + ": " + summary[k].join(", ") : null))
      .filter(Boolean);
    toast("Reloaded. " + (parts.join("; ") || "Nothing changed."));
  } catch (err) {
    toast("Reload failed: " + err.message, "error");
  } finally {
    button.disabled = false;
    refreshApps();
  }
}

async function loadTools(appId) {
  const item = appItems.get(appId);
  if (!item) {
    return;
  }
  item.toolList.textContent = "";
  item.toolList.appendChild(el("li", { class: "muted", text: "Loading tools…" }));
  let detail;
  try {
    detail = await appDetail(appId);
  } catch (err) {
    item.toolList.textContent = "";
    item.toolList.appendChild(el("li", { class: "problem-error", text: "Could not load the tools: " + err.message }));
    return;
  }
  item.toolList.textContent = "";
  const tools = Array.isArray(detail.tools) ? detail.tools : [];
  if (!tools.length) {
    item.toolList.appendChild(el("li", { class: "muted", text: "No tools." }));
  }
  for (const tool of tools) {
    const visibility = tool.visibility || {};
    const badges = [];
    if (tool.uiResourceUri) {
      badges.push(el("span", { class: "badge ui", text: "UI" }));
    }
    if (visibility.malformed) {
      badges.push(el("span", { class: "badge warn", text: "bad visibility" }));
    } else if (visibility.app && !visibility.model) {
      badges.push(el("span", { class: "badge", text: "app only" }));
    } else if (visibility.model && !visibility.app) {
      badges.push(el("span", { class: "badge", text: "model only" }));
    }
    const run = el("button", {
      type: "button",
      class: "small",
      "data-run": tool.name,
      "aria-label": "Run " + tool.name,
      text: "Run",
    });
    if (!visibility.app || detail.lifecycle !== "Running") {
      run.disabled = true;
      run.title = visibility.app ? "The app is not running" : "Only the agent may call this tool";
    }
    run.addEventListener("click", () => openRunDialog(detail, tool));
    item.toolList.appendChild(
      el("li", { class: "tool", "data-tool-name": tool.name }, [
        el("div", { class: "tool-line" }, [el("code", { text: tool.name }), ...badges, run]),
        tool.description ? el("p", { class: "tool-description", text: tool.description }) : null,
      ]),
    );
  }
}

// ---- The run action ----------------------------------------------------------

let runTarget = null;

function skeleton(schema) {
  const args = {};
  const props = schema && typeof schema.properties === "object" ? schema.properties : {};
  for (const name of (schema && schema.required) || []) {
    const type = props[name] && props[name].type;
    args[name] = type === "integer" || type === "number" ? 0 : type === "boolean" ? false : type === "array" ? [] : type === "object" ? {} : "";
  }
  return args;
}

function openRunDialog(detail, tool) {
  runTarget = { appId: detail.id, appName: detail.name, tool };
  const dialog = $("#run-dialog");
  $("#run-title").textContent = "Run " + tool.name;
  $("#run-app").textContent = (detail.name || detail.id) + (tool.uiResourceUri ? " · shows a view" : "");
  $("#run-description").textContent = tool.description || "";
  $("#run-schema").textContent = pretty(tool.inputSchema || {});
  $("#run-args").value = JSON.stringify(skeleton(tool.inputSchema), null, 2);
  $("#run-error").textContent = "";
  dialog.showModal();
  $("#run-args").focus();
}

export function submitRunDialog(event) {
  event.preventDefault();
  let args;
  try {
    args = JSON.parse($("#run-args").value || "{}");
  } catch (err) {
    $("#run-error").textContent = "The arguments are not valid JSON: " + err.message;
    return;
  }
  if (args === null || typeof args !== "object" || Array.isArray(args)) {
    $("#run-error").textContent = "The arguments must be a JSON object.";
    return;
  }
  $("#run-dialog").close();
  const target = runTarget;
  runTarget = null;
  if (target) {
    runTool(target, args);
  }
}

/** The "run" action: calls the tool through the app's session, as a view would. */
async function runTool(target, args) {
  const { appId, appName, tool } = target;
  const client = clientFor(appId);
  const id = client.allocateId();
  const entry = toolEntry(id, tool.name, args, "You ran");
  entry.node.dataset.appId = appId;
  if (tool.uiResourceUri) {
    entry.view = openView(entry.slot, { appId, appName, tool, toolCallId: id, input: args });
  }
  const reply = await client.request("tools/call", { name: tool.name, arguments: args }, { id, context: "run" });
  if (reply.error) {
    entry.finish("Refused: " + reply.error.message, true);
    if (entry.view) {
      entry.view.cancel(reply.error.message);
    }
    return;
  }
  const result = reply.result || { content: [] };
  entry.finish(textOf(result.content) || pretty(result.structuredContent || {}), Boolean(result.isError));
  if (entry.view) {
    entry.view.setToolResult(result);
  }
  reportToolCall(appId, tool.name, args, textOf(result.content), Boolean(result.isError));
}

/** The panel's own controls. */
export function wireAppsPanel() {
  $("#reload-apps").addEventListener("click", (e) => reloadApps(e.currentTarget));
  $("#run-form").addEventListener("submit", submitRunDialog);
  $("#run-cancel").addEventListener("click", () => $("#run-dialog").close());
}
