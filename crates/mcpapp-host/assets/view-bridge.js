// mcpapp host page: the host side of the MCP Apps view protocol (2026-01-26) for one view.
//
// A view runs in a double iframe: the outer frame is the gateway's sandbox proxy, served from
// another origin with the view's CSP as an HTTP header; the proxy writes the view's HTML into
// an inner sandboxed frame and relays JSON-RPC both ways. This module owns the outer frame and
// is the view's JSON-RPC peer: it answers ui/initialize, sends nothing before
// ui/notifications/initialized, then tool-input exactly once and tool-result or
// tool-cancelled, forwards the view's MCP requests to the app's own session, and asks the view
// to tear down before removing it. Every message must come from the outer frame's window and
// the sandbox origin; everything sent goes to that origin only.
"use strict";

import { el } from "./dom.js";

/** The MCP Apps protocol version this host speaks. */
export const APP_PROTOCOL_VERSION = "2026-01-26";
const SUPPORTED_APP_VERSIONS = [APP_PROTOCOL_VERSION];
/** The display modes this host can show. */
export const HOST_DISPLAY_MODES = ["inline", "fullscreen"];
const MCP_APP_MIME = "text/html;profile=mcp-app";
const SANDBOX_FLAGS = "allow-scripts allow-same-origin";
const SANDBOX_PREFIX = "ui/notifications/sandbox-";
/** How long the sandbox proxy may take to announce itself. */
const PROXY_READY_TIMEOUT_MS = 20000;
/** How long a view may take to answer ui/resource-teardown before it is removed anyway. */
export const TEARDOWN_TIMEOUT_MS = 3000;
const MIN_HEIGHT = 80;
const MAX_INLINE_HEIGHT = 4000;
const INITIAL_HEIGHT = 360;
const MAX_LOG_ENTRIES = 200;
const MAX_EVENT_TEXT = 2000;

/** A JSON-RPC error to answer a view's request with. */
export class RpcError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function validId(id) {
  return typeof id === "string" || (typeof id === "number" && Number.isFinite(id));
}

/** The text blocks of a result or content list, joined. */
export function textOf(content) {
  const blocks = Array.isArray(content) ? content : isObject(content) ? [content] : [];
  return blocks
    .filter((c) => isObject(c) && c.type === "text" && typeof c.text === "string")
    .map((c) => c.text)
    .join("\n");
}

/** Whether a raw `tools/list` entry may be called by a view (visibility includes "app"). */
export function visibleToApps(tool) {
  const ui = isObject(tool) && isObject(tool._meta) && isObject(tool._meta.ui) ? tool._meta.ui : null;
  if (!ui || !("visibility" in ui)) {
    return true;
  }
  return Array.isArray(ui.visibility) && ui.visibility.includes("app");
}

/** Reads the view's HTML from a `resources/read` result: one MCP App item, text or base64. */
export function htmlFromRead(result, uri) {
  const contents = isObject(result) && Array.isArray(result.contents) ? result.contents : [];
  const item = contents.length === 1 ? contents[0] : contents.find((c) => isObject(c) && c.uri === uri);
  if (!isObject(item)) {
    throw new Error("resources/read of " + uri + " returned " + contents.length + " items and none for that URI");
  }
  const mime = String(item.mimeType || "").toLowerCase().replace(/\s+/g, "");
  if (mime !== MCP_APP_MIME) {
    throw new Error(uri + " has MIME type '" + item.mimeType + "', not " + MCP_APP_MIME);
  }
  if (typeof item.text === "string") {
    return item.text;
  }
  if (typeof item.blob === "string") {
    const bytes = Uint8Array.from(atob(item.blob), (c) => c.charCodeAt(0));
    return new TextDecoder().decode(bytes);
  }
  throw new Error(uri + " has neither text nor blob content");
}

/**
 * One view: its card, its frames and its side of the protocol.
 *
 * `host` provides what the page owns: `theme()`, `styleVariables()`, `hostInfo`,
 * `log(view, level, text)`, `appEvent(view, event)`, `message(view, text)` (returns
 * `{accepted, reason}`), `modelContext(view, context|null)`, `close(view, reason)`,
 * `stateChanged(view)`.
 */
export class ViewBridge {
  constructor(options) {
    this.host = options.host;
    this.appId = options.appId;
    this.appName = options.appName || options.appId;
    this.tool = options.tool;
    this.toolCallId = options.toolCallId;
    this.toolInput = isObject(options.toolInput) ? options.toolInput : {};
    this.client = options.client;
    this.state = "loading";
    this.initialized = false;
    this.closed = false;
    this.outcome = null;
    this.outcomeSent = false;
    this.inputSent = false;
    this.pending = new Map();
    this.nextId = 1;
    this.displayMode = "inline";
    this.appInfo = null;
    this.appCapabilities = {};
    this.declaresFullscreen = false;
    this.context = null;
    this.sandboxOrigin = null;
    this.policy = null;
    this.inlineHeight = INITIAL_HEIGHT;
    this.sent = [];
    this.contextChanges = [];
    this.teardownOutcome = null;
    this.abort = new AbortController();
    this.proxyReady = null;
    this.resolveProxyReady = null;
    this.build();
  }

  // ---- The card ----------------------------------------------------------------------------

  build() {
    const title = this.tool.title || this.tool.name;
    this.fullscreenButton = el("button", {
      type: "button",
      class: "view-button",
      hidden: true,
      "aria-pressed": "false",
      text: "Fullscreen",
    });
    this.closeButton = el("button", {
      type: "button",
      class: "view-button",
      "aria-label": "Close the " + title + " view",
      text: "Close",
    });
    this.stateLabel = el("span", { class: "view-state", text: "loading" });
    this.notices = el("div", { class: "view-notices", role: "status" });
    this.frameWrap = el("div", { class: "view-frame-wrap" });
    this.logList = el("ol", { class: "view-log-list" });
    this.logSummary = el("summary", { text: "View log (0)" });
    this.element = el(
      "section",
      {
        class: "view",
        "data-app-id": this.appId,
        "data-tool-call-id": this.toolCallId,
        "data-state": this.state,
        "aria-label": "App view: " + title,
      },
      [
        el("header", { class: "view-bar" }, [
          el("span", { class: "view-title" }, [
            el("strong", { text: title }),
            el("span", { class: "view-app", text: this.appName }),
          ]),
          this.stateLabel,
          el("span", { class: "view-actions" }, [this.fullscreenButton, this.closeButton]),
        ]),
        this.notices,
        this.frameWrap,
        el("details", { class: "view-log" }, [this.logSummary, this.logList]),
      ],
    );
    this.fullscreenButton.addEventListener("click", () => {
      this.setDisplayMode(this.displayMode === "fullscreen" ? "inline" : "fullscreen");
    });
    this.closeButton.addEventListener("click", () => this.host.close(this, "closed by the user"));
  }

  setState(state) {
    this.state = state;
    this.element.dataset.state = state;
    this.stateLabel.textContent = state;
    this.host.stateChanged(this);
  }

  notice(text, kind, link) {
    const line = el("p", { class: "view-notice " + (kind || "") });
    line.appendChild(document.createTextNode(text));
    if (link) {
      line.appendChild(document.createTextNode(" "));
      line.appendChild(el("a", { href: link, target: "_blank", rel: "noopener noreferrer", text: link }));
    }
    this.notices.appendChild(line);
    return line;
  }

  log(level, text) {
    const entry = el("li", { class: "log-" + level }, [
      el("time", { text: new Date().toLocaleTimeString() }),
      document.createTextNode(" " + level + ": " + text),
    ]);
    this.logList.appendChild(entry);
    while (this.logList.children.length > MAX_LOG_ENTRIES) {
      this.logList.firstElementChild.remove();
    }
    this.logSummary.textContent = "View log (" + this.logList.children.length + ")";
    this.host.log(this, level, text);
  }

  fail(text) {
    this.setState("error");
    this.notice(text, "error");
    this.log("error", text);
  }

  // ---- Loading -----------------------------------------------------------------------------

  /**
   * Loads the sandbox proxy for `prepared` (the gateway's POST /apps/{id}/views answer) and,
   * once it is ready, hands it the view's HTML.
   */
  async start(prepared, html) {
    if (this.closed) {
      return;
    }
    this.sandboxOrigin = prepared.sandboxOrigin;
    this.policy = prepared.policy || {};
    if (!this.sandboxOrigin || this.sandboxOrigin === window.location.origin) {
      throw new Error("refusing to render: the sandbox must be served from another origin than this page");
    }
    if (prepared.externalDomains) {
      const domains = []
        .concat(this.policy.connectDomains || [], this.policy.resourceDomains || [], this.policy.frameDomains || [])
        .filter((d, i, all) => all.indexOf(d) === i);
      this.notice("This view may contact other sites: " + domains.join(", "), "warning");
    }
    this.log("info", "CSP: " + prepared.csp);
    this.frameWrap.classList.toggle("borderless", this.policy.prefersBorder === false);
    this.proxyReady = new Promise((resolve) => {
      this.resolveProxyReady = resolve;
    });
    const iframe = el("iframe", {
      class: "view-frame",
      title: (this.tool.title || this.tool.name) + " (" + this.appName + ")",
      sandbox: SANDBOX_FLAGS,
      allow: prepared.allow || undefined,
      referrerpolicy: "no-referrer",
    });
    iframe.style.height = this.inlineHeight + "px";
    iframe.src = prepared.sandboxUrl;
    this.iframe = iframe;
    this.frameWrap.appendChild(iframe);
    this.observeWidth();
    this.setState("sandbox");
    let timer;
    const timedOut = new Promise((resolve) => {
      timer = setTimeout(() => resolve(false), PROXY_READY_TIMEOUT_MS);
    });
    const ready = await Promise.race([this.proxyReady.then(() => true), timedOut]);
    clearTimeout(timer);
    if (this.closed) {
      return;
    }
    if (!ready) {
      throw new Error("the sandbox proxy did not start within " + PROXY_READY_TIMEOUT_MS / 1000 + " s");
    }
    this.postToSandbox({
      jsonrpc: "2.0",
      method: "ui/notifications/sandbox-resource-ready",
      params: { html, allow: prepared.allow || "", permissions: this.permissionsObject() },
    });
    this.setState("rendering");
  }

  permissionsObject() {
    const granted = {};
    for (const name of (this.policy && this.policy.permissions) || []) {
      granted[name] = {};
    }
    return granted;
  }

  observeWidth() {
    if (typeof ResizeObserver !== "function") {
      return;
    }
    let timer = null;
    this.resizeObserver = new ResizeObserver(() => {
      clearTimeout(timer);
      timer = setTimeout(() => this.contextChanged({ containerDimensions: this.containerDimensions() }), 150);
    });
    this.resizeObserver.observe(this.frameWrap);
  }

  // ---- Incoming ----------------------------------------------------------------------------

  /** Handles a message whose source is this view's outer frame (the page checked that). */
  receive(event) {
    if (this.closed && this.teardownOutcome) {
      return;
    }
    if (event.origin !== this.sandboxOrigin) {
      this.log("warn", "dropped a message from the unexpected origin " + event.origin);
      return;
    }
    const msg = event.data;
    if (!isObject(msg) || msg.jsonrpc !== "2.0") {
      return;
    }
    if (typeof msg.method === "string") {
      if (msg.method.startsWith(SANDBOX_PREFIX)) {
        if (msg.method === "ui/notifications/sandbox-proxy-ready" && this.resolveProxyReady) {
          this.resolveProxyReady();
          this.resolveProxyReady = null;
        }
        return;
      }
      if ("id" in msg) {
        if (validId(msg.id)) {
          this.handleRequest(msg);
        } else {
          this.respondError(null, -32600, "Invalid Request: the id must be a string or a number");
        }
      } else {
        this.handleNotification(msg);
      }
      return;
    }
    if (validId(msg.id) && ("result" in msg || "error" in msg)) {
      this.handleResponse(msg);
      return;
    }
    this.log("warn", "ignored a malformed JSON-RPC message");
    if (validId(msg.id)) {
      this.respondError(msg.id, -32600, "Invalid Request");
    }
  }

  async handleRequest(msg) {
    const params = isObject(msg.params) ? msg.params : {};
    if (msg.method !== "ping") {
      this.log("debug", "view → host: " + msg.method);
    }
    try {
      switch (msg.method) {
        case "ui/initialize":
          this.respond(msg.id, this.initializeResult(params));
          return;
        case "ping":
          this.respond(msg.id, {});
          return;
        case "tools/call":
          this.relay(msg.id, await this.callTool(params));
          return;
        case "tools/list":
          this.relay(msg.id, await this.listTools(params));
          return;
        case "resources/read":
        case "resources/list":
        case "resources/templates/list":
          this.relay(msg.id, await this.client.request(msg.method, msg.params, { signal: this.abort.signal }));
          return;
        case "ui/open-link":
          this.respond(msg.id, this.openLink(params));
          return;
        case "ui/message":
          this.respond(msg.id, this.sendMessage(params));
          return;
        case "ui/update-model-context":
          this.respond(msg.id, this.updateModelContext(params));
          return;
        case "ui/request-display-mode":
          this.respond(msg.id, this.requestDisplayMode(params));
          return;
        default:
          this.respondError(msg.id, -32601, "Method not found: " + msg.method);
      }
    } catch (err) {
      const code = err instanceof RpcError ? err.code : -32603;
      this.respondError(msg.id, code, err.message || String(err));
    }
  }

  handleNotification(msg) {
    const params = isObject(msg.params) ? msg.params : {};
    switch (msg.method) {
      case "ui/notifications/initialized":
        if (!this.initialized && this.context) {
          this.initialized = true;
          this.setState("initialized");
          this.flush();
        }
        return;
      case "ui/notifications/size-changed":
        this.resize(params);
        return;
      case "notifications/message": {
        const level = typeof params.level === "string" ? params.level : "info";
        const data = typeof params.data === "string" ? params.data : JSON.stringify(params.data);
        this.log(level, (params.logger ? "[" + params.logger + "] " : "") + data);
        return;
      }
      case "ui/notifications/request-teardown":
        this.log("info", "the view asked to be closed");
        this.host.close(this, "the view asked to close");
        return;
      default:
        this.log("debug", "ignored the notification " + msg.method);
    }
  }

  handleResponse(msg) {
    const waiting = this.pending.get(msg.id);
    if (!waiting) {
      return;
    }
    this.pending.delete(msg.id);
    if ("error" in msg) {
      waiting.reject(new RpcError(msg.error && msg.error.code, (msg.error && msg.error.message) || "error"));
    } else {
      waiting.resolve(msg.result);
    }
  }

  // ---- Requests from the view ----------------------------------------------------------------

  initializeResult(params) {
    this.appInfo = isObject(params.appInfo) ? params.appInfo : null;
    this.appCapabilities = isObject(params.appCapabilities) ? params.appCapabilities : {};
    const declared = Array.isArray(this.appCapabilities.availableDisplayModes)
      ? this.appCapabilities.availableDisplayModes
      : [];
    this.declaresFullscreen = declared.includes("fullscreen");
    this.fullscreenButton.hidden = !this.declaresFullscreen;
    const protocolVersion = SUPPORTED_APP_VERSIONS.includes(params.protocolVersion)
      ? params.protocolVersion
      : APP_PROTOCOL_VERSION;
    this.context = this.fullContext();
    if (this.appInfo && typeof this.appInfo.name === "string") {
      this.log("info", "initialised " + this.appInfo.name + " " + (this.appInfo.version || "") + " (protocol " + params.protocolVersion + ")");
    }
    return {
      protocolVersion,
      hostInfo: this.host.hostInfo,
      hostCapabilities: this.hostCapabilities(),
      hostContext: this.context,
    };
  }

  /** Only what this page really handles. */
  hostCapabilities() {
    const policy = this.policy || {};
    return {
      openLinks: {},
      serverTools: {},
      serverResources: {},
      logging: {},
      message: { text: {} },
      updateModelContext: { text: {}, structuredContent: {} },
      sandbox: {
        permissions: this.permissionsObject(),
        csp: {
          connectDomains: policy.connectDomains || [],
          resourceDomains: policy.resourceDomains || [],
          frameDomains: policy.frameDomains || [],
          baseUriDomains: policy.baseUriDomains || [],
        },
      },
    };
  }

  toolObject() {
    const tool = {
      name: this.tool.name,
      description: this.tool.description || undefined,
      inputSchema: isObject(this.tool.inputSchema) ? this.tool.inputSchema : { type: "object" },
    };
    if (this.tool.title) {
      tool.title = this.tool.title;
    }
    const ui = {};
    if (this.tool.uiResourceUri) {
      ui.resourceUri = this.tool.uiResourceUri;
    }
    const visibility = this.tool.visibility;
    if (isObject(visibility) && !visibility.malformed) {
      ui.visibility = ["model", "app"].filter((k) => visibility[k]);
    }
    tool._meta = { ui };
    return tool;
  }

  fullContext() {
    const coarse = window.matchMedia && window.matchMedia("(pointer: coarse)").matches;
    const hover = window.matchMedia && window.matchMedia("(hover: hover)").matches;
    return {
      toolInfo: { id: this.toolCallId, tool: this.toolObject() },
      theme: this.host.theme(),
      styles: { variables: this.host.styleVariables() },
      displayMode: this.displayMode,
      availableDisplayModes: HOST_DISPLAY_MODES.slice(),
      containerDimensions: this.containerDimensions(),
      locale: navigator.language || "en",
      timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
      userAgent: navigator.userAgent,
      platform: "web",
      deviceCapabilities: { touch: Boolean(coarse), hover: Boolean(hover) },
    };
  }

  containerDimensions() {
    if (this.displayMode === "fullscreen") {
      const rect = this.frameWrap.getBoundingClientRect();
      return { width: Math.round(rect.width), height: Math.round(rect.height) };
    }
    return { width: Math.round(this.frameWrap.clientWidth), maxHeight: MAX_INLINE_HEIGHT };
  }

  async callTool(params) {
    if (typeof params.name !== "string" || !params.name) {
      throw new RpcError(-32602, "tools/call needs the name of a tool");
    }
    // The view is the context of what the app may ask during the call (an elicitation).
    const reply = await this.client.request("tools/call", params, { signal: this.abort.signal, context: this });
    if (reply.error) {
      this.log("warn", "tools/call " + params.name + " failed: " + reply.error.message);
    } else if (reply.result) {
      this.host.appEvent(this, {
        tool: params.name,
        args: isObject(params.arguments) ? params.arguments : {},
        resultText: textOf(reply.result.content).slice(0, MAX_EVENT_TEXT),
        isError: reply.result.isError === true,
      });
    }
    return reply;
  }

  /** The app's tools a view may call: those whose visibility includes "app". */
  async listTools(params) {
    const reply = await this.client.request("tools/list", params, { signal: this.abort.signal });
    if (reply.result && Array.isArray(reply.result.tools)) {
      reply.result.tools = reply.result.tools.filter(visibleToApps);
    }
    return reply;
  }

  openLink(params) {
    let url;
    try {
      url = new URL(String(params.url));
    } catch (_) {
      throw new RpcError(-32602, "ui/open-link needs an absolute URL");
    }
    if (!["http:", "https:", "mailto:"].includes(url.protocol)) {
      throw new RpcError(-32000, "Link opening denied: only http, https and mailto links are opened");
    }
    window.open(url.href, "_blank", "noopener,noreferrer");
    // With noopener the browser does not say whether a popup blocker stopped it; the link
    // stays in the card so the user can always follow it.
    this.notice("The view opened a link:", "", url.href);
    this.log("info", "opened " + url.href);
    return {};
  }

  sendMessage(params) {
    if (params.role !== undefined && params.role !== "user") {
      throw new RpcError(-32602, "ui/message supports the role 'user' only");
    }
    const text = textOf(params.content);
    if (!text.trim()) {
      throw new RpcError(-32602, "ui/message needs text content");
    }
    const outcome = this.host.message(this, text);
    if (!outcome.accepted) {
      throw new RpcError(-32000, outcome.reason || "the message was not accepted");
    }
    return {};
  }

  updateModelContext(params) {
    const text = textOf(params.content);
    const structured = isObject(params.structuredContent) ? params.structuredContent : null;
    this.host.modelContext(this, text.trim() || structured ? { text, structuredContent: structured } : null);
    return {};
  }

  requestDisplayMode(params) {
    const declared = Array.isArray(this.appCapabilities.availableDisplayModes)
      ? this.appCapabilities.availableDisplayModes
      : [];
    const mode = params.mode;
    if (HOST_DISPLAY_MODES.includes(mode) && declared.includes(mode)) {
      this.setDisplayMode(mode);
    }
    return { mode: this.displayMode };
  }

  // ---- Host-driven changes -------------------------------------------------------------------

  setDisplayMode(mode) {
    if (mode === this.displayMode || !HOST_DISPLAY_MODES.includes(mode)) {
      return;
    }
    this.displayMode = mode;
    const full = mode === "fullscreen";
    this.element.classList.toggle("fullscreen", full);
    document.body.classList.toggle("has-fullscreen-view", full);
    this.fullscreenButton.setAttribute("aria-pressed", String(full));
    this.fullscreenButton.textContent = full ? "Exit fullscreen" : "Fullscreen";
    this.fullscreenButton.hidden = !(full || this.declaresFullscreen);
    if (this.iframe) {
      this.iframe.style.height = full ? "" : this.inlineHeight + "px";
    }
    this.contextChanged({ displayMode: mode, containerDimensions: this.containerDimensions() });
  }

  resize(params) {
    const height = Number(params.height);
    if (!Number.isFinite(height) || height <= 0) {
      return;
    }
    this.inlineHeight = Math.min(Math.max(Math.ceil(height), MIN_HEIGHT), MAX_INLINE_HEIGHT);
    if (this.displayMode === "inline" && this.iframe) {
      this.iframe.style.height = this.inlineHeight + "px";
    }
  }

  /** Sends the keys of `partial` that differ from what the view has. */
  contextChanged(partial) {
    if (!this.context) {
      return;
    }
    const changed = {};
    for (const [key, value] of Object.entries(partial)) {
      if (JSON.stringify(this.context[key]) !== JSON.stringify(value)) {
        changed[key] = value;
        this.context[key] = value;
      }
    }
    if (Object.keys(changed).length && this.initialized && !this.closed) {
      this.contextChanges.push(Object.keys(changed));
      this.notify("ui/notifications/host-context-changed", changed);
    }
  }

  setTheme(theme) {
    this.contextChanged({ theme });
  }

  /** The tool's result (a full CallToolResult); sent once the view is initialised. */
  setToolResult(result) {
    if (this.outcome) {
      return;
    }
    this.outcome = { method: "ui/notifications/tool-result", params: result };
    this.flush();
  }

  /** The tool call did not complete. */
  cancel(reason) {
    if (this.outcome) {
      return;
    }
    this.outcome = { method: "ui/notifications/tool-cancelled", params: { reason } };
    this.flush();
  }

  flush() {
    if (!this.initialized || this.closed) {
      return;
    }
    if (!this.inputSent) {
      this.inputSent = true;
      this.notify("ui/notifications/tool-input", { arguments: this.toolInput });
    }
    if (this.outcome && !this.outcomeSent) {
      this.outcomeSent = true;
      this.notify(this.outcome.method, this.outcome.params);
    }
  }

  // ---- Outgoing ------------------------------------------------------------------------------

  postToSandbox(message) {
    if (this.iframe && this.iframe.contentWindow) {
      this.iframe.contentWindow.postMessage(message, this.sandboxOrigin);
    }
  }

  respond(id, result) {
    this.postToSandbox({ jsonrpc: "2.0", id, result });
  }

  respondError(id, code, message) {
    this.postToSandbox({ jsonrpc: "2.0", id, error: { code, message } });
  }

  /** Relays a JSON-RPC response from the app's session under the view's own id. */
  relay(id, reply) {
    if (reply && reply.error) {
      this.postToSandbox({ jsonrpc: "2.0", id, error: reply.error });
    } else {
      this.respond(id, reply ? reply.result : {});
    }
  }

  /** Notifications and requests go to the view only after ui/notifications/initialized. */
  notify(method, params) {
    if (!this.initialized) {
      this.log("warn", "held back " + method + ": the view is not initialised");
      return;
    }
    this.sent.push(method);
    this.postToSandbox({ jsonrpc: "2.0", method, params });
  }

  request(method, params, timeoutMs) {
    if (!this.initialized) {
      return Promise.reject(new Error("the view is not initialised"));
    }
    const id = "host-" + this.nextId++;
    this.sent.push(method);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(method + " was not answered within " + timeoutMs + " ms"));
      }, timeoutMs);
      this.pending.set(id, {
        resolve: (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        reject: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      });
      this.postToSandbox({ jsonrpc: "2.0", id, method, params });
    });
  }

  // ---- Teardown ------------------------------------------------------------------------------

  /**
   * Asks the view to tear down and waits for its answer (at most TEARDOWN_TIMEOUT_MS), then
   * removes the frames and forgets the view's state. Idempotent.
   */
  async teardown(reason) {
    if (this.closed) {
      return this.teardownDone;
    }
    this.closed = true;
    this.teardownDone = (async () => {
      if (this.initialized) {
        try {
          await this.request("ui/resource-teardown", { reason }, TEARDOWN_TIMEOUT_MS);
          this.teardownOutcome = "answered";
        } catch (err) {
          this.teardownOutcome = "unanswered";
          this.log("warn", "teardown: " + err.message);
        }
      } else {
        this.teardownOutcome = "not-initialized";
      }
      this.abort.abort();
      for (const waiting of this.pending.values()) {
        waiting.reject(new Error("the view was closed"));
      }
      this.pending.clear();
      if (this.resizeObserver) {
        this.resizeObserver.disconnect();
      }
      if (this.displayMode === "fullscreen") {
        document.body.classList.remove("has-fullscreen-view");
      }
      this.element.classList.remove("fullscreen");
      if (this.iframe) {
        this.iframe.remove();
        this.iframe = null;
      }
      this.element.dataset.teardown = this.teardownOutcome;
      this.fullscreenButton.hidden = true;
      this.closeButton.hidden = true;
      this.notice("View closed (" + reason + ").", "muted");
      this.setState("closed");
    })();
    return this.teardownDone;
  }

  /** A summary for the page's debug hook. */
  describe() {
    return {
      appId: this.appId,
      tool: this.tool.name,
      toolCallId: this.toolCallId,
      state: this.state,
      initialized: this.initialized,
      displayMode: this.displayMode,
      sent: this.sent.slice(),
      contextChanges: this.contextChanges.map((keys) => keys.slice()),
      teardown: this.teardownOutcome,
      appInfo: this.appInfo,
    };
  }
}
