// mcpapp host page: the apps panel. GET /apps, read again whenever GET /apps/events says
// something changed (followAppEvents: a fetch-read event stream, so it carries the token
// like every request, reconnecting with backoff), with each app's lifecycle, counts, errors
// and start/stop/restart; reload; each app's tools with a "run" action, which calls a tool
// through the app's session as a view would and shows the result (and the tool's view) in
// the transcript; each stdio app's sandbox (what applies, from GET /apps/{id}); an HTTP app
// behind OAuth gets Connect / Grant more access / Disconnect (connect.js).
"use strict";

import { ApiError, api, authHeaders, readEvents, reportUnauthorized } from "./api.js";
import { appDetail, rebuildToolIndex } from "./catalog.js";
import { authorizationLine, showAuthorization, wireConnect } from "./connect.js";
import { $, el, pretty } from "./dom.js";
import { decorateApp } from "./extensions.js";
import { showTokenForm, toast } from "./notices.js";
import { EVENTS_RETRY_MAX_MS, EVENTS_RETRY_MS, record, state } from "./state.js";
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
  NeedsAuthorization: "busy",
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
  const signature = JSON.stringify(data) + JSON.stringify(state.reloadDiagnostics);
  if (signature === state.appsSignature) {
    return;
  }
  const before = new Map(state.apps.map((a) => [a.id, a]));
  state.appsSignature = signature;
  state.apps = Array.isArray(data.apps) ? data.apps : [];
  renderApps(state.apps, (Array.isArray(data.diagnostics) ? data.diagnostics : []).concat(state.reloadDiagnostics));
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
    auth: authorizationLine(),
    actions: el("div", { class: "app-actions" }),
    tools: el("details", { class: "app-tools" }),
    toolList: el("ul", { class: "tool-list" }),
    summary: el("summary", { text: "Tools" }),
    sandbox: el("details", { class: "app-tools app-sandbox" }),
    sandboxBody: el("dl", { class: "sandbox-report" }),
  };
  item.root.append(
    el("div", { class: "app-head" }, [item.name, item.lifecycle]),
    item.meta,
    item.description,
    item.counts,
    item.error,
    item.problems,
    item.auth.root,
    item.actions,
    item.tools,
    item.sandbox,
  );
  item.tools.append(item.summary, item.toolList);
  item.sandbox.append(el("summary", { text: "Sandbox" }), item.sandboxBody);
  item.sandbox.addEventListener("toggle", () => {
    if (item.sandbox.open) {
      loadSandbox(key);
    }
  });
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
  item.meta.textContent = [
    app.id,
    app.version ? "v" + app.version : null,
    app.transport,
    app.hasUi ? "has UI" : null,
    app.sandbox ? "sandbox " + app.sandbox : null,
  ]
    .filter(Boolean)
    .join(" · ");
  item.root.dataset.sandbox = app.sandbox || "";
  item.sandbox.hidden = !app.sandbox;
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
  showAuthorization(item.auth, app);
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
  decorateApp(item.actions, app);
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

/** The network of a sandbox report as text: "none", "all", or its ports and hosts. */
function networkText(network) {
  if (typeof network === "string") {
    return network;
  }
  const parts = (network.tcpPorts || []).map((p) => "tcp:" + p).concat(network.hosts || []);
  return parts.join(", ") || "none";
}

/** Shows what an app's sandbox applies: its status, mode, kernel, network, limits, paths. */
async function loadSandbox(appId) {
  const item = appItems.get(appId);
  if (!item) {
    return;
  }
  const body = item.sandboxBody;
  body.textContent = "";
  let report;
  try {
    state.details.delete(appId);
    report = (await appDetail(appId)).sandbox;
  } catch (err) {
    body.appendChild(el("dd", { class: "problem-error", text: "Could not load the sandbox: " + err.message }));
    return;
  }
  if (!report) {
    body.appendChild(el("dd", { class: "muted", text: "Not started yet." }));
    return;
  }
  const limits = report.limits || {};
  const limit = (v) => (v === null || v === undefined ? "unlimited" : String(v));
  const rows = [
    ["Status", report.status + " (mode " + report.mode + ")"],
    ["Why none", report.note],
    ["Landlock", report.landlockAbi === null || report.landlockAbi === undefined ? null : "ABI " + report.landlockAbi + ", rules for " + report.rulesAbi],
    ["Network", networkText(report.network) + " · TCP connect " + report.tcpConnect + " · sockets " + report.inetSockets + (report.unixSockets ? ", unix" : "")],
    ["Egress proxy", report.proxy],
    ["Process", report.status === "none" ? null : "capabilities " + report.capabilities + " · no_new_privs · seccomp " + (report.seccomp ? "on" : "off") + " · scopes " + ((report.scopes || []).join(", ") || "none")],
    ["Home", report.home],
    ["Limits", report.limits ? "open files " + limit(limits.openFiles) + " · address space " + limit(limits.addressSpaceBytes) + " · processes " + limit(limits.processes) + " · core dumps off" : null],
    ["Missing", (report.missing || []).join("; ") || null],
    ["Paths", (report.paths || []).map((p) => p.access + " " + p.path).join("\n") || null],
  ];
  for (const [label, value] of rows) {
    if (value) {
      body.append(el("dt", { text: label }), el("dd", { class: label === "Paths" ? "sandbox-paths" : "", text: value }));
    }
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

let refreshing = null;
let refreshAgain = false;

/** Reads the apps again, once at a time: events arriving meanwhile make one more read. */
function refreshSoon() {
  if (refreshing) {
    refreshAgain = true;
    return;
  }
  refreshing = refreshApps().finally(() => {
    refreshing = null;
    if (refreshAgain) {
      refreshAgain = false;
      refreshSoon();
    }
  });
}

function diagnosticText(d) {
  const where = [d.path, d.line, d.column].filter((p) => p !== null && p !== undefined).join(":");
  return (where ? where + ": " : "") + d.severity + ": " + d.message;
}

/** What one /apps/events event changes on the page. */
function takeAppEvent(event) {
  let data = null;
  try {
    data = JSON.parse(event.data);
  } catch (_) {
    return;
  }
  if (event.event === "reload") {
    state.reloadDiagnostics = (Array.isArray(data.diagnostics) ? data.diagnostics : [])
      .filter((d) => d.severity === "warning" || d.severity === "error")
      .map((d) => ({ message: diagnosticText(d) }));
    record("apps-event", "reload: " + JSON.stringify({ added: data.added, removed: data.removed, changed: data.changed, kept: data.kept }));
  } else if (event.event !== "ready") {
    record("apps-event", event.event + " " + (data.appId || ""));
  }
  // `ready` (a new stream: anything may have changed while it was closed), `resync` (events
  // were missed) and every change: the list is read again.
  refreshSoon();
}

let eventsAbort = null;
let eventsTimer = null;
let eventsDelay = EVENTS_RETRY_MS;

/**
 * Follows GET /apps/events for as long as the page is open: every event refreshes the
 * panel; when the stream ends or fails, it reconnects after a wait that doubles (with
 * jitter) up to EVENTS_RETRY_MAX_MS, sending Last-Event-ID so nothing is missed; a 401 waits
 * for a token (see reconnectAppEvents).
 */
export function followAppEvents() {
  clearTimeout(eventsTimer);
  eventsTimer = null;
  if (eventsAbort) {
    eventsAbort.abort();
  }
  const abort = new AbortController();
  eventsAbort = abort;
  const retry = () => {
    if (abort.signal.aborted) {
      // Replaced by a newer stream, which keeps the state.
      return;
    }
    state.events.connected = false;
    const wait = eventsDelay * (0.8 + Math.random() * 0.4);
    eventsDelay = Math.min(eventsDelay * 2, EVENTS_RETRY_MAX_MS);
    eventsTimer = setTimeout(followAppEvents, wait);
  };
  (async () => {
    const headers = authHeaders({ Accept: "text/event-stream" });
    if (state.events.lastEventId !== null) {
      headers["Last-Event-ID"] = state.events.lastEventId;
    }
    const response = await fetch("/apps/events", { headers, signal: abort.signal, cache: "no-store" });
    if (response.status === 401) {
      reportUnauthorized();
      renderHealth({ ok: false, error: "needs a token" });
      // A new token reconnects at once; until then, try now and then.
      eventsDelay = EVENTS_RETRY_MAX_MS;
      return;
    }
    if (!response.ok) {
      throw new Error("HTTP " + response.status);
    }
    for await (const event of readEvents(response)) {
      state.events.connected = true;
      eventsDelay = EVENTS_RETRY_MS;
      if (event.id !== null) {
        state.events.lastEventId = event.id;
      }
      takeAppEvent(event);
    }
  })()
    .catch((err) => {
      if (!abort.signal.aborted) {
        record("apps-event", "stream failed: " + err.message);
        renderHealth({ ok: false, error: "events stream lost, reconnecting" });
      }
    })
    .finally(retry);
}

/** Opens the events stream again at once (a new token, the page visible again). */
export function reconnectAppEvents() {
  eventsDelay = EVENTS_RETRY_MS;
  followAppEvents();
}

/** The panel's own controls. */
export function wireAppsPanel() {
  $("#reload-apps").addEventListener("click", (e) => reloadApps(e.currentTarget));
  $("#run-form").addEventListener("submit", submitRunDialog);
  $("#run-cancel").addEventListener("click", () => $("#run-dialog").close());
  wireConnect(refreshSoon);
}
