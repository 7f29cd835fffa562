// mcpapp host page: the apps panel (GET /apps, live, with controls and a "run" action per
// tool), the chat (POST /apps/chat, streamed), and app views rendered in the sandbox when a
// tool with a UI resource runs. The view protocol itself lives in view-bridge.js.
"use strict";

import { ApiError, api, authHeaders, captureToken, readEventStream, setToken } from "./api.js";
import { McpProxyClient } from "./mcp-client.js";
import { ViewBridge, htmlFromRead, textOf } from "./view-bridge.js";

const HOST_INFO = { name: "mcpapp", version: "0.1.0" };
/** How often the apps panel refreshes while the page is visible. */
const POLL_MS = 2500;
/** UI events kept for the next chat turn, at most. */
const MAX_APP_EVENTS = 20;
/** Messages from views waiting for the chat, at most. */
const MAX_QUEUED_MESSAGES = 5;
const THEME_KEY = "mcpapp.theme";
const LOG_LIMIT = 500;

/** Style variables handed to views; colours follow the view's colour scheme. */
const STYLE_VARIABLES = {
  "--color-background-primary": "light-dark(#ffffff, #161a21)",
  "--color-background-secondary": "light-dark(#f3f5f8, #1e232b)",
  "--color-text-primary": "light-dark(#1b2230, #e6e9ef)",
  "--color-text-secondary": "light-dark(#5a6373, #a4acba)",
  "--color-border-primary": "light-dark(#d4d9e1, #343b47)",
  "--color-ring-primary": "light-dark(#2f6fe0, #7aa7ff)",
  "--font-sans": "system-ui, -apple-system, \"Segoe UI\", Roboto, sans-serif",
  "--font-mono": "ui-monospace, \"SFMono-Regular\", Menlo, Consolas, monospace",
  "--border-radius-sm": "4px",
  "--border-radius-md": "8px",
  "--border-radius-lg": "12px",
};

const $ = (selector) => document.querySelector(selector);

function el(tag, attrs, children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) {
      continue;
    }
    if (key === "text") {
      node.textContent = value;
    } else if (key === "class") {
      node.className = value;
    } else {
      node.setAttribute(key, value === true ? "" : value);
    }
  }
  for (const child of children || []) {
    if (child !== null && child !== undefined && child !== false) {
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    }
  }
  return node;
}

function randomId(prefix) {
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  return prefix + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function pretty(value) {
  if (typeof value === "string") {
    try {
      return JSON.stringify(JSON.parse(value), null, 2);
    } catch (_) {
      return value;
    }
  }
  return JSON.stringify(value, null, 2);
}

// ---- State ----------------------------------------------------------------------------------

const state = {
  sessionId: randomId("page-"),
  theme: "light",
  apps: [],
  appsSignature: "",
  details: new Map(),
  toolIndex: new Map(),
  clients: new Map(),
  views: new Set(),
  closedViews: [],
  appEvents: [],
  modelContexts: new Map(),
  chatBusy: false,
  chatAbort: null,
  queue: [],
  log: [],
  unauthorized: false,
};

function record(kind, text) {
  state.log.push({ at: new Date().toISOString(), kind, text });
  if (state.log.length > LOG_LIMIT) {
    state.log.splice(0, state.log.length - LOG_LIMIT);
  }
}

// ---- Theme ----------------------------------------------------------------------------------

function initialTheme() {
  const saved = localStorage.getItem(THEME_KEY);
  if (saved === "light" || saved === "dark") {
    return saved;
  }
  return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

function applyTheme(theme) {
  state.theme = theme;
  document.documentElement.dataset.theme = theme;
  const button = $("#theme-toggle");
  button.setAttribute("aria-pressed", String(theme === "dark"));
  button.textContent = theme === "dark" ? "Light theme" : "Dark theme";
  for (const view of state.views) {
    view.setTheme(theme);
  }
}

// ---- Auth -----------------------------------------------------------------------------------

function showTokenForm(show) {
  const appearing = show && !state.unauthorized;
  state.unauthorized = show;
  $("#token-banner").hidden = !show;
  if (appearing) {
    $("#token-input").focus();
  }
}

// ---- Apps panel -----------------------------------------------------------------------------

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

async function refreshApps() {
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

async function reloadApps(button) {
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

async function appDetail(appId) {
  if (!state.details.has(appId)) {
    const promise = api("GET", "/apps/" + encodeURIComponent(appId)).catch((err) => {
      state.details.delete(appId);
      throw err;
    });
    state.details.set(appId, promise);
  }
  return state.details.get(appId);
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

/** registeredName → {appId, appName, tool}, from every running app's detail. */
async function rebuildToolIndex() {
  const index = new Map();
  await Promise.all(
    state.apps
      .filter((app) => app.id && app.lifecycle === "Running")
      .map(async (app) => {
        try {
          const detail = await appDetail(app.id);
          for (const tool of detail.tools || []) {
            if (tool.registeredName) {
              index.set(tool.registeredName, { appId: app.id, appName: app.name, tool });
            }
          }
        } catch (_) {
          // The app may just have stopped; the next refresh tries again.
        }
      }),
  );
  state.toolIndex = index;
  return index;
}

// ---- Run dialog -----------------------------------------------------------------------------

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

function submitRunDialog(event) {
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

// ---- Per-app MCP sessions -------------------------------------------------------------------

function clientFor(appId) {
  let client = state.clients.get(appId);
  if (!client) {
    client = new McpProxyClient(appId, state.sessionId, { name: "mcpapp-host-page", version: HOST_INFO.version });
    state.clients.set(appId, client);
  }
  return client;
}

/** Tool calls made outside the agent, reported with the next chat turn. */
function addAppEvent(event) {
  state.appEvents.push(event);
  if (state.appEvents.length > MAX_APP_EVENTS) {
    state.appEvents.splice(0, state.appEvents.length - MAX_APP_EVENTS);
  }
  renderComposerNotes();
}

// ---- Views ----------------------------------------------------------------------------------

const viewHost = {
  hostInfo: HOST_INFO,
  theme: () => state.theme,
  styleVariables: () => Object.assign({}, STYLE_VARIABLES),
  log(view, level, text) {
    record("view", view.appId + "/" + view.tool.name + " " + level + ": " + text);
    if (level === "error" || level === "warn" || level === "warning") {
      console.warn("[view " + view.appId + "/" + view.tool.name + "]", text);
    } else if (level !== "debug") {
      console.info("[view " + view.appId + "/" + view.tool.name + "]", text);
    }
  },
  appEvent(view, event) {
    const entry = state.toolIndex.size ? findRegistered(view.appId, event.tool) : null;
    addAppEvent({ tool: entry || view.appId + "/" + event.tool, args: event.args, resultText: event.resultText });
  },
  message(view, text) {
    if (state.queue.length >= MAX_QUEUED_MESSAGES) {
      return { accepted: false, reason: "too many messages are waiting for the agent" };
    }
    enqueueTurn(text, { from: (view.appName || view.appId) + " view" });
    return { accepted: true };
  },
  modelContext(view, context) {
    if (context) {
      state.modelContexts.set(view, context);
    } else {
      state.modelContexts.delete(view);
    }
    renderComposerNotes();
  },
  close(view, reason) {
    closeView(view, reason);
  },
  stateChanged() {},
};

function findRegistered(appId, toolName) {
  for (const [registered, entry] of state.toolIndex) {
    if (entry.appId === appId && entry.tool.name === toolName) {
      return registered;
    }
  }
  return null;
}

async function closeView(view, reason) {
  state.modelContexts.delete(view);
  renderComposerNotes();
  await view.teardown(reason);
  state.views.delete(view);
  state.closedViews.push(view.describe());
  if (state.closedViews.length > 20) {
    state.closedViews.shift();
  }
  record("view", "closed " + view.appId + "/" + view.tool.name + " (" + view.teardownOutcome + ")");
}

/**
 * Creates the view for a tool call at once (so a result that arrives early is kept) and loads
 * it in the background: the sandbox from the gateway, the HTML through the app's session.
 */
function openView(slot, { appId, appName, tool, toolCallId, input }) {
  const view = new ViewBridge({
    host: viewHost,
    appId,
    appName,
    tool,
    toolCallId,
    toolInput: input,
    client: clientFor(appId),
  });
  state.views.add(view);
  slot.appendChild(view.element);
  record("view", "opening " + appId + "/" + tool.name + " for call " + toolCallId);
  (async () => {
    const uri = tool.uiResourceUri;
    const [prepared, read] = await Promise.all([
      api("POST", "/apps/" + encodeURIComponent(appId) + "/views", { uri }),
      view.client.request("resources/read", { uri }),
    ]);
    if (read.error) {
      throw new Error("resources/read failed: " + read.error.message);
    }
    await view.start(prepared, htmlFromRead(read.result, uri));
  })().catch((err) => {
    if (!view.closed) {
      view.fail("The view could not be shown: " + err.message);
    }
  });
  return view;
}

// ---- Chat -----------------------------------------------------------------------------------

const transcript = () => $("#transcript");

function scrollToEnd() {
  const box = $("#transcript-box");
  box.scrollTop = box.scrollHeight;
}

function addEntry(node) {
  $("#chat-empty").hidden = true;
  transcript().appendChild(node);
  scrollToEnd();
  return node;
}

function userEntry(text, from) {
  return addEntry(
    el("li", { class: "msg msg-user" }, [
      el("div", { class: "msg-who", text: from ? "You, via " + from : "You" }),
      el("div", { class: "msg-text", text }),
    ]),
  );
}

function assistantEntry() {
  const text = el("div", { class: "msg-text" });
  const node = addEntry(el("li", { class: "msg msg-assistant" }, [el("div", { class: "msg-who", text: "Agent" }), text]));
  return { node, text };
}

function errorEntry(text) {
  return addEntry(el("li", { class: "msg msg-error", role: "alert", text }));
}

/** A tool call in the transcript: name, input, the view (if any) and the result. */
function toolEntry(id, name, input, origin) {
  const status = el("span", { class: "tool-status", text: "running…" });
  const slot = el("div", { class: "tool-view-slot" });
  const result = el("pre", { class: "tool-result-text" });
  const resultBox = el("details", { class: "tool-io tool-result", hidden: true }, [el("summary", { text: "Result" }), result]);
  const node = addEntry(
    el("li", { class: "msg msg-tool", "data-tool-call-id": id, "data-tool-name": name }, [
      el("div", { class: "tool-head" }, [
        el("span", { class: "msg-who", text: origin || "Tool call" }),
        el("code", { text: name }),
        status,
      ]),
      el("details", { class: "tool-io" }, [el("summary", { text: "Input" }), el("pre", { text: pretty(input || {}) })]),
      slot,
      resultBox,
    ]),
  );
  return {
    node,
    slot,
    view: null,
    done: false,
    finish(text, isError) {
      this.done = true;
      status.textContent = isError ? "failed" : "done";
      status.className = "tool-status " + (isError ? "bad" : "ok");
      result.textContent = text;
      resultBox.hidden = false;
      node.dataset.status = isError ? "error" : "done";
      scrollToEnd();
    },
  };
}

function enqueueTurn(message, options) {
  state.queue.push({ message, options: options || {} });
  renderComposerNotes();
  if (!state.chatBusy) {
    runQueue();
  }
}

async function runQueue() {
  while (state.queue.length && !state.chatBusy) {
    const next = state.queue.shift();
    await chatTurn(next.message, next.options);
  }
}

function modelContextText() {
  const parts = [];
  for (const [view, context] of state.modelContexts) {
    const lines = ["Context from the " + (view.appName || view.appId) + " view (" + view.tool.name + "):"];
    if (context.text) {
      lines.push(context.text);
    }
    if (context.structuredContent) {
      lines.push(JSON.stringify(context.structuredContent));
    }
    parts.push(lines.join("\n"));
  }
  return parts.join("\n\n");
}

function renderComposerNotes() {
  const notes = [];
  if (state.modelContexts.size) {
    const names = Array.from(state.modelContexts.keys(), (v) => v.appName || v.appId);
    notes.push("Context from " + names.join(", ") + " goes with your next message.");
  }
  if (state.appEvents.length) {
    notes.push(state.appEvents.length + " action(s) taken in app views will be reported to the agent.");
  }
  if (state.queue.length) {
    notes.push(state.queue.length + " message(s) waiting.");
  }
  const box = $("#composer-notes");
  box.textContent = notes.join(" ");
  box.hidden = notes.length === 0;
}

function setBusy(busy) {
  state.chatBusy = busy;
  $("#chat-send").disabled = busy;
  $("#chat-form").setAttribute("aria-busy", String(busy));
}

/** Runs one chat turn and renders its events as they stream. */
async function chatTurn(message, options) {
  setBusy(true);
  userEntry(message, options.from);
  const appEvents = state.appEvents.splice(0);
  const modelContext = modelContextText();
  renderComposerNotes();
  const calls = new Map();
  let assistant = null;
  let sawText = false;
  const abort = new AbortController();
  state.chatAbort = abort;
  try {
    const body = { message, sessionId: state.sessionId };
    if (appEvents.length) {
      body.appEvents = appEvents;
    }
    if (modelContext) {
      body.modelContext = modelContext;
    }
    const response = await fetch("/apps/chat", {
      method: "POST",
      headers: authHeaders({ "Content-Type": "application/json", Accept: "text/event-stream" }),
      body: JSON.stringify(body),
      signal: abort.signal,
    });
    if (!response.ok) {
      state.appEvents.unshift(...appEvents);
      let text = "HTTP " + response.status;
      try {
        const payload = await response.json();
        text = payload.error || text;
      } catch (_) {
        // Not JSON: keep the status.
      }
      if (response.status === 401) {
        showTokenForm(true);
      }
      errorEntry("The chat failed: " + text);
      return;
    }
    for await (const data of readEventStream(response)) {
      let event;
      try {
        event = JSON.parse(data);
      } catch (_) {
        continue;
      }
      record("chat", event.type);
      switch (event.type) {
        case "session":
          if (event.sessionId && event.sessionId !== state.sessionId) {
            state.sessionId = event.sessionId;
            showSession();
          }
          break;
        case "text":
          if (!assistant) {
            assistant = assistantEntry();
          }
          assistant.text.textContent += event.text;
          sawText = true;
          scrollToEnd();
          break;
        case "tool": {
          assistant = null;
          const entry = toolEntry(event.id, event.name, event.input);
          calls.set(event.id, entry);
          await attachChatView(entry, event);
          break;
        }
        case "tool_result": {
          const entry = calls.get(event.id);
          if (!entry) {
            break;
          }
          entry.finish(event.text, event.isError);
          if (entry.view) {
            const result = { content: [{ type: "text", text: event.text }], isError: Boolean(event.isError) };
            if (event.structuredContent !== undefined) {
              result.structuredContent = event.structuredContent;
            }
            entry.view.setToolResult(result);
          }
          break;
        }
        case "error":
          errorEntry(event.error);
          break;
        case "result":
          if (!sawText && event.text) {
            assistantEntry().text.textContent = event.text;
          }
          break;
        default:
          break;
      }
    }
  } catch (err) {
    if (!abort.signal.aborted) {
      errorEntry("The chat stream broke: " + err.message);
    }
  } finally {
    state.chatAbort = null;
    for (const entry of calls.values()) {
      if (!entry.done) {
        entry.finish("The turn ended before this tool call finished.", true);
        if (entry.view) {
          entry.view.cancel("the turn ended before the tool call finished");
        }
      }
    }
    setBusy(false);
    renderComposerNotes();
  }
}

async function attachChatView(entry, event) {
  let known = state.toolIndex.get(event.name);
  if (!known) {
    // A tool the page has not seen yet (an app just started, or its tools were registered
    // for the agent after the page read it): read the apps again, once.
    state.details.clear();
    known = (await rebuildToolIndex()).get(event.name);
  }
  if (known && known.tool.uiResourceUri) {
    entry.view = openView(entry.slot, {
      appId: known.appId,
      appName: known.appName,
      tool: known.tool,
      toolCallId: event.id,
      input: event.input,
    });
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
  const reply = await client.request("tools/call", { name: tool.name, arguments: args }, { id });
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
  addAppEvent({
    tool: findRegistered(appId, tool.name) || appId + "/" + tool.name,
    args,
    resultText: textOf(result.content).slice(0, 2000),
  });
}

async function newConversation() {
  state.queue = [];
  if (state.chatAbort) {
    // Leaving the stream cancels the turn on the gateway.
    state.chatAbort.abort();
  }
  const views = Array.from(state.views);
  await Promise.all(views.map((v) => closeView(v, "a new conversation started")));
  for (const client of state.clients.values()) {
    client.close();
  }
  state.clients.clear();
  state.appEvents = [];
  state.modelContexts.clear();
  state.queue = [];
  state.sessionId = randomId("page-");
  transcript().textContent = "";
  $("#chat-empty").hidden = false;
  showSession();
  renderComposerNotes();
  $("#chat-input").focus();
}

function showSession() {
  document.documentElement.dataset.sessionId = state.sessionId;
  $("#session-id").textContent = "Session " + state.sessionId.slice(0, 13) + "…";
  $("#session-id").title = state.sessionId;
}

// ---- Notices --------------------------------------------------------------------------------

function toast(text, kind) {
  const box = $("#toasts");
  const node = el("p", { class: "toast " + (kind || ""), role: kind === "error" ? "alert" : "status", text });
  box.appendChild(node);
  setTimeout(() => node.remove(), 6000);
}

// ---- Boot -----------------------------------------------------------------------------------

function wire() {
  window.addEventListener("message", (event) => {
    for (const view of state.views) {
      if (view.iframe && event.source === view.iframe.contentWindow) {
        view.receive(event);
        return;
      }
    }
    // Not from one of our frames: ignored.
  });
  window.addEventListener("mcpapp:unauthorized", () => showTokenForm(true));
  window.addEventListener("pagehide", () => {
    for (const client of state.clients.values()) {
      client.close();
    }
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      for (const view of state.views) {
        if (view.displayMode === "fullscreen") {
          view.setDisplayMode("inline");
        }
      }
    }
  });
  $("#theme-toggle").addEventListener("click", () => {
    const theme = state.theme === "dark" ? "light" : "dark";
    localStorage.setItem(THEME_KEY, theme);
    applyTheme(theme);
  });
  $("#new-chat").addEventListener("click", newConversation);
  $("#reload-apps").addEventListener("click", (e) => reloadApps(e.currentTarget));
  $("#chat-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const input = $("#chat-input");
    const message = input.value.trim();
    if (!message || state.chatBusy) {
      return;
    }
    input.value = "";
    enqueueTurn(message);
  });
  $("#chat-input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("#chat-form").requestSubmit();
    }
  });
  $("#token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    setToken($("#token-input").value.trim());
    $("#token-input").value = "";
    state.details.clear();
    refreshApps();
  });
  $("#run-form").addEventListener("submit", submitRunDialog);
  $("#run-cancel").addEventListener("click", () => $("#run-dialog").close());
}

function poll() {
  const tick = async () => {
    if (!document.hidden) {
      await refreshApps();
    }
    setTimeout(tick, POLL_MS);
  };
  tick();
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden) {
      refreshApps();
    }
  });
}

captureToken();
wire();
applyTheme(initialTheme());
showSession();
poll();

// A read-only window on the page's state for debugging and the browser tests.
Object.defineProperty(window, "mcpappHost", {
  value: Object.freeze({
    sessionId: () => state.sessionId,
    views: () => state.closedViews.concat(Array.from(state.views, (v) => v.describe())),
    log: () => state.log.slice(),
    toolIndex: () => Array.from(state.toolIndex.keys()),
  }),
});
